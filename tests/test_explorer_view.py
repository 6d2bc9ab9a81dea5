"""The Explore tab's pure view (explorer_view) and its handlers (explorer_tab.ExplorerTab) on a run folder written
by hand with the trainer's own writer: the query the widgets make, a page, a group split at its mean, a prompt's
history across steps, paging and export."""

from __future__ import annotations

import csv
from pathlib import Path

import gradio as gr
import pytest

from workbench.errors import WorkbenchError
from workbench.insight.groups import groups_for_step
from workbench.runstore import runfolder
from workbench.spec.config import RunConfig
from workbench.ui import explorer_tab, explorer_view
from workbench.ui.context import UIContext

G = 4


def records_of(step: int) -> list[dict]:
    """Two prompts a step, the same two every step; prompt 0's answers get better with the step."""
    records = []
    for group, prompt in enumerate(["What is 2+2? <b>", "Name a colour."]):
        for index in range(G):
            reward = (index + step) / 10 if group == 0 else 0.5
            records.append(
                {
                    "step": step,
                    "group": group,
                    "prompt": prompt,
                    "completion": f"answer {index} at step {step}" + (" <script>" if index == 0 else ""),
                    "rewards": {"brevity": reward},
                    "reward": reward,
                    "advantage": index - 1.5 if group == 0 else 0.0,
                    "length": 10 * (index + 1),
                    "truncated": index == 3,
                }
            )
    return records


@pytest.fixture
def run_dir(tmp_path) -> Path:
    folder = tmp_path / "runs" / "run-a"
    folder.mkdir(parents=True)
    RunConfig(reward_names=["brevity"], num_generations=G).save(folder / runfolder.CONFIG_FILE)
    runfolder.append_jsonl(folder / runfolder.COMPLETIONS_FILE, [r for step in (1, 2, 3) for r in records_of(step)])
    return folder


@pytest.fixture
def tab(run_dir, tmp_path, monkeypatch):
    monkeypatch.setattr(explorer_view, "PAGE_ROWS", 5)
    with gr.Blocks():
        ui = explorer_tab.layout()
    return explorer_tab.ExplorerTab(UIContext(runs_dir=run_dir.parent), ui)


def test_the_widgets_make_the_engines_query_and_bad_input_names_its_field():
    assert explorer_view.parse_steps("10:50") == (10, 50)
    assert explorer_view.parse_steps(" 7 ") == (7, 7)
    assert explorer_view.parse_steps(":5") == (None, 5)
    assert explorer_view.parse_steps("") == (None, None)
    assert explorer_view.steps_text(7, 7) == "7" and explorer_view.steps_text(3, None) == "3:"
    with pytest.raises(WorkbenchError, match="steps"):
        explorer_view.parse_steps("ten")
    flags = {"truncated": "yes", "correct": "no", "reward_error": "any"}
    assert explorer_view.combined_where("reward<1 or length>3", flags) == (
        "(reward<1 or length>3) and truncated==true and correct==false"
    )
    with pytest.raises(WorkbenchError, match="Truncated"):
        explorer_view.combined_where("", {"truncated": "maybe"})
    assert ("score of brevity", "rewards.brevity") in explorer_view.sort_choices(["brevity"])
    assert explorer_view.clicked_step("12") == 12 and explorer_view.clicked_step("1; x") is None


def test_a_group_shows_its_answers_above_and_below_the_mean_apart(run_dir):
    group = groups_for_step(records_of(2), 2)[0]
    above, below = explorer_view.split_by_mean(group)
    assert [item.index for item in above] == [3, 2] and [item.index for item in below] == [1, 0]
    html = explorer_view.group_html(group, 1)
    assert html.index("Above the group mean") < html.index("answer 3 at step 2") < html.index("At or below the mean")
    assert html.index("At or below the mean") < html.index("answer 0 at step 2")
    assert "<script>" not in html and "&lt;script&gt;" in html and "row #2" in html


def test_a_page_filters_sorts_and_pages_and_a_bad_filter_says_why(tab, run_dir):
    viewer = tab.ctx.viewer(None)
    values = ("", "1:2", "reward>0.3", "any", "any", "any", "reward", True)
    shown = tab.page(viewer, "run-a", *values)
    state = shown[tab.ui.page_state]
    rewards = [row["reward"] for row in state["rows"]]
    expected = sorted([r["reward"] for s in (1, 2) for r in records_of(s) if r["reward"] > 0.3], reverse=True)
    assert state["total"] == len(expected) and rewards == expected[:5]
    assert shown[tab.ui.table][0][:3] == [1, 1, 0]  # step, group, place counted from 0 as the CSV (ties in file order)
    assert "Rows 1–5 of 11" in shown[tab.ui.note]
    moved = tab.on_move(1)(None, state, "run-a", *values)
    assert moved[tab.ui.page_state]["offset"] == 5
    truncated = tab.page(viewer, "run-a", "", "", "", "yes", "any", "any", "step", False)
    assert truncated[tab.ui.page_state]["total"] == 6
    found = tab.page(viewer, "run-a", "COLOUR", "", "", "any", "any", "any", "step", False)
    assert found[tab.ui.page_state]["total"] == 12
    refused = tab.page(viewer, "run-a", "", "", "__import__('os')", "any", "any", "any", "step", False)
    assert refused[tab.ui.page_state] is None and "where" in refused[tab.ui.note]
    assert tab.page(viewer, "../elsewhere", *values)[tab.ui.note] == explorer_tab.NO_RUN


def test_a_row_opens_its_group_and_its_prompts_history_across_steps(tab):
    viewer = tab.ctx.viewer(None)
    state = tab.page(viewer, "run-a", "", "3", "", "any", "any", "any", "step", False)[tab.ui.page_state]
    row = state["rows"][2]
    opened = tab.open_row(viewer, "run-a", row)
    assert opened[tab.ui.picked_state] == row and "Step 3 · group 0 · row #3" in opened[tab.ui.group]
    history = tab.history_of(viewer, "run-a", row)
    assert [history.index(f"<b>Step {step}</b>") for step in (1, 2, 3)] == sorted(
        history.index(f"<b>Step {step}</b>") for step in (1, 2, 3)
    )
    assert "Name a colour." not in history  # only this prompt's groups
    assert "group mean 0.25 → 0.45" in history  # the answers got better as training went


def test_export_writes_every_matching_row_for_download(tab, tmp_path, monkeypatch):
    monkeypatch.setattr(explorer_tab.run_reports, "reports_root", lambda: tmp_path)
    shown = tab.on_export(None, "run-a", "csv", "", "", "truncated==true", "any", "any", "any", "step", False)
    path = Path(shown[tab.ui.export_file].value["path"] if isinstance(shown[tab.ui.export_file].value, dict) else "")
    if not path.name:
        path = next(tmp_path.rglob("*.csv"))
    with open(path, newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert len(rows) == 6 and {row["truncated"] for row in rows} == {"True"}
    assert "Exported 6 rows" in shown[tab.ui.note]


def test_the_tab_runs_only_when_asked_no_timer_and_nothing_at_page_load(tmp_path):
    """A page watching a live run pays nothing for the Explore tab until a person uses it."""
    import inspect

    from workbench.ui.app import build_app

    app = build_app(tmp_path / "runs")
    explorer = [
        fn for fn in app.fns.values() if fn.fn is not None and "explorer_tab" in inspect.unwrap(fn.fn).__module__
    ]
    assert explorer
    triggers = {event for fn in explorer for _, event in fn.targets}
    assert not triggers & {"load", "tick", "change"}, triggers
    assert explorer_view.POINT_CLICK_JS in app.page_scripts
