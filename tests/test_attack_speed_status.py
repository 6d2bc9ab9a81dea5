"""Attack: a sandboxed run writes the speed fields of its status.json (`speed_probe`, `speed_choice`,
`library_ties`, issue 43) to break or inject into the dashboard of whoever watches it: its owner, and every admin.

The run's code owns its status.json. Tried against the real app's Train tab, an admin picking alice's live run:
HTML and script in `speed_probe` while the state is `tuning` (held: escaped), wrong types in all three fields
(held: ignored, the bar still draws; the Setup tab's speed line reads the server's cache, never a run's status),
and a 4 MiB `speed_probe`: broke, every redraw of the bar sent it to the page, 16 MiB once `<` was escaped.
Fixed in workbench/ui/train_view.py: the bar shows at most MAX_PROBE_CHARS of the probe's line.
"""

from __future__ import annotations

import json

import gradio as gr
import pytest
from helpers import app_handler, sandboxed_run_with_a_live_process

from workbench.access import users
from workbench.insight import follow
from workbench.runstore import runfolder
from workbench.ui import train_view
from workbench.ui.app import build_app

pytestmark = pytest.mark.slow  # builds the whole app
SCRIPT = "<img src=x onerror=alert(document.cookie)><script>alert(1)</script>"
HOSTILE = {  # what the run's code writes, beside state "tuning"
    "script": {
        "speed_probe": SCRIPT,
        "speed_choice": {"chosen": SCRIPT, "seconds": SCRIPT},
        "library_ties": {SCRIPT: SCRIPT},
    },
    "wrong types": {"speed_probe": {"timing": [1, 2]}, "speed_choice": [SCRIPT], "library_ties": "x" * 1000},
    "huge": {"speed_probe": "<" * (4 * 2**20 - 200)},
}


@pytest.fixture
def alices_tuning_run(tmp_path):
    run_dir = tmp_path / "runs" / "20260101-000001-alice"
    process = sandboxed_run_with_a_live_process(run_dir)  # alive: its state stays the run's word
    yield run_dir
    process.kill()
    process.wait()


def shown(out) -> str:
    """What the event sends to the page (not the session's state, which stays on the server)."""
    values = out.values() if isinstance(out, dict) else out
    return " ".join(
        str(getattr(value, "value", value)) for value in values if not isinstance(value, train_view.RunWatch)
    )


@pytest.mark.parametrize("case", list(HOSTILE))
def test_an_admin_watching_a_run_sees_its_speed_fields_escaped_and_bounded(alices_tuning_run, case):
    run_dir = alices_tuning_run
    status = {"state": "tuning", "owner": "alice", "step": 0, "total_steps": 2, **HOSTILE[case]}
    (run_dir / runfolder.STATUS_FILE).write_text(json.dumps(status))  # the run's code
    assert (run_dir / runfolder.STATUS_FILE).stat().st_size <= runfolder.MAX_JSON_BYTES
    app = build_app(
        run_dir.parent, users={"alice": users.User("alice", "user", ""), "root": users.User("root", "admin", "")}
    )
    pick = app_handler(app, "train_tab", "on_pick")
    text = shown(pick(gr.Request(username="root"), run_dir.name, train_view.RunWatch(), 0.5))
    assert "measuring this machine" in text, "the bar of a tuning run is drawn"
    assert "<script>" not in text and "<img" not in text
    assert len(text) < 2**20, f"the Train tab sent {len(text) / 2**20:.1f} MiB for one run's bar"
    follow.status_signature(runfolder.read_status(run_dir))  # the page's cheap question still answers
