"""The admin's caps on live runs, kept by the runs folder's dispatcher: a run-time cap, and each user's disk total.

`WORKBENCH_RUN_TIME_LIMIT_H` (default: none) bounds how long one start of a run trains; past it the run gets the
existing stop request (stop.request: it ends its step, saves and ends `stopped`), and its status.json then says
why. A run whose owner's runs, uploads and helper folders hold more than WORKBENCH_USER_DISK_GB
(jobs/user_disk.py) is stopped the same way. A run that does not stop within the stop's wait is ended with its
processes, as Stop does. The dispatcher (jobs/dispatcher.py) calls `look` on every turn and keeps running while a
capped run is live (`watching`), so one student cannot hold the only CPU slot for good.

What a run is asked and when lives in `<runs folder>/.launches/caps/`, the server's, outside every run folder; when
it started is the launcher's record of its first process (runstore/launch_records.py), never the run's own files.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from workbench.jobs import processes, user_disk
from workbench.runstore import launch_records, run_locks, runfolder

RUN_TIME_ENV = "WORKBENCH_RUN_TIME_LIMIT_H"
STOP_WAIT_S = 120.0  # after the stop request, how long a run has to end its step and save before it is ended
DISK_LOOK_S = 30.0  # how often the users' disk totals are added up (a walk of their folders)
CAPS_DIR = "caps"


def run_time_limit(environ=None) -> float:
    """The run-time cap in seconds; 0 when none is set (or the value is not a positive number)."""
    raw = (os.environ if environ is None else environ).get(RUN_TIME_ENV, "")
    try:
        hours = float(raw)
    except ValueError:
        return 0.0
    return hours * 3600.0 if hours > 0 and hours != float("inf") else 0.0


def watching(environ=None) -> bool:
    """Whether any cap is set, so live runs need the dispatcher."""
    return run_time_limit(environ) > 0 or user_disk.disk_limit(environ) > 0


def time_note(limit: float) -> str:
    return (
        f"stopped: it reached the run-time cap of {limit / 3600:g} h for one start (WORKBENCH_RUN_TIME_LIMIT_H); "
        "resume it to train on from its last checkpoint, or ask the admin to raise the cap"
    )


def _asked_path(root: Path, run_id: str) -> Path:
    return root / launch_records.RECORDS_DIR / CAPS_DIR / f"{run_id}.json"


def live_runs(root: Path) -> list[tuple[Path, launch_records.LaunchRecord]]:
    """The runs whose recorded processes still run, with their records."""
    records = root / launch_records.RECORDS_DIR
    found = []
    for path in sorted(records.glob("*.json")) if records.is_dir() else []:
        record = launch_records.read_record(root / path.stem)
        if record is not None and record.processes and record.processes[0].is_running():
            found.append((root / path.stem, record))
    return found


def overdue(record: launch_records.LaunchRecord, limit: float, now: float) -> bool:
    """Whether the run's current start (its first recorded process) began more than `limit` seconds ago."""
    started = record.processes[0].started if record.processes else None
    return limit > 0 and started is not None and now - started > limit


def _ask(run_dir: Path, note: str, now: float) -> None:
    path = _asked_path(run_dir.parent, run_dir.name)
    if path.exists():
        return
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    runfolder.write_json_atomic(path, {"asked_at": now, "note": note})
    run_locks.request_stop(run_dir)
    print(f"[warden] {run_dir.name}: {note}", flush=True)


def _follow_up(root: Path, now: float) -> None:
    """Runs asked to stop: the note written once they ended, their processes ended past the wait."""
    folder = root / launch_records.RECORDS_DIR / CAPS_DIR
    for path in sorted(folder.glob("*.json")) if folder.is_dir() else []:
        data = runfolder.read_json(path, {})
        run_dir = root / path.stem
        record = launch_records.read_record(run_dir)
        live = record is not None and bool(record.live_processes())
        if live and now - float(data.get("asked_at", now)) > STOP_WAIT_S:
            for started in record.live_processes():
                processes.end_tree(started.pid, grace=5.0)
            live = False
        if not live:
            run_locks.clear_stop_request(run_dir)
            ended = runfolder.read_run_status(run_dir)
            runfolder.update_status(
                run_dir,
                state=ended.state if ended.state in runfolder.FINAL_STATES else "stopped",
                finished_at=ended.finished_at or now,
                note=str(data.get("note", "")),
            )
            path.unlink(missing_ok=True)


def look(root: str | os.PathLike, now: float | None = None, disk: bool = True) -> None:
    """One turn: ask each run past a cap to stop, and finish what earlier turns asked. `disk`: add up the users'
    disk totals this turn too."""
    root, now = Path(root), time.time() if now is None else now
    limit, disk_limit = run_time_limit(), user_disk.disk_limit() if disk else 0
    over: dict[str, int] = {}
    for run_dir, record in live_runs(root):
        if overdue(record, limit, now):
            _ask(run_dir, time_note(limit), now)
        elif disk_limit and record.owner:
            if record.owner not in over:
                over[record.owner] = user_disk.used_bytes(root, record.owner)
            if over[record.owner] > disk_limit:
                _ask(
                    run_dir,
                    "stopped: " + user_disk.refusal(record.owner, over[record.owner], disk_limit, "training on").rule,
                    now,
                )
    _follow_up(root, now)
