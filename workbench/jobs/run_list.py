"""Every run of a runs folder, newest first, as the Runs tab, `workbench runs` and the notebooks list them.

Each entry is the run's status as readers see it (workbench/jobs/run_state.py),
the config fields a table shows (from the launcher's record of the config, config.json only for a run with
no record: runstore/launch_records.py `recorded_config`) and, for a queued run, its place in the GPU
queue. A listing of thousands of runs every few seconds stays quick: a
finished run's entry is built once per version of its status.json
(workbench/runstore/file_cache.py).
"""

from __future__ import annotations

import os
from pathlib import Path

from workbench.jobs import queue
from workbench.jobs.gpu_queue import ensure_dispatcher, place_fields, queue_entries
from workbench.jobs.run_state import status_of_dir, unreadable_status
from workbench.runstore import file_cache, launch_records, runfolder
from workbench.spec.run_status import UNREADABLE_FIELDS

# The config fields an entry carries, for a table.
TABLE_FIELDS = ("model", "task", "run_name", "dataset_name", "dataset_path", "num_processes", "generation")


def _listed(run_dir: Path) -> tuple[dict, dict]:
    """One run's `list_runs` entry (its status as readers see it, and the config fields a table shows) and config."""
    entry = status_of_dir(run_dir, read=file_cache.read_json_object)
    try:  # the launcher's record of the config: the run's code can rewrite config.json (issue 52)
        config = launch_records.recorded_config(run_dir, read=file_cache.read_json_object)
    except (OSError, ValueError) as exc:  # one broken folder must not hide every other run
        entry, config = unreadable_status(run_dir, exc), {}
    entry.update({key: config.get(key) for key in TABLE_FIELDS})
    unreadable = [name for name in config.get(UNREADABLE_FIELDS, ()) if name in TABLE_FIELDS]
    if unreadable:  # a config.json field of a run with no record, of the wrong type or too long
        entry[UNREADABLE_FIELDS] = sorted({*entry.get(UNREADABLE_FIELDS, ()), *unreadable})
    return entry, config


def _settled(listed: tuple[dict, dict]) -> bool:
    """An entry that only a new status.json changes: a final state read from the file, not a live process's."""
    return listed[0]["state"] in runfolder.FINAL_STATES and listed[0]["state"] != runfolder.UNREADABLE


def list_runs(runs_dir: str | os.PathLike | None = None) -> list[dict]:
    """Every run, newest first: its status plus the config fields a table shows.

    The Runs tab lists thousands of runs every 3 s: a finished run's entry is
    built once per version of its status.json, and each file is parsed once
    per version (runstore/file_cache.py).
    """
    runs, configs = [], []
    for run_dir in runfolder.list_run_dirs(runs_dir):
        entry, config = file_cache.cached(
            os.path.join(run_dir, runfolder.STATUS_FILE),
            lambda _, run_dir=run_dir: _listed(run_dir),
            "listed",
            keep=_settled,
        )
        runs.append(dict(entry))  # callers add fields (a queued run's place) to their copy
        configs.append(config)
    if any(entry["state"] == runfolder.QUEUED for entry in runs):  # their `queue_position` and `waits_for`
        holding, queued = queue_entries((Path(e["run_dir"]), e, c) for e, c in zip(runs, configs))
        places = {place.entry.run_id: place_fields(place) for place in queue.plan(queued, holding)}
        for entry in runs:
            entry.update(places.get(entry["run_id"], {}))
    return runs


def keep_queue_moving(runs_dir: str | os.PathLike | None = None, runs: list[dict] | None = None) -> bool:
    """The backstop the app (at start and on each Runs-tab refresh) and `workbench runs` call.

    Starts a dispatcher when a run is queued and none is alive (after a reboot,
    or one that was killed); `runs` is a `list_runs()` answer already at hand.
    """
    runs = list_runs(runs_dir) if runs is None else runs
    return any(entry.get("state") == runfolder.QUEUED for entry in runs) and ensure_dispatcher(runs_dir)
