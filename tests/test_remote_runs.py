"""Runs whose process is on another machine (status.json's host): judged by heartbeat age, stopped by the folder."""

import json
import os
import socket
import time

import pytest

from workbench.cli import main
from workbench.cli.train import format_runs_table
from workbench.jobs import gpu_queue, launcher, run_list, run_state
from workbench.runstore import run_locks, runfolder
from workbench.ui import runs_view

ELSEWHERE = "node07.cluster.invalid"


@pytest.fixture
def runs_dir(tmp_path):
    return tmp_path / "runs"


def remote_run(runs_dir, age: float, state: str = "training", host: str = ELSEWHERE, pid: int | None = None):
    """A run folder as a trainer on `host` leaves it, its heartbeat `age` seconds old."""
    run_dir = runs_dir / "20260101-000000-remote"
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / runfolder.CONFIG_FILE).write_text(json.dumps({"model": "tiny", "task": "demo"}))
    # this machine's own pid: were it looked up here, the run would seem alive
    status = {
        "state": state,
        "pid": pid or os.getpid(),
        "host": host,
        "step": 3,
        "total_steps": 10,
        "started_at": time.time() - 600,
        "updated_at": time.time() - age,
    }
    (run_dir / runfolder.STATUS_FILE).write_text(json.dumps(status))
    return run_dir


@pytest.mark.parametrize(
    "age, state",
    [(1, "training"), (run_state.STALE_SECONDS + 5, "training"), (run_state.LOST_SECONDS + 5, "lost")],
    ids=["fresh", "stalled", "past-the-limit"],
)
def test_a_remote_run_is_judged_by_its_heartbeat(runs_dir, age, state):
    status = run_state.status_of_dir(remote_run(runs_dir, age))
    assert status["state"] == state
    if state == "lost":
        assert status["last_state"] == "training" and ELSEWHERE in status["error"]["message"]
        assert f"limit {run_state.LOST_SECONDS:.0f} s" in status["error"]["message"]
    assert ("stalled_seconds" in status) == (age > run_state.STALE_SECONDS and state != "lost")


def test_a_dead_remote_pid_is_never_failed_by_a_local_lookup(runs_dir):
    # pid 999999 does not exist here; on its own machine it may well be training
    status = run_state.status_of_dir(remote_run(runs_dir, age=1, pid=999999))
    assert status["state"] == "training"


def test_a_final_remote_run_keeps_its_state(runs_dir):
    status = run_state.status_of_dir(remote_run(runs_dir, age=3600, state="finished"))
    assert status["state"] == "finished" and "error" not in status


def test_a_local_run_is_still_judged_by_its_pid(runs_dir):
    status = run_state.status_of_dir(remote_run(runs_dir, age=3600, host=socket.gethostname(), pid=999999))
    assert status["state"] == "failed"


def test_lost_shows_in_the_runs_command_with_the_reason(runs_dir, capsys):
    remote_run(runs_dir, age=run_state.LOST_SECONDS + 60)
    assert main(["runs", "--runs-dir", str(runs_dir)]) == 0
    out = capsys.readouterr().out
    assert f"lost on {ELSEWHERE}" in out and "has not written status.json for" in out


def test_lost_shows_in_the_runs_tab(runs_dir):
    remote_run(runs_dir, age=run_state.LOST_SECONDS + 60)
    row = runs_view.summarise_run(run_list.list_runs(runs_dir)[0])
    assert row["state"] == f"lost on {ELSEWHERE}" and "has not written status.json" in row["task"]
    assert (
        runs_view.summarise_run(run_state.status_of_dir(remote_run(runs_dir, age=1)))["state"]
        == f"training on {ELSEWHERE}"
    )


def test_stop_reaches_a_remote_run_through_its_folder_and_kills_nothing(runs_dir, monkeypatch):
    run_dir = remote_run(runs_dir, age=1)
    killed = []
    monkeypatch.setattr(launcher.processes, "end_tree", lambda *a, **k: killed.append(a))
    result = launcher.stop(run_dir.name, runs_dir, timeout=0.5)
    assert run_locks.stop_requested(run_dir) and killed == []
    assert result["state"] == "training" and "never killed from here" in result["note"]


def test_stop_of_a_lost_run_leaves_the_request_for_its_return(runs_dir, monkeypatch):
    run_dir = remote_run(runs_dir, age=run_state.LOST_SECONDS + 60)
    monkeypatch.setattr(launcher.processes, "end_tree", lambda *a, **k: pytest.fail("killed a local pid"))
    result = launcher.stop(run_dir.name, runs_dir)
    assert result["state"] == "lost" and run_locks.stop_requested(run_dir)


def test_remote_runs_hold_no_local_gpu_and_block_no_local_trainer(runs_dir):
    run_dir = remote_run(runs_dir, age=1)
    assert gpu_queue.busy_gpu_ids(runs_dir) == set()
    assert run_state.other_live_process(run_dir) is None


def test_the_runs_folder_note_names_the_folder_and_the_variable(tmp_path):
    note = runs_view.runs_folder_note(tmp_path)
    assert str(tmp_path) in note and "WORKBENCH_RUNS_DIR" in note and "lost" in note


def test_a_table_without_hosts_is_unchanged():
    table = format_runs_table([{"run_id": "r", "state": "finished", "step": 2}])
    assert table.splitlines()[1].split() == ["r", "finished", "2"]
