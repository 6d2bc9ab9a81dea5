"""The run-folder contract: atomic status, append-only JSON lines, half lines skipped."""

import fcntl
import json

import pytest

from workbench.modeltools import probes
from workbench.runstore import checkpoint_integrity, run_locks, runfolder


def test_status_is_merged_and_stamped(tmp_path):
    runfolder.update_status(tmp_path, state="starting", pid=123)
    status = runfolder.update_status(tmp_path, state="training", step=2)
    assert status["pid"] == 123 and status["state"] == "training" and status["step"] == 2
    assert runfolder.read_status(tmp_path) == status
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")], "temp file left behind"


def test_half_written_last_line_is_not_data(tmp_path):
    path = tmp_path / runfolder.METRICS_FILE
    runfolder.append_jsonl(path, [{"step": 1, "reward": 0.5}])
    with open(path, "a") as handle:
        handle.write('{"step": 2, "rew')  # the writer is mid-line
    records, offset = runfolder.read_jsonl_from(path)
    assert records == [{"step": 1, "reward": 0.5}]
    with open(path, "a") as handle:
        handle.write('ard": 0.7}\n')
    more, _ = runfolder.read_jsonl_from(path, offset)
    assert more == [{"step": 2, "reward": 0.7}]


def test_reading_a_missing_file_is_empty(tmp_path):
    assert runfolder.read_jsonl_from(tmp_path / "nope.jsonl", 7) == ([], 7)
    assert runfolder.read_status(tmp_path) == {}


def test_run_ids_are_safe_and_runs_listed_newest_first(tmp_path):
    run_id = runfolder.new_run_id("my demo/run!")
    assert "/" not in run_id and run_id.endswith("my-demo-run")
    for name in ("20260101-000000-a", "20260102-000000-b"):
        (tmp_path / name).mkdir()
        (tmp_path / name / runfolder.CONFIG_FILE).write_text(json.dumps({}))
    (tmp_path / "not-a-run").mkdir()
    assert [p.name for p in runfolder.list_run_dirs(tmp_path)] == ["20260102-000000-b", "20260101-000000-a"]


# ---------------------------------------------------------------- checkpoints


def cut_short(path):
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])


def test_last_checkpoint_skips_those_a_kill_left_incomplete(tmp_path, make_checkpoint):
    for step in (1, 2, 3, 4, 5, 6):
        make_checkpoint(tmp_path, step)
    cut_short(tmp_path / "checkpoint-3" / "adapter_model.safetensors")  # killed while writing the weights
    (tmp_path / "checkpoint-4" / "trainer_state.json").write_text("")  # state file created, never filled
    (tmp_path / "checkpoint-5" / "optimizer.pt").unlink()  # killed before the optimizer
    cut_short(tmp_path / "checkpoint-6" / "scheduler.pt")
    (tmp_path / "checkpoint-7").mkdir()  # killed at once
    assert [p.name for p in checkpoint_integrity.checkpoint_dirs(tmp_path)] == ["checkpoint-1", "checkpoint-2"]
    assert checkpoint_integrity.last_checkpoint(tmp_path).name == "checkpoint-2"
    cut_short(tmp_path / "checkpoint-2" / "adapter_model.safetensors")
    assert checkpoint_integrity.last_checkpoint(tmp_path).name == "checkpoint-1"  # falls back further


def test_keep_steps_up_to_cuts_a_file_back_to_the_checkpoint(tmp_path):
    path = tmp_path / runfolder.METRICS_FILE
    runfolder.append_jsonl(path, [{"step": s, "reward": s / 10} for s in (1, 2, 3, 4)] + [{"note": "no step"}])
    with open(path, "a") as handle:
        handle.write('{"step": 5, "rew')  # the kill came mid-line
    before = runfolder.file_identity(path)
    assert runfolder.keep_steps_up_to(path, 2) == 3
    assert runfolder.read_jsonl(path) == [{"step": 1, "reward": 0.1}, {"step": 2, "reward": 0.2}, {"note": "no step"}]
    assert runfolder.file_identity(path) != before  # replaced, so offset readers start again
    assert runfolder.keep_steps_up_to(path, 2) == 0 and runfolder.keep_steps_up_to(tmp_path / "none.jsonl", 2) == 0


def test_run_ids_from_a_browser_must_name_a_run_folder_inside_the_runs_folder(tmp_path):
    runs = tmp_path / "runs"
    good = runs / "20260101-000000-demo"
    good.mkdir(parents=True)
    (good / runfolder.CONFIG_FILE).write_text("{}")
    outside = tmp_path / "model"  # a folder with a config.json, like a model folder
    outside.mkdir()
    (outside / runfolder.CONFIG_FILE).write_text("{}")
    (runs / "escape").symlink_to(outside, target_is_directory=True)
    assert runfolder.run_dir_in(runs, good.name) == good
    hostile = [
        "",
        None,
        3,
        ".",
        "..",
        "../model",
        str(outside),
        "escape",
        "a/b",
        "a\\b",
        "x\0y",
        "<script>alert(1)</script>",
        "n" * 10_000,
        "no-such-run",
    ]
    for run_id in hostile:
        with pytest.raises(runfolder.RunIdError, match=r"^run: .* is not a run folder inside .*pick a run"):
            runfolder.run_dir_in(runs, run_id)
        assert runfolder.picked_run_dir(runs, run_id) is None  # a picker's stale or forged value: nothing picked
    assert runfolder.picked_run_dir(runs, good.name) == good


def test_the_queue_lock_has_one_holder_at_a_time(tmp_path):
    def try_lock() -> bool:  # a second open file: flock tells it apart from the holder's, as it would another process
        with open(tmp_path / "runs" / runfolder.QUEUE_LOCK_FILE, "ab") as other:
            try:
                fcntl.flock(other.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                return False
            return True

    with run_locks.queue_lock(tmp_path / "runs"):  # made with the folder when missing
        assert not try_lock()
    assert try_lock()


def test_one_dispatcher_holds_its_lock_at_a_time(tmp_path):
    held = run_locks.hold_dispatcher_lock(tmp_path)
    assert held is not None and run_locks.dispatcher_running(tmp_path)
    assert run_locks.hold_dispatcher_lock(tmp_path) is None
    held.close()
    assert not run_locks.dispatcher_running(tmp_path)


def test_only_the_runs_own_checkpoint_folders_count(tmp_path, make_checkpoint):
    mine, other = tmp_path / "mine", tmp_path / "other"
    make_checkpoint(mine, 2)
    make_checkpoint(other, 5)
    (other / runfolder.ADAPTER_DIR).mkdir()
    (other / runfolder.ADAPTER_DIR / "adapter_config.json").write_text("{}")
    (mine / "checkpoint-9").symlink_to(other / "checkpoint-5", target_is_directory=True)
    (mine / runfolder.ADAPTER_DIR).symlink_to(other / runfolder.ADAPTER_DIR, target_is_directory=True)
    assert [path.name for path in checkpoint_integrity.checkpoint_dirs(mine)] == ["checkpoint-2"]
    assert [label for label, _ in probes.list_checkpoints(mine)] == ["step 2 (checkpoint-2)"]
