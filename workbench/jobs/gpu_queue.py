"""The GPU queue as the run folders hold it: which runs hold which devices, where a queued run stands.

The queue is only files: a queued run's status.json and the runs folder's
`.queue.lock`. Its rules are pure (workbench/jobs/queue.py); this module
reads the run folders into them, and starts the runs folder's dispatcher
process (workbench/jobs/dispatcher.py), which starts queued runs as their
devices free up.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable
from pathlib import Path

from workbench.jobs import processes, queue
from workbench.jobs.run_state import launch_record, runs_elsewhere, status_of_dir
from workbench.runstore import launch_records, run_locks, runfolder
from workbench.sources.gpus import list_gpus, runs_on_cpu
from workbench.spec.run_status import RunStatus, status_field

DISPATCHER_MODULE = "workbench.jobs.dispatcher"  # started as `python -m` while runs are queued


def machine_gpus() -> list[int]:
    """The GPU indexes runs started from here can use: none when this process's CUDA_VISIBLE_DEVICES hides all."""
    if runs_on_cpu("auto", gpus_present=True):  # true only when CUDA_VISIBLE_DEVICES hides every GPU
        return []
    return [g.index for g in list_gpus()]


def _process_alive(run_dir: Path, status: RunStatus | dict) -> bool:
    """Whether a process of a run here (its trainer, or its vLLM server's guard) has not exited yet: those the
    launcher recorded; the pids status.json names only for a run it has no record of."""
    record = launch_record(run_dir)
    if record is not None:
        return bool(record.live_processes())
    return any(
        processes.alive(pid, status_field(status, "updated_at"))
        for pid in (*runfolder.pids_here(status), runfolder.server_pid_here(status))
        if pid
    )


def _config_of(run_dir: Path) -> dict:
    """The config whose devices a run holds or waits for: the launcher's record of it (config.json is the
    run's to rewrite), config.json only for a run the launcher has no record of."""
    return launch_records.recorded_config(run_dir)


def queue_entries(runs: Iterable[tuple[Path, dict, dict | None]]) -> tuple[list[queue.Entry], list[queue.Entry]]:
    """(runs holding devices, queued runs) among (run folder, status, config or None to read it) triples.

    A run holds its devices while it is live on this machine, and after its
    status is final (or queued again, to resume) for as long as its processes
    take to exit: a GPU is free only once they have. Runs on other machines
    hold nothing here.
    """
    holding, queued, gpus = [], [], None
    for run_dir, status, config in runs:  # one field at a time: most of a large folder's runs are skipped at once
        state = status_field(status, "state")
        if runs_elsewhere(status) or state in (runfolder.UNREADABLE, runfolder.LOST):
            continue
        live = state not in runfolder.FINAL_STATES and state != runfolder.QUEUED
        ending = not live and _process_alive(run_dir, status)
        if not (live or ending or state == runfolder.QUEUED):
            continue
        if gpus is None:
            gpus = machine_gpus()
        devices = queue.devices_of(_config_of(run_dir) if config is None else config, gpus)
        owner = status_field(status, "owner")
        if state == runfolder.QUEUED:
            queued.append(queue.Entry(run_dir.name, devices, owner, state, status_field(status, "queued_at") or 0.0))
        if live or ending:
            holding.append(queue.Entry(run_dir.name, devices, owner, state if live else queue.ENDING))
    return holding, queued


def queue_state(root: Path) -> tuple[list[queue.Entry], list[queue.Entry]]:
    """(runs holding devices, queued runs) of the runs folder `root`, read from the run folders."""
    return queue_entries((run_dir, status_of_dir(run_dir), None) for run_dir in runfolder.list_run_dirs(root))


def place_fields(place: queue.Place) -> dict:
    return {"queue_position": place.position, "waits_for": queue.describe_wait(place.waits_for)}


def queue_place(run_id: str, runs_dir: str | os.PathLike | None = None) -> dict | None:
    """A queued run's `{"queue_position": N, "waits_for": "GPU 0 (run X)"}`; None for a run that is not queued."""
    holding, queued = queue_state(runfolder.runs_root(runs_dir))
    return next((place_fields(p) for p in queue.plan(queued, holding) if p.entry.run_id == run_id), None)


def status_with_queue_place(run_dir: str | os.PathLike) -> dict:
    """`status_of_dir`, plus `queue_position` and `waits_for` while the run is queued."""
    run_dir = Path(run_dir)
    current = status_of_dir(run_dir)
    if current["state"] == runfolder.QUEUED:
        current.update(queue_place(run_dir.name, run_dir.parent) or {})
    return current


def busy_gpu_ids(runs_dir: str | os.PathLike | None = None) -> set[int]:
    """GPUs held by runs that are still going (theirs and their vLLM servers'), read from their run folders."""
    holding, _ = queue_state(runfolder.runs_root(runs_dir))
    return {index for entry in holding for index in map(queue.gpu_index, entry.devices) if index is not None}


def ensure_dispatcher(runs_dir: str | os.PathLike | None = None) -> bool:
    """Start the runs folder's dispatcher process unless one is alive; True when this call started one.

    It runs in a session of its own, so it outlives the app and needs no
    browser; it ends by itself once nothing is queued.
    """
    root = runfolder.runs_root(runs_dir)
    held = run_locks.hold_dispatcher_lock(root)
    if held is None:
        return False
    with held:  # the child inherits the lock: it holds it from its first instant, and this copy lets go
        processes.spawn(
            [sys.executable, "-m", DISPATCHER_MODULE, "--runs-dir", str(root), "--lock-fd", str(held.fileno())],
            root / runfolder.DISPATCHER_LOG_FILE,
            processes.job_env(),
            cwd=root,
            append=True,
            reap=True,
            pass_fds=(held.fileno(),),
        )
    return True
