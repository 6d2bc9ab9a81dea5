"""What one user holds on a shared dashboard's disk: their runs' folders, their uploads and their helper folders,
added up, and the refusal of a launch, a helper job or an upload past the admin's per-user total
(access/disk_totals.py's WORKBENCH_USER_DISK_GB).

A run is the user's by the launcher's record (runstore/launch_records.py), a helper folder by the server's record
of it (jobs/helper_folders.py): never by what a folder says of itself.
"""

from __future__ import annotations

import os
from pathlib import Path

from workbench.access import disk_totals, uploads
from workbench.jobs import helper_folders
from workbench.runstore import launch_records


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
    folders = [*run_folders(root, owner), uploads.uploads_dir(root, owner)]
    folders += [entry.folder for entry in helper_folders.owned_by(root, owner)]
    return sum(disk_totals.folder_bytes(str(folder)) for folder in folders if not os.path.islink(folder))


def check_room(root: str | os.PathLike, owner: str | None, what: str, adding: int = 0) -> None:
    """DiskTotalError when `owner` already holds their disk total (or would with `adding` bytes more); nothing
    when no total is set or the job has no owner (an open dashboard)."""
    limit = disk_totals.disk_limit()
    if owner is None or limit <= 0:
        return
    used = used_bytes(root, owner)
    if disk_totals.over_limit(used, limit, adding) or used >= limit:
        raise disk_totals.refusal(owner, used, limit, what)
