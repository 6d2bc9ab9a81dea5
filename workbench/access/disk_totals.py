"""A user's disk total on a shared dashboard: what their runs, uploads and helper folders hold together, and the
admin's limit on it (standard library only).

`WORKBENCH_USER_DISK_GB` (default: none, every run's folder is still bounded by WORKBENCH_RUN_DISK_GB inside its
sandbox) bounds the sum; a launch, a helper job or an upload past it is refused with `DiskTotalError`, and a
running job of a user past it is stopped (jobs/warden.py). What is counted is jobs/user_disk.py's.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from workbench.errors import WorkbenchError

DISK_ENV = "WORKBENCH_USER_DISK_GB"


class DiskTotalError(WorkbenchError):
    """A user's runs, uploads and helper folders hold their disk total or more."""


def disk_limit(environ: Mapping[str, str] | None = None) -> int:
    """The admin's per-user disk total in bytes; 0 when none is set (or the value is not a positive number)."""
    raw = (os.environ if environ is None else environ).get(DISK_ENV, "")
    try:
        value = float(raw)
    except ValueError:
        return 0
    return int(value * 2**30) if value > 0 and value != float("inf") else 0


def over_limit(used: int, limit: int, adding: int = 0) -> bool:
    return limit > 0 and used + adding > limit


def size_text(size: int) -> str:
    return f"{size / 2**30:.2f} GiB" if size >= 2**30 else f"{size / 2**20:.1f} MiB"


def refusal(user: str, used: int, limit: int, what: str) -> DiskTotalError:
    """The one message a refused `what` (a launch, an upload) gets."""
    return DiskTotalError(
        field="disk",
        rule=f"{user}'s runs, uploads and helper folders hold {size_text(used)}, and each user may hold "
        f"{size_text(limit)} (WORKBENCH_USER_DISK_GB); {what} was refused",
        fix="delete runs you no longer need (the Runs tab) or uploads (the Setup tab), or ask the admin to raise "
        "WORKBENCH_USER_DISK_GB",
    )


def folder_bytes(folder: str) -> int:
    """What `folder` holds: each file's allocated blocks or its length, whichever is more (a sparse or
    preallocated file counts at what it can take), links never followed; 0 for a folder that is gone."""
    total, pending = 0, [folder]
    while pending:
        try:
            entries = list(os.scandir(pending.pop()))
        except OSError:  # removed meanwhile, or not a folder
            continue
        for entry in entries:
            try:
                info = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            total += max(info.st_blocks * 512, info.st_size)
            if entry.is_dir(follow_symlinks=False):
                pending.append(entry.path)
    return total
