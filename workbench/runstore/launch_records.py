"""The launcher's own record of each run: what the server decides from, kept where the run cannot write.

A run's folder belongs to the run's code: a sandboxed run's reward file can
rewrite status.json, config.json and every other file there. So what the
server acts on is written by the launcher (and the sandbox starter, which runs
outside the sandbox) into `<runs folder>/.launches/<run id>.json`, beside the
run folders, never inside one. A sandbox hides the whole runs folder and binds
back only the run's own folder, so no run sees, let alone writes, any record.

A record holds:

- `owner`     the signed-in user who launched the run (the owner rule of access/owners.py)
- `sandboxed` whether the run starts in a sandbox; `policy` the server's additions to it
              (jobs/sandbox_policy.py `Policy`: the files it masks, the folders it shows)
- `config`    the config as checked at launch; a resume or a queued start writes it back as the
              run's config.json and binds only its paths into the sandbox
- `resume`    a queued run that resumes from its checkpoint when its turn comes
- `queued_at` when the launcher queued the run (its place in the GPU queue); None: not queued, whatever
              its status.json says
- `processes` the processes the launcher started and may signal: host pid, process group and
              start time (psutil's `create_time`), so a pid the kernel gave to another process
              since is never taken for the run's
- `uid`       the uid its sandbox runs as on a server running as root, chosen by the server at its first
              sandboxed start (jobs/run_uids.py) and kept while the record lasts; None: not chosen yet

status.json stays the run's report (its state, steps, errors), read as data:
`run_state.status_of_dir` lays a record's owner and processes over it.

A run with no record was not started by a launcher of this version (a run folder
from before records existed, a remote run, one started in a terminal without
`--sandbox`): readers fall back to what its status.json says, and the launcher
never kills a process it did not record.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from workbench.runstore import run_locks, runfolder
from workbench.spec.config_shown import shown_config

RECORDS_DIR = ".launches"
# A process whose start time differs from the recorded one by more than this is another process on a reused pid.
START_TIME_TOLERANCE = 0.05


@dataclass(frozen=True)
class ProcessRecord:
    """One process the launcher started: its host pid, process group and start time."""

    pid: int
    pgid: int | None = None
    started: float | None = None

    @classmethod
    def of_pid(cls, pid: int) -> ProcessRecord:
        """The live process `pid` as a record (its group and start time read from the kernel now)."""
        import psutil

        try:
            started = psutil.Process(pid).create_time()
            pgid = os.getpgid(pid)
        except (psutil.Error, ProcessLookupError):
            started, pgid = None, None
        return cls(pid, pgid, started)

    def is_running(self) -> bool:
        """Whether this very process still runs (not a zombie, not another process on its reused pid)."""
        import psutil

        try:
            process = psutil.Process(self.pid)
            if process.status() == psutil.STATUS_ZOMBIE:
                return False
            return self.started is None or abs(process.create_time() - self.started) <= START_TIME_TOLERANCE
        except (psutil.Error, ValueError):
            return False


@dataclass(frozen=True)
class LaunchRecord:
    """What the launcher knows of a run (see the module docstring)."""

    owner: str | None = None
    sandboxed: bool = False
    policy: dict | None = None
    config: dict | None = None
    resume: bool = False
    queued_at: float | None = None
    processes: tuple[ProcessRecord, ...] = field(default_factory=tuple)
    uid: int | None = None

    def to_dict(self) -> dict:
        return {**asdict(self), "processes": [asdict(p) for p in self.processes]}

    @classmethod
    def from_dict(cls, data: Any) -> LaunchRecord | None:
        if not isinstance(data, dict) or not data:  # a reader's {} for a missing file: no record
            return None
        known = {f.name for f in fields(cls)} - {"processes"}
        kept = {key: value for key, value in data.items() if key in known}
        listed = data.get("processes") if isinstance(data.get("processes"), list) else []
        running = tuple(
            ProcessRecord(**{k: p.get(k) for k in ("pid", "pgid", "started")})
            for p in listed
            if isinstance(p, dict) and isinstance(p.get("pid"), int)
        )
        return cls(**kept, processes=running)

    def live_processes(self) -> list[ProcessRecord]:
        """The recorded processes that still run."""
        return [process for process in self.processes if process.is_running()]


def record_path(run_dir: str | os.PathLike) -> Path:
    """Where the record of the run in `run_dir` lies: its runs folder's `.launches/`, outside every run folder."""
    run_dir = Path(os.path.abspath(run_dir))
    return run_dir.parent / RECORDS_DIR / f"{run_dir.name}.json"


def read_record(run_dir: str | os.PathLike, read=runfolder.read_json) -> LaunchRecord | None:
    """The run's record, or None when the launcher never wrote one (see the module docstring)."""
    return LaunchRecord.from_dict(read(record_path(run_dir)))


def recorded_config(run_dir: str | os.PathLike, read=runfolder.read_json) -> dict:
    """The config the run was launched with, as the launcher recorded it: what a table or a helper of the run
    shows and acts on. config.json, which the run's code can rewrite, only for a run the launcher has no record
    of, and then each field typed and bounded (`spec.config_shown.shown_config`). `read`: how a file is read
    (`file_cache.read_json_object` for a listing: then a config.json it cannot read raises, as that reader does)."""
    try:
        record = read_record(run_dir, read)
    except (OSError, ValueError, TypeError):
        record = None
    if record is not None and isinstance(record.config, dict) and record.config:
        return dict(record.config)
    return shown_config(read(os.path.join(run_dir, runfolder.CONFIG_FILE)))


def write_record(run_dir: str | os.PathLike, record: LaunchRecord) -> LaunchRecord:
    """Replace the run's record atomically (its folder made, readable by the server only)."""
    path = record_path(run_dir)
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    runfolder.write_json_atomic(path, record.to_dict())
    return record


def _changing(run_dir: str | os.PathLike):
    """Held while a record is read and written back: the launcher, a sandbox's starter and a helper choosing
    the run's uid may change one record at once, and none may lose what another wrote."""
    record_path(run_dir).parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    return run_locks.held(record_path(run_dir).parent / ".records.lock")


def update_record(run_dir: str | os.PathLike, **changes: Any) -> LaunchRecord:
    """The run's record with `changes` (LaunchRecord's fields), written; a run with none gets one."""
    with _changing(run_dir):
        return write_record(run_dir, replace(read_record(run_dir) or LaunchRecord(), **changes))


def record_started(run_dir: str | os.PathLike, pid: int) -> LaunchRecord:
    """Record the process the launcher just started for the run, first, before any it started already (its vLLM
    server's guard): the only processes a stop may signal."""
    with _changing(run_dir):
        kept = read_record(run_dir) or LaunchRecord()
        return write_record(run_dir, replace(kept, processes=(ProcessRecord.of_pid(pid), *kept.processes)))


def keep_uid(run_dir: str | os.PathLike, choose: Callable[[], int]) -> int | None:
    """The uid recorded for the run, or `choose()`'s, recorded now when it has none; None for a run the launcher
    has no record of (one is not made here: a record's absence means something to its readers)."""
    with _changing(run_dir):
        record = read_record(run_dir)
        if record is None:
            return None
        if isinstance(record.uid, int) and not isinstance(record.uid, bool):
            return record.uid
        return write_record(run_dir, replace(record, uid=choose())).uid


def recorded_uids(runs_root: str | os.PathLike) -> set[int]:
    """Every uid a run record of the runs folder holds (a run keeps its uid while its record lasts)."""
    found = (runfolder.read_json(path, {}) for path in (Path(runs_root) / RECORDS_DIR).glob("*.json"))
    return {data["uid"] for data in found if isinstance(data, dict) and type(data.get("uid")) is int}


def remove_record(run_dir: str | os.PathLike) -> None:
    record_path(run_dir).unlink(missing_ok=True)


# ---------------------------------------------------------------- helper jobs (signal checks)

JOBS_DIR = "jobs"


def job_path(runs_root: str | os.PathLike, job_id: str) -> Path:
    return Path(runs_root) / RECORDS_DIR / JOBS_DIR / f"{job_id}.json"


def record_job(runs_root: str | os.PathLike, job_id: str, owner: str | None, pid: int) -> None:
    """Record a helper job (a signal check) the server started for `owner`: it counts against their runs
    while its process runs."""
    path = job_path(runs_root, job_id)
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    runfolder.write_json_atomic(path, {"owner": owner, "process": asdict(ProcessRecord.of_pid(pid))})


def live_jobs(runs_root: str | os.PathLike, owner: str | None) -> list[str]:
    """The ids of `owner`'s helper jobs still running; the records of jobs that ended are removed."""
    folder = Path(runs_root) / RECORDS_DIR / JOBS_DIR
    live = []
    for path in sorted(folder.glob("*.json")) if owner is not None else []:
        data = runfolder.read_json(path, {})
        process = data.get("process") if isinstance(data, dict) else None
        running = (
            isinstance(process, dict)
            and isinstance(process.get("pid"), int)
            and ProcessRecord(process["pid"], process.get("pgid"), process.get("started")).is_running()
        )
        if not running:
            path.unlink(missing_ok=True)
        elif data.get("owner") == owner:
            live.append(path.stem)
    return live


# ---------------------------------------------------------------- uids held by folders with no run record

UIDS_DIR = "uids"


def _reservation_path(runs_root: str | os.PathLike, folder: str) -> Path:
    return Path(runs_root) / RECORDS_DIR / UIDS_DIR / f"{hashlib.sha256(folder.encode()).hexdigest()[:24]}.json"


def _holders(data: Any) -> list[ProcessRecord]:
    listed = data.get("holders") if isinstance(data, dict) and isinstance(data.get("holders"), list) else []
    return [
        ProcessRecord(p["pid"], p.get("pgid"), p.get("started"))
        for p in listed
        if isinstance(p, dict) and type(p.get("pid")) is int
    ]


def reserved_uids(runs_root: str | os.PathLike) -> dict[str, int]:
    """{folder: uid} for each folder with no run record whose sandbox's starter (a signal check's, a helper's)
    still runs; the reservations of those that ended are removed."""
    live = {}
    for path in sorted((Path(runs_root) / RECORDS_DIR / UIDS_DIR).glob("*.json")):
        data = runfolder.read_json(path, {})
        if not any(holder.is_running() for holder in _holders(data)) or type(data.get("uid")) is not int:
            path.unlink(missing_ok=True)
        elif isinstance(data.get("folder"), str):
            live[data["folder"]] = data["uid"]
    return live


def reserve_uid(runs_root: str | os.PathLike, folder: str, uid: int, pid: int) -> None:
    """Hold `uid` for the sandbox of `folder` (a real path) while process `pid` runs (the one that becomes the
    sandbox, or starts it); a folder held already gains `pid` as another holder."""
    path = _reservation_path(runs_root, folder)
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    holders = [h for h in _holders(runfolder.read_json(path, {})) if h.is_running() and h.pid != pid]
    kept = [asdict(h) for h in (*holders, ProcessRecord.of_pid(pid))]
    runfolder.write_json_atomic(path, {"folder": folder, "uid": uid, "holders": kept})
