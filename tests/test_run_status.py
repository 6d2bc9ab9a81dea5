"""status.json as a typed `RunStatus` (spec/run_status.py): read, written and judged through it, nothing lost.

A status written by an older version lacks keys this one writes, a newer one's
has keys this one does not know, and a hand-edited one may hold a value of the
wrong type; each still reads, and the file keeps what it held through every writer.
"""

from __future__ import annotations

import ast
import json
import math
import time
from pathlib import Path

import pytest

from workbench.jobs import launcher, run_list, run_state
from workbench.runstore import runfolder
from workbench.spec.config import RunConfig
from workbench.spec.run_status import FIELDS, RunStatus, running_seconds, status_field
from workbench.trainer.recorder import StatusWriter

# A real status.json of a finished run, as the trainer and the launcher of an earlier version wrote it
# (paths shortened): no `host`, `allocator`, `cpu_threads`, `sandbox_pid` or `resumed_from` yet, and
# two keys this version does not know (`progress`, `eta_seconds`).
OLDER = {
    "state": "finished",
    "pid": 32364,
    "pgid": 32364,
    "command": ["python", "-m", "workbench", "train", "--run-dir", "runs/demo", "--config", "runs/demo/config.json"],
    "vllm": None,
    "started_at": 1795597027.0409102,
    "step": 5,
    "smoke_test": False,
    "owner": None,
    "updated_at": 1795597089.5197523,
    "num_processes": 1,
    "total_steps": 5,
    "finished_at": 1795597089.5,
    "summary": {"train_runtime": 61.2, "train_loss": 0.012},
    "progress": 1.0,
    "eta_seconds": 0,
}
UNKNOWN = {"progress": 1.0, "eta_seconds": 0}


def written(run_dir: Path, data: dict) -> Path:
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / runfolder.STATUS_FILE).write_text(json.dumps(data, indent=2))
    return run_dir


def on_disk(run_dir: Path) -> dict:
    return json.loads((run_dir / runfolder.STATUS_FILE).read_text())


def test_a_status_of_an_older_version_reads_with_defaults_and_keeps_what_it_does_not_know(tmp_path):
    status = runfolder.read_run_status(written(tmp_path / "run", OLDER))
    assert (status.state, status.step, status.total_steps, status.pid, status.smoke_test) == (
        "finished",
        5,
        5,
        32364,
        False,
    )
    assert status.summary == {"train_runtime": 61.2, "train_loss": 0.012} and status.command[0] == "python"
    # what the older version did not write reads as None, which every reader takes as "not written"
    assert (
        status.host,
        status.allocator,
        status.cpu_threads,
        status.sandbox_pid,
        status.resumed_from,
        status.vllm,
        status.owner,
        status.error,
        status.queued_at,
    ) == (None,) * 9
    assert status.extra == UNKNOWN
    assert status.to_dict() == OLDER  # nulls included
    assert RunStatus() == RunStatus.from_dict({}) == RunStatus.from_dict([1, 2]) and RunStatus().to_dict() == {}


def test_keys_of_the_wrong_type_read_as_none_and_are_written_back_as_they_were(tmp_path):
    odd = {"state": 3, "step": "4", "pid": True, "updated_at": float("nan"), "total_steps": 6.0, "started_at": 10}
    status = RunStatus.from_dict(odd)
    assert (status.state, status.step, status.pid, status.updated_at) == (None, None, None, None)
    assert status.total_steps == 6 and isinstance(status.total_steps, int)  # a whole float is a whole number
    assert status.started_at == 10.0 and isinstance(status.started_at, float)
    assert set(status.extra) == {"state", "step", "pid", "updated_at"}
    again = status.to_dict()
    assert again["step"] == "4" and again["pid"] is True and math.isnan(again["updated_at"]) and again["state"] == 3
    status.update(step=7)
    assert status.step == 7 and "step" not in status.extra and status.to_dict()["step"] == 7
    assert [status_field(odd, name) for name in ("step", "total_steps", "pid", "started_at")] == [None, 6, None, 10.0]
    status.update(owner=None)  # a writer's null is written as null (readers take it as not written)
    status.drop("pid", "started_at")  # and a dropped key is not written at all
    assert status.to_dict()["owner"] is None and not {"pid", "started_at"} & set(status.to_dict())


def test_every_writer_keeps_unknown_keys(tmp_path):
    run_dir = written(tmp_path / "run", {**OLDER, "state": "training", "finished_at": None, "summary": None})
    runfolder.update_status(
        run_dir, step=6, note="by hand"
    )  # the launcher's, the dispatcher's and the sandbox's writer
    assert {key: on_disk(run_dir)[key] for key in UNKNOWN} == UNKNOWN and on_disk(run_dir)["step"] == 6
    writer = StatusWriter(run_dir, state="training")  # the trainer's
    writer.set(step=7, total_steps=9)
    disk = on_disk(run_dir)
    assert {key: disk[key] for key in UNKNOWN} == UNKNOWN
    assert (disk["step"], disk["total_steps"], disk["note"], disk["pid"]) == (7, 9, "by hand", 32364)
    assert writer.status.step == 7 and writer.status.extra == UNKNOWN


def test_the_trainer_drops_an_old_failure_and_the_launcher_reads_an_older_status(tmp_path):
    runs = tmp_path / "runs"
    run_dir = written(runs / "20260101-000000-old", {**OLDER, "state": "failed", "error": {"message": "boom"}})
    RunConfig.for_task("demo", model="tiny").save(run_dir / runfolder.CONFIG_FILE)
    seen = run_state.status_of_dir(run_dir)
    assert seen["state"] == "failed" and seen["error"] == {"message": "boom"}
    assert "progress" not in seen, "a key no field names is kept on disk, never shown (RunStatus.shown)"
    assert seen["run_id"] == run_dir.name and "host" not in seen
    assert [entry["run_id"] for entry in run_list.list_runs(runs)] == [run_dir.name]
    StatusWriter(run_dir, state="starting")  # a resume: the old failure is not the new run's
    assert "error" not in on_disk(run_dir) and on_disk(run_dir)["progress"] == 1.0


def test_a_live_status_without_a_process_is_judged_failed_from_its_typed_fields(tmp_path):
    run_dir = written(
        tmp_path / "runs" / "20260101-000000-gone",
        {"state": "training", "pid": 2**22 + 12345, "updated_at": time.time() - 5, "future": [1]},
    )
    seen = run_state.status_of_dir(run_dir)
    assert seen["state"] == "failed" and seen["error"]["type"] == "ProcessDied" and "future" not in seen
    assert on_disk(run_dir)["future"] == [1]
    assert on_disk(run_dir)["state"] == "training"  # a reader's judgement is never written


def test_every_key_a_writer_sets_is_a_run_status_field():
    """The keys passed to update_status(...) and status.set(...) anywhere in the package, read from the source."""
    package = Path(launcher.__file__).resolve().parents[1]
    keys = set()
    for path in package.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and (
                    node.func.attr == "update_status"
                    or node.func.attr == "set"
                    and getattr(node.func.value, "id", "") == "status"
                )
            ):
                keys |= {keyword.arg for keyword in node.keywords if keyword.arg}
    assert len(keys) > 15 and keys <= set(FIELDS), sorted(keys - set(FIELDS))


def test_a_levers_decision_is_written_as_fields_and_an_older_sentence_still_reads(tmp_path):
    from workbench.spec.lever_decisions import LeverDecision

    status = StatusWriter(
        tmp_path,
        packed_decode=LeverDecision("yes", "the decode step written for llama layers"),
        merged_generation=LeverDecision("float32", "auto: measured earlier", "Test CPU"),
    )
    assert on_disk(tmp_path)["merged_generation"] == {
        "value": "float32",
        "why": "auto: measured earlier",
        "measured_on": "Test CPU",
    }
    read = runfolder.read_run_status(tmp_path)
    assert read.merged_generation == LeverDecision("float32", "auto: measured earlier", "Test CPU")
    assert read.packed_decode.sentence() == "yes (the decode step written for llama layers)"
    status.close()
    older = RunStatus.from_dict({"shared_prompt_pass": "no (set in the config)", "merged_generation": "bfloat16"})
    assert older.shared_prompt_pass == LeverDecision("no", "set in the config")
    assert older.merged_generation == LeverDecision("bfloat16") and older.merged_generation.sentence() == "bfloat16"
    assert RunStatus.from_dict({"packed_decode": {"why": "no value"}}).packed_decode is None


def test_a_field_of_the_wrong_type_or_too_long_reads_as_none_is_named_unreadable_and_kept_on_disk(tmp_path):
    from workbench.spec.run_status import MAX_CHARS, UNREADABLE_FIELDS

    long_note = "n" * (MAX_CHARS[str] + 1)
    run_dir = written(tmp_path / "run", {"state": "training", "total_steps": "9", "note": long_note, "step": 2})
    status = runfolder.read_run_status(run_dir)
    assert (status.total_steps, status.note, status.step) == (None, None, 2)
    assert runfolder.read_shown_status(run_dir)[UNREADABLE_FIELDS] == ["note", "total_steps"]
    runfolder.update_status(run_dir, step=3)  # a writer loses nothing the file held
    assert on_disk(run_dir)["note"] == long_note and on_disk(run_dir)["total_steps"] == "9"


@pytest.mark.parametrize(
    "status, live, seconds",
    [
        ({"started_at": 100.0, "updated_at": 400.0}, False, 300.0),
        ({"started_at": 100.0}, True, 900.0),
        # ran 50 s, stood stopped, resumed at 900: 50 + 100 s at now = 1000
        ({"state": "training", "started_at": 100.0, "resumed_at": 900.0, "ran_before_resume": 50.0}, True, 150.0),
        (
            {
                "state": "finished",
                "started_at": 100.0,
                "resumed_at": 900.0,
                "ran_before_resume": 50.0,
                "updated_at": 960.0,
            },
            False,
            110.0,
        ),
        # a resume waiting in the queue: its clock stands at what it ran before
        ({"state": "queued", "started_at": 100.0, "resumed_at": 300.0, "ran_before_resume": 50.0}, True, 50.0),
        # resumed before ran_before_resume was recorded: from the first start, as before
        ({"started_at": 100.0, "resumed_at": 900.0, "updated_at": 960.0}, False, 860.0),
        ({"state": "queued"}, True, None),
    ],
    ids=["ended", "live", "resumed-live", "resumed-ended", "queued-resume", "resumed-unrecorded", "never-started"],
)
def test_running_seconds_leave_out_the_time_a_run_stood_stopped(status, live, seconds):

    assert running_seconds(status, now=1000.0, live=live) == seconds
