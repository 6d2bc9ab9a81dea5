"""The folders helper jobs write beside the runs (a signal check's `<runs folder>/signal-checks/<id>/`): who owns
each, what it holds, and their removal.

A helper folder lives only as long as its job: the job's reader removes it once it has taken what the user needs
(the report, the end of the log), a cancel removes it, and what is left (a job killed mid-way, a server that
crashed) is listed for the admin (`python -m workbench runs --helpers`) and removed at the server's start
(`clean`). Each folder's owner and process are recorded by the server in `<runs folder>/.launches/helpers/`,
outside every folder a job writes, so a job cannot hide its folder or pass it to another user; the per-user
disk total (jobs/user_disk.py) counts a user's helper folders from these records.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path

from workbench.jobs.sandbox_init import folder_bytes
from workbench.runstore import launch_records, runfolder

HELPERS_DIR = "helpers"
KIND_FOLDERS = ("signal-checks",)  # the folders of the runs folder that hold helper jobs' folders


@dataclass(frozen=True)
class HelperFolder:
    """One helper job's folder: where it is, whose, which kind, and whether its job still runs."""

    folder: Path
    owner: str | None
    kind: str
    live: bool

    def bytes(self) -> int:
        return folder_bytes(str(self.folder))


def _records(root: Path) -> Path:
    return Path(root) / launch_records.RECORDS_DIR / HELPERS_DIR


def _record_path(root: Path, folder: Path) -> Path:
    return _records(root) / f"{Path(folder).parent.name}--{Path(folder).name}.json"


def register(root: str | os.PathLike, folder: Path, owner: str | None, kind: str, pid: int) -> None:
    """Record that `folder` (made now by the server for a `kind` job of `owner`) belongs to the process `pid`."""
    path = _record_path(Path(root), folder)
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    process = launch_records.ProcessRecord.of_pid(pid)
    runfolder.write_json_atomic(
        path,
        {"folder": str(folder), "owner": owner, "kind": kind, "process": [process.pid, process.pgid, process.started]},
    )


def _read(root: Path, path: Path) -> HelperFolder | None:
    data = runfolder.read_json(path, {})
    if not isinstance(data, dict) or not isinstance(data.get("folder"), str):
        return None
    process = data.get("process")
    live = (
        isinstance(process, list)
        and len(process) == 3
        and isinstance(process[0], int)
        and launch_records.ProcessRecord(*process).is_running()
    )
    owner = data.get("owner") if isinstance(data.get("owner"), str) else None
    return HelperFolder(Path(data["folder"]), owner, str(data.get("kind", "")), live)


def remove(root: str | os.PathLike, folder: Path) -> None:
    """Remove a helper folder and its record. Only a real folder directly inside one of the runs folder's helper
    folders is removed (never one reached through a link); shutil.rmtree follows no link inside it."""
    root = Path(root)
    folder = Path(folder)
    inside = folder.parent.parent == root and folder.parent.name in KIND_FOLDERS
    info = os.lstat(folder) if inside and os.path.lexists(folder) else None
    if info is not None and not os.path.islink(folder.parent) and os.path.isdir(folder) and not os.path.islink(folder):
        shutil.rmtree(folder, ignore_errors=True)
    _record_path(root, folder).unlink(missing_ok=True)


def listed(root: str | os.PathLike) -> list[HelperFolder]:
    """Every helper folder of the runs folder: the recorded ones, and any folder there with no record (owner
    unknown, its job not running: a server that crashed before recording it)."""
    root = Path(root)
    found: dict[Path, HelperFolder] = {}
    records = _records(root)
    for path in sorted(records.glob("*.json")) if records.is_dir() else []:
        entry = _read(root, path)
        if entry is not None:
            found[entry.folder] = entry
    for kind in KIND_FOLDERS:
        parent = root / kind
        if parent.is_dir() and not parent.is_symlink():
            for entry in sorted(os.scandir(parent), key=lambda e: e.name):
                path = parent / entry.name
                if path not in found:
                    found[path] = HelperFolder(path, None, kind, False)
    return list(found.values())


def owned_by(root: str | os.PathLike, owner: str) -> list[HelperFolder]:
    """`owner`'s helper folders still on disk."""
    return [entry for entry in listed(root) if entry.owner == owner and os.path.lexists(entry.folder)]


def leftovers(root: str | os.PathLike) -> list[HelperFolder]:
    """Helper folders whose job no longer runs: a job killed mid-way, or a reader that never came back."""
    return [entry for entry in listed(root) if not entry.live]


def clean(root: str | os.PathLike) -> list[Path]:
    """Remove every leftover helper folder (the server's start); returns the folders removed."""
    removed = []
    for entry in leftovers(root):
        remove(root, entry.folder)
        removed.append(entry.folder)
    return removed
