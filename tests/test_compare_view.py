"""The Compare tab's parts: checkpoints of a run, probe prompts, and real sampling jobs side by side."""

import json
import time

import pytest

from workbench.modeltools import probes, sampling
from workbench.runstore import runfolder
from workbench.ui import compare_view
from workbench.ui.compare_tab import read_sides

JOB_TIMEOUT_S = 180


@pytest.fixture
def run_dir(tmp_path):
    path = tmp_path / "20261122-000000-demo"
    path.mkdir()
    (path / runfolder.CONFIG_FILE).write_text(json.dumps({"model": "tiny", "task": "demo"}))
    return path


def test_checkpoints_are_listed_by_step_then_the_final_adapter(run_dir, make_checkpoint):
    runfolder.update_status(run_dir, state="finished", step=10, adapter_step=10)
    for step in (10, 2):
        make_checkpoint(run_dir, step)
    (run_dir / runfolder.ADAPTER_DIR).mkdir()
    (run_dir / runfolder.ADAPTER_DIR / "adapter_config.json").write_text("{}")
    (run_dir / "checkpoint-5").mkdir()  # being written: no weights, no trainer_state.json yet
    (run_dir / "checkpoint-5" / "adapter_config.json").write_text("{}")
    labels = [label for label, _ in probes.list_checkpoints(run_dir)]
    assert labels == ["step 2 (checkpoint-2)", "step 10 (checkpoint-10)", probes.FINAL_LABEL]
    assert probes.list_checkpoints(run_dir / "missing") == []


@pytest.mark.parametrize(
    "status, label",
    [
        ({"state": "finished", "step": 10, "adapter_step": 10}, "final adapter"),
        ({"state": "finished", "step": 10}, "final adapter"),  # a run from before adapter_step was written
        ({"state": "stopped", "step": 7, "adapter_step": 7}, "adapter at stop, step 7"),
        ({"state": "stopped", "step": 7}, "adapter at stop, step 7"),
        ({"state": "training", "step": 9, "adapter_step": 7}, "adapter saved at step 7, at an earlier end of the run"),
        ({"state": "failed", "step": 9, "adapter_step": 7}, "adapter saved at step 7, at an earlier end of the run"),
    ],
    ids=["finished", "finished-unrecorded", "stopped", "stopped-unrecorded", "resumed-training", "resumed-failed"],
)
def test_the_adapter_is_called_final_only_when_the_run_finished_with_it(status, label):
    assert probes.adapter_label(probes.RunStatus.from_dict(status)) == label


@pytest.mark.parametrize(
    "config, expected",
    [({"task": "demo"}, True), ({"task": "demo", "dataset_path": "x.jsonl"}, False), ({"task": "nope"}, False)],
    ids=["task", "user-file", "unknown-task"],
)
def test_default_prompts_come_from_the_task(config, expected):
    assert bool(probes.default_prompts(config)) is expected


@pytest.mark.parametrize(
    "text, result",
    [("a\n\n  b  \n", ["a", "b"]), ("", "box is empty"), ("\n".join(f"p{i}" for i in range(20)), "more than")],
    ids=["lines", "empty", "too-many"],
)
def test_parse_prompts(text, result):
    if isinstance(result, list):
        assert probes.parse_prompts(text) == result
    else:
        with pytest.raises(probes.ProbeError, match=result):
            probes.parse_prompts(text)


def test_answers_are_keyed_by_what_changes_them(run_dir):
    path = probes.answers_path(run_dir, "step 2 (checkpoint-2)", "tiny", "/x/checkpoint-2", ["a"], 16)
    assert path.parent == run_dir / probes.PROBES_DIR and path.name.startswith("step-2-checkpoint-2-")
    assert path != probes.answers_path(run_dir, "step 2 (checkpoint-2)", "tiny", "/x/checkpoint-2", ["a"], 17)
    assert path != probes.answers_path(run_dir, "step 2 (checkpoint-2)", "tiny", "/x/checkpoint-2", ["b"], 16)


def test_a_run_without_a_model_is_refused(run_dir):
    with pytest.raises(probes.ProbeError, match="names no model"):
        probes.plan_job(run_dir, {}, None, ["a"], 8)


def wait_for(job):
    deadline = time.monotonic() + JOB_TIMEOUT_S
    while not job.finished:
        assert time.monotonic() < deadline, compare_view.progress_text(job, read_sides(job))
        time.sleep(0.5)
        job = probes.advance_job(job)
    return job


@pytest.mark.slow
def test_base_and_checkpoint_answer_side_by_side_then_come_from_the_cache(run_dir, tiny_adapter):
    prompts = ["What is 2 + 2?", "Name a colour."]
    checkpoint = ("step 2 (checkpoint-2)", str(tiny_adapter))
    job = probes.advance_job(probes.plan_job(run_dir, {"model": "tiny"}, checkpoint, prompts, 6))
    assert job.running == 0 and job.process is not None  # the base model answers first
    assert "base model" in compare_view.progress_text(job, read_sides(job))
    job = wait_for(job)
    assert job.error is None and job.running is None
    page = compare_view.compare_html(job, read_sides(job))
    assert page.count("<tr>") == 1 + len(prompts) and "step 2 (checkpoint-2)" in page and "…" not in page
    for side in job.sides:
        assert len(sampling.read_sampling(side.out_path)["answers"]) == len(prompts)
    assert compare_view.progress_text(job, read_sides(job)) == "base model: done · step 2 (checkpoint-2): done"

    again = probes.advance_job(probes.plan_job(run_dir, {"model": "tiny"}, checkpoint, prompts, 6))
    assert again.process is None and again.finished  # read back, not sampled again


@pytest.mark.slow
def test_cancel_kills_the_sampling_process(run_dir):
    job = probes.advance_job(probes.plan_job(run_dir, {"model": "tiny"}, None, ["Hi"], 400))
    process = job.process
    job = probes.cancel_job(job)
    assert process.poll() is not None and job.cancelled and job.finished
    assert compare_view.progress_text(job, read_sides(job)).startswith("Cancelled.")
    assert probes.advance_job(job).process is None  # a cancelled job starts nothing


@pytest.mark.slow
def test_a_failing_side_reports_its_error(run_dir, tmp_path):
    config = {"model": str(tmp_path / "no-such-model")}
    job = wait_for(probes.advance_job(probes.plan_job(run_dir, config, ("step 2", str(tmp_path)), ["Hi"], 4)))
    assert job.error and job.error.startswith("base model:") and "no-such-model" in job.error
    assert job.running is None and not probes.side_complete(job.sides[1])  # nothing started after the failure
    assert compare_view.progress_text(job, read_sides(job)).startswith("Sampling failed. base model:")
