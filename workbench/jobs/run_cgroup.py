"""A control group per sandboxed run, where the machine offers one: the run's memory and processes in all.

Resource limits (RLIMIT_DATA, RLIMIT_NPROC, set by jobs/sandbox_init.py) hold per process or per uid; a run
can still share memory between processes (a shared mapping), fork several processes each up to the limit,
and fill its in-memory folders. A memory cgroup charges all of it, in-memory folders' pages included, to the
run, and a pids cgroup counts its processes. So, when this process may make cgroups (a server running as
root on cgroup v2 with the memory controller delegated, or v1 with the memory and pids hierarchies), each
sandbox starts inside one of its own: `prepare` makes it with the run's limits and gives the argument list
that joins it (jobs/sandbox_init.py `--join`, outside the sandbox) before bwrap starts. Elsewhere it gives
nothing and the per-process limits are what holds (docs/sharing.md says so).

Stale groups (their processes gone) are removed by the next `prepare`.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

ROOT = Path("/sys/fs/cgroup")
PREFIX = "workbench-run-"


def _own_paths() -> dict[str, str]:
    """This process's cgroup paths: {"": path} for cgroup v2, {"memory": path, "pids": path} for v1."""
    found = {}
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return found
    for line in lines:
        _, controllers, path = line.split(":", 2)
        for name in controllers.split(",") if controllers else [""]:
            found[name] = path
    return found


def _parents() -> dict[str, Path]:
    """Where this process may make a run's groups: {"memory": folder, "pids": folder} (one folder under v2)."""
    own = _own_paths()
    unified = ROOT / own.get("", "/").lstrip("/")
    if "memory" not in own and (unified / "cgroup.controllers").is_file():  # cgroup v2 only
        enabled = (
            (unified / "cgroup.subtree_control").read_text().split()
            if (unified / "cgroup.subtree_control").is_file()
            else []
        )
        return {"memory": unified, "pids": unified} if "memory" in enabled else {}
    folders = {name: ROOT / name / own[name].lstrip("/") for name in ("memory", "pids") if name in own}
    return {name: folder for name, folder in folders.items() if os.access(folder, os.W_OK)}


def _settings(folder: Path, memory: int, processes: int) -> dict[str, str]:
    """The files that hold the limits in `folder` and their values (v1 and v2 name them differently)."""
    wanted = {}
    if memory:
        wanted["memory.max" if (folder / "memory.max").exists() else "memory.limit_in_bytes"] = str(memory)
    if processes and (folder / "pids.max").exists():
        wanted["pids.max"] = str(processes)
    return wanted


STALE_AFTER_SECONDS = 60.0  # a group is joined a moment after it is made: one this old and empty is left over


def remove_stale(parent: Path) -> None:
    """Remove this workbench's groups whose processes are all gone (rmdir refuses a group still in use); a
    group made in the last minute may be another sandbox's, about to be joined, and is left alone."""
    for folder in parent.glob(f"{PREFIX}*"):
        try:
            if time.time() - folder.stat().st_mtime > STALE_AFTER_SECONDS:
                folder.rmdir()
        except OSError:
            pass


def prepare(memory: int, processes: int) -> list[str]:
    """Make a group (or one per v1 hierarchy) with the run's limits; the `cgroup.procs` files to join, or []
    where this process may make none."""
    joins = []
    name = f"{PREFIX}{os.getpid()}-{time.time_ns()}"
    for parent in dict.fromkeys(_parents().values()):
        try:
            remove_stale(parent)
            folder = parent / name
            folder.mkdir()
            for setting, value in _settings(folder, memory, processes).items():
                (folder / setting).write_text(value)
            joins.append(str(folder / "cgroup.procs"))
        except OSError:  # a controller this machine does not let us use: the per-process limits still hold
            continue
    return joins
