"""Attack: a run that says it finished is deleted while it runs, and its processes run on, unseen and unstoppable.

`launcher.delete_run` refuses a run "still running" by its status as readers see it; a run whose code wrote
`state: finished` (with `finished_at` in the future it never turns `ending`) passes, its folder and the
launcher's record of it are removed, and its sandbox keeps running: no run lists it, Stop has nothing to
name, it counts against no cap and holds its devices for nobody to see. The fast test fakes the run's
process with a sleeper; the slow one is a real sandboxed run whose reward writes the lie and then keeps
going, deleted through the Runs tab's own Delete handler as its signed-in owner.
"""

from __future__ import annotations

import time

import gradio as gr
import psutil
import pytest
from helpers import app_handler, poll_until, sandboxed_run_with_a_live_process, tiny_settings

from workbench.access import uploads, users
from workbench.jobs import launcher, sandbox
from workbench.runstore import launch_records, runfolder
from workbench.spec.config import RunConfig

needs_bwrap = pytest.mark.skipif(sandbox.bwrap_binary() is None, reason="bubblewrap is not installed")


def test_a_run_whose_recorded_process_runs_is_not_deleted_whatever_its_status_says(tmp_path):
    runs = tmp_path / "runs"
    run_dir = runs / "20260101-000001-alice"
    process = sandboxed_run_with_a_live_process(run_dir)
    try:
        runfolder.write_json_atomic(
            run_dir / runfolder.STATUS_FILE,
            {  # the run's code: "I finished"
                "state": "finished",
                "finished_at": time.time() + 10**9,
                "updated_at": time.time(),
                "owner": "alice",
            },
        )
        with pytest.raises(launcher.LauncherError):
            launcher.delete_run(run_dir.name, runs)
        assert launch_records.read_record(run_dir) is not None, "the record of a live run's processes was removed"
    finally:
        process.kill()
        process.wait()


LIAR = """
import json, os, time

def brevity(completions, **kwargs):
    with open("status.json") as handle:
        status = json.load(handle)
    status.update(state="finished", finished_at=time.time() + 10**9, updated_at=time.time())
    with open(".status.new", "w") as handle:
        json.dump(status, handle)
    os.replace(".status.new", "status.json")
    open("claimed", "w").close()
    while True:  # the sandbox, and whatever it does, keeps going
        time.sleep(0.5)
"""


@pytest.mark.slow
@needs_bwrap
def test_deleting_a_run_that_lies_about_finishing_leaves_nothing_running(tmp_path):
    from workbench.ui.app import build_app

    runs = tmp_path / "runs"
    alice_uploads = uploads.uploads_dir(runs, "alice")
    alice_uploads.mkdir(parents=True)
    (alice_uploads / "liar.py").write_text(LIAR)
    policy = sandbox.Policy(readable=(str(alice_uploads),))
    app = build_app(runs, users={name: users.User(name, "user", "") for name in ("alice", "bob")}, sandbox=policy)
    config = RunConfig(
        **tiny_settings(task="demo", reward_names=["brevity"], max_steps=2, save_steps=1000),
        reward_file=str(alice_uploads / "liar.py"),
    )
    run_id = launcher.start(config, runs, owner="alice", import_reward_file=False, sandboxed=policy)
    uid = sandbox.run_uid(runs / run_id)
    bwrap = launch_records.read_record(runs / run_id).processes[0]
    try:
        poll_until(lambda: (runs / run_id / "claimed").exists(), timeout=240)
        delete = app_handler(app, "runs_tab", "delete")
        delete(gr.Request(username="alice"), run_id, [], [], "reward", 0.0, {})
        time.sleep(2)
        left = (
            [
                p.pid
                for p in psutil.process_iter(["uids"])
                if uid is not None and p.info["uids"] and p.info["uids"].real == uid
            ]
            if uid is not None
            else ([bwrap.pid] if bwrap.is_running() else [])
        )
        assert (runs / run_id).exists() or not left, (
            f"the run was deleted while its processes {left} ran on: no run, no record, nothing can stop them"
        )
    finally:
        for process in processes_of(uid) if uid is not None else []:
            process.kill()
        if bwrap.is_running():
            psutil.Process(bwrap.pid).kill()


def processes_of(uid: int) -> list:
    return [p for p in psutil.process_iter(["uids"]) if p.info["uids"] and p.info["uids"].real == uid]
