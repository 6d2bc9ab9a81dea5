"""What does the sandbox cost a run? The same run launched with and without it, rows alternating.

    python benchmarks/bench_sandbox.py                  # demo task, bundled model, 6 steps, 2 rounds
    python benchmarks/bench_sandbox.py --steps 4 --rounds 1
    python benchmarks/bench_sandbox.py --generation vllm-server --steps 2   # the run's own vLLM server too

Each round starts the same config (`RunConfig.for_task("demo")` with `--steps`,
the same seed) twice through `launcher.start`: once plain, once with
`sandboxed=Policy()` (what every run of a dashboard with accounts gets).
Rows alternate so a machine that slows down over the benchmark slows both.
It prints, per row, the median step time (TRL's `step_time`, the first step
left out), the CPU seconds a step takes (the run's process tree, between its
first and last step records: much less moved than wall time when other work
shares the machine), the seconds from the launch to the first step's record
(the sandbox's start, bwrap and the wrapper that becomes it, falls there), and
the sandboxed / plain ratios.

`--generation vllm-server` launches runs that start their own CPU vLLM server (inside the same
sandbox when sandboxed), shrunk as the suite's vLLM tests shrink them (4 completions of at most
16 tokens a step); the start then includes the server's, and the first step its first requests.

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

from workbench.jobs import launcher, run_state, sandbox  # noqa: E402
from workbench.runstore import runfolder  # noqa: E402
from workbench.spec.config import RunConfig  # noqa: E402


def tree_cpu_seconds(pid: int, seen: dict) -> float:
    """User + system CPU seconds of the process `pid` and its descendants; `seen` keeps each one's last reading,
    so a process that has ended still counts."""
    import psutil

    try:
        root = psutil.Process(pid)
        for process in [root, *root.children(recursive=True)]:
            try:
                times = process.cpu_times()
                seen[process.pid] = times.user + times.system + times.children_user + times.children_system
            except psutil.Error:
                pass
    except psutil.Error:
        pass
    return sum(seen.values())


def timed_run(config: RunConfig, runs: Path, sandboxed: bool) -> dict:
    """Launch `config`, wait for it; its median step time, CPU seconds per step and time to its first step.

    CPU per step is the run's process tree's CPU between its first and last step
    records over the steps between them: less moved than wall time by other work on the machine.
    A run's own vLLM server counts in both rows (inside a sandbox it is the trainer's child; outside, not).
    """
    started = time.monotonic()
    run_id = launcher.start(config, runs, sandboxed=sandbox.Policy() if sandboxed else None)
    metrics_file = runs / run_id / runfolder.METRICS_FILE
    while not run_state.status(run_id, runs).get("pid"):  # queued while the previous run's processes exit
        time.sleep(0.05)
    pid = run_state.status(run_id, runs)["pid"]
    first_step, seen, readings = None, {}, []  # readings: (steps recorded, tree CPU seconds)
    while True:
        status = run_state.status(run_id, runs)
        cpu = tree_cpu_seconds(pid, seen)
        server = status.get("vllm") or {}
        if server.get("pid") and not server.get("in_sandbox"):
            # outside a sandbox the run's own server is no child of the trainer: its CPU counts for the run too
            # (`seen` holds each process's last reading, so this returns both trees' sum)
            cpu = tree_cpu_seconds(server["pid"], seen)
        steps_done = len(runfolder.read_jsonl(metrics_file)) if metrics_file.exists() else 0
        if steps_done and first_step is None:
            first_step = time.monotonic() - started
        if steps_done and (not readings or readings[-1][0] != steps_done):
            readings.append((steps_done, cpu))
        if status["state"] in runfolder.FINAL_STATES:
            break
        time.sleep(0.05)
    if status["state"] != "finished":
        raise SystemExit(f"run {run_id} ended {status['state']}: {status.get('error')}")
    steps = [m["step_time"] for m in runfolder.read_jsonl(metrics_file) if "step_time" in m][1:]
    (first_n, first_cpu), (last_n, last_cpu) = readings[0], readings[-1]
    cpu_per_step = (last_cpu - first_cpu) / (last_n - first_n) if last_n > first_n else float("nan")
    return {
        "step_time": statistics.median(steps),
        "cpu_per_step": cpu_per_step,
        "first_step_s": first_step,
        "wall_s": time.monotonic() - started,
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=6)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--generation", choices=("transformers", "vllm-server"), default="transformers")
    args = parser.parse_args(argv)
    sandbox.check_available()
    config = RunConfig.for_task("demo", max_steps=args.steps, save_steps=10_000)
    if args.generation == "vllm-server":
        config = config.with_changes(
            generation="vllm-server",
            per_device_train_batch_size=4,
            num_generations=4,
            max_completion_length=16,
            vllm_max_model_len=512,
            eval_strategy="no",
        )
    rows = {False: [], True: []}
    with tempfile.TemporaryDirectory(prefix="bench-sandbox-") as folder:
        for round_ in range(args.rounds):
            for sandboxed in (False, True) if round_ % 2 == 0 else (True, False):
                result = timed_run(config, Path(folder) / "runs", sandboxed)
                rows[sandboxed].append(result)
                print(
                    f"round {round_ + 1} {'sandboxed' if sandboxed else 'plain    '}: "
                    f"step {result['step_time']:.2f} s, CPU {result['cpu_per_step']:.2f} s a step, "
                    f"first step after {result['first_step_s']:.1f} s, ended after {result['wall_s']:.1f} s",
                    flush=True,
                )

    def median(sandboxed: bool, key: str) -> float:
        return statistics.median(r[key] for r in rows[sandboxed])

    print(
        f"\n{'row':<10} {'median step (s)':>16} {'CPU a step (s)':>15} {'launch to first step (s)':>26} "
        f"{'launch to end (s)':>18}"
    )
    for sandboxed in (False, True):
        print(
            f"{'sandboxed' if sandboxed else 'plain':<10} {median(sandboxed, 'step_time'):>16.2f} "
            f"{median(sandboxed, 'cpu_per_step'):>15.2f} {median(sandboxed, 'first_step_s'):>26.1f} "
            f"{median(sandboxed, 'wall_s'):>18.1f}"
        )
    print(
        f"\nsandboxed / plain: step time x{median(True, 'step_time') / median(False, 'step_time'):.3f}, "
        f"CPU a step x{median(True, 'cpu_per_step') / median(False, 'cpu_per_step'):.3f}, "
        f"start {median(True, 'first_step_s') - median(False, 'first_step_s'):+.1f} s "
        f"({args.steps} steps, {args.rounds} rounds, demo task on the bundled model, generation={args.generation})"
    )


if __name__ == "__main__":
    main()
