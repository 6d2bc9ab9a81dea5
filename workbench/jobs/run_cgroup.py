"""Control groups for the sandboxes, where the machine offers them: each job's memory, processes and CPU weight,
and one memory limit over all sandboxes together.

Resource limits (RLIMIT_DATA, RLIMIT_NPROC, set by jobs/sandbox_init.py) hold per process or per uid; a run
can still share memory between processes (a shared mapping), fork several processes each up to the limit,
and fill its in-memory folders, and the kernel shares CPU time per thread, so 32 spinners take 32 times what
one trainer thread gets. So, when this process may make cgroups (a server running as root on cgroup v2 with
the controllers delegated, or v1 with the memory, pids and cpu hierarchies), each sandbox starts inside
groups of its own, in one layout under this process's own group in each hierarchy:

    workbench/                     memory: the limit over all sandboxes (WORKBENCH_SANDBOX_MEMORY_GB);
                                   cpu: a thread's weight per core, against the server's and the system's
      runs/      user-<name>/job-  cpu: a training run's weight; users at equal weights inside
      helpers/   user-<name>/job-  cpu: a fraction of it (WORKBENCH_HELPER_CPU_SHARE) for signal checks,
                                   probes, exports, merges, Compare samples and evaluations

each job's group with its own memory and process limits. The CPU weights are shares, not caps: an idle
machine gives a helper all of it, a busy one keeps a training run's share of the CPU at least
1 / (1 + helper share) of what it would get alone, whatever the helpers start.

`prepare` makes the job's groups and gives the `cgroup.procs` files that join them (jobs/sandbox_init.py
`--join`, outside the sandbox) before bwrap starts. Elsewhere it gives nothing and the per-process limits
are what holds (docs/sharing.md says so). Stale groups (their processes gone) are removed by the next `prepare`.
"""

from __future__ import annotations

import hashlib
import os
import re
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path("/sys/fs/cgroup")
PREFIX = "workbench-run-"  # the groups of an earlier layout (one per job beside the server's), removed when stale
TOP = "workbench"
RUNS, HELPERS = "runs", "helpers"
CONTROLLERS = ("memory", "pids", "cpu")
V1_RUN_SHARES = 1024  # cgroup v1's default cpu.shares, v2's default cpu.weight is 100
V2_RUN_WEIGHT = 100


@dataclass(frozen=True)
class Placement:
    """Where a job's groups go: its owner (None on a dashboard without accounts) and whether it is a helper job."""

    owner: str | None = None
    helper: bool = False


A_RUN = Placement()  # a training run of no one in particular (a dashboard without accounts, `train --sandbox`)


def _own_paths() -> dict[str, str]:
    """This process's cgroup paths: {"": path} for cgroup v2, {"memory": path, "pids": path, ...} for v1."""
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
    """Where this process may make the sandboxes' groups: {controller: folder} (one folder for all under v2)."""
    own = _own_paths()
    unified = ROOT / own.get("", "/").lstrip("/")
    if "memory" not in own and (unified / "cgroup.controllers").is_file():  # cgroup v2 only
        enabled = (
            (unified / "cgroup.subtree_control").read_text().split()
            if (unified / "cgroup.subtree_control").is_file()
            else []
        )
        return {name: unified for name in CONTROLLERS if name in enabled}
    folders = {name: ROOT / name / own[name].lstrip("/") for name in CONTROLLERS if name in own}
    return {name: folder for name, folder in folders.items() if os.access(folder, os.W_OK)}


def user_folder(owner: str | None) -> str:
    """The folder name of `owner`'s group: its name where safe, with a digest so two names never meet."""
    if not owner:
        return "user-"
    safe = re.sub(r"[^A-Za-z0-9_.-]", "_", owner)[:40]
    return f"user-{safe}-{hashlib.sha256(owner.encode()).hexdigest()[:8]}"


def cpu_weight(folder: Path, share: float) -> dict[str, str]:
    """The setting that gives `folder` `share` times a training run's CPU weight (v1 cpu.shares, v2 cpu.weight)."""
    if (folder / "cpu.weight").exists():
        return {"cpu.weight": str(max(1, min(10_000, round(V2_RUN_WEIGHT * share))))}
    if (folder / "cpu.shares").exists():
        return {"cpu.shares": str(max(2, round(V1_RUN_SHARES * share)))}
    return {}


def job_settings(folder: Path, memory: int, processes: int) -> dict[str, str]:
    """The files that hold one job's limits in `folder` and their values (v1 and v2 name them differently)."""
    wanted = {}
    if memory and ((folder / "memory.max").exists() or (folder / "memory.limit_in_bytes").exists()):
        wanted["memory.max" if (folder / "memory.max").exists() else "memory.limit_in_bytes"] = str(memory)
    if processes and (folder / "pids.max").exists():
        wanted["pids.max"] = str(processes)
    return wanted


def shared_settings(folder: Path, shared_memory: int) -> dict[str, str]:
    """The limit over all sandboxes, on the workbench/ folder; v1 counts children in it only with use_hierarchy."""
    if not shared_memory:
        return {}
    if (folder / "memory.max").exists():
        return {"memory.max": str(shared_memory)}
    if (folder / "memory.limit_in_bytes").exists():
        return {"memory.use_hierarchy": "1", "memory.limit_in_bytes": str(shared_memory)}
    return {}


def _write(folder: Path, settings: dict[str, str]) -> None:
    for setting, value in settings.items():
        try:
            (folder / setting).write_text(value)
        except OSError:  # v1 refuses use_hierarchy once children exist, or a limit below what is held: kept as is
            pass


def _enable_below(folder: Path) -> None:
    """cgroup v2: let the groups below `folder` use the controllers (v1 has no such file)."""
    control = folder / "cgroup.subtree_control"
    if control.is_file() and (folder / "cgroup.controllers").is_file():
        available = (folder / "cgroup.controllers").read_text().split()
        _write(folder, {"cgroup.subtree_control": " ".join(f"+{n}" for n in CONTROLLERS if n in available)})


STALE_AFTER_SECONDS = 60.0  # a group is joined a moment after it is made: one this old and empty is left over


def remove_stale(parent: Path) -> None:
    """Remove the groups whose processes are all gone under `parent` (its job groups, then its user groups:
    rmdir refuses a group still in use or with groups inside); a group made in the last minute may be
    another sandbox's, about to be joined, and is left alone. The earlier layout's groups go too."""
    top = parent / TOP
    for folder in [*top.glob("*/*/job-*"), *top.glob("*/user-*"), *parent.glob(f"{PREFIX}*")]:
        try:
            if time.time() - folder.stat().st_mtime > STALE_AFTER_SECONDS:
                folder.rmdir()
        except OSError:
            pass


def _job_folder(parent: Path, placement: Placement, helper_share: float, shared_memory: int) -> Path:
    """Make (or reuse) workbench/<class>/<user>/ under `parent` with their settings; the job's folder to make."""
    top = parent / TOP
    top.mkdir(exist_ok=True)
    # all sandboxes weigh as much against the server's own threads as a trainer with a thread per core would
    # without groups: the server keeps its share, and a run keeps its speed beside the machine's other work
    _write(top, {**shared_settings(top, shared_memory), **cpu_weight(top, float(os.cpu_count() or 1))})
    _enable_below(top)
    klass = top / (HELPERS if placement.helper else RUNS)
    klass.mkdir(exist_ok=True)
    _write(klass, cpu_weight(klass, helper_share if placement.helper else 1.0))
    _enable_below(klass)
    user = klass / user_folder(placement.owner)
    user.mkdir(exist_ok=True)  # users at the default weight: equal to each other
    _enable_below(user)
    return user / f"job-{os.getpid()}-{time.time_ns()}"


def prepare(
    memory: int, processes: int, placement: Placement = A_RUN, helper_share: float = 0.1, shared_memory: int = 0
) -> list[str]:
    """Make the job's groups (one per v1 hierarchy) with its limits; the `cgroup.procs` files to join, or []
    where this process may make none."""
    joins = []
    for parent in dict.fromkeys(_parents().values()):
        remove_stale(parent)
        for _ in range(2):  # a stale user group removed by another server between its mkdir and the job's: again
            try:
                folder = _job_folder(parent, placement, helper_share, shared_memory)
                folder.mkdir()
            except FileNotFoundError:
                continue
            except OSError:  # a controller this machine does not let us use: the per-process limits still hold
                break
            _write(folder, job_settings(folder, memory, processes))
            joins.append(str(folder / "cgroup.procs"))
            break
    return joins
