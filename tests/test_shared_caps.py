"""What one user of a shared dashboard may use up: launches and stops a minute, uploads, and the app's leftovers.

The per-minute cap through the Train tab's own handlers (launches wait in
the GPU queue behind a run that holds the CPU, so nothing trains); the
upload caps through the function every upload passes; Gradio's upload
cache cleaned of day-old files by the real app at start; and the app with
accounts making its folders private (umask 077).
"""

from __future__ import annotations

import os
import subprocess
import time

import gradio as gr
import pytest
from helpers import app_handler, setup_form_values

from workbench.access import limits, uploads, users
from workbench.jobs import launcher
from workbench.runstore import runfolder
from workbench.spec.config import RunConfig
from workbench.ui import cleanup
from workbench.ui.app import build_app
from workbench.ui.train_view import RunWatch

DAY = 24 * 3600


def test_launches_and_stops_per_user_per_minute_are_capped(tmp_path, monkeypatch):
    runs = tmp_path / "runs"
    holder = runs / "20260101-000000-holder"
    RunConfig(model="tiny", device="cpu").save(holder / runfolder.CONFIG_FILE)
    live = subprocess.Popen(["sleep", "300"])  # holds the CPU: each launch waits in the queue
    monkeypatch.setenv(limits.MAX_ACTIONS_ENV, "3")
    accounts = {name: users.User(name, "user", "") for name in ("alice", "bob")}
    app = build_app(runs, users=accounts)
    on_launch, on_stop = app_handler(app, "train_tab", "on_launch"), app_handler(app, "train_tab", "on_stop")

    def said(out) -> str:
        return " ".join(str(getattr(value, "value", "")) for value in out.values())

    bob = gr.Request(username="bob")
    try:
        runfolder.update_status(holder, state="training", pid=live.pid, pgid=live.pid, step=1)
        first = on_launch(bob, RunWatch(), 0.5, *setup_form_values())
        (queued,) = [d.name for d in runfolder.list_run_dirs(runs) if d != holder]
        assert "Queued" in said(first)
        watch = RunWatch(run_id=queued, status={"state": runfolder.QUEUED})
        assert "stopped" in said(list(on_stop(bob, watch))[-1])
        second = on_launch(bob, RunWatch(), 0.5, *setup_form_values())
        assert "Queued" in said(second), said(second)
        (queued,) = [
            d.name for d in runfolder.list_run_dirs(runs) if runfolder.read_status(d).get("state") == runfolder.QUEUED
        ]
        refused = said(next(on_stop(bob, RunWatch(run_id=queued, status={"state": runfolder.QUEUED}))))
        assert "Not stopped: stop: bob has started or stopped runs 3 times in the last 60 s" in refused, refused
        assert "wait" in refused and runfolder.read_status(runs / queued)["state"] == runfolder.QUEUED
        third = said(on_launch(bob, RunWatch(), 0.5, *setup_form_values()))
        assert "Not launched" in third and "launch: bob has started or stopped runs 3 times" in third
        assert "Queued" in said(on_launch(gr.Request(username="alice"), RunWatch(), 0.5, *setup_form_values())), (
            "each user has a cap of their own"
        )
    finally:
        # the queued runs first: once the holder ends, the dispatcher would start one (the bundled model's
        # demo), and it would train on through the rest of the suite
        for run_dir in runfolder.list_run_dirs(runs):
            if run_dir != holder and runfolder.read_status(run_dir).get("state") not in runfolder.FINAL_STATES:
                launcher.stop(run_dir.name, runs)
        live.kill()
        live.wait()


def test_the_cap_forgets_actions_older_than_a_minute():
    cap = limits.ActionLimit(2)
    cap.take("bob", now=0.0)
    cap.take("bob", now=30.0)
    with pytest.raises(limits.LimitError, match=r"wait 30 s"):
        cap.take("bob", now=30.0)
    cap.take("bob", now=60.5)
    cap.take(None, now=60.5)  # an open dashboard: no one to count
    assert limits.max_actions({}) == 10
    with pytest.raises(limits.LimitError, match=rf"^{limits.MAX_ACTIONS_ENV}: 'ten' is not a whole number"):
        limits.max_actions({limits.MAX_ACTIONS_ENV: "ten"})


def test_uploads_per_user_are_capped_in_count_and_size(tmp_path, monkeypatch):
    folder = uploads.uploads_dir(tmp_path / "runs", "bob")
    source = tmp_path / "gradio-temp.jsonl"
    source.write_bytes(b'{"prompt": "hi"}\n' + b" " * (300 * 1024))  # about 0.3 MB
    monkeypatch.setenv(uploads.MAX_FILES_ENV, "3")
    monkeypatch.setenv(uploads.MAX_TOTAL_ENV, "1")
    for name in ("a.jsonl", "b.jsonl", "c.jsonl"):
        uploads.store_upload(source, name, folder)
    uploads.store_upload(source, "b.jsonl", folder)  # replacing a file takes no more room
    with pytest.raises(uploads.UploadError, match=r"^upload: d.jsonl would be your upload number 4, over the 3 files"):
        uploads.store_upload(source, "d.jsonl", folder)
    monkeypatch.setenv(uploads.MAX_FILES_ENV, "10")
    with pytest.raises(uploads.UploadError, match=r"^upload: d.jsonl would take your uploads to 1.2 MB, over the 1 MB"):
        uploads.store_upload(source, "d.jsonl", folder)
    assert sorted(p.name for p in folder.iterdir()) == ["a.jsonl", "b.jsonl", "c.jsonl"]
    monkeypatch.delenv(uploads.MAX_FILES_ENV)
    monkeypatch.delenv(uploads.MAX_TOTAL_ENV)
    assert uploads.upload_caps() == (200, 500 * 2**20)


def old_and_new_files(cache):
    """A cache as Gradio fills it (a folder per file), with files of two days ago and of now; and a link
    out of it to a file that must survive."""
    old = cache / "0f1e2d" / "old.jsonl"
    new = cache / "a1b2c3" / "new.jsonl"
    outside = cache.parent / "keep.txt"
    for path in (old, new, outside):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("x")
    link = cache / "link.txt"
    link.symlink_to(outside)
    two_days_ago = time.time() - 2 * DAY
    for path in (old, old.parent, outside):
        os.utime(path, (two_days_ago, two_days_ago))
    os.utime(link, (two_days_ago, two_days_ago), follow_symlinks=False)
    return old, new, outside, link


def test_files_older_than_a_day_leave_the_cache(tmp_path):
    old, new, outside, link = old_and_new_files(tmp_path / "gradio")
    assert cleanup.remove_old_files(tmp_path / "gradio") == 2
    assert not old.exists() and not old.parent.exists() and not link.is_symlink()
    assert new.exists() and outside.exists()
    assert cleanup.remove_old_files(tmp_path / "gradio") == 0


@pytest.mark.slow
def test_the_app_with_accounts_cleans_the_cache_at_start_and_keeps_its_folders_private(tmp_path):
    from browser_fixtures import start_app
    from gradio_client import Client, handle_file

    old, new, _, _ = old_and_new_files(tmp_path / "gradio")
    users_file = tmp_path / "users.txt"
    users_file.write_text(f"bob user {users.hash_password('a-long-password', iterations=1000)}\n")
    runs = tmp_path / "runs"
    holder = runs / "20260101-000000-holder"
    RunConfig(model="tiny", device="cpu").save(holder / runfolder.CONFIG_FILE)
    live = subprocess.Popen(["sleep", "300"])  # holds the CPU: the launch waits in the queue, nothing trains
    runfolder.update_status(holder, state="training", pid=live.pid, pgid=live.pid, step=1)
    server = start_app(
        runs, extra_env={users.USERS_FILE_ENV: str(users_file), "GRADIO_TEMP_DIR": str(tmp_path / "gradio")}
    )
    try:
        assert not old.exists() and new.exists(), "the app cleans Gradio's upload cache when it starts"
        data = tmp_path / "prompts.jsonl"
        data.write_text('{"prompt": "What is 2 + 2?"}\n')
        client = Client(server.url, auth=("bob", "a-long-password"), verbose=False)
        try:
            client.predict([handle_file(str(data))], api_name="/on_upload")
            client.predict(0.5, *setup_form_values()[:-1], api_name="/on_launch")  # the hardware is a State: not sent
        finally:
            client.close()
        folder = runs / "uploads" / "bob"
        assert (folder / "prompts.jsonl").is_file()
        (run_dir,) = [d for d in runfolder.list_run_dirs(runs) if d != holder]
        modes = {
            path.name: oct(path.stat().st_mode & 0o777)
            for path in (runs / "uploads", folder, run_dir, run_dir / runfolder.CONFIG_FILE)
        }
        assert modes == {"uploads": "0o700", "bob": "0o700", run_dir.name: "0o700", "config.json": "0o600"}, modes
    finally:
        server.process.kill()
        server.process.wait(timeout=10)
        live.kill()
        live.wait()
        for run_dir in runfolder.list_run_dirs(runs):
            if runfolder.read_status(run_dir).get("state") == runfolder.QUEUED:
                launcher.stop(run_dir.name, runs)
