"""Every job a student starts is under a clock, and what they hold on disk adds up (jobs/job_clock.py,
jobs/helper_folders.py, jobs/user_disk.py, jobs/warden.py, the shared rule on reward_timeout_s)."""

from __future__ import annotations

import json
import os
import subprocess
import time

import gradio as gr
import psutil
import pytest
from helpers import accounts_text, app_handler, poll_until, setup_form_values, tiny_config

from workbench.access import uploads, users
from workbench.errors import WorkbenchError
from workbench.jobs import launcher, sandbox, signal_job
from workbench.runstore import launch_records, runfolder

needs_bwrap = pytest.mark.skipif(sandbox.bwrap_binary() is None, reason="bubblewrap is not installed")

SLEEPY_REWARD = """
import time
time.sleep(150)  # at import: the check would wait as long as this file likes


def sleepy(prompts, completions, **kwargs):
    return [0.0] * len(completions)
"""

TINY_FORM = dict(model="tiny", max_completion_length=8, num_generations=4, per_device_train_batch_size=4)


def shared_app(runs, **kwargs):
    from workbench.ui.app import build_app

    return build_app(runs, users=users.parse_users(accounts_text()), **kwargs)


@pytest.mark.slow
@needs_bwrap
def test_a_signal_check_whose_reward_sleeps_at_import_is_ended_at_its_time_limit(tmp_path, monkeypatch):
    runs = tmp_path / "runs"
    folder = uploads.uploads_dir(runs, "alice")
    folder.mkdir(parents=True)
    (folder / "sleepy.py").write_text(SLEEPY_REWARD)
    monkeypatch.setenv("WORKBENCH_SIGNAL_CHECK_TIME_LIMIT_S", "15")
    app = shared_app(runs, sandbox=sandbox.Policy())
    start, poll = (app_handler(app, "setup_tab", name) for name in ("start_signal", "poll_signal"))
    values = setup_form_values(**TINY_FORM, reward_file=str(folder / "sleepy.py"))
    started = time.monotonic()
    job, shown, _ = start(gr.Request(username="alice"), None, *values)
    assert job is not None, shown
    try:
        html = poll_until(lambda: (lambda h, t: h if "Checking" not in h else None)(*poll(job)), timeout=90)
        took = time.monotonic() - started
    finally:
        signal_job.cancel_signal_check(job)
    assert "time limit of 15 s" in html and "WORKBENCH_SIGNAL_CHECK_TIME_LIMIT_S" in html, html
    assert took < 60, f"the check was ended {took:.0f} s after it started, under a 15 s limit"
    assert not job.folder.exists()  # its folder went with it
    assert not any("sleepy" in " ".join(p.info["cmdline"] or []) for p in psutil.process_iter(["cmdline"]))


@pytest.mark.slow
def test_a_signal_checks_folder_is_gone_once_its_report_is_read(tmp_path):
    runs = tmp_path / "runs"
    job = signal_job.start_signal_check(tiny_config(), runs, groups=1, owner="alice")
    state = poll_until(lambda: (lambda s: s if s["state"] != "running" else None)(signal_job.read_signal_check(job)))
    assert state["state"] == "done", state  # the report was taken out first
    assert not job.folder.exists(), f"{sorted(p.name for p in job.folder.iterdir())} stayed on disk after the check"
    assert signal_job.read_signal_check(job) == state  # read again: the same answer, from memory
    from workbench.jobs import helper_folders

    assert helper_folders.leftovers(runs) == []


def test_what_a_killed_helper_job_left_is_listed_and_removed_at_the_servers_start(tmp_path, capsys):
    from workbench import cli
    from workbench.jobs import helper_folders

    runs = tmp_path / "runs"
    left = signal_job.new_job_folder(runs / signal_job.CHECKS_DIR, "killed")
    with open(left / "big", "wb") as handle:
        os.posix_fallocate(handle.fileno(), 0, 8 * 2**20)
    ended = subprocess.Popen(["true"])
    ended.wait()
    helper_folders.register(runs, left, "alice", signal_job.CHECKS_DIR, ended.pid)
    [entry] = helper_folders.leftovers(runs)
    assert (entry.folder, entry.owner, entry.live) == (left, "alice", False) and entry.bytes() >= 8 * 2**20
    assert cli.main(["runs", "--runs-dir", str(runs), "--helpers"]) == 0
    out = capsys.readouterr().out
    assert str(left) in out and "alice" in out and "8.0 MiB" in out, out
    assert helper_folders.clean(runs) == [left]  # what the server does as it starts (app.py)
    assert not left.exists() and helper_folders.listed(runs) == []


def test_a_user_past_their_disk_total_is_refused(tmp_path, monkeypatch):
    from workbench.ui import files_panel

    runs = tmp_path / "runs"
    folder = uploads.uploads_dir(runs, "alice")
    folder.mkdir(parents=True)
    with open(folder / "data.jsonl", "wb") as handle:
        os.posix_fallocate(handle.fileno(), 0, 3 * 2**20)
    monkeypatch.setenv("WORKBENCH_USER_DISK_GB", str(2 / 1024))  # 2 MiB
    with pytest.raises(WorkbenchError, match="WORKBENCH_USER_DISK_GB") as refused:
        launcher.start(tiny_config(), runs, owner="alice")
    assert "hold 3.0 MiB, and each user may hold 2.0 MiB" in str(refused.value), refused.value
    assert [p.name for p in runs.iterdir() if not p.name.startswith(".")] == ["uploads"]  # no run folder made
    with pytest.raises(WorkbenchError, match="WORKBENCH_USER_DISK_GB"):
        with launcher.helper_job(runs, "alice", "export"):
            pass
    sent = tmp_path / "gradio" / "more.jsonl"
    sent.parent.mkdir()
    sent.write_text('{"prompt": "x"}\n')
    stored, refusals = files_panel.store_files([str(sent)], folder, str(sent.parent))
    assert stored == [] and "WORKBENCH_USER_DISK_GB" in refusals[0], refusals
    with launcher.helper_job(runs, "bob", "export"):  # bob holds nothing
        pass


def test_reward_timeout_of_zero_is_refused_on_a_shared_dashboard(tmp_path):
    from workbench.spec.config import ConfigError
    from workbench.ui import paths_view
    from workbench.ui.context import UIContext

    runs = tmp_path / "runs"
    config = tiny_config(reward_timeout_s=0)
    ctx = UIContext(runs_dir=runs, users=users.parse_users(accounts_text()), sandbox=sandbox.Policy())
    _, problems = paths_view.confine_config(config, ctx.scope_for(gr.Request(username="alice")))
    assert [p.field for p in problems] == ["reward_timeout_s"], problems  # the Setup tab's plan, launch and check
    for attempt in (
        lambda: launcher.start(config, runs, owner="alice", import_reward_file=False, sandboxed=sandbox.Policy()),
        lambda: signal_job.start_signal_check(config, runs, owner="alice", policy=sandbox.Policy()),
    ):
        with pytest.raises(ConfigError, match="reward_timeout_s: 0 means no time limit") as refused:
            attempt()
        assert "set it to the seconds one call may take" in str(refused.value)
    assert not runs.exists() or [p.name for p in runs.iterdir() if not p.name.startswith(".")] == []


def test_the_clock_ends_a_job_and_whatever_it_left_past_its_limit(tmp_path):
    from workbench.jobs import job_clock, processes

    code = "import os, time; os.system('sleep 300 &'); time.sleep(300)"
    env = {**processes.job_env(), "WORKBENCH_SAMPLING_TIME_LIMIT_S": "1"}
    started = time.monotonic()
    done = subprocess.run(
        job_clock.clocked(["python3", "-c", code], "sampling", env), env=env, capture_output=True, text=True
    )
    assert done.returncode == job_clock.TIMED_OUT and time.monotonic() - started < 30
    assert job_clock.ended_message("sampling", done.returncode, env) in done.stderr


@pytest.mark.slow
def test_a_run_past_the_run_time_cap_is_stopped_saying_why(tmp_path, monkeypatch):
    runs = tmp_path / "runs"
    monkeypatch.setenv("WORKBENCH_RUN_TIME_LIMIT_H", str(3 / 3600))  # 3 s
    run_id = launcher.start(tiny_config(max_steps=10_000, save_steps=10_000), runs, owner="alice")
    run_dir = runs / run_id
    try:
        status = poll_until(
            lambda: (lambda s: s if s.get("state") in runfolder.FINAL_STATES else None)(
                json.loads((run_dir / "status.json").read_text())
            ),
            timeout=120,
        )
    finally:
        for started in (launch_records.read_record(run_dir) or launch_records.LaunchRecord()).live_processes():
            launcher.processes.end_tree(started.pid)
    poll_until(
        lambda: "WORKBENCH_RUN_TIME_LIMIT_H" in json.loads((run_dir / "status.json").read_text()).get("note", "")
    )
    status = json.loads((run_dir / "status.json").read_text())
    assert status["state"] == "stopped", status
    assert "run-time cap" in status["note"], status
