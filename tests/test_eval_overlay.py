"""Held-out curves of several runs on the Runs tab's overlay, read from each run's eval.jsonl; the Compare tab
picks a run's best evaluated checkpoint first."""

from __future__ import annotations

import json

import pytest
from app_events import Page, find_event

from workbench.insight import eval_results, overlay_figures
from workbench.runstore import jsonl_cache, runfolder
from workbench.spec.config import RunConfig


def evaluated(runs_dir, run_id: str, points) -> None:
    """A run folder whose eval.jsonl holds (step, accuracy, pass@k) each."""
    run_dir = runs_dir / run_id
    RunConfig.for_task("arithmetic", model="tiny").save(run_dir / runfolder.CONFIG_FILE)
    runfolder.update_status(run_dir, state="finished", step=points[-1][0])
    runfolder.append_jsonl(
        run_dir / runfolder.EVAL_FILE,
        [
            {"step": step, "accuracy": accuracy, "pass_at_k": passed, "k": 4, "n": 8, "rewards": {}}
            for step, accuracy, passed in points
        ],
    )


def test_the_curve_as_metrics_draws_one_line_per_run_and_names_a_run_that_never_evaluated():
    curves = {
        "a": eval_results.as_metrics([{"step": 0, "accuracy": 0.25, "pass_at_k": None}, {"step": 4, "accuracy": 0.5}]),
        "b": [],
        "c": eval_results.as_metrics([{"step": 0, "accuracy": 0.5, "pass_at_k": 0.75}]),
    }
    assert curves["a"] == [{"step": 0, "held_out/accuracy": 0.25}, {"step": 4, "held_out/accuracy": 0.5}]
    figure = overlay_figures.overlay_runs(curves, eval_results.HELD_OUT_ACCURACY)
    assert [trace.name for trace in figure.data] == ["a", "c"] and list(figure.data[0].y) == [0.25, 0.5]
    assert "not logged by: b" in figure.layout.title.text
    assert "eval_strategy=steps" in json.dumps(
        overlay_figures.overlay_runs({"b": []}, eval_results.HELD_OUT_ACCURACY).to_dict()
    )


@pytest.fixture
def app(tmp_path, make_checkpoint):
    from workbench.ui.app import build_app

    runs = tmp_path / "runs"
    evaluated(runs, "20261127-100000-small-lr", [(0, 0.25, 0.5), (5, 0.375, 0.625), (10, 0.5, 0.75)])
    evaluated(runs, "20261127-110000-large-lr", [(0, 0.25, 0.5), (5, 0.5, 0.25), (10, 0.125, 0.25)])
    for step in (5, 10):
        make_checkpoint(runs / "20261127-110000-large-lr", step)
    jsonl_cache.forget()
    yield build_app(runs)
    jsonl_cache.forget()


@pytest.mark.slow  # builds the whole app (about 10 s here)
def test_the_runs_tab_overlays_the_held_out_curves_of_the_runs_ticked(app):
    page = Page(app)
    metric = next(block for block in app.blocks.values() if getattr(block, "label", None) == "Metric")
    on_metric = find_event(app, "workbench.ui.runs_tab", "on_metric", (metric, "input"))
    ticked = ["20261127-100000-small-lr", "20261127-110000-large-lr"]
    page.run(find_event(app, "workbench.ui.runs_tab", "on_load"), [[], [], None, "reward", 0.0, {}])  # lists the runs
    result = page.run(on_metric, [ticked, eval_results.HELD_OUT_ACCURACY, 0.0, {}])
    figure = json.loads(Page.output(on_metric, result, "wb-runs-overlay")["plot"])
    assert [(trace["name"], trace["x"], trace["y"]) for trace in figure["data"]] == [
        (ticked[0], [0, 5, 10], [0.25, 0.375, 0.5]),
        (ticked[1], [0, 5, 10], [0.25, 0.5, 0.125]),
    ]
    # the Compare tab offers the run's checkpoints, the best evaluated one (step 5, not the newest) picked
    page.run(find_event(app, "workbench.ui.compare_tab", "on_load"), [])
    on_pick = find_event(app, "workbench.ui.compare_tab", "on_pick")
    picked = Page.output(on_pick, page.run(on_pick, [ticked[1]]), "wb-compare-checkpoint")
    assert picked["value"] == "step 5 (checkpoint-5)"
