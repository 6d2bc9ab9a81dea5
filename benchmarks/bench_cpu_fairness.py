"""Can one student's helper job slow another's training? Bob's median step, alone and beside Alice's hostile check.

    python benchmarks/bench_cpu_fairness.py                    # demo task, bundled model, 10 steps, 1 round
    python benchmarks/bench_cpu_fairness.py --steps 8 --rounds 2 --task demo

Run as root (a server with accounts: each sandbox a uid of its own, in the sandboxes' control groups of
jobs/run_cgroup.py). Each round launches Bob's sandboxed run (`launcher.start`, owner bob, the server's
policy) twice: once alone, once while Alice's "Check the signal" job (`signal_job.start_signal_check`,
owner alice, sandboxed) imports a reward file that starts 32 double-forked spinners and then sleeps, so
the spinners hold the CPU for all of Bob's run. Rows alternate so a machine that slows down over the
benchmark slows both. It prints Bob's median step time (TRL's `step_time`, the first step left out) in
each row, the CPUs (cores' worth) Bob's run, Alice's check and the rest of the machine used during it (on a
machine shared with other work the rest slows both rows: the CPU Alice's check got says what the weights
held), the attacked / alone ratio against the 1.5x target, how many of Alice's processes spun, and the load
average, and records the result in benchmarks/results/bench_cpu_fairness.jsonl.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from results_file import record  # noqa: E402

from workbench.access import uploads  # noqa: E402
from workbench.jobs import launcher, run_state, sandbox, signal_job  # noqa: E402
from workbench.runstore import runfolder  # noqa: E402
from workbench.spec.config import RunConfig  # noqa: E402

TARGET = 1.5
SPINNERS = 32
# Alice's reward file: at import, 32 double-forked spinners (re-parented to the sandbox's init), then a sleep
# that keeps the check, and so its sandbox, alive while they spin.
HOSTILE = f"""
import os, time
for _ in range({SPINNERS}):
    if os.fork() == 0:
        if os.fork() == 0:
            while True:
                pass
        os._exit(0)
    os.wait()
time.sleep(3600)
"""


def tree_cpu_seconds(pid: int, seen: dict) -> float:
    """User + system CPU seconds of `pid` and its descendants; `seen` keeps each one's last reading, so a process
    that has ended still counts."""
    import psutil

    try:
        for process in [psutil.Process(pid), *psutil.Process(pid).children(recursive=True)]:
            try:
                times = process.cpu_times()
                seen[process.pid] = times.user + times.system
            except psutil.Error:
                pass
    except psutil.Error:
        pass
    return sum(seen.values())


def machine_cpu_seconds() -> float:
    import psutil

    times = psutil.cpu_times()
    return times.user + times.nice + times.system


def bob_run(config: RunConfig, runs: Path, alice_pid: int | None = None) -> dict:
    """Launch Bob's sandboxed run, wait for it to finish; its median step time and the CPUs (cores' worth) that
    Bob's run, Alice's check and everything else on the machine used meanwhile."""
    policy = sandbox.Policy(readable=(str(uploads.uploads_dir(runs, "bob")),))
    run_id = launcher.start(config, runs, owner="bob", sandboxed=policy)
    bob_seen, alice_seen = {}, {}
    alice_start = tree_cpu_seconds(alice_pid, alice_seen) if alice_pid else 0.0
    started, machine_start = time.monotonic(), machine_cpu_seconds()
    while True:
        status = run_state.status(run_id, runs)
        if status.get("pid"):
            tree_cpu_seconds(status["pid"], bob_seen)
        if status["state"] in runfolder.FINAL_STATES:
            break
        time.sleep(0.5)
    wall = time.monotonic() - started
    if status["state"] != "finished":
        raise SystemExit(f"bob's run {run_id} ended {status['state']}: {status.get('error')}")
    steps = [m["step_time"] for m in runfolder.read_jsonl(runs / run_id / runfolder.METRICS_FILE) if "step_time" in m]
    bob = sum(bob_seen.values()) / wall
    alice = (tree_cpu_seconds(alice_pid, alice_seen) - alice_start) / wall if alice_pid else 0.0
    return {
        "step": statistics.median(steps[1:] or steps),
        "bob_cpus": bob,
        "alice_cpus": alice,
        "others_cpus": (machine_cpu_seconds() - machine_start) / wall - bob - alice,
    }


def spinning(pid: int) -> int:
    """How many processes of the check's tree use a CPU now (its spinners)."""
    import psutil

    try:
        tree = psutil.Process(pid).children(recursive=True)
    except psutil.Error:
        return 0
    for process in tree:
        try:
            process.cpu_percent(None)
        except psutil.Error:
            pass
    time.sleep(1.0)
    busy = 0
    for process in tree:
        try:
            busy += process.cpu_percent(None) > 1.0
        except psutil.Error:
            pass
    return busy


def attacked_run(config: RunConfig, runs: Path) -> tuple[dict, int]:
    """Bob's median step while Alice's check spins; and how many of Alice's processes spun when Bob started."""
    alice = uploads.uploads_dir(runs, "alice")
    alice.mkdir(parents=True, exist_ok=True)
    reward = alice / "spinners.py"
    reward.write_text(HOSTILE)
    check_config = config.with_changes(reward_file=str(reward), run_name="alice-check")
    policy = sandbox.Policy(readable=(str(alice),))
    job = signal_job.start_signal_check(check_config, runs, groups=1, policy=policy, owner="alice")
    try:
        deadline, busy = time.monotonic() + 120, 0
        while time.monotonic() < deadline and busy < SPINNERS // 2:  # the check's model and import take a while
            if job.process.poll() is not None:
                raise SystemExit(f"alice's check ended early: {signal_job.read_signal_check(job)}")
            busy = spinning(job.process.pid)
        return bob_run(config, runs, job.process.pid), busy
    finally:
        signal_job.cancel_signal_check(job)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--task", default="demo")
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=1)
    args = parser.parse_args(argv)
    if os.geteuid() != 0:
        raise SystemExit("run it as root: the server with accounts makes the sandboxes' control groups as root")
    sandbox.check_available()
    config = RunConfig.for_task(args.task, max_steps=args.steps, save_steps=10_000)
    alone, attacked, spun = [], [], []
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="bench-cpu-fairness-") as folder:
        runs = Path(folder) / "runs"
        for round_ in range(args.rounds):
            for hostile in (False, True) if round_ % 2 == 0 else (True, False):
                busy = 0
                if hostile:
                    row, busy = attacked_run(config, runs)
                    attacked.append(row)
                    spun.append(busy)
                else:
                    row = bob_run(config, runs)
                    alone.append(row)
                print(
                    f"round {round_ + 1} {'beside the spinners' if hostile else 'alone'}: bob's median step "
                    f"{row['step']:.2f} s" + (f" ({busy} of alice's processes spinning)" if hostile else "") + "; "
                    f"CPUs used: bob's run {row['bob_cpus']:.2f}, alice's check {row['alice_cpus']:.2f}, "
                    f"the rest of the machine {row['others_cpus']:.2f}; load {os.getloadavg()[0]:.2f}",
                    flush=True,
                )
    ratio = statistics.median(r["step"] for r in attacked) / statistics.median(r["step"] for r in alone)
    load = os.getloadavg()
    print(
        f"\nbob's median step: alone {statistics.median(r['step'] for r in alone):.2f} s, beside alice's "
        f"{SPINNERS} spinners {statistics.median(r['step'] for r in attacked):.2f} s: x{ratio:.2f} (target <= x{TARGET}: "
        f"{'met' if ratio <= TARGET else 'MISSED'}); load average {load_before[0]:.2f} before, "
        f"{load[0]:.2f} / {load[1]:.2f} / {load[2]:.2f} after ({args.task}, {args.steps} steps, {args.rounds} rounds)"
    )
    path = record(
        "bench_cpu_fairness",
        {
            "task": args.task,
            "steps": args.steps,
            "rounds": args.rounds,
            "alone": [{key: round(value, 3) for key, value in row.items()} for row in alone],
            "attacked": [{key: round(value, 3) for key, value in row.items()} for row in attacked],
            "spinning": spun,
            "ratio": round(ratio, 3),
            "target": TARGET,
            "load_before": [round(x, 2) for x in load_before],
        },
        note="machine shared with other sessions' work; see load_average",
    )
    print(f"recorded in {path.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
