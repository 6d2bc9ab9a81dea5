"""`python -m workbench train | runs | stop | resume`: exit codes, one-line errors, a real short run."""

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers import launched_threads, poll_until

from workbench.cli.train import format_runs_table
from workbench.jobs import allocator
from workbench.runstore import run_locks, runfolder
from workbench.spec.config import RunConfig

ROOT = Path(__file__).resolve().parent.parent


def workbench(*args, cwd=None, timeout=300):
    # run from a scratch folder (runs/ lands there), importing the checkout's package
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, "-m", "workbench", *args], capture_output=True, text=True, timeout=timeout, cwd=cwd, env=env
    )


@pytest.mark.parametrize(
    "args, words",
    [
        (["train", "--set", "colour=blue"], "colour: is not a RunConfig field"),
        (["train", "--set", "max_steps=many"], "max_steps: must be a whole number"),
        (["train", "--set", "beta"], "is not field=value"),
        (["train", "--set", "num_generations=3"], "divisible by num_generations (3)"),
        (["train", "--task", "poetry"], "task: unknown task 'poetry'"),
        (["train", "--model", "/no/such/folder"], "model: the folder /no/such/folder does not exist"),
        (["train", "--config", "/no/such/config.json"], "config: no file at"),
        (["train", "--set", "reward_names=bogus", "--background"], "unknown reward 'bogus'"),
        (["train", "--max-steps", "x"], "invalid int value"),
        (["stop", "no-such-run"], "no run called 'no-such-run'"),
        (["resume", "no-such-run"], "no run called 'no-such-run'"),
    ],
    ids=[
        "unknown-field",
        "bad-number",
        "no-equals",
        "batch-plan",
        "unknown-task",
        "missing-model",
        "missing-config",
        "unknown-reward-background",
        "argparse-type",
        "stop-unknown",
        "resume-unknown",
    ],
)
def test_bad_input_exits_2_with_one_line(tmp_path, args, words):
    result = workbench(*args, "--runs-dir", str(tmp_path / "runs"), cwd=tmp_path)
    assert result.returncode == 2, result.stderr
    assert words in result.stderr
    assert "Traceback" not in result.stderr
    assert not list(tmp_path.glob("runs/*")), "nothing may start on bad input"


def test_runs_with_no_runs(tmp_path):
    result = workbench("runs", "--runs-dir", str(tmp_path))
    assert result.returncode == 0 and "No runs yet" in result.stdout


def test_runs_table_lists_state_and_steps():
    table = format_runs_table(
        [
            {
                "run_id": "20260101-000000-demo",
                "state": "training",
                "step": 3,
                "total_steps": 30,
                "model": "/cache/smollm2-135m-instruct",
                "task": "demo",
                "started_at": time.time(),
            },
            {"run_id": "20260101-000001-smoke", "state": "finished", "step": 1, "smoke_test": True, "model": "tiny"},
        ]
    )
    lines = table.splitlines()
    assert lines[0].split() == ["RUN", "STATE", "STEP", "MODEL", "TASK", "STARTED"]
    assert "3/30" in lines[1] and "smollm2-135m-instruct" in lines[1]
    assert "finished (smoke test)" in lines[2]


def test_runs_table_shows_a_queued_run_with_its_place():
    table = format_runs_table(
        [
            {"run_id": "20260101-000002-b", "state": "queued", "queue_position": 1, "waits_for": "GPU 0 (run a)"},
            {"run_id": "20260101-000001-a", "state": "training", "step": 1},
        ]
    )
    lines = table.splitlines()
    assert lines[1].split()[:2] == ["20260101-000002-b", "queued"] and "#1" in lines[1]
    assert lines[-1] == "20260101-000002-b: queued #1, waits for GPU 0 (run a)"


@pytest.mark.slow
def test_background_train_waits_in_the_queue_and_stop_takes_it_out(tmp_path):
    runs = tmp_path / "runs"
    holder = runs / "20260101-000000-holder"
    tiny = [
        "--model",
        "tiny",
        "--max-steps",
        "1",
        "--set",
        "device=cpu",
        "--set",
        "max_completion_length=8",
        "--set",
        "per_device_train_batch_size=4",
        "--set",
        "num_generations=4",
    ]
    RunConfig(model="tiny", device="cpu").save(holder / runfolder.CONFIG_FILE)
    live = subprocess.Popen(["sleep", "120"])  # the trainer of a run that holds the CPU
    try:
        runfolder.update_status(holder, state="training", pid=live.pid, pgid=live.pid, step=1)
        started = workbench("train", *tiny, "--background", "--runs-dir", str(runs), cwd=tmp_path)
        assert started.returncode == 0, started.stderr[-2000:]
        run_id = started.stdout.split("\t")[0]
        assert started.stdout.splitlines()[1].startswith(
            f"queued at position 1, waiting for the CPU (run {holder.name}); it starts by itself"
        )
        listing = workbench("runs", "--runs-dir", str(runs))
        assert f"{run_id}: queued #1, waits for the CPU (run {holder.name})" in listing.stdout
        stopped = workbench("stop", run_id, "--runs-dir", str(runs))
        assert stopped.stdout.strip() == f"{run_id}: stopped at step 0 (taken out of the queue before it started)"
    finally:
        live.kill()
        live.wait()
    poll_until(lambda: not run_locks.dispatcher_running(runs), timeout=20)  # nothing queued: the dispatcher ends


@pytest.mark.slow
def test_background_train_writes_into_the_run_dir_it_is_given(tmp_path):
    runs = tmp_path / "runs"
    holder = runs / "20260101-000000-holder"
    tiny = [
        "--model",
        "tiny",
        "--max-steps",
        "1",
        "--set",
        "device=cpu",
        "--set",
        "max_completion_length=8",
        "--set",
        "per_device_train_batch_size=4",
        "--set",
        "num_generations=4",
    ]
    RunConfig(model="tiny", device="cpu").save(holder / runfolder.CONFIG_FILE)
    live = subprocess.Popen(["sleep", "120"])  # holds the CPU: the run waits in the queue, nothing trains
    try:
        runfolder.update_status(holder, state="training", pid=live.pid, pgid=live.pid, step=1)
        (runs / "mine").mkdir()  # an empty folder is fine
        started = workbench("train", *tiny, "--background", "--run-dir", str(runs / "mine"), cwd=tmp_path)
        assert started.returncode == 0, started.stderr[-2000:]
        assert started.stdout.splitlines()[0] == f"mine\t{runs / 'mine'}"
        assert RunConfig.load(runs / "mine" / runfolder.CONFIG_FILE).model == "tiny"
        assert runfolder.read_status(runs / "mine")["state"] == runfolder.QUEUED

        refused = [
            (["--run-dir", str(runs / "mine")], "already exists and is not an empty folder"),
            (
                ["--run-dir", str(tmp_path / "other" / "x"), "--runs-dir", str(runs)],
                "is not directly inside the runs folder",
            ),
        ]
        for args, words in refused:
            result = workbench("train", *tiny, "--background", *args, cwd=tmp_path)
            assert result.returncode == 2 and f"--run-dir: {tmp_path}" in result.stderr and words in result.stderr, (
                result.stderr
            )
            assert "Traceback" not in result.stderr
        assert sorted(p.name for p in runs.iterdir() if runfolder.is_run_dir(p)) == [holder.name, "mine"]
        stopped = workbench("stop", "mine", "--runs-dir", str(runs))
        assert stopped.stdout.startswith("mine: stopped at step 0"), stopped.stdout
    finally:
        live.kill()
        live.wait()
    poll_until(lambda: not run_locks.dispatcher_running(runs), timeout=20)


def test_resume_without_checkpoint_exits_2(tmp_path):
    run_dir = tmp_path / "20260101-000000-demo"
    RunConfig(model="tiny").save(run_dir / runfolder.CONFIG_FILE)
    runfolder.update_status(run_dir, state="failed", pid=0)
    result = workbench("resume", run_dir.name, "--runs-dir", str(tmp_path))
    assert result.returncode == 2 and "no checkpoint" in result.stderr


@pytest.mark.slow
def test_train_in_the_foreground_then_list_it(tmp_path):
    run_dir = tmp_path / "runs" / "cli-run"
    result = workbench(
        "train",
        "--model",
        "tiny",
        "--max-steps",
        "1",
        "--run-dir",
        str(run_dir),
        "--set",
        "max_completion_length=8",
        "--set",
        "per_device_train_batch_size=4",
        "--set",
        "num_generations=4",
        "--set",
        "device=cpu",
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert "Run finished at step 1" in result.stdout
    status = runfolder.read_status(run_dir)
    assert status["state"] == "finished" and status["step"] == 1
    # the foreground run started itself again under the launcher's allocator and thread count
    assert status["allocator"]["value"] == allocator.choose() and status["cpu_threads"] == launched_threads(1)
    saved = RunConfig.load(run_dir / runfolder.CONFIG_FILE)
    assert saved.model == "tiny" and saved.max_steps == 1 and saved.num_generations == 4
    listing = workbench("runs", "--runs-dir", str(tmp_path / "runs"))
    assert listing.returncode == 0 and "cli-run" in listing.stdout and "finished" in listing.stdout


def test_runs_lists_an_unreadable_run_with_its_reason(tmp_path):
    run_dir = tmp_path / "20260101-000000-broken"
    RunConfig().save(run_dir / runfolder.CONFIG_FILE)
    (run_dir / runfolder.STATUS_FILE).write_bytes(b"[]")
    result = workbench("runs", "--runs-dir", str(tmp_path))
    assert result.returncode == 0, result.stderr
    assert "unreadable" in result.stdout and "status.json holds a JSON list, not an object" in result.stdout


def test_resume_into_a_live_run_folder_is_refused(tmp_path, make_checkpoint):
    run_dir = tmp_path / "runs" / "20260101-000000-live"
    RunConfig(
        model="tiny",
        device="cpu",
        max_steps=2,
        max_completion_length=8,
        per_device_train_batch_size=4,
        num_generations=4,
    ).save(run_dir / runfolder.CONFIG_FILE)
    make_checkpoint(run_dir, 1)
    live = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])  # the run's trainer
    try:
        runfolder.update_status(run_dir, state="training", pid=live.pid, pgid=live.pid, step=1)
        result = workbench(
            "train",
            "--run-dir",
            str(run_dir),
            "--config",
            str(run_dir / runfolder.CONFIG_FILE),
            "--resume",
            cwd=tmp_path,
            timeout=120,
        )
    finally:
        live.kill()
        live.wait()
    assert result.returncode == 2, result.stderr[-2000:]
    assert f"is still training (process {live.pid} is alive)" in result.stderr
    assert "python -m workbench stop" in result.stderr and "Traceback" not in result.stderr
    assert runfolder.read_status(run_dir)["pid"] == live.pid  # nothing of the live run was touched
