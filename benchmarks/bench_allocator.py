"""Which memory allocator should a CPU training run use? Step time and peak memory of each.

    python benchmarks/bench_allocator.py                         # every installed allocator, demo task, bundled model
    python benchmarks/bench_allocator.py --steps 5 --rounds 2 --allocators glibc jemalloc

Each run is the real foreground command, `python -m workbench train --task demo
--max-steps N`, with WORKBENCH_ALLOCATOR set (the CLI starts itself again
under that allocator, as the launcher does for background runs). Peak RSS is
sampled from the process every 0.2 s; the step time is TRL's own `step_time`,
the first step left out (it pays one-off costs). Rounds alternate the order
so a change in machine load hits every allocator alike. Run it on a quiet
machine for figures to quote.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench_training import tree_rss  # noqa: E402  (same folder)

from workbench.jobs import allocator  # noqa: E402  (after the path fix above)
from workbench.runstore import runfolder  # noqa: E402  (after the path fix above)
from workbench.spec.lever_decisions import LeverDecision  # noqa: E402  (after the path fix above)

GB = 2**30


def one_run(name: str, model: str, steps: int, runs_dir: Path) -> dict:
    run_dir = runs_dir / f"{name}-{time.monotonic_ns()}"
    command = [
        sys.executable,
        "-m",
        "workbench",
        "train",
        "--model",
        model,
        "--task",
        "demo",
        "--max-steps",
        str(steps),
        "--run-dir",
        str(run_dir),
        "--set",
        "save_steps=1000",
        "--set",
        "device=cpu",
    ]
    env = {**os.environ, allocator.ALLOCATOR_ENV_VAR: name, "PYTHONPATH": str(ROOT)}
    env.pop(allocator.APPLIED_ENV_VAR, None)
    process = subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    peak = 0
    while process.poll() is None:
        peak = max(peak, tree_rss(process.pid))
        time.sleep(0.2)
    if process.returncode != 0:
        raise SystemExit(f"{name}: the run failed:\n{process.stderr.read().decode()[-2000:]}")
    metrics = runfolder.read_jsonl(run_dir / runfolder.METRICS_FILE)
    # status.json records the allocator as a decision (value, why, where measured); older runs as a name
    known, recorded = LeverDecision.read(runfolder.read_status(run_dir).get("allocator"))
    return {
        "step_times": [m["step_time"] for m in metrics if "step_time" in m][1:],
        "peak": peak,
        "recorded": recorded.value if known else None,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--allocators", nargs="+", default=allocator.available(), choices=allocator.ALLOCATORS)
    parser.add_argument("--steps", type=int, default=5, help="optimizer steps per run (default 5)")
    parser.add_argument("--rounds", type=int, default=1, help="runs per allocator, order alternating (default 1)")
    parser.add_argument("--model", default="smollm2-135m-instruct")
    args = parser.parse_args(argv)

    results = {name: {"step_times": [], "peaks": []} for name in args.allocators}
    with tempfile.TemporaryDirectory(prefix="bench-allocator-") as tmp:
        for index in range(args.rounds):
            order = args.allocators if index % 2 == 0 else list(reversed(args.allocators))
            for name in order:
                run = one_run(name, args.model, args.steps, Path(tmp))
                assert run["recorded"] == name, f"status.json says {run['recorded']!r}, expected {name!r}"
                results[name]["step_times"] += run["step_times"]
                results[name]["peaks"].append(run["peak"])
                print(
                    f"  {name}: steps {', '.join(f'{t:.2f}' for t in run['step_times'])} s, "
                    f"peak {run['peak'] / GB:.2f} GB",
                    flush=True,
                )

    print(
        f"\n{'allocator':<14} {'median step':>12} {'peak RSS':>10}   (demo, {args.model}, {args.steps} steps x "
        f"{args.rounds} round(s); default: {allocator.choose()})"
    )
    for name, result in results.items():
        print(f"{name:<14} {statistics.median(result['step_times']):>10.2f} s {max(result['peaks']) / GB:>7.2f} GB")
    print(
        json.dumps(
            {
                name: {
                    "median_step_s": round(statistics.median(r["step_times"]), 3),
                    "peak_rss_gb": round(max(r["peaks"]) / GB, 3),
                }
                for name, r in results.items()
            }
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
