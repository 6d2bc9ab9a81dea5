"""Attack: make the speed probe, which runs outside the sandbox as root (jobs/tune_job.py, issue 43), read another
student's model, or any server file, through a link in the student's own run folder.

A sandboxed run's code may make links in its own folder to paths its sandbox does not show (a link is only a
name). So alice's run A writes `A/merged` with real files but `model.safetensors` a link to bob's weights; the path
rule lets her name `A/merged` as the model of her next run B (it resolves the folder, not what is in it). Or, with
B queued behind A (the dispatcher starts a queued run without the path rule), A turns `A/merged`, checked while a
real folder, into a link to bob's merged model. In B's sandbox those links lead nowhere (the runs folder is hidden,
a path with a link in the runs folder is not shown), but B's starter ran the probe first, outside, as root: it
loaded bob's model through the link, measured it, handed the timings to alice's run (status.json's `speed_choice`)
and kept the choice under bob's model's key, for bob's own runs to take (measured on whatever the link named while
it loaded). Measured: with either link in place B's starter ran a whole probe of bob's model (10 s here) and handed
its timings to alice's run. A FIFO in place of the weights held (transformers skips what is not a file).

Fixed in workbench/jobs/tune_job.py (`model_left_to_the_run`): a model folder in the runs folder reached through a
link, or holding a link or anything but files and folders (a FIFO, a device), is not probed
outside the sandbox; the run measures in its sandbox and keeps nothing. What is left: a link made between that check
and the probe's read by a run of the same user training at that moment on another device (see the report).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import time

import pytest

from workbench.jobs import tune_job
from workbench.runstore import launch_records, runfolder
from workbench.spec.config import RunConfig
from workbench.tuning import cache, for_config

SHAPE = dict(
    device="cpu",
    max_completion_length=8,
    per_device_train_batch_size=4,
    num_generations=4,
    merged_generation="no",
    packed_decode="no",
)


def finished_run(runs, name: str, owner: str, tiny_model: str):
    run_dir = runs / name
    run_dir.mkdir(parents=True)
    launch_records.write_record(run_dir, launch_records.LaunchRecord(owner=owner, sandboxed=True, policy={}, config={}))
    runfolder.update_status(run_dir, state="finished", owner=owner)
    shutil.copytree(tiny_model, run_dir / "merged")
    return run_dir / "merged"


def plant_folder_link(alices, bobs):
    shutil.rmtree(alices)
    alices.symlink_to(bobs, target_is_directory=True)


def plant_weights_link(alices, bobs):
    (alices / "model.safetensors").unlink()
    (alices / "model.safetensors").symlink_to(bobs / "model.safetensors")


def plant_fifo(alices, bobs):
    (alices / "model.safetensors").unlink()
    os.mkfifo(alices / "model.safetensors")


@pytest.mark.parametrize("plant", [plant_folder_link, plant_weights_link, plant_fifo])
def test_the_probe_outside_the_sandbox_reads_nothing_through_a_link_in_the_students_run(
    tmp_path, monkeypatch, tiny_model, plant
):
    monkeypatch.setenv("WORKBENCH_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv(for_config.PROBE_ENV, raising=False)
    runs = tmp_path / "runs"
    bobs = finished_run(runs, "20260101-000001-bob", "bob", tiny_model)
    alices = finished_run(runs, "20260101-000002-alice", "alice", tiny_model)
    # alice's run B, checked and recorded while A/merged was a real folder of hers
    config = RunConfig.for_task("demo", model=str(alices), max_steps=1, eval_strategy="no", **SHAPE)
    run_dir = runs / "20260101-000003-alice"
    config.save(run_dir / runfolder.CONFIG_FILE)
    launch_records.write_record(
        run_dir, launch_records.LaunchRecord(owner="alice", sandboxed=True, policy={}, config=config.to_dict())
    )
    plant(alices, bobs)  # run A's code, since

    log = run_dir / runfolder.LOG_FILE
    started = time.monotonic()
    with open(log, "w") as handle, contextlib.redirect_stdout(handle), contextlib.redirect_stderr(handle):
        # the starter's stdout and stderr are the run's log
        handed = tune_job.choice_env(run_dir, launch_records.read_record(run_dir).config, dict(os.environ))
    text = log.read_text()

    assert handed == {}, "the probe measured through the link and handed its choice to alice's run"
    assert cache.lookup(for_config.key_for(RunConfig.for_task("demo", model=str(bobs), **SHAPE))) is None, (
        "a choice measured by alice's run is kept under bob's model"
    )
    assert "the model folder is left to the run" in text and "timing" not in text, text[-2000:]
    assert time.monotonic() - started < 20  # nothing loaded: a FIFO blocks no probe
