"""report_to: TensorBoard and trackio fed by TRL's own integrations, written inside the run folder, offline.

The real test trains 2 tiny steps with both trackers in a process of its own
(trackio reads its folder once, when first imported) under an audit hook that
records every connection and name lookup off this machine: there must be none.
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys

import pytest
from helpers import TINY

from workbench.jobs import processes
from workbench.runstore import runfolder
from workbench.spec import trackers
from workbench.spec.config import RunConfig
from workbench.spec.config_checks import validate_config

# Runs the training command in this interpreter, noting every connection or lookup that leaves the machine.
OFFLINE_TRAIN = """
import json, sys
log = open(sys.argv[1], "a")
LOCAL = ("127.0.0.1", "::1", "localhost", "0.0.0.0", "")

def hook(event, args):
    if event == "socket.connect" and isinstance(args[1], tuple) and args[1][0] not in LOCAL:
        log.write(json.dumps([event, str(args[1])]) + "\\n"); log.flush()
    elif event == "socket.getaddrinfo" and args[0] not in LOCAL and args[0] is not None:
        log.write(json.dumps([event, str(args[0])]) + "\\n"); log.flush()

sys.addaudithook(hook)
from workbench.cli import main
sys.exit(main(sys.argv[2:]))
"""


def test_the_default_is_no_tracker_and_both_trackers_are_accepted():
    assert RunConfig().report_to == []
    assert [p for p in validate_config(RunConfig(report_to=["tensorboard", "trackio"])) if p.field == "report_to"] == []
    assert RunConfig.from_dict({"report_to": "tensorboard,trackio"}).report_to == ["tensorboard", "trackio"]


@pytest.mark.parametrize(
    "report_to, rule",
    [
        (["wandb"], "'wandb' is not a tracker the workbench passes on"),
        (["none"], "'none' is not a tracker the workbench passes on"),
        (["trackio", "trackio"], "names a tracker twice"),
    ],
    ids=["online_tracker", "none_as_text", "twice"],
)
def test_bad_trackers_are_refused_naming_the_fix(report_to, rule):
    problems = [p for p in validate_config(RunConfig(report_to=report_to)) if p.field == "report_to"]
    assert [p.rule for p in problems] == [rule] and problems[0].fix


def test_a_tracker_that_is_not_installed_says_how_to_install_it(monkeypatch):
    monkeypatch.setattr(trackers.importlib.util, "find_spec", lambda name: None)
    assert trackers.problems(["trackio"]) == [
        (
            "report_to",
            "trackio is not installed in this Python",
            "run `make setup` (requirements.txt pins trackio), or remove trackio from report_to",
        )
    ]


def test_trackers_write_into_the_run_folder_and_trackio_nowhere_else(tmp_path):
    settings, removed = trackers.environment(["tensorboard", "trackio"], tmp_path)
    assert settings == {
        "TENSORBOARD_LOGGING_DIR": str(tmp_path / "tensorboard"),
        "TRACKIO_DIR": str(tmp_path / "trackio"),
    }
    assert "TRACKIO_SPACE_ID" in removed and "TRACKIO_SERVER_URL" in removed
    assert trackers.environment([], tmp_path) == ({}, ())
    assert trackers.open_commands(["tensorboard", "trackio"], "runs/x") == [
        "tensorboard --logdir runs/x/tensorboard",
        "TRACKIO_DIR=runs/x/trackio trackio show --project grpo-workbench",
    ]


@pytest.fixture(scope="module")
def tracked_run(tmp_path_factory):
    """2 tiny steps with TensorBoard and trackio, in their own process, watched for network access."""
    run_dir = tmp_path_factory.mktemp("runs") / "20261123-100000-tracked"
    config = RunConfig(
        **TINY, task="reward_hacking", max_steps=2, save_steps=10, beta=0.0, report_to=["tensorboard", "trackio"]
    )
    config.save(run_dir / runfolder.CONFIG_FILE)
    script, network = run_dir.parent / "offline_train.py", run_dir.parent / "network.jsonl"
    script.write_text(OFFLINE_TRAIN)
    # TRACKIO_SPACE_ID must be ignored: metrics stay local. TRL's own usage ping to huggingface.co, sent by every
    # trainer with or without trackers, is switched off the way TRL documents: this test is about the trackers.
    env = {**processes.job_env(), "TRACKIO_SPACE_ID": "someone/space", "HF_HUB_DISABLE_TELEMETRY": "1"}
    result = subprocess.run(
        [
            sys.executable,
            str(script),
            str(network),
            "train",
            "--run-dir",
            str(run_dir),
            "--config",
            str(run_dir / runfolder.CONFIG_FILE),
        ],
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
    )
    assert result.returncode == 0, (result.stderr[-3000:], runfolder.read_status(run_dir).get("error"))
    return run_dir, network


@pytest.mark.slow
def test_two_steps_land_in_tensorboard_trackio_and_the_run_folder_offline(tracked_run):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    run_dir, network = tracked_run
    assert not network.exists() or network.read_text() == "", network.read_text()
    assert [m["step"] for m in runfolder.read_jsonl(run_dir / runfolder.METRICS_FILE)] == [1, 2]  # still the record

    assert list((run_dir / "tensorboard").glob("events.out.tfevents.*"))
    events = EventAccumulator(str(run_dir / "tensorboard"))
    events.Reload()
    assert {"train/reward", "train/loss", "train/rewards/brevity/mean"} <= set(events.Tags()["scalars"])
    assert [e.step for e in events.Scalars("train/reward")] == [1, 2]

    database = run_dir / "trackio" / f"{trackers.TRACKIO_PROJECT}.db"
    assert database.is_file(), sorted(p.name for p in (run_dir / "trackio").iterdir())
    with sqlite3.connect(database) as db:
        rows = db.execute("SELECT run_name, step, metrics FROM metrics ORDER BY step").fetchall()
    logged = [(name, step, json.loads(metrics)) for name, step, metrics in rows]
    rewards = [(name, metrics["train/global_step"]) for name, _, metrics in logged if "train/reward" in metrics]
    assert rewards == [(run_dir.name, 1), (run_dir.name, 2)]
