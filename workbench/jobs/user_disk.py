"""What one user holds on a shared dashboard's disk: their runs' folders, their uploads and their helper folders,
added up, and the admin's limit on it.

`WORKBENCH_USER_DISK_GB` (default: none; every run's folder is still bounded by WORKBENCH_RUN_DISK_GB inside its
sandbox) bounds the sum; a launch, a helper job or an upload past it is refused with `DiskTotalError`, and a live
run of a user past it is stopped (jobs/warden.py). A run is the user's by the launcher's record
(runstore/launch_records.py), a helper folder by the server's record of it (jobs/helper_folders.py): never by what
a folder says of itself.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from workbench.errors import WorkbenchError
from workbench.jobs import helper_folders
from workbench.jobs.sandbox_init import folder_bytes
from workbench.runstore import launch_records

DISK_ENV = "WORKBENCH_USER_DISK_GB"
FOLDER_DISK_ENV = "WORKBENCH_RUN_DISK_GB"  # what one sandbox's folder may hold (jobs/sandbox_policy.py `Limits`)
UPLOADS_DIR = "uploads"  # access/uploads.py's folder of each user's uploads (jobs/ does not import access/)


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


def run_folders(root: Path, owner: str) -> list[Path]:
    """The run folders the launcher recorded as `owner`'s."""
    records = Path(root) / launch_records.RECORDS_DIR
    owned = []
    for path in sorted(records.glob("*.json")) if records.is_dir() else []:
        record = launch_records.read_record(root / path.stem)
        if record is not None and record.owner == owner:
            owned.append(Path(root) / path.stem)
    return owned


def used_bytes(root: str | os.PathLike, owner: str) -> int:
    """What `owner`'s runs, uploads and helper folders hold now, links never followed."""
    root = Path(root)
    folders = [*run_folders(root, owner), root / UPLOADS_DIR / owner]
    folders += [entry.folder for entry in helper_folders.owned_by(root, owner)]
    return sum(folder_bytes(str(folder)) for folder in folders if not os.path.islink(folder))


def check_room(root: str | os.PathLike, owner: str | None, what: str, adding: int = 0) -> None:
    """DiskTotalError when `owner` already holds their disk total (or would with `adding` bytes more); nothing
    when no total is set or the job has no owner (an open dashboard)."""
    limit = disk_limit()
    if owner is None or limit <= 0:
        return
    used = used_bytes(root, owner)
    if used + adding > limit or used >= limit:
        raise refusal(owner, used, limit, what)


def job_env(env: dict, root: str | os.PathLike, owner: str | None) -> dict:
    """`env` for a helper job of `owner`'s, its sandbox's folder limit lowered to the room they have left under
    their total: checked only at the start, the total would bound nothing the job writes once running."""
    limit = disk_limit(env)
    if owner is None or limit <= 0:
        return env
    room = max(limit - used_bytes(root, owner), 1)
    try:
        folder_limit = float(env.get(FOLDER_DISK_ENV, "50")) * 2**30
    except ValueError:
        folder_limit = 50 * 2**30
    if folder_limit <= 0 or room < folder_limit:
        env = {**env, FOLDER_DISK_ENV: f"{room / 2**30:.9f}"}
    return env
