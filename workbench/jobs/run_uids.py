"""Which uid each sandbox of a server running as root runs as: chosen here by the server, from RUN_UIDS, never
derived from a name a user picks, and never one a live sandbox holds.

RLIMIT_NPROC counts a uid's processes and threads across the whole host, so two sandboxes on one uid share one
limit: whoever could put their job on another user's uid could fill it and make that user's run fail. So:

- a run keeps one uid for good, recorded in its launch record (runstore/launch_records.py `uid`) the first
  time it starts in a sandbox; its resumes and its helpers (Compare sampling, exports, evaluations) run as it,
  which already owns its folder. A run folder from before (a record with no uid) gets one at its next start,
  and the sandbox's starter hands the folder over to it (jobs/sandbox_uid.py `hand_over`);
- a folder with no run record (a signal check's, a bare sandbox's) gets one held for the process that asked,
  the one that becomes its sandbox, while that process runs;
- taken, under the runs folder's uid lock: every run record's uid, every live reservation's, and every uid of
  RUN_UIDS some process of the host still runs as (a sandbox started before this rule, or one ending now).
  A uid is free again once its record or reservation is gone and no process of it remains.
"""

from __future__ import annotations

import os
import secrets
from pathlib import Path

from workbench.errors import WorkbenchError
from workbench.jobs.sandbox_paths import real_path
from workbench.runstore import launch_records, run_locks

# A server running as root runs each sandbox as a uid of its own, in this range (no account uses it).
RUN_UIDS = range(2_000_000, 2_100_000)


class UidsExhausted(WorkbenchError):
    """Every uid of RUN_UIDS is held: no sandbox can start until one is free."""


def pick_free(taken: set[int], pool: range = RUN_UIDS, start: int | None = None) -> int:
    """A uid of `pool` not in `taken`: the first free one from `start` on (a random place when None, so that a
    uid just freed is not the next one given), wrapping around. UidsExhausted when none is free."""
    first = secrets.randbelow(len(pool)) if start is None else start % len(pool)
    for offset in range(len(pool)):
        uid = pool[(first + offset) % len(pool)]
        if uid not in taken:
            return uid
    raise UidsExhausted(
        field="sandbox",
        rule=f"all {len(pool)} uids a sandbox may run as ({pool.start}-{pool.stop - 1}) are held by runs' records "
        "and live jobs",
        fix="a run's uid is freed when the run is deleted (Runs tab): delete finished runs no one needs",
    )


def process_uids(pool: range = RUN_UIDS) -> set[int]:
    """The uids of `pool` that some process of the host runs as now (real, effective, saved or filesystem uid)."""
    found: set[int] = set()
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/status", encoding="ascii", errors="replace") as status:
                line = next((line for line in status if line.startswith("Uid:")), "")
        except OSError:  # it ended meanwhile
            continue
        found.update(uid for uid in map(int, line.split()[1:]) if uid in pool)
    return found


def taken(runs_root: str | os.PathLike) -> set[int]:
    """The uids no new sandbox of `runs_root` may get now (see the module docstring); the caller holds the lock."""
    reserved = launch_records.reserved_uids(runs_root).values()
    return launch_records.recorded_uids(runs_root) | set(reserved) | process_uids()


def sandbox_uid(own_dir: str | os.PathLike, runs_root: str | os.PathLike) -> int:
    """The uid the sandbox writing `own_dir` runs as: its run's recorded one (chosen and recorded now when it has
    none), else the one held for that folder, else one held from now for this process (which starts the
    sandbox or becomes it)."""
    own, root = Path(real_path(own_dir)), Path(real_path(runs_root))
    with run_locks.uid_lock(root):
        if own.parent == root:
            kept = launch_records.keep_uid(own, lambda: pick_free(taken(root)))
            if kept is not None:
                return kept
        uid = launch_records.reserved_uids(root).get(str(own))
        if uid is None:
            uid = pick_free(taken(root))
        launch_records.reserve_uid(root, str(own), uid, os.getpid())
        return uid
