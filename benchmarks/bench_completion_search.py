"""How fast the completions explorer answers on a big run: first page, a filter, a sort and a text search.

    python benchmarks/bench_completion_search.py                  # 10,000 steps, 640,000 completions
    python benchmarks/bench_completion_search.py --steps 500      # a quick look (not recorded)
    python benchmarks/bench_completion_search.py --dir /tmp/big   # where the run folder is kept between runs

The run folder is benchmarks/big_run.py's (written by the trainer's own writers, reused when it is there), read by
`workbench.insight.completion_search` as the explorer and `python -m workbench completions` read it. Rows:

- build: the first query on a run the cache has never seen (every line of completions.jsonl parsed into the
  cache's parts once);
- cold: each query in a process that has not loaded the run yet (the parts are on disk: every later open);
- warm: each query again in the same process (the median of `--repeats`), as the explorer's next page, filter
  or search is;
- tick: the first page after the trainer appended one more step (64 completions): only that is parsed.

Target: each query under 1 s, cold and warm. Peak RSS is the process's high-water mark over the whole benchmark
(the run is written, or checked, first). The step appended is cut off again at the end.
"""

from __future__ import annotations

import argparse
import random
import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

import big_run  # noqa: E402  (same folder)
from results_file import record  # noqa: E402

from workbench.insight import completion_search  # noqa: E402
from workbench.insight.completion_search import CompletionQuery, search_completions  # noqa: E402
from workbench.runstore import runfolder  # noqa: E402

TARGET_S = 1.0
QUERIES = {
    "first page": CompletionQuery(),
    "filter": CompletionQuery(where="reward<0.2 and length>40"),
    "sort": CompletionQuery(sort="advantage", desc=True),
    "text search": CompletionQuery(search="photosynthesis"),
}


def timed(run_dir: Path, query: CompletionQuery, cache: Path) -> tuple[float, int]:
    start = time.perf_counter()
    page = search_completions(run_dir, query, cache_dir=cache)
    return time.perf_counter() - start, page.total


def rss_mib() -> tuple[float, float]:
    """(resident memory now, its peak so far), MiB."""
    now = 0.0
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            now = int(line.split()[1]) / 1024
    return now, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=big_run.STEPS)
    parser.add_argument("--dir", type=Path, default=Path(tempfile.gettempdir()) / "grpo-workbench-big-run")
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args(argv)

    started = time.perf_counter()
    run_dir = big_run.ensure_run(args.dir, args.steps)
    path = run_dir / runfolder.COMPLETIONS_FILE
    size = path.stat().st_size
    print(
        f"{run_dir}: {args.steps} steps, {size / 2**20:.0f} MiB of completions ({time.perf_counter() - started:.0f} s)"
    )
    before, _ = rss_mib()
    figures: dict = {"steps": args.steps, "completions_mib": round(size / 2**20), "target_s": TARGET_S}
    with tempfile.TemporaryDirectory() as cache_folder:
        cache = Path(cache_folder)
        seconds, total = timed(run_dir, QUERIES["first page"], cache)
        figures["build_s"] = round(seconds, 2)
        print(f"build (first query, empty cache): {seconds:.2f} s, {total} completions")
        for name, query in QUERIES.items():
            completion_search._KEPT.clear()  # a process that has not loaded the run yet
            cold, total = timed(run_dir, query, cache)
            warm = statistics.median(timed(run_dir, query, cache)[0] for _ in range(args.repeats))
            figures[f"{name.replace(' ', '_')}_cold_s"] = round(cold, 3)
            figures[f"{name.replace(' ', '_')}_warm_s"] = round(warm, 3)
            verdict = "ok" if max(cold, warm) < TARGET_S else "OVER 1 s"
            print(f"{name:12} cold {cold:6.3f} s  warm {warm:6.3f} s  ({total} rows)  {verdict}")
        figures["tick_s"] = round(tick(run_dir, path, size, args.steps, cache), 3)
        print(f"tick (first page after one more step): {figures['tick_s']:.3f} s")
        figures["cache_mib"] = round(sum(p.stat().st_size for p in cache.rglob("*") if p.is_file()) / 2**20)
    now, peak = rss_mib()
    figures.update(rss_before_queries_mib=round(before), rss_after_mib=round(now), peak_rss_mib=round(peak))
    print(
        f"cache {figures['cache_mib']} MiB; RSS {before:.0f} MiB before the queries, {now:.0f} after, peak {peak:.0f}"
    )
    over = [k for k, v in figures.items() if k.endswith(("_cold_s", "_warm_s")) and v >= TARGET_S]
    if args.steps == big_run.STEPS:
        record("bench_completion_search", figures, note="over target: " + ", ".join(over) if over else "")
    else:
        print("(not recorded: only the full-size run is)")
    return 1 if over else 0


def tick(run_dir: Path, path: Path, size: int, steps: int, cache: Path) -> float:
    """The first page's time after the trainer's writer appended one more step; the step is cut off again after."""
    rng = random.Random(steps + 1)
    pool = big_run.completion_pool(rng, 256)
    logs, lengths, truncated = big_run.round_logs(rng, pool, steps + 1)
    records = big_run.completion_records(
        logs, steps + 1, big_run.NUM_GENERATIONS, list(big_run.REWARD_WEIGHTS), lengths, truncated
    )
    try:
        runfolder.append_jsonl(path, records)
        return timed(run_dir, QUERIES["first page"], cache)[0]
    finally:
        with open(path, "r+b") as handle:
            handle.truncate(size)


if __name__ == "__main__":
    sys.exit(main())
