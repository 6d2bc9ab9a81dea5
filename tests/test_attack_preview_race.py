"""Attack: a live run swaps its own data file for a link between the Setup preview's check and its read.

The path rule and the dataset's file-by-file check (ui/paths_view.py `confine_data_files`,
sources/dataset_files.py `outside`) look at the file first, and the preview's readers then open it again by
its path, following whatever is there by then. A run's code can keep replacing its `data.jsonl` by a link
to another user's upload and back; one preview in a few dozen then shows that user's rows (measured here:
1 in 40 with a blind flip every 2 ms). The first test wins the race on purpose, right after the check; the
second races as a run does.
"""

from __future__ import annotations

import subprocess
import sys

import gradio as gr
import pytest
from helpers import app_handler, setup_form_values

from workbench.access import users
from workbench.runstore import launch_records, runfolder
from workbench.sources import dataset_files
from workbench.spec.config import RunConfig
from workbench.ui.app import build_app

pytestmark = pytest.mark.slow  # builds the whole app
SECRET = "BOB-SECRET-ROW-4c2d"
RUN = "20260101-000001-alice"


@pytest.fixture
def places(tmp_path):
    runs = tmp_path / "runs"
    run_dir = runs / RUN
    RunConfig(model="tiny").save(run_dir / runfolder.CONFIG_FILE)
    live = subprocess.Popen(["sleep", "300"], start_new_session=True)  # the run's process: its code can act
    launch_records.write_record(
        run_dir, launch_records.LaunchRecord(owner="alice", sandboxed=True, policy={}, config={})
    )
    launch_records.record_started(run_dir, live.pid)
    runfolder.update_status(run_dir, state="training", owner="alice")
    bob = runs / "uploads" / "bob"
    bob.mkdir(parents=True)
    (bob / "secret.jsonl").write_text(f'{{"prompt": "{SECRET}"}}\n')
    (runs / "uploads" / "alice").mkdir(parents=True)
    data = run_dir / "data.jsonl"
    data.write_text('{"prompt": "my own row"}\n')
    app = build_app(runs, users={name: users.User(name, "user", "") for name in ("alice", "bob")})
    yield app, data, bob / "secret.jsonl"
    live.kill()
    live.wait()


def preview(app, data) -> str:
    out = app_handler(app, "setup_tab", "live_preview")(
        gr.Request(username="alice"), *setup_form_values(dataset_name=str(data))
    )
    values = out if isinstance(out, (list, tuple)) else list(out.values())
    return " ".join(str(getattr(value, "value", value)) for value in values)


def test_a_data_file_swapped_for_a_link_after_the_check_shows_nothing_outside(places, monkeypatch):
    app, data, secret = places
    check = dataset_files.outside

    def check_then_swap(source, allowed):
        problem = check(source, allowed)
        data.unlink()  # the run's code, just after the check
        data.symlink_to(secret)
        return problem

    monkeypatch.setattr(dataset_files, "outside", check_then_swap)
    assert SECRET not in preview(app, data), (
        "the preview showed another user's row through a link planted after the check"
    )


FLIP = """
import os, sys, time
data, secret = sys.argv[1], sys.argv[2]
link, plain = data + ".l", data + ".r"
while True:
    try:
        os.symlink(secret, link)
        os.rename(link, data)
        time.sleep(0.002)
        with open(plain, "w") as handle:
            handle.write('{"prompt": "my own row"}\\n')
        os.rename(plain, data)
        time.sleep(0.002)
    except OSError:
        pass
"""


def test_a_run_flipping_its_data_file_never_shows_another_users_rows(places):
    app, data, secret = places
    flipper = subprocess.Popen([sys.executable, "-c", FLIP, str(data), str(secret)])
    try:
        shown = any(SECRET in preview(app, data) for _ in range(10))  # before the fix: 1 look in about 40
    finally:
        flipper.kill()
        flipper.wait()
    assert not shown, "a preview showed another user's row while the run flipped its data file and a link"
