"""What a training process runs under, read from /proc: to diff a launched run against the same run in the foreground.

    python benchmarks/process_setting.py                       # a tiny run both ways; prints what differs
    python benchmarks/process_setting.py --model smollm2-135m-instruct --steps 2

A run started by `workbench train` in the foreground and one started by the launcher (`--background`, the
dashboard's Launch) should step alike; whatever the kernel schedules them by, or the libraries read at start-up,
must then be alike too. `setting_of(pid)` reads it all from outside the process, once it trains: the environment,
nice value and scheduling policy, the scheduler's autogroup (a session of its own is one: the kernel shares the CPU
between autogroups first), CPU affinity, cgroups, oom_score_adj, the threads it runs, the allocator and OpenMP
libraries it mapped, its working folder and where its output goes. `differences(a, b)` names each item that
differs, leaving out what must differ (its pid, run folder, the paths under it, the session's own ids).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

# environment variables a shell, a terminal or the benchmark's own caller set, which no library reads for speed
INCIDENTAL = ("_", "OLDPWD", "PWD", "SHLVL", "TERM", "COLUMNS", "LINES", "WORKBENCH_RECIPE_SHOWN")
LIBRARIES = ("jemalloc", "tcmalloc", "libgomp", "libiomp", "libmkl", "libomp")


def _read(path: Path) -> str:
    try:
        return path.read_text()
    except OSError:
        return ""


def _output(proc: Path, fd: int) -> str:
    """Where a descriptor goes, as a kind: a terminal, a pipe, /dev/null, a file."""
    try:
        target = os.readlink(proc / "fd" / str(fd))
    except OSError:
        return "closed"
    if target.startswith("/dev/pts") or target.startswith("/dev/tty"):
        return "terminal"
    if target.startswith("pipe:"):
        return "pipe"
    if target.startswith("socket:"):
        return "socket"
    return "/dev/null" if target == "/dev/null" else "file"


def setting_of(pid: int) -> dict:
    """Everything that decides how process `pid` is scheduled and what its libraries chose at start-up."""
    proc = Path("/proc") / str(pid)
    stat = _read(proc / "stat")
    fields = stat[stat.rindex(")") + 2 :].split()
    status = dict(line.split(":\t", 1) for line in _read(proc / "status").splitlines() if ":\t" in line)
    environ = dict(item.split("=", 1) for item in _read(proc / "environ").split("\0") if "=" in item)
    maps = _read(proc / "maps")
    return {
        "environment": {k: v for k, v in environ.items() if k not in INCIDENTAL},
        "nice": int(fields[16]),  # field 19 of proc(5)
        "policy": int(fields[38]),  # field 41: SCHED_OTHER 0, SCHED_BATCH 3, SCHED_IDLE 5
        # empty for a process in the default group (no session since boot made one), which weighs as nice 0
        "autogroup_nice": _read(proc / "autogroup").split(" nice ")[-1].strip() or "0",
        "own_session": int(fields[3]) == pid,  # field 6, the session id: a leader starts an autogroup of its own
        "affinity": sorted(os.sched_getaffinity(pid)),
        "cgroup": _read(proc / "cgroup").strip(),
        "oom_score_adj": _read(proc / "oom_score_adj").strip(),
        "threads": int(status.get("Threads", "0").strip()),
        "libraries": sorted({lib for lib in LIBRARIES if lib in maps}),
        "cwd_is_run_dir": None,  # filled by the caller, who knows the run folder
        "stdout": _output(proc, 1),
        "stderr": _output(proc, 2),
    }


def differences(a: dict, b: dict, ignore_env: tuple[str, ...] = ()) -> dict:
    """{item: (a's, b's)} for each item of two settings that differs; environment variables one by one."""
    found = {}
    for key in a:
        if key == "environment":
            names = (set(a[key]) | set(b[key])) - set(ignore_env)
            for name in sorted(names):
                if a[key].get(name) != b[key].get(name):
                    found[f"env {name}"] = (a[key].get(name), b[key].get(name))
        elif a[key] != b[key]:
            found[key] = (a[key], b[key])
    return found


def wait_training(run_dir: Path, pid_of, timeout: float = 600.0) -> int:
    """The training process's pid once its first step is in metrics.jsonl (its threads all started by then)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        metrics = run_dir / "metrics.jsonl"
        pid = pid_of()
        if pid and metrics.is_file() and b'"step_time"' in metrics.read_bytes():
            return pid
        time.sleep(0.1)
    raise SystemExit(f"{run_dir.name}: no step within {timeout:.0f} s")


def foreground_setting(config_path: Path, run_dir: Path) -> dict:
    """A `workbench train` in the foreground, as a person types it (its output to this terminal's pipes)."""
    command = [sys.executable, "-m", "workbench", "train", "--config", str(config_path), "--run-dir", str(run_dir)]
    process = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        pid = wait_training(run_dir, lambda: process.pid)
        setting = setting_of(pid)
        setting["cwd_is_run_dir"] = Path(os.readlink(f"/proc/{pid}/cwd")) == run_dir.resolve()
        return setting
    finally:
        process.communicate(timeout=600)


def launched_setting(config, runs_dir: Path) -> dict:
    """The same run started by the launcher (what `--background` and the dashboard's Launch call)."""
    from workbench.jobs import launcher, run_state
    from workbench.runstore import runfolder

    run_id = launcher.start(config, runs_dir)
    run_dir = runs_dir / run_id
    try:
        pid = wait_training(run_dir, lambda: runfolder.read_status(run_dir).get("pid"))
        setting = setting_of(pid)
        setting["cwd_is_run_dir"] = Path(os.readlink(f"/proc/{pid}/cwd")) == run_dir.resolve()
        return setting
    finally:
        while run_state.status_of_dir(run_dir)["state"] not in runfolder.FINAL_STATES:
            time.sleep(0.2)


def main(argv: list[str] | None = None) -> int:
    from workbench.spec.config import RunConfig

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="tiny")
    parser.add_argument("--steps", type=int, default=2)
    args = parser.parse_args(argv)
    config = RunConfig.for_task("demo", model=args.model, max_steps=args.steps, save_steps=args.steps)
    if args.model == "tiny":
        config = config.with_changes(max_completion_length=8, per_device_train_batch_size=4, num_generations=4)
    with tempfile.TemporaryDirectory(prefix="process-setting-") as tmp:
        work = Path(tmp)
        config.save(work / "config.json")
        foreground = foreground_setting(work / "config.json", work / "foreground")
        launched = launched_setting(config, work / "runs")
    print(f"{'':<16} {'foreground':<28} launched")
    for name in foreground:
        if name != "environment":
            print(f"{name:<16} {json.dumps(foreground[name])[:28]:<28} {json.dumps(launched[name])[:60]}")
    found = differences(foreground, launched)
    print("\nforeground vs launched:" if found else "\nforeground and launched run under the same setting")
    for name, (fg, bg) in found.items():
        print(f"  {name}: {fg!r} vs {bg!r}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
