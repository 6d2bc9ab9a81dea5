"""Held-out evaluation as the Train tab shows it: the figure beside the training reward, the changed answers."""

from __future__ import annotations

import json

from workbench.insight import eval_results, figures, overlay_figures
from workbench.spec.heldout import eval_record
from workbench.ui import heldout_view


def _record(step, correct, completions, k=2, right=None):
    rewards = {"exact_answer": [1.0 if ok else 0.0 for ok in correct]}
    return eval_record(
        step,
        [f"What is {i} + {i}?" for i in range(len(correct))],
        completions,
        rewards,
        [4] * len(correct),
        "exact_answer",
        right or [1] * len(correct),
        k,
        1.25,
    )


EVALS = [
    _record(0, [False, True], ["<answer>1</answer>", "<answer>2</answer>"]),
    _record(2, [True, False], ["<answer>0</answer>", "<b>wrong</b>"]),
]
METRICS = [{"step": 1, "reward": 0.2}, {"step": 2, "reward": 0.6}]


def _traces(figure) -> dict:
    return {trace["name"]: trace for trace in json.loads(figures.figure_json(figure))["data"]}


def test_held_out_accuracy_and_pass_at_k_share_the_training_rewards_step_axis():
    traces = _traces(overlay_figures.held_out_figure(EVALS, METRICS))
    assert list(traces["held-out accuracy (right)"]["x"]) == [0, 2]
    assert list(traces["held-out accuracy (right)"]["y"]) == [0.5, 0.5]
    assert list(traces["pass@2 (right)"]["y"]) == [1.0, 1.0] and traces["pass@2 (right)"]["yaxis"] == "y2"
    assert list(traces["training reward"]["x"]) == [1, 2]


def test_a_run_without_evaluation_says_how_to_turn_it_on_and_one_waiting_says_so():
    def note(figure):
        return json.loads(figures.figure_json(figure))["layout"]["annotations"][0]["text"]

    assert "eval_strategy=steps" in note(overlay_figures.held_out_figure([], METRICS, evaluates=False))
    assert "step 0" in note(overlay_figures.held_out_figure([], METRICS, evaluates=True))


def test_changed_answers_show_both_answers_escaped_with_the_summary():
    page = heldout_view.changed_answers_html(EVALS, eval_results.changed_answers(EVALS))
    assert "Held-out accuracy 50% at step 0 → 50% at step 2, pass@2 100% (2 prompts" in page
    assert page.index("wrong → right") < page.index("right → wrong")
    assert "&lt;b&gt;wrong&lt;/b&gt;" in page and "<b>wrong</b>" not in page
    assert "<th>step 0</th><th>step 2</th>" in page


def test_no_change_and_no_evaluation_read_plainly():
    same = [EVALS[0], {**EVALS[0], "step": 1}]
    assert "No held-out answer changed verdict between step 0 and step 1" in heldout_view.changed_answers_html(
        same, eval_results.changed_answers(same)
    )
    assert heldout_view.changed_answers_html([], []) == ""
