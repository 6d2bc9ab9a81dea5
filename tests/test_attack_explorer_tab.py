"""Attack: the Explore tab on a dashboard with accounts, driven as a hostile student's browser drives it: run ids
that are not the student's, forged export formats, what the click bridge sends, and a run's text (issue 46).

- another user's run, an unowned one, a link to one, a path, `..` (held: every handler reads the run id
  through `run_access.picked_run_dir_for`, and each reads as no run: no page, no group, no history, no file);
- an export format that is not csv or parquet, a path in it (held: refused before a file is written);
- the click bridge's text: a step in other digits, a number past Python's integer-text limit (broke:
  `clicked_step` took `str.isdigit`, which says yes to `²` and to 5,000 nines, and `int` then raised: a
  traceback in the handler; fixed: ASCII digits, at most 12);
- a run's prompt and completion holding HTML (held: the group card and the history escape it);
- exports clicked again and again (broke: each export, as large as the run's matching completions, stayed in
  the download folder for a day: a student could fill the server's disk; fixed: a user's new export deletes
  their previous one. Gradio's own copy of each download still stays up to an hour: not bounded here).
"""

from __future__ import annotations

import gradio as gr
import pytest
from helpers import tiny_config

from workbench.access import users
from workbench.runstore import runfolder
from workbench.ui import explorer_tab, explorer_view
from workbench.ui.context import UIContext

ALICE_RUN, BOB_RUN = "20260101-000001-a", "20260101-000002-b"
HTML = '<img src=x onerror="alert(document.cookie)"><script>alert(1)</script>'
VALUES = ("", "", "", "any", "any", "any", "step", False)  # search, steps, where, flags, sort, desc


class Request:
    def __init__(self, username):
        self.username = username


@pytest.fixture
def tab(tmp_path, monkeypatch):
    runs = tmp_path / "runs"
    for run_id, owner in [(ALICE_RUN, "alice"), (BOB_RUN, "bob"), ("20260101-000003-x", None)]:
        run_dir = runs / run_id
        run_dir.mkdir(parents=True)
        tiny_config().save(run_dir / runfolder.CONFIG_FILE)
        runfolder.update_status(run_dir, state="finished", step=1, owner=owner)
        record = {
            "step": 1,
            "group": 0,
            "prompt": HTML,
            "completion": f"{owner}'s secret {HTML}",
            "rewards": {},
            "reward": 1.0,
            "advantage": 0.0,
            "length": 3,
            "truncated": False,
        }
        runfolder.append_jsonl(run_dir / runfolder.COMPLETIONS_FILE, [record])
    (runs / "alias").symlink_to(runs / BOB_RUN, target_is_directory=True)
    hashed = users.hash_password("password1", iterations=1000)
    known = users.parse_users(f"alice user {hashed}\nbob user {hashed}\n")
    monkeypatch.setenv("WORKBENCH_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(explorer_tab.run_reports, "reports_root", lambda: tmp_path / "downloads")
    (tmp_path / "downloads").mkdir()
    ctx = UIContext(runs_dir=runs, users=known)
    with gr.Blocks(), gr.Tabs() as tabs:
        ui = explorer_tab.layout()
    ctx.components["tabs"] = tabs
    return explorer_tab.ExplorerTab(ctx, ui)


FORGED = [BOB_RUN, "20260101-000003-x", "alias", "../runs/" + BOB_RUN, "/etc", "..", BOB_RUN + "/", None, 7, ["x"]]


@pytest.mark.parametrize("run_id", FORGED)
def test_a_run_id_sent_from_the_browser_shows_alice_none_of_bobs_completions(tab, tmp_path, run_id):
    alice = Request("alice")
    shown = tab.on_search(alice, run_id, *VALUES)
    assert shown[tab.ui.table] == [] and shown[tab.ui.page_state] is None
    row = {"step": 1, "group": 0, "index": 0, "prompt": HTML}
    assert tab.ui.group in tab.open_row(tab.ctx.viewer(alice), run_id, row)
    assert "secret" not in str(tab.open_row(tab.ctx.viewer(alice), run_id, row))
    assert "secret" not in tab.on_history(alice, run_id, row)
    exported = tab.on_export(alice, run_id, "csv", *VALUES)
    assert exported[tab.ui.note] == explorer_tab.NO_RUN
    assert not list((tmp_path / "downloads").rglob("*.*"))
    linked = tab.on_train_link(alice, run_id, 1)
    assert "bob's secret" not in str(linked)


def test_alice_sees_her_own_run_and_its_text_escaped(tab):
    alice = Request("alice")
    shown = tab.on_search(alice, ALICE_RUN, *VALUES)
    assert [r["completion"] for r in shown[tab.ui.page_state]["rows"]] == [f"alice's secret {HTML}"]
    html = tab.open_row(tab.ctx.viewer(alice), ALICE_RUN, shown[tab.ui.page_state]["rows"][0])[tab.ui.group]
    history = tab.on_history(alice, ALICE_RUN, shown[tab.ui.page_state]["rows"][0])
    for text in (html, history):
        assert "alice&#x27;s secret" in text or "alice's secret" in text
        assert "<script>" not in text and "<img" not in text
    assert tab.on_search(Request("mallory"), ALICE_RUN, *VALUES)[tab.ui.table] == []  # no account: nothing


@pytest.mark.parametrize("fmt", ["xlsx", "../../../tmp/x", "csv/../../x", "", None])
def test_a_forged_export_format_writes_no_file(tab, tmp_path, fmt):
    shown = tab.on_export(Request("alice"), ALICE_RUN, fmt, *VALUES)
    assert "Not exported" in shown[tab.ui.note] and "format" in shown[tab.ui.note]
    assert not [p for p in tmp_path.rglob("*") if p.is_file() and "downloads" in str(p) and p.stat().st_size]


@pytest.mark.parametrize("text", ["²", "١", "9" * 5000, "1e3", "-1", " 3 ", "3.0", "", None, "<script>", "0x10"])
def test_what_the_click_bridge_sends_is_a_step_or_nothing(tab, text):
    step = explorer_view.clicked_step(text)
    assert step is None or (isinstance(step, int) and 0 <= step < 10**12)
    tab.on_point(Request("alice"), ALICE_RUN, text)  # never raises


def test_exports_clicked_again_and_again_keep_one_file_per_user(tab, tmp_path):
    for where in ("", "reward>0", "reward>=1", "step==1", ""):
        shown = tab.on_export(Request("alice"), ALICE_RUN, "csv", "", "", where, "any", "any", "any", "step", False)
        assert "Exported 1 rows" in shown[tab.ui.note]
    assert len([p for p in (tmp_path / "downloads").rglob("*") if p.is_file()]) == 1
    tab.on_export(Request("bob"), BOB_RUN, "parquet", *VALUES)  # another user's export is their own
    assert len([p for p in (tmp_path / "downloads").rglob("*") if p.is_file()]) == 2
