"""Attack: a run that ended writes `state: queued` into its status.json, and the dispatcher starts it again.

The GPU queue is read from the run folders: a run folder whose status.json says `queued` is a queued run,
its place in line is the `queued_at` it wrote, and the devices it waits for come from its config.json
(gpu_queue.queue_entries reads it when no config is given). So a run's own code, at its exit, can queue
itself again at the head of the line (queued_at 0, ahead of everyone who queued before it), claim every GPU
in its config.json so that nothing queued behind it starts while any GPU is busy, and the dispatcher then
starts it again, a run nobody launched, over and over.
"""

from __future__ import annotations

import json
import os
import time

import pytest
from helpers import tiny_config

from workbench.jobs import dispatcher, gpu_queue, launcher, run_state
from workbench.runstore import launch_records, runfolder


@pytest.fixture
def ended_run(tmp_path):
    """alice's run, started by the launcher and ended (its recorded process is gone)."""
    runs = tmp_path / "runs"
    run_dir = runs / "20260101-000001-alice"
    run_dir.mkdir(parents=True)
    config = tiny_config(max_steps=1)
    config.save(run_dir / runfolder.CONFIG_FILE)
    launch_records.write_record(
        run_dir,
        launch_records.LaunchRecord(
            owner="alice",
            sandboxed=False,
            config=config.to_dict(),
            processes=(launch_records.ProcessRecord(os.getpid(), os.getpid(), 1.0),),
        ),
    )  # a start time no process has
    runfolder.write_json_atomic(
        run_dir / runfolder.STATUS_FILE, {"state": "finished", "step": 1, "owner": "alice", "finished_at": time.time()}
    )
    yield runs, run_dir
    for other in runfolder.list_run_dirs(runs):
        if run_state.status_of_dir(other)["state"] not in runfolder.FINAL_STATES:
            launcher.stop(other.name, runs, timeout=2)


def test_a_run_that_writes_queued_is_not_started_again(ended_run):
    runs, run_dir = ended_run
    runfolder.update_status(run_dir, state="queued", queued_at=0)  # what the run's code writes at its exit
    dispatcher.dispatch(runs)
    assert run_state.status_of_dir(run_dir)["state"] in runfolder.FINAL_STATES, (
        "the dispatcher started a run nobody launched, because its status.json said `queued`"
    )


def test_a_run_cannot_put_itself_at_the_head_of_the_queue_or_claim_devices_by_its_own_files(ended_run):
    runs, run_dir = ended_run
    config = json.loads((run_dir / runfolder.CONFIG_FILE).read_text())
    (run_dir / runfolder.CONFIG_FILE).write_text(json.dumps({**config, "device": "cuda", "gpu_ids": list(range(8))}))
    runfolder.update_status(run_dir, state="queued", queued_at=0)
    holding, queued = gpu_queue.queue_state(runs)
    assert all(entry.run_id != run_dir.name for entry in queued), (
        f"the queue took the run's own word for its place and devices: {queued}"
    )
