"""What a long run costs the server: opening it in the Train and Runs tabs, and each refresh while it grows.

    python benchmarks/bench_big_run.py                  # 10,000 steps, 640,000 completions (written once, ~1 min)
    python benchmarks/bench_big_run.py --steps 500      # a quick look
    python benchmarks/bench_big_run.py --dir /tmp/big   # where the run folder is kept between runs

The run folder is written by the trainer's own writers (benchmarks/big_run.py)
and then opened with the app's real code: the app is built in this process
(`ui.app.build_app`) and each Train and Runs tab event runs as Gradio's queue
runs it (`Blocks.process_api`: preprocess, the handler, postprocess), one
session state per page (tests/app_events.py). Times are the server's work for
the event, without the network and the browser: wall-clock (median, p95) and
the CPU time the process spent on it (median; on a machine shared with other
jobs the wall-clock time waits for a core, the CPU time does not); the last
column is what the event sends to the browser.

Rows:
- open: the Train tab's page load (`on_load`), for the first page in the
  process (which indexes completions.jsonl once) and for another page;
  the Runs tab's table (its page load), one run picked in "One run" (its
  newest step's groups) and ticked in "Compare runs" (the reward overlay).
- tick: the Train tab's refresh when nothing changed and after one new step
  was appended (64 completions and a metric row, by the trainer's writers), the
  `GET /workbench/changes` answer (its handler) the page asks for meanwhile,
  the Runs tab's 3 s timer with the run ticked for comparison after a new
  step, and reading an earlier step on either tab's slider.

Targets: open under 2 s, tick under 50 ms at the median. The files
are read from the page cache (they were just written or read); a first read
from disk adds the disk's time to the first open. The steps appended are cut
off again at the end, so the folder can be used again.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

import big_run  # noqa: E402  (same folder)
from app_events import Page, find_component, find_event  # noqa: E402

from workbench.runstore import runfolder  # noqa: E402

OPEN_TARGET_S = 2.0
TICK_TARGET_MS = 50.0


def percentile(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def timed(run) -> tuple[float, float, int]:
    """(seconds, CPU seconds of this process, bytes sent to the browser) of one event."""
    import orjson

    start, cpu = time.perf_counter(), time.process_time()
    result = run()
    seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
    data = result.get("data") if isinstance(result, dict) else result
    return seconds, cpu, len(orjson.dumps(data, default=str))


class Grower:
    """Appends steps to the run as the trainer does, and cuts them off again at the end."""

    def __init__(self, run_dir: Path, steps: int):
        self.run_dir, self.next_step, self.total = run_dir, steps + 1, steps
        self.sizes = {
            name: (run_dir / name).stat().st_size for name in (runfolder.METRICS_FILE, runfolder.COMPLETIONS_FILE)
        }
        self.rng = random.Random(1)
        self.pool = big_run.completion_pool(self.rng, 256)

    def step(self) -> None:
        big_run.append_step(self.run_dir, self.rng, self.pool, self.next_step, self.total + 1000)
        runfolder.update_status(self.run_dir, step=self.next_step)
        self.next_step += 1

    def restore(self) -> None:
        for name, size in self.sizes.items():
            os.truncate(self.run_dir / name, size)
        big_run.mark_live(self.run_dir, self.total, self.total + 1)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=big_run.STEPS, help="steps in the run (default 10,000)")
    parser.add_argument(
        "--dir",
        type=Path,
        default=Path(tempfile.gettempdir()) / "grpo-workbench-big-run",
        help="runs folder that keeps the written run between benchmarks",
    )
    parser.add_argument("--repeats", type=int, default=30, help="ticks of each kind (default 30)")
    parser.add_argument("--pages", type=int, default=20, help="pages watching the run in the class row (default 20)")
    args = parser.parse_args(argv)

    started = time.perf_counter()
    run_dir = big_run.ensure_run(args.dir, args.steps)
    big_run.mark_live(run_dir, args.steps, args.steps + 1)
    sizes = {name: (run_dir / name).stat().st_size for name in (runfolder.METRICS_FILE, runfolder.COMPLETIONS_FILE)}
    completions = sum(1 for _ in open(run_dir / runfolder.COMPLETIONS_FILE, "rb"))
    print(
        f"run folder {run_dir} ({time.perf_counter() - started:.0f} s to write or check): {args.steps} steps, "
        f"{completions} completions; metrics.jsonl {sizes[runfolder.METRICS_FILE] / 2**20:.1f} MiB, "
        f"completions.jsonl {sizes[runfolder.COMPLETIONS_FILE] / 2**20:.0f} MiB",
        flush=True,
    )

    from workbench.ui.app import build_app

    app = build_app(args.dir)
    run_id = run_dir.name
    train = {name: find_event(app, "workbench.ui.train_tab", name) for name in ("on_load", "on_refresh", "on_step")}
    runs_load = find_event(app, "workbench.ui.runs_tab", "on_load", (app, "load"))
    runs_tick = find_event(app, "workbench.ui.runs_tab", "on_tick", (None, "tick"))
    one_run = find_event(app, "workbench.ui.runs_tab", "on_one_run", (find_component(app, "wb-runs-one"), "input"))
    runs_step = find_event(app, "workbench.ui.runs_tab", "on_step")
    choose = find_event(app, "workbench.ui.runs_tab", "on_choose")
    changes = app.api_routes["/workbench/changes"]  # (signed-in user or None, query parameters)
    rows: list[tuple[str, str, list[float], list[float], list[int]]] = []

    def measure(kind: str, name: str, run, repeats: int = 1, before=None) -> None:
        seconds, cpus, sent = [], [], []
        for _ in range(repeats):
            if before:
                before()
            took, cpu, size = timed(run)
            seconds.append(took)
            cpus.append(cpu)
            sent.append(size)
        rows.append((kind, name, seconds, cpus, sent))
        print(f"  {name}: median {statistics.median(seconds) * 1000:.1f} ms", flush=True)

    grower = Grower(run_dir, args.steps)
    try:
        first = Page(app)
        measure("open", "Train tab, first page in the process", lambda: first.run(train["on_load"], [None, 0.5]))
        second = Page(app)
        measure("open", "Train tab, another page", lambda: second.run(train["on_load"], [None, 0.5]))
        runs = Page(app)
        measure("open", "Runs tab: table of runs", lambda: runs.run(runs_load, [None, [], None, "reward", 0.0, None]))
        measure("open", "Runs tab: the run's newest groups", lambda: runs.run(one_run, [run_id]))
        measure("open", "Runs tab: the run's reward overlay", lambda: runs.run(choose, [[run_id], "reward", 0.0, None]))

        measure(
            "tick",
            "Train refresh, nothing new",
            lambda: first.run(train["on_refresh"], [None, None, 0.5]),
            args.repeats,
        )
        measure("tick", "GET /workbench/changes (handler)", lambda: changes(None, {"run": run_id}), args.repeats)
        measure(
            "tick",
            "Train refresh after a new step",
            lambda: first.run(train["on_refresh"], [None, None, 0.5]),
            args.repeats,
            before=grower.step,
        )
        # A class: every page refreshes after each new step (the first draws, the others take its drawing).
        pages = [Page(app) for _ in range(args.pages)]
        for page in pages:
            page.run(train["on_load"], [None, 0.5])

        def class_refresh():
            return [page.run(train["on_refresh"], [None, None, 0.5])["data"] for page in pages]

        class_row = f"{args.pages} pages refresh after a step: all"
        measure("tick", class_row, class_refresh, max(3, args.repeats // 5), before=grower.step)
        measure(
            "tick",
            "Runs timer after a new step (overlay on)",
            lambda: runs.run(runs_tick, [None, [run_id], run_id, "reward", 0.0, None]),
            args.repeats,
            before=grower.step,
        )
        middle = args.steps // 2
        measure("tick", f"Train slider to step {middle}", lambda: first.run(train["on_step"], [None, middle]))
        measure("tick", f"Runs slider to step {middle}", lambda: runs.run(runs_step, [run_id, middle]))
    finally:
        grower.restore()

    kind, name, seconds, cpus, sent = next(row for row in rows if row[1] == class_row)
    rows.append(
        (
            "tick",
            f"{args.pages} pages refresh after a step: a page",
            [t / args.pages for t in seconds],
            [c / args.pages for c in cpus],
            [b / args.pages for b in sent],
        )
    )
    rows.remove((kind, name, seconds, cpus, sent))
    load = os.getloadavg()
    print(
        f"\n{'':4} {'what':<42} {'median':>9} {'p95':>9} {'CPU':>9} {'sent':>7}   target   "
        f"({args.steps} steps; load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}; {os.cpu_count()} cores)"
    )
    verdicts = []
    for kind, name, seconds, cpus, sent in rows:
        median, p95, cpu = statistics.median(seconds), percentile(seconds, 0.95), statistics.median(cpus)
        target = f"< {OPEN_TARGET_S:g} s" if kind == "open" else f"< {TICK_TARGET_MS:g} ms"
        met = median < OPEN_TARGET_S if kind == "open" else median * 1000 < TICK_TARGET_MS
        verdicts.append(met)
        shown = (lambda s: f"{s:7.2f} s") if kind == "open" else (lambda s: f"{s * 1000:6.1f} ms")
        print(
            f"{kind:<4} {name:<42} {shown(median):>9} {shown(p95):>9} {shown(cpu):>9} "
            f"{statistics.median(sent) / 1024:4.0f} KB   {target:<8} {'meets' if met else 'MISSES'}"
        )
    print(
        f"{sum(verdicts)} of {len(verdicts)} rows meet their target (wall-clock median; CPU: the median CPU time "
        f"this process spent on the event, all its threads, which other jobs on the machine do not stretch)"
    )
    return 0 if all(verdicts) else 1


if __name__ == "__main__":
    sys.exit(main())
