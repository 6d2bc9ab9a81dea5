"""A run folder's planted links, FIFOs and hard links (runstore/safe_files.py): the server never follows one.

A run's own code (its reward file) can write in its folder, and the server reads and writes that folder
as root. Each test plants what a hostile reward would, with real files, and checks that the server's
readers read it as missing (at once, for a FIFO) and its writers replace it, nothing outside changed.
"""

from __future__ import annotations

import json
import logging
import os
import sys
import threading

import pytest
from helpers import write_checkpoint

from workbench.jobs import processes
from workbench.modeltools import probes
from workbench.runstore import checkpoint_integrity, file_cache, jsonl_cache, run_locks, runfolder, safe_files

SECRET = "alice admin pbkdf2_sha256$600000$salt$hash-of-a-password\n"


def returns_within(call, seconds: float = 10.0):
    """`call()`'s result, or a failure when it does not return in time (a FIFO opened blocking waits forever)."""
    result, errors = [], []

    def run():
        try:
            result.append(call())
        except BaseException as exc:  # handed to the test below
            errors.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(seconds)
    assert not thread.is_alive(), f"{call} hung (it waits on something planted in the run folder)"
    if errors:
        raise errors[0]
    return result[0]


@pytest.fixture
def outside(tmp_path):
    """A file outside the run folder the run wants to read or change: the server's users file."""
    path = tmp_path / "server" / "users"
    path.parent.mkdir()
    path.write_text(SECRET)
    return path


@pytest.fixture
def run_dir(tmp_path):
    path = tmp_path / "runs" / "20260101-000000-hostile"
    path.mkdir(parents=True)
    (path / runfolder.CONFIG_FILE).write_text("{}")
    return path


def plant(path, kind: str, target) -> None:
    """Put `kind` where a run file belongs: a link to `target`, a hard link to it, a FIFO, or a folder."""
    path.unlink(missing_ok=True)
    if kind == "link":
        path.symlink_to(target)
    elif kind == "hard link":
        os.link(target, path)
    elif kind == "fifo":
        os.mkfifo(path)
    else:
        (path / "inside").mkdir(parents=True)


def test_a_linked_train_log_shows_nothing_of_its_target(run_dir, outside, caplog):
    plant(run_dir / runfolder.LOG_FILE, "link", outside)
    with caplog.at_level(logging.WARNING, logger=safe_files.__name__):
        assert runfolder.read_log_tail(run_dir, 4000) == ""
        assert runfolder.read_log_tail(run_dir, 4000) == ""
    said = [record.getMessage() for record in caplog.records]
    assert len(said) == 1 and "train.log: a link where a regular file belongs" in said[0], said
    # a log name that is a path (status.json is the run's to write) never reads outside the run folder
    for name in ("../../server/users", str(outside), "sub/../../../server/users"):
        assert runfolder.read_log_tail(run_dir, 4000, name=name) == ""
    assert outside.read_text() == SECRET


def test_stop_never_writes_through_a_linked_stop_request(run_dir, outside, tmp_path):
    stop = run_dir / runfolder.STOP_FILE
    for target in (outside, tmp_path / "site-packages" / "evil.pth"):  # an existing file, and one to be made
        plant(stop, "link", target)
        run_locks.request_stop(run_dir)
        assert not stop.is_symlink() and stop.is_file() and float(stop.read_text()) > 0
        assert run_locks.stop_requested(run_dir)
    assert outside.read_text() == SECRET and not (tmp_path / "site-packages").exists()
    for planted in ("link", "folder"):  # the link itself goes, never its target; a folder is moved aside
        plant(stop, planted, outside)
        run_locks.clear_stop_request(run_dir)
        assert not stop.is_symlink() and not run_locks.stop_requested(run_dir) and outside.read_text() == SECRET


def test_resume_writes_a_fresh_log_in_place_of_a_planted_one(run_dir, outside):
    log = run_dir / runfolder.LOG_FILE
    command = [sys.executable, "-c", "print('resumed')"]
    for planted in ("link", "hard link", "fifo", "folder"):  # through a hard link the other file would change too
        plant(log, planted, outside)
        process = returns_within(lambda: processes.spawn(command, log, processes.job_env(), cwd=run_dir, append=True))
        assert process.wait(timeout=60) == 0
        assert not log.is_symlink() and log.is_file() and os.stat(log).st_nlink == 1, planted
        assert log.read_text().splitlines() == [f"$ {' '.join(command)}", "resumed"], planted
        assert outside.read_text() == SECRET, planted
    with open(log, "ab") as opened:  # a log the caller opened itself is written to and left open
        processes.spawn(command, opened, processes.job_env(), append=True).wait(timeout=60)
        assert not opened.closed
    assert log.read_text().splitlines().count("resumed") == 2


@pytest.mark.parametrize("kind", ["link", "fifo"])
def test_readers_take_a_planted_link_or_fifo_as_missing_at_once(run_dir, outside, kind):
    metrics = run_dir / runfolder.METRICS_FILE
    outside.write_text(json.dumps({"step": 1, "loss": 0.5, "state": "training"}) + "\n")
    for name in (
        runfolder.STATUS_FILE,
        runfolder.METRICS_FILE,
        runfolder.COMPLETIONS_FILE,
        runfolder.LOG_FILE,
        runfolder.CONFIG_FILE,
    ):
        plant(run_dir / name, kind, outside)
    readers = {
        "read_status": (lambda: runfolder.read_status(run_dir), {}),
        "read_config": (lambda: runfolder.read_config(run_dir), {}),
        "read_run_status": (lambda: runfolder.read_run_status(run_dir).to_dict(), {}),
        "read_json_object": (lambda: runfolder.read_json_object(run_dir / runfolder.STATUS_FILE), {}),
        "file_cache": (lambda: file_cache.read_json_object(run_dir / runfolder.STATUS_FILE), {}),
        "read_records_from": (lambda: runfolder.read_records_from(metrics)[:2], ([], 0)),
        "read_jsonl_tail": (lambda: runfolder.read_jsonl_tail(metrics), []),
        "last_metric": (lambda: runfolder.last_metric(run_dir, "loss"), None),
        "jsonl_cache.records": (lambda: jsonl_cache.read_records(metrics).records, []),
        "jsonl_cache.step_index": (lambda: jsonl_cache.index_steps(run_dir / runfolder.COMPLETIONS_FILE).steps, []),
        "read_span": (lambda: jsonl_cache.read_span(metrics, 0, 100)[0], []),
        "read_log_tail": (lambda: runfolder.read_log_tail(run_dir), ""),
        "keep_steps_up_to": (lambda: runfolder.keep_steps_up_to(metrics, 0), 0),
        "file_identity": (lambda: runfolder.file_identity(metrics) == runfolder.file_identity(outside), False),
    }
    for name, (read, empty) in readers.items():
        assert returns_within(read) == empty, name
    # a writer puts a fresh file in its place (a FIFO with no reader would block, or fail, an appending writer)
    returns_within(lambda: runfolder.append_jsonl(metrics, [{"step": 2, "loss": 0.25}]))
    assert runfolder.read_jsonl(metrics) == [{"step": 2, "loss": 0.25}] and not metrics.is_symlink()
    assert json.loads(outside.read_text())["step"] == 1


def test_update_status_replaces_a_linked_status_json_and_reads_nothing_through_it(run_dir, outside):
    outside.write_text(json.dumps({"state": "training", "planted": "taken from outside"}))
    plant(run_dir / runfolder.STATUS_FILE, "link", outside)
    status = runfolder.update_status(run_dir, state="stopped", step=3)
    assert status["state"] == "stopped" and "planted" not in status
    assert not (run_dir / runfolder.STATUS_FILE).is_symlink()
    assert runfolder.read_status(run_dir) == status
    assert json.loads(outside.read_text()) == {"state": "training", "planted": "taken from outside"}
    assert not [p.name for p in run_dir.iterdir() if p.name.startswith(".")], "temporary file left behind"
    (run_dir / runfolder.STATUS_FILE).unlink()
    plant(run_dir / runfolder.STATUS_FILE, "folder", outside)  # a folder is moved aside: status is written still
    assert runfolder.update_status(run_dir, state="finished")["state"] == "finished"
    assert runfolder.read_status(run_dir)["state"] == "finished"


def test_a_run_folder_that_is_a_link_is_refused(tmp_path, outside):
    elsewhere = tmp_path / "elsewhere"  # another user's run, or any folder
    elsewhere.mkdir()
    (elsewhere / runfolder.STATUS_FILE).write_text('{"state": "training", "step": 7}')
    (elsewhere / runfolder.LOG_FILE).write_text(SECRET)
    (elsewhere / runfolder.STOP_FILE).write_text("theirs\n")
    runfolder.append_jsonl(elsewhere / runfolder.METRICS_FILE, [{"step": 7, "loss": 0.1}])
    write_checkpoint(elsewhere, 7)
    linked = tmp_path / "runs" / "20260101-000000-link"
    linked.parent.mkdir()
    linked.symlink_to(elsewhere, target_is_directory=True)
    before = {path.name: path.read_bytes() for path in elsewhere.iterdir() if path.is_file()}

    assert runfolder.read_status(linked) == {} and runfolder.read_log_tail(linked) == ""
    assert (
        runfolder.read_jsonl(linked / runfolder.METRICS_FILE) == []
        and checkpoint_integrity.checkpoint_dirs(linked) == []
    )
    for write in (
        lambda: runfolder.update_status(linked, state="stopped"),
        lambda: run_locks.request_stop(linked),
        lambda: runfolder.append_jsonl(linked / runfolder.METRICS_FILE, [{"step": 8}]),
        lambda: processes.spawn(["true"], linked / runfolder.LOG_FILE, processes.job_env(), append=True),
    ):
        with pytest.raises(OSError):
            write()
    run_locks.clear_stop_request(linked)  # nothing removed there either
    assert {path.name: path.read_bytes() for path in elsewhere.iterdir() if path.is_file()} == before


def test_checkpoints_made_of_links_are_not_the_runs(tmp_path):
    mine, other = tmp_path / "runs" / "mine", tmp_path / "runs" / "other"
    write_checkpoint(mine, 1)
    for step in (2, 3):
        write_checkpoint(other, step)
    # checkpoint-2: a real folder whose every file is a link to the other run's checkpoint-2
    (mine / "checkpoint-2").mkdir()
    for file in (other / "checkpoint-2").iterdir():
        (mine / "checkpoint-2" / file.name).symlink_to(file)
    # checkpoint-4: a link that stays inside the run (to its own checkpoint-1); checkpoint-5: one into the other run
    (mine / "checkpoint-4").symlink_to(mine / "checkpoint-1", target_is_directory=True)
    (mine / "checkpoint-5").symlink_to(other / "checkpoint-3", target_is_directory=True)
    assert checkpoint_integrity.checkpoint_steps(other) == [2, 3]
    assert checkpoint_integrity.checkpoint_steps(mine) == [1]
    assert checkpoint_integrity.last_checkpoint(mine) == mine / "checkpoint-1"
    assert [label for label, _ in probes.list_checkpoints(mine)] == ["step 1 (checkpoint-1)"]


def test_names_are_one_component_inside_their_folder(run_dir):
    for path, root in ((run_dir / ".." / "x", run_dir), (run_dir.parent / "x", run_dir), (run_dir, run_dir)):
        with pytest.raises(safe_files.UnsafeName):
            safe_files.read_bytes(path, root=root)
    safe_files.replace_file(run_dir / "checkpoint-3" / "state.json", b"{}", root=run_dir)  # folders made on the way
    assert safe_files.read_bytes(run_dir / "checkpoint-3" / "state.json", root=run_dir) == b"{}"
    assert safe_files.folders(run_dir) == ["checkpoint-3"]
