"""A run's own status.json and config.json, rewritten with the wrong types and huge strings in every field,
read by every tab of the dashboard for the run's owner and for an admin (issue 52).

A sandboxed run's code owns both files. A string `total_steps` (or `started_at`, `updated_at`) broke the Train
tab's load and refresh whenever that run was the newest (every panel "Error"). Every field shown is now checked for
its type and size on read (spec/run_status.py `RunStatus`, `shown_fields`), and a field that fails shows
"unreadable"; the Runs table's model and task come from the launcher's record, not from config.json.
"""

from __future__ import annotations

import json

import gradio as gr
import pytest
from helpers import app_handler, sandboxed_run_with_a_live_process

from workbench.access import users
from workbench.runstore import runfolder
from workbench.spec.run_status import FIELDS
from workbench.ui import train_view
from workbench.ui.app import build_app

pytestmark = pytest.mark.slow  # builds the whole app

WRONG = {str: 12345, int: "3", float: "yesterday", bool: "yes", dict: "not an object", list: {"not": "a list"}}
HUGE = "<" * 120_000  # each of about thirty fields: near status.json's 4 MiB cap in all


def hostile_status(case: str) -> dict:
    """Every status.json field wrong: of the wrong type, or a huge string (`state` stays a word the run may say)."""
    if case == "wrong types":
        status = {name: WRONG.get(kind, "not a decision") for name, kind in FIELDS.items()}
    else:
        status = {name: HUGE for name in FIELDS}
    return {**status, "state": "training"}


HOSTILE_CONFIG = {"model": HUGE, "task": ["x"], "num_generations": "four", "scale_rewards": {"a": 1}, "device": 7}


def shown(out) -> str:
    """What an event sends to the page (not the session's state, which stays on the server)."""
    values = out.values() if isinstance(out, dict) else out
    return " ".join(
        str(getattr(value, "value", value)) for value in values if not isinstance(value, train_view.RunWatch)
    )


@pytest.fixture(params=["wrong types", "huge strings"])
def hostile_run(tmp_path, request):
    run_dir = tmp_path / "runs" / "20260101-000001-alice"
    process = sandboxed_run_with_a_live_process(run_dir)  # alive: the run is the newest, and watched
    (run_dir / runfolder.STATUS_FILE).write_text(json.dumps(hostile_status(request.param)))  # the run's code
    (run_dir / runfolder.CONFIG_FILE).write_text(json.dumps(HOSTILE_CONFIG))
    assert (run_dir / runfolder.STATUS_FILE).stat().st_size <= runfolder.MAX_JSON_BYTES
    yield run_dir
    process.kill()
    process.wait()


def app_for(run_dir):
    return build_app(
        run_dir.parent, users={"alice": users.User("alice", "user", ""), "root": users.User("root", "admin", "")}
    )


@pytest.mark.parametrize("viewer", ["alice", "root"])
def test_the_train_tab_loads_and_refreshes_a_run_whose_status_fields_are_wrong(hostile_run, viewer):
    app = app_for(hostile_run)
    request = gr.Request(username=viewer)
    out = app_handler(app, "train_tab", "on_load")(request, None, 0.5)
    text = shown(out)
    assert "unreadable" in text, "the bar says which numbers it could not read"
    assert len(text) < 2**20, f"the Train tab sent {len(text) / 2**20:.1f} MiB"
    watch = next(value for value in out.values() if isinstance(value, train_view.RunWatch))
    assert watch.run_id == hostile_run.name
    app_handler(app, "train_tab", "on_refresh")(request, watch, None, 0.5)  # answers, never an "Error"


@pytest.mark.parametrize("viewer", ["alice", "root"])
def test_the_runs_table_shows_unreadable_fields_as_unreadable(hostile_run, viewer):
    app = app_for(hostile_run)
    handler = app_handler(app, "runs_tab", "on_load")
    out = handler(gr.Request(username=viewer), [], [], None, "reward", 0.5, {})
    (row,) = out[next(key for key in out if getattr(key, "elem_id", "") == "wb-runs-table")]
    text = " ".join(map(str, row))
    assert "unreadable" in text
    assert len(text) < 4000, "a row shows no huge field"
    assert "tiny" in text, "the model is the launcher's record's, not the rewritten config.json's"
    chosen = app_handler(app, "runs_tab", "on_choose")(gr.Request(username=viewer), [row[0]], "reward", 0.5, {})
    assert len(shown(chosen)) < 2**20, "the config diff shows the launcher's record, not a huge config.json"


def test_a_rewritten_config_json_changes_nothing_the_runs_table_shows_of_a_launched_run(tmp_path):
    from workbench.access.owners import Viewer
    from workbench.ui import runs_tab, runs_view

    run_dir = tmp_path / "runs" / "20260101-000001-alice"
    process = sandboxed_run_with_a_live_process(run_dir)
    try:
        runfolder.update_status(run_dir, state="training", step=1, total_steps=4, started_at=1000.0)
        viewer = Viewer("alice", admin=False)
        before = runs_tab.read_rows(run_dir.parent, viewer, runs_view.SHARED_COLUMNS)
        rewritten = {"model": "/srv/runs/20260101-000002-bob", "task": "x", "dataset_path": "/srv/bob/secret.jsonl"}
        (run_dir / runfolder.CONFIG_FILE).write_text(json.dumps(rewritten))  # the run's code
        after = runs_tab.read_rows(run_dir.parent, viewer, runs_view.SHARED_COLUMNS)
    finally:
        process.kill()
        process.wait()
    assert after == before
    assert "bob" not in json.dumps(after)
