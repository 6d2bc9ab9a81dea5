"""Training benchmarks: does the demo learn, what does the workbench cost, how much memory.

    python benchmarks/bench_training.py                 # all three parts
    python benchmarks/bench_training.py --learning      # demo task, bundled model: reward first 3 vs last 3 steps
    python benchmarks/bench_training.py --overhead      # median step time: workbench run vs bare TRL script
    python benchmarks/bench_training.py --memory        # peak RSS of the training process tree
    python benchmarks/bench_training.py --eval-cost     # step time with held-out evaluation off vs on (arithmetic)

--learning and --memory share one run when both are chosen. Targets:
reward +0.3 within 5 minutes of launch, overhead within 5%, peak memory < 3 GB;
held-out evaluation leaves TRL's step_time unchanged (within 5%), its own time
counted apart (eval.jsonl's eval_seconds). --eval-cost is only run when named.
Timings depend on what else the machine is doing; run it on a quiet machine
for figures to quote.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bare_trl import SETTINGS as BARE_SETTINGS  # noqa: E402  (same folder)

from workbench.jobs import commands, launcher, run_state  # noqa: E402  (after the path fix above)
from workbench.runstore import runfolder  # noqa: E402  (after the path fix above)
from workbench.spec.config import RunConfig  # noqa: E402

GB = 2**30


def tree_rss(pid: int) -> int:
    """Resident memory of a process and all its children, in bytes."""
    import psutil

    try:
        parent = psutil.Process(pid)
        processes = [parent, *parent.children(recursive=True)]
    except psutil.NoSuchProcess:
        return 0
    total = 0
    for process in processes:
        try:
            total += process.memory_info().rss
        except psutil.NoSuchProcess:
            pass
    return total


def run_and_watch(config: RunConfig, runs_dir: Path, time_limit: float) -> dict:
    """Start a background run, sample its memory, stop it at `time_limit` seconds after launch."""
    launched = time.monotonic()
    run_id = launcher.start(config, runs_dir)
    peak = 0
    state = {}
    try:
        while True:
            state = run_state.status(run_id, runs_dir)
            if state.get("pgid"):
                peak = max(peak, tree_rss(int(state["pgid"])))
            if state["state"] in runfolder.FINAL_STATES:
                break
            if time.monotonic() - launched > time_limit:
                state = launcher.stop(run_id, runs_dir, timeout=120)
                break
            time.sleep(0.25)
    except BaseException:  # interrupted: the detached run must not outlive the benchmark
        launcher.stop(run_id, runs_dir, timeout=0)
        raise
    run_dir = run_state.run_dir_of(run_id, runs_dir)
    return {
        "run_dir": run_dir,
        "elapsed": time.monotonic() - launched,
        "state": state["state"],
        "error": state.get("error"),
        "peak_rss": peak,
        "metrics": runfolder.read_jsonl(run_dir / runfolder.METRICS_FILE),
        "summary": runfolder.read_status(run_dir).get("summary") or {},
    }


def report_learning(result: dict) -> None:
    rewards = [m["reward"] for m in result["metrics"] if m.get("reward") is not None]
    print(f"learning: {len(rewards)} steps logged, state {result['state']}, {result['elapsed']:.0f} s since launch")
    if len(rewards) < 6:
        print(f"learning: too few steps to compare ({result['error'] or 'stopped early'})")
        return
    step_times = [m["step_time"] for m in result["metrics"]]
    print(f"learning: median step_time {statistics.median(step_times):.1f} s")
    first, last = statistics.mean(rewards[:3]), statistics.mean(rewards[-3:])
    verdict = "meets" if last - first >= 0.3 and result["elapsed"] <= 300 else "misses"
    print(
        f"learning: mean reward first 3 steps {first:.3f}, last 3 steps {last:.3f}, "
        f"gain {last - first:+.3f} in {result['elapsed']:.0f} s ({verdict} the +0.3 within 5 min target)"
    )


def report_memory(result: dict) -> None:
    peak = result["peak_rss"] / GB
    print(
        f"memory: peak RSS of the training process tree {peak:.2f} GB "
        f"({'meets' if peak < 3 else 'misses'} the < 3 GB target)"
    )


# ---------------------------------------------------------------- overhead


def run_bare_trl(config: RunConfig, workdir: Path, trl_bf16: bool | None = False) -> dict:
    """TRL alone (benchmarks/bare_trl.py) on `config`'s settings, under the launcher's allocator and threads:
    its summary.json, plus `peak_rss` (bytes) of the process and `log` (its per-step lines).

    `trl_bf16`: False trains in float32; None leaves GRPOConfig's own precision default (bare_trl.py says more).
    """
    import psutil

    settings = {name: getattr(config, name) for name in BARE_SETTINGS} | {"trl_bf16": trl_bf16}
    process = subprocess.Popen(
        [sys.executable, str(ROOT / "benchmarks" / "bare_trl.py"), json.dumps(settings), str(workdir)],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        env={**commands.launch_env(config), "PYTHONPATH": str(ROOT)},
    )
    peak = 0
    while process.poll() is None:
        try:
            peak = max(peak, psutil.Process(process.pid).memory_info().rss)
            process.wait(timeout=0.25)
        except (psutil.NoSuchProcess, subprocess.TimeoutExpired):
            pass
    if process.returncode:
        raise subprocess.CalledProcessError(process.returncode, process.args)
    log = [json.loads(line) for line in (workdir / "log.jsonl").read_text().splitlines()]
    return {**json.loads((workdir / "summary.json").read_text()), "peak_rss": peak, "log": log}


def report_overhead(config: RunConfig, runs_dir: Path, rounds: int) -> None:
    """Alternate workbench and bare runs so a change in machine load hits both alike."""
    wb_steps, bare_steps, wb_walls, bare_walls = [], [], [], []
    for index in range(rounds):
        order = ("workbench", "bare") if index % 2 == 0 else ("bare", "workbench")
        for kind in order:
            # the first step of a run pays one-off costs (allocations, caches), so it is left out
            if kind == "workbench":
                result = run_and_watch(config, runs_dir, time_limit=3600)
                wb_steps += [m["step_time"] for m in result["metrics"]][1:]
                runtime = result["summary"].get("train_runtime")
                if runtime:
                    wb_walls.append(runtime / max(1, len(result["metrics"])))
            else:
                bare = run_bare_trl(config, runs_dir / f"bare-{index}")
                bare_steps += bare["step_time"][1:]
                bare_walls.append(bare["train_runtime"] / max(1, bare["steps"]))
    wb_step, bare_step = statistics.median(wb_steps), statistics.median(bare_steps)
    ratio = wb_step / bare_step
    print(
        f"overhead: median step_time over {len(wb_steps)} steps each: workbench {wb_step:.2f} s, "
        f"bare TRL {bare_step:.2f} s, ratio {ratio:.3f} ({'meets' if ratio <= 1.05 else 'misses'} the within 5% target)"
    )
    print(
        f"overhead: train_runtime / steps (callbacks and file writes included): workbench {statistics.mean(wb_walls):.2f} s, "
        f"bare TRL {statistics.mean(bare_walls):.2f} s"
    )


# ---------------------------------------------------------------- evaluation's cost


def report_eval_cost(config: RunConfig, runs_dir: Path, rounds: int) -> None:
    """Alternate runs with held-out evaluation off and on: TRL's step_time, wall time per step, eval time apart."""
    on_config = config.with_changes(eval_strategy="steps", eval_steps=2, eval_size=8, eval_pass_k=2)
    steps = {"off": [], "on": []}
    walls = {"off": [], "on": []}
    evals = []
    for index in range(rounds):
        for kind in ("off", "on") if index % 2 == 0 else ("on", "off"):
            result = run_and_watch(on_config if kind == "on" else config, runs_dir, time_limit=3600)
            steps[kind] += [m["step_time"] for m in result["metrics"] if "step_time" in m][1:]  # first: one-off costs
            runtime = result["summary"].get("train_runtime")
            if runtime:
                walls[kind].append(runtime / max(1, len(result["metrics"])))
            if kind == "on":
                evals += [r["eval_seconds"] for r in runfolder.read_jsonl(result["run_dir"] / runfolder.EVAL_FILE)]
    off, on = statistics.median(steps["off"]), statistics.median(steps["on"])
    ratio = on / off
    print(
        f"eval cost: median step_time over {len(steps['off'])} / {len(steps['on'])} steps: evaluation off {off:.2f} s, "
        f"on {on:.2f} s, ratio {ratio:.3f} ({'meets' if abs(ratio - 1) <= 0.05 else 'misses'} the within 5% target)"
    )
    print(
        f"eval cost: {len(evals)} evaluations of {on_config.eval_size} prompts (greedy + pass@{on_config.eval_pass_k}), "
        f"median {statistics.median(evals):.2f} s each, counted apart in eval.jsonl"
    )
    print(
        f"eval cost: train_runtime / steps (evaluations included when on): off {statistics.mean(walls['off']):.2f} s, "
        f"on {statistics.mean(walls['on']):.2f} s"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--learning", action="store_true")
    parser.add_argument("--overhead", action="store_true")
    parser.add_argument("--memory", action="store_true")
    parser.add_argument(
        "--eval-cost",
        dest="eval_cost",
        action="store_true",
        help="held-out evaluation off vs on, on the arithmetic task (its own rounds of runs)",
    )
    parser.add_argument("--max-steps", type=int, default=30, help="steps of the learning run (default 30)")
    parser.add_argument("--time-limit", type=float, default=300, help="stop the learning run after this many seconds")
    parser.add_argument("--overhead-steps", type=int, default=6, help="steps of each overhead run (default 6)")
    parser.add_argument("--overhead-rounds", type=int, default=2, help="alternating pairs of overhead runs (default 2)")
    parser.add_argument("--model", default="smollm2-135m-instruct")
    args = parser.parse_args(argv)
    if not (args.learning or args.overhead or args.memory or args.eval_cost):
        args.learning = args.overhead = args.memory = True

    with tempfile.TemporaryDirectory(prefix="bench-training-") as tmp:
        runs_dir = Path(tmp)
        # The demo as the Setup tab, the CLI and the notebooks start it (the task's own settings).
        demo = RunConfig.for_task("demo", model=args.model, device="cpu", save_steps=1000)
        if args.learning or args.memory:
            steps = args.max_steps if args.learning else 5
            result = run_and_watch(demo.with_changes(max_steps=steps), runs_dir, args.time_limit)
            if args.learning:
                report_learning(result)
            if args.memory:
                report_memory(result)
        if args.overhead:
            report_overhead(demo.with_changes(max_steps=args.overhead_steps), runs_dir, args.overhead_rounds)
        if args.eval_cost:  # the demo's brevity reward has no right answer to evaluate: arithmetic has one
            arithmetic = RunConfig.for_task("arithmetic", model=args.model, device="cpu", save_steps=1000)
            report_eval_cost(arithmetic.with_changes(max_steps=args.overhead_steps), runs_dir, args.overhead_rounds)
    return 0


if __name__ == "__main__":
    sys.exit(main())
