"""The runs a viewer may see, and run ids from the browser checked against them. No gradio here.

Not a view: it reads each run's owner from the launcher's record (`run_owner`)
and lists the runs folder, for every tab that shows or controls runs.

Every tab lists runs through `visible_run_dirs` / `visible_entries`, and
turns an id that came from the browser into a folder only through
`run_dir_for`: first `runfolder.run_dir_in` (a run folder directly inside
the runs folder: no `..`, no path, no link out), then the owner rule of
workbench/access/owners.py, on every event. A run another user owns reads,
to a signed-in user, exactly like a run that does not exist; where the GPU
queue names the run a queued run waits for, `hide_other_runs` words another
user's run without its id.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path

from workbench.access.owners import Viewer, may_control, may_see
from workbench.runstore import launch_records, runfolder


class RunAccessError(runfolder.RunIdError):
    """A run id the viewer may not see or control (or that names no run they could)."""


def run_owner(run_dir: str | Path) -> str | None:
    """The user who launched the run, or None when none was recorded: the launcher's record's word
    (runstore/launch_records.py); status.json's `owner`, which the run's code can rewrite, only for a run
    the launcher has no record of."""
    record = launch_records.read_record(run_dir)
    owner = record.owner if record is not None else runfolder.read_status(run_dir).get("owner")
    return owner if isinstance(owner, str) and owner else None


def run_config(run_dir: str | Path) -> dict:
    """The config a run was launched with as the launcher recorded it; its config.json, which the run's code can
    rewrite, only for a run the launcher has no record of. What a helper of the run (sampling, export) is shown."""
    return launch_records.recorded_config(run_dir)


def live_run_holding(path: str | Path, runs_dir: str | Path) -> str | None:
    """The id of the run whose folder holds `path` while a process the launcher started for it still runs: its
    code may change the files there under a reader (swap one for a link after a check). None otherwise."""
    root = Path(runs_dir).resolve()
    try:
        relative = Path(path).resolve().relative_to(root)
    except ValueError:
        return None
    if not relative.parts:
        return None
    record = launch_records.read_record(root / relative.parts[0])
    return relative.parts[0] if record is not None and record.live_processes() else None


def controls_run(viewer: Viewer):
    """A test of a folder: a run folder that `viewer` may control (what access/paths.py lets them name)."""

    def own_run(folder: Path) -> bool:
        try:
            return runfolder.is_run_dir(folder) and may_control(viewer, run_owner(folder))
        except OSError:  # a folder that cannot be looked into is no one's to name
            return False

    return own_run


def sees_all(viewer: Viewer) -> bool:
    return viewer.open or viewer.admin


def visible_run_dirs(runs_dir: str | Path, viewer: Viewer) -> list[Path]:
    """The run folders `viewer` may see, newest first."""
    run_dirs = runfolder.list_run_dirs(runs_dir)
    return run_dirs if sees_all(viewer) else [path for path in run_dirs if may_see(viewer, run_owner(path))]


def visible_entries(entries: Iterable[dict], viewer: Viewer) -> list[dict]:
    """The `run_list.list_runs()` entries (each carries its status's `owner`) that `viewer` may see."""
    return [entry for entry in entries if may_see(viewer, entry.get("owner"))]


def run_dir_for(runs_dir: str | Path, run_id, viewer: Viewer, control: bool = False) -> Path:
    """The folder of `run_id` (from the browser) when `viewer` may see it (`control`: stop, delete, ...).

    Raises RunIdError for an id that names no run folder, and RunAccessError,
    worded the same for a run of another user and for no run at all, so a
    signed-in user learns nothing of other users' runs.
    """
    try:
        path = runfolder.run_dir_in(runs_dir, run_id)
    except runfolder.RunIdError:
        if sees_all(viewer):
            raise
        path = None
    allowed = may_control if control else may_see
    if path is None or not allowed(viewer, run_owner(path)):
        raise RunAccessError(
            field="run",
            rule=f"{repr(run_id)[:80]} is not one of your runs",
            fix="pick a run from the list: each user sees and controls the runs they launched "
            "(an admin sees every run)",
        )
    return path


def picked_run_dir_for(runs_dir: str | Path, run_id, viewer: Viewer) -> Path | None:
    """`run_dir_for` for a picker's value: None when nothing is picked or the viewer may not see that run."""
    try:
        return run_dir_for(runs_dir, run_id, viewer) if run_id else None
    except runfolder.RunIdError:
        return None


# How the GPU queue names a run in what a queued run waits for (jobs/queue.describe_wait): `(run ID, ...)`.
RUN_NAMED = re.compile(r"\brun ([A-Za-z0-9_.-]+)")


def hide_other_runs(text: str, visible: Iterable[str]) -> str:
    """`text` with each `run ID` whose id is not in `visible` worded as `another user's run`."""
    shown = set(visible)
    return RUN_NAMED.sub(lambda m: m.group(0) if m.group(1) in shown else "another user's run", text)


def waits_for_seen_by(viewer: Viewer, runs_dir: str | Path, text: str) -> str:
    """What a queued run waits for (`waits_for`), as `viewer` may read it."""
    if sees_all(viewer) or not text:
        return text
    return hide_other_runs(text, [path.name for path in visible_run_dirs(runs_dir, viewer)])


def status_reader(read_status, runs_dir: str | Path, viewer: Viewer):
    """`read_status` (run folder -> status) for `viewer`: a queued run's `waits_for` names only runs they may see."""
    if sees_all(viewer):
        return read_status

    def read(run_dir) -> dict:
        status = read_status(run_dir)
        if status.get("waits_for"):
            status = {**status, "waits_for": waits_for_seen_by(viewer, runs_dir, str(status["waits_for"]))}
        return status

    return read
