"""How a run stands, read from its folder and its processes: the status every reader sees.

status.json says what the trainer last wrote; this module judges it against
the processes: a run whose process is gone while its state is not final
(killed, out of memory) is `failed`, a silent heartbeat is `stalled_seconds`,
a run on another machine whose heartbeat stopped is `lost`. Nothing here
keeps state between calls, so it works after the caller restarts; a folder
that cannot be read is `unreadable` with the reason, never an exception.

status.json is the run's report, and a run's own code can write it: the
launcher's record of the run (runstore/launch_records.py) is laid over it.
The record's owner replaces the one written there, and whether the run's
processes live is judged by the processes the launcher recorded (pid and start
time), never by a pid read from status.json. A run that says it ended while its
recorded processes still run is `lingering`: not final, so it still counts
against its owner's runs, cannot be deleted, and a stop ends it. A sandboxed run
is so at once (its times are its own to write); a run outside a sandbox, whose
code is its user's own, after LINGER_SECONDS (a trainer exits a moment after its
last word).
"""

from __future__ import annotations

import os
import socket
import time
from pathlib import Path

from workbench.errors import WorkbenchError
from workbench.jobs import processes
from workbench.runstore import launch_records, runfolder
from workbench.spec.run_status import RunStatus, status_field

STALE_SECONDS = 30.0  # a live process whose heartbeat is older than this is flagged as stalled
# A run on another machine whose heartbeat (every 2 s) is older than this shows as `lost`: long
# enough for a shared filesystem's attribute cache (NFS keeps them up to 60 s) to show a live run late.
LOST_SECONDS = 120.0
# A run the launcher has marked `starting` but whose process it has not recorded yet (it is being spawned)
# counts as starting for this long; after that, as failed.
RECORD_PID_SECONDS = 30.0
# A run outside a sandbox whose status.json says it ended while its recorded processes still run this long
# after is `lingering` (a sandboxed one at once: see the module's docstring).
LINGER_SECONDS = 60.0
LINGERING = "lingering"


class LauncherError(WorkbenchError):
    """A run that does not exist or cannot do what was asked; the message says what to do."""


def run_dir_of(run_id: str | os.PathLike, runs_dir: str | os.PathLike | None = None) -> Path:
    """The folder of a run, from its id (or a path to the folder itself)."""
    path = Path(run_id)
    if runfolder.is_run_dir(path):
        return path.resolve()
    candidate = runfolder.runs_root(runs_dir) / str(run_id)
    if runfolder.is_run_dir(candidate):
        return candidate
    known = [p.name for p in runfolder.list_run_dirs(runs_dir)[:5]]
    raise LauncherError(
        f"run: no run called {str(run_id)!r} in {runfolder.runs_root(runs_dir)}; "
        + (f"recent runs: {', '.join(known)}" if known else "start one with `python -m workbench train`")
    )


def unreadable_status(run_dir: Path, exc: BaseException) -> dict:
    """The status readers give a run folder they cannot read: state `unreadable` and the reason."""
    return {
        "state": runfolder.UNREADABLE,
        "run_id": run_dir.name,
        "run_dir": str(run_dir),
        "error": {
            "type": type(exc).__name__,
            "message": f"this run folder cannot be read: {exc}",
            "hint": "Check the folder's permissions and that its status.json and config.json are UTF-8 JSON "
            "objects, or delete the folder.",
            "traceback_tail": "",
        },
    }


def status_of_dir(run_dir: str | os.PathLike, read=runfolder.read_json_object) -> dict:
    """A run's status as readers should see it: a dead process with a non-final state is `failed`.

    It is status.json as a reader shows it (`RunStatus.shown`: each field typed and bounded, the ones that were not
    named in `unreadable_fields`; the state judged here) with what the
    launcher adds: `run_id`, `run_dir`, and `stalled_seconds` for a silent heartbeat,
    `last_state` for a run on another machine that is `lost`.
    A folder that cannot be read is reported `unreadable` with the reason; this never raises.
    `read`: how status.json is read (`file_cache.read_json_object` for a listing).
    """
    run_dir = Path(run_dir)
    record = launch_record(run_dir, read)
    try:
        written = RunStatus.from_dict(read(os.path.join(run_dir, runfolder.STATUS_FILE)))
    except (OSError, ValueError, TypeError) as exc:
        unreadable = unreadable_status(run_dir, exc)
        if record is not None and record.live_processes():  # a run that hides its status still runs
            unreadable.update(state=LINGERING, owner=record.owner)
        return unreadable
    return _live_status(run_dir, written, record)


def launch_record(run_dir: Path, read=runfolder.read_json_object) -> launch_records.LaunchRecord | None:
    """The launcher's record of the run (None when it has none, or it cannot be read)."""
    try:
        return launch_records.read_record(run_dir, read)
    except (OSError, ValueError, TypeError):
        return None


def runs_elsewhere(status: RunStatus | dict) -> bool:
    """Whether the run's process is on another machine (status.json's `host`), where no pid can be looked up."""
    host = status_field(status, "host")
    return bool(host) and host != socket.gethostname()


def _live_status(run_dir: Path, status: RunStatus, record: launch_records.LaunchRecord | None = None) -> dict:
    """`status` judged (`failed` when its process is gone, `lost` when its heartbeat is), with the launcher's fields
    (its record's owner and processes over what the run wrote)."""
    status.update(state=status.state or "starting")
    seen = {"run_id": run_dir.name, "run_dir": str(run_dir)}
    if record is not None:
        status.update(owner=record.owner)
        if status.state == runfolder.QUEUED:  # its place in the queue is the launcher's word, not the run's
            _queued_by_the_launcher(status, record)
        if record.processes:  # started here by the launcher, whatever `host` the run wrote
            status.update(pid=record.processes[0].pid, pgid=record.processes[0].pgid, host=socket.gethostname())
    if status.state in runfolder.FINAL_STATES and _lingers(status, record):
        status.update(note=f"status.json says {status.state}, but its processes still run", state=LINGERING)
    if status.state in runfolder.FINAL_STATES or status.state == runfolder.QUEUED:
        return {**status.shown(), **seen}  # a queued run has no process yet: the dispatcher starts it
    updated = status.updated_at or 0.0
    if runs_elsewhere(status):
        seen.update(_remote_judgement(status, updated))
    elif (
        status.state == "starting"
        and not (record.processes if record else status.pid or status.pgid)
        and time.time() - updated < RECORD_PID_SECONDS
    ):
        pass  # being spawned: the launcher records the pid next
    elif not _processes_live(status, record, updated):
        status.update(
            state="failed",
            error={
                "type": "ProcessDied",
                "message": f"the training process (pid {status.pid}) ended without recording why",
                "hint": "It was killed or ran out of memory. Read the end of train.log; if memory ran out, "
                "lower per_device_train_batch_size, num_generations or max_completion_length.",
                "traceback_tail": runfolder.read_log_tail(run_dir, 2000),
            },
        )
    elif updated and time.time() - updated > STALE_SECONDS:
        seen["stalled_seconds"] = round(time.time() - updated, 1)
    return {**status.shown(), **seen}


def _queued_by_the_launcher(status: RunStatus, record: launch_records.LaunchRecord) -> None:
    """A run whose status.json says `queued`: in the queue at the time the launcher queued it, or, when the
    launcher never queued it (the run's own code wrote that), `failed` saying so: it waits for nothing."""
    if record.queued_at is not None:
        status.update(queued_at=record.queued_at)
        return
    status.update(
        state="failed",
        error={
            "type": "NotQueued",
            "message": "status.json says the run is queued, but the launcher never queued it",
            "hint": "The run's own code wrote it; resume the run to queue it again.",
            "traceback_tail": "",
        },
    )


def _processes_live(status: RunStatus, record: launch_records.LaunchRecord | None, updated: float) -> bool:
    """Whether the run's process runs: the launcher's recorded ones, or (no record) the pids status.json names."""
    if record is not None and record.processes:
        return bool(record.live_processes())
    return processes.alive(status.pid, updated or None) or processes.alive(status.pgid, updated or None)


def _lingers(status: RunStatus, record: launch_records.LaunchRecord | None) -> bool:
    """A run that wrote a final state while a process the launcher recorded for it still runs (outside a sandbox:
    LINGER_SECONDS after it said so)."""
    if record is None or not record.processes:
        return False
    since = status.finished_at or status.updated_at or 0.0
    return (record.sandboxed or time.time() - since > LINGER_SECONDS) and bool(record.live_processes())


def _remote_judgement(status: RunStatus, updated: float) -> dict:
    """A run on another machine, judged by its heartbeat alone: `lost` once it is older than LOST_SECONDS.

    Sets the state and error of `status`; returns the launcher's fields (`last_state`, `stalled_seconds`).
    """
    age = time.time() - updated if updated else float("inf")
    if age > LOST_SECONDS:
        last_state = status.state
        status.update(
            state=runfolder.LOST,
            error={
                "type": "HeartbeatLost",
                "message": f"the run on {status.host} has not written status.json for "
                + (f"{age:.0f} s" if updated else "ever")
                + f" (limit {LOST_SECONDS:.0f} s)",
                "hint": f"Its processes cannot be seen from here. Check on {status.host} (its terminal or "
                "slurm-JOBID.out, and train.log in the run folder) whether it still runs and whether the "
                "filesystem is still shared; it shows its state again as soon as its heartbeat returns.",
                "traceback_tail": "",
            },
        )
        return {"last_state": last_state}
    if age > STALE_SECONDS:
        return {"stalled_seconds": round(age, 1)}
    return {}


def status(run_id: str, runs_dir: str | os.PathLike | None = None) -> dict:
    return status_of_dir(run_dir_of(run_id, runs_dir))


def is_running(run_id: str, runs_dir: str | os.PathLike | None = None) -> bool:
    return status(run_id, runs_dir)["state"] not in runfolder.FINAL_STATES


def wait(run_id: str, runs_dir: str | os.PathLike | None = None, timeout: float = 600.0, poll: float = 0.5) -> dict:
    """Block until the run reaches a final state (or `timeout`), and return its status."""
    deadline = time.monotonic() + timeout
    while True:
        current = status(run_id, runs_dir)
        if current["state"] in runfolder.FINAL_STATES or time.monotonic() > deadline:
            return current
        time.sleep(poll)


def other_live_process(run_dir: str | os.PathLike) -> int | None:
    """The pid of a live process that writes `run_dir`, unless it belongs to this run's own process tree.

    A second trainer in the same folder would interleave both runs' files and
    checkpoints. The launcher's own child finds its pid (or a parent's: the
    accelerate launcher) in status.json, and a worker of several processes
    its sibling's (rank 0 writes its pid); those are let through.
    """
    import psutil

    status = runfolder.read_run_status(run_dir)
    if status.state in runfolder.FINAL_STATES or runs_elsewhere(status):  # a pid on another machine
        return None
    updated = status.updated_at or None
    me = psutil.Process()
    own = {me.pid, *(parent.pid for parent in me.parents())}
    worker = "LOCAL_RANK" in os.environ  # started by torchrun / accelerate with sibling workers
    for pid in runfolder.pids_here(status):
        if pid not in own and processes.alive(pid, updated) and not (worker and _sibling(pid, me.ppid())):
            return pid
    return None


def _sibling(pid: int, parent: int) -> bool:
    import psutil

    try:
        return psutil.Process(pid).ppid() == parent
    except psutil.Error:
        return False
