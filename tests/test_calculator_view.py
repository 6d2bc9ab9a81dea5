"""The pure functions behind the UI tabs, without a browser.

The Calculator tab's update and click handlers, the HTML pieces they return,
the heatmap, and the promise that the UI process starts without torch,
transformers or trl (checked in a fresh interpreter).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import plotly.graph_objects as go
import pytest

from workbench.calc import grid
from workbench.ui import calculator_tab
from workbench.ui.calculator_view import (
    SUGGESTION_SLOTS,
    apply_changes,
    badge_html,
    explain_html,
    frameworks_html,
    heatmap_figure,
    make_plan_view,
    numbers_html,
    suggestion_slots,
    warnings_html,
)

REPO = Path(__file__).resolve().parents[1]
HEAVY_MODULES = ("torch", "transformers", "trl", "peft", "accelerate")


def calc_inputs(**overrides) -> dict:
    return {**calculator_tab.START_VALUES, **overrides}


def calc_values(**overrides) -> list:
    """The Calculator tab's field values in FIELDS order, plus the ms-swift ratio."""
    inputs = calc_inputs(**overrides)
    return [inputs[name] for name in calculator_tab.FIELDS] + [1.0]


# ---------------------------------------------------------------- plan view


@pytest.mark.parametrize(
    ("overrides", "css_class", "text"),
    [
        ({"per_device_train_batch_size": 8}, "wb-badge-valid", "Valid: TRL 1.16 accepts"),
        (
            {"num_processes": 3},
            "wb-badge-invalid",
            "generation_batch_size (3) must be divisible by num_generations (8).",
        ),
        ({"num_generations": 0}, "wb-badge-input", "Check the field num_generations"),
        ({"num_processes": None}, "wb-badge-input", "num_processes"),
        ({"gradient_accumulation_steps": 2.5}, "wb-badge-input", "use 2 or 3"),
    ],
    ids=["valid", "invalid-seed-001", "zero-G", "blank-processes", "fractional-GA"],
)
def test_badge_shows_verdict_or_the_field_at_fault(overrides, css_class, text):
    html = badge_html(make_plan_view(calc_inputs(**overrides)))
    assert css_class in html
    assert text in html


def test_badge_lists_errors_trl_would_raise_next():
    view = make_plan_view(
        calc_inputs(per_device_train_batch_size=3, num_generations=2, do_eval=True, per_device_eval_batch_size=3)
    )
    html = badge_html(view)
    assert view.plan.errors[0].startswith("The global eval batch size (3 * 1)") and view.plan.errors[0] in html
    assert "After fixing that" in html and "generation_batch_size (3) must be divisible by num_generations (2)" in html


@pytest.mark.parametrize(
    ("value", "expected"),
    [(4.0, 4), (None, None), ("", None), (1.5, 1.5)],
    ids=["whole-float", "none", "blank", "fraction-kept-for-the-calculator-to-refuse"],
)
def test_form_values_are_cleaned(value, expected):
    view = make_plan_view(calc_inputs(dataset_size=value))
    assert view.inputs["dataset_size"] == expected


def test_blank_max_steps_means_train_by_epochs():
    view = make_plan_view(calc_inputs(per_device_train_batch_size=8, max_steps=None))
    assert view.plan.valid and view.plan.inputs["max_steps"] == -1


def test_numbers_table_holds_the_plan_numbers():
    view = make_plan_view(calc_inputs(per_device_train_batch_size=8, dataset_size=100))
    html = numbers_html(view)
    assert f">{view.plan.total_steps}<" in html
    assert "prompts dropped each epoch" in html
    assert "Numbers appear" in numbers_html(make_plan_view(calc_inputs(num_generations=-1)))


def test_warnings_are_plain_words_and_absent_for_invalid_plans():
    dropping = make_plan_view(calc_inputs(per_device_train_batch_size=8, num_generations=4, dataset_size=11))
    html = warnings_html(dropping)
    assert "prompts are dropped each epoch" in html and "wb-infos" in html and "wb-warnings" not in html  # information
    starved = make_plan_view(calc_inputs(per_device_train_batch_size=8, num_generations=2, dataset_size=3, max_steps=5))
    assert "silently trains 0 steps" in warnings_html(starved) and "wb-warnings" in warnings_html(starved)
    assert warnings_html(make_plan_view(calc_inputs(num_processes=3))) == ""


@pytest.mark.parametrize("allowed", [None, {"num_generations"}], ids=["all-fields", "only-G"])
def test_suggestion_slots_are_fixed_in_number_and_filtered(allowed):
    view = make_plan_view(calc_inputs(num_processes=3))
    slots = suggestion_slots(view, allowed_fields=allowed)
    assert len(slots) == SUGGESTION_SLOTS
    filled = [s for s in slots if s]
    assert filled and all(allowed is None or set(s["changes"]) <= allowed for s in filled)


def test_valid_plan_hides_every_suggestion():
    assert suggestion_slots(make_plan_view(calc_inputs(per_device_train_batch_size=8))) == [None] * SUGGESTION_SLOTS


def test_apply_changes_touches_only_changed_fields():
    values = calc_inputs(num_processes=3)
    applied = apply_changes(values, {"num_generations": 3, "not_a_field": 1})
    assert applied == {**values, "num_generations": 3}


# ---------------------------------------------------------------- heatmap


@pytest.mark.parametrize(
    ("batch", "generations", "expected_top"),
    [(1, 8, 16), (40, 8, 42), (8, 200, 64)],
    ids=["default-axes", "wide-batch", "huge-G-capped"],
)
def test_heatmap_marks_the_current_choice_and_matches_grid(batch, generations, expected_top):
    view = make_plan_view(calc_inputs(per_device_train_batch_size=batch, num_generations=generations, num_processes=2))
    fig = go.Figure(heatmap_figure(view))  # also checks the dict is a figure plotly accepts
    cells, marker = fig.data
    assert list(marker.x) == [batch] and list(marker.y) == [generations]
    axis = cells.y if generations > 16 else cells.x
    assert axis[-1] == expected_top
    expected = grid(num_processes=2, per_device_train_batch_sizes=list(cells.x), num_generations_values=list(cells.y))[
        "valid"
    ]
    assert [[bool(z) for z in row] for row in cells.z] == expected


def test_heatmap_without_a_plan_says_what_to_do():
    fig = go.Figure(heatmap_figure(make_plan_view(calc_inputs(num_generations=None))))
    assert not fig.data and "Fix the highlighted field" in fig.layout.annotations[0].text


# ---------------------------------------------------------------- frameworks and explain


def test_framework_table_reads_seed_001_as_open_r1():
    html = frameworks_html(make_plan_view(calc_inputs(num_processes=3, vllm_gpus=1)).plan.inputs)
    for title in ("TRL 1.16 (exact)", "Open-R1", "ms-swift"):
        assert title in html
    assert "4 GPUs in all: 1 serve vLLM, 3 train" in html


def test_framework_table_names_a_bad_ratio():
    html = frameworks_html(make_plan_view(calc_inputs()).plan.inputs, train_data_ratio=1.5)
    assert "train_data_ratio" in html and "<table" not in html


@pytest.mark.parametrize(
    ("text", "recognised"),
    [
        ("generation_batch_size (4) must be divisible by num_generations (8).", True),
        ("CUDA out of memory", False),
        ("", False),
    ],
    ids=["trl-1.16", "unrelated", "empty"],
)
def test_explain_html_never_raises(text, recognised):
    html, inputs = explain_html(text)
    assert ("Recognised" in html) is recognised
    assert (inputs is not None) is recognised


# ---------------------------------------------------------------- the tab's handlers


def test_update_calculator_returns_one_value_per_output():
    outputs = calculator_tab.update_calculator(*calc_values(num_processes=3))
    # badge, 4 buttons, suggestions state, warnings, numbers, heatmap, framework table
    assert len(outputs) == 1 + SUGGESTION_SLOTS + 1 + 3 + 1
    assert "must be divisible" in outputs[0]
    slots = outputs[1 + SUGGESTION_SLOTS]
    assert len(slots) == SUGGESTION_SLOTS and slots[0]


def test_update_calculator_reports_bad_input_in_every_panel():
    outputs = calculator_tab.update_calculator(*calc_values(per_device_train_batch_size=0))
    assert "per_device_train_batch_size" in outputs[0]
    assert "comparison appears" in outputs[-1]


def test_clicking_a_suggestion_makes_the_plan_valid():
    values = calc_values(num_processes=3)[:-1]
    slots = calculator_tab.update_calculator(*values, 1.0)[1 + SUGGESTION_SLOTS]
    fixed = calculator_tab.apply_suggestion(0, slots, *values)
    assert make_plan_view(dict(zip(calculator_tab.FIELDS, fixed))).plan.valid
    assert calculator_tab.apply_suggestion(3, [None] * 4, *values) == values


def test_loading_an_explained_error_sets_its_numbers():
    _, inputs = explain_html(
        "The global train batch size (3 x 1) must be evenly divisible by the number of generations per prompt (8)"
    )
    values = calc_values()[:-1]
    loaded = dict(zip(calculator_tab.FIELDS, calculator_tab.load_explained(inputs, *values)))
    assert (loaded["num_processes"], loaded["per_device_train_batch_size"], loaded["num_generations"]) == (3, 1, 8)
    assert calculator_tab.load_explained(None, *values) == values


# ---------------------------------------------------------------- the process


def test_app_binds_localhost_by_default(monkeypatch):
    monkeypatch.delenv("WORKBENCH_HOST", raising=False)
    sys.path.insert(0, str(REPO))
    try:
        import app
    finally:
        sys.path.remove(str(REPO))
    assert app.parse_args([]).host == "127.0.0.1"
    assert app.parse_args(["--host", "0.0.0.0"]).host == "0.0.0.0"


@pytest.mark.slow
def test_building_the_app_imports_no_training_stack(tmp_path):
    code = (
        "import json, sys\n"
        "from workbench.ui.app import build_app\n"
        f"build_app({str(tmp_path)!r})\n"
        f"print(json.dumps([m for m in {HEAVY_MODULES!r} if m in sys.modules]))\n"
    )
    result = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=180)
    assert result.returncode == 0, result.stderr[-3000:]
    assert json.loads(result.stdout.strip().splitlines()[-1]) == []
