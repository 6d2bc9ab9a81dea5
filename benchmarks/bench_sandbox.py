"""What does the sandbox cost a run? The same run launched with and without it, rows alternating.

    python benchmarks/bench_sandbox.py                  # demo task, bundled model, 6 steps, 2 rounds
    python benchmarks/bench_sandbox.py --steps 4 --rounds 1

Each round starts the same config (`RunConfig.for_task("demo")` with `--steps`,
the same seed) twice through `launcher.start`: once plain, once with
`sandboxed=Policy()` (what every run of a dashboard with accounts gets).
Rows alternate so a machine that slows down over the benchmark slows both.
It prints, per row, the median step time (TRL's `step_time`, the first step
left out), the seconds from the launch to the first step's record (the
sandbox's start, bwrap and the wrapper that becomes it, falls there), and the
sandboxed / plain ratio of both.

Target: the sandbox adds nothing measurable to a step (ratio <= 1.02) and
under a second to the start. Run it on a quiet machine.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from workbench.jobs import launcher, runfolder, sandbox  # noqa: E402
from workbench.spec.config import RunConfig  # noqa: E402


def timed_run(config: RunConfig, runs: Path, sandboxed: bool) -> dict:
    """Launch `config`, wait for it, and return its median step time and time to its first step."""
    started = time.monotonic()
    run_id = launcher.start(config, runs, sandboxed=sandbox.Policy() if sandboxed else None)
    metrics_file = runs / run_id / runfolder.METRICS_FILE
    first_step = None
    while True:
        status = launcher.status(run_id, runs)
        if first_step is None and metrics_file.exists() and metrics_file.stat().st_size:
            first_step = time.monotonic() - started
        if status["state"] in runfolder.FINAL_STATES:
            break
        time.sleep(0.1)
    if status["state"] != "finished":
        raise SystemExit(f"run {run_id} ended {status['state']}: {status.get('error')}")
    steps = [m["step_time"] for m in runfolder.read_jsonl(metrics_file) if "step_time" in m][1:]
    return {"step_time": statistics.median(steps), "first_step_s": first_step}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=6)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args(argv)
    sandbox.check_available()
    config = RunConfig.for_task("demo", max_steps=args.steps, save_steps=10_000)
    rows = {False: [], True: []}
    with tempfile.TemporaryDirectory(prefix="bench-sandbox-") as folder:
        for round_ in range(args.rounds):
            for sandboxed in ((False, True) if round_ % 2 == 0 else (True, False)):
                result = timed_run(config, Path(folder) / "runs", sandboxed)
                rows[sandboxed].append(result)
                print(f"round {round_ + 1} {'sandboxed' if sandboxed else 'plain    '}: "
                      f"step {result['step_time']:.2f} s, first step after {result['first_step_s']:.1f} s", flush=True)

    def median(sandboxed: bool, key: str) -> float:
        return statistics.median(r[key] for r in rows[sandboxed])

    print(f"\n{'row':<10} {'median step (s)':>16} {'launch to first step (s)':>26}")
    for sandboxed in (False, True):
        print(f"{'sandboxed' if sandboxed else 'plain':<10} {median(sandboxed, 'step_time'):>16.2f} "
              f"{median(sandboxed, 'first_step_s'):>26.1f}")
    print(f"\nsandboxed / plain: step time x{median(True, 'step_time') / median(False, 'step_time'):.3f}, "
          f"start {median(True, 'first_step_s') - median(False, 'first_step_s'):+.1f} s "
          f"({args.steps} steps, {args.rounds} rounds, demo task on the bundled model)")


if __name__ == "__main__":
    main()
