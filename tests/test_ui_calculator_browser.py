"""The Calculator tab in a real headless Chromium against the real app server.

Sets the Open-R1 failing case (3 training processes x batch 1, G = 8), reads
TRL's exact message in the badge, clicks a suggestion and sees the plan turn
valid; bad input names the field; a pasted error is explained and loaded into
the fields. Takes calculator.png (the README's picture when tools/screenshots.py runs it).
"""

from __future__ import annotations

import pytest

pytestmark = [pytest.mark.browser, pytest.mark.slow]

SEED_001_MESSAGE = r"generation_batch_size \(3\) must be divisible by num_generations \(8\)\."


@pytest.fixture
def calculator(ui):
    """The Calculator tab of a freshly loaded page, after its first update has landed."""
    ui.open("Calculator")
    tab = ui.panel("Calculator")
    # The first update (on page load) may be slow on a busy machine.
    ui.expect_text(tab.locator(".wb-badge"), r"Valid|Invalid", timeout=90_000)
    return tab


def test_invalid_plan_shows_trl_message_and_a_suggestion_fixes_it(ui, calculator):
    ui.set_number("per_device_train_batch_size", 1, calculator)
    ui.set_number("num_processes", 3, calculator)
    ui.set_number("num_generations", 8, calculator)
    badge = calculator.locator(".wb-badge")
    ui.expect_text(badge, "Invalid: GRPOConfig would raise")
    ui.expect_text(badge, SEED_001_MESSAGE)

    suggestion = calculator.get_by_role("button", name="Apply: num_generations 8 -> 3")
    suggestion.wait_for()
    calculator.locator(".js-plotly-plot .heatmaplayer").wait_for()
    ui.settle()
    ui.screenshot("calculator.png")

    suggestion.click()
    ui.expect_text(badge, "Valid: TRL 1.16 accepts these settings")
    assert ui.number("num_generations", calculator).input_value() == "3"
    # The verdict is live again after the fix: the suggestion buttons are gone.
    assert calculator.get_by_role("button", name="Apply: num_generations 8 -> 3").count() == 0


@pytest.mark.parametrize(
    ("field", "value", "expected"),
    [
        ("num_generations", 0, r"must be >= 1, got 0"),
        ("per_device_train_batch_size", 2_000_000, r"must be <= 1,000,000"),
        ("num_processes", "", r"is missing"),
    ],
    ids=["zero-generations", "absurd-batch", "blank-processes"],
)
def test_bad_input_names_the_field(ui, calculator, field, value, expected):
    ui.set_number(field, value, calculator)
    badge = calculator.locator(".wb-badge")
    ui.expect_text(badge, f"Check the field {field}")
    ui.expect_text(badge, expected)
    assert "Traceback" not in calculator.inner_text()


def test_pasted_error_is_explained_and_loaded(ui, calculator):
    calculator.get_by_label("Error message").fill(
        "ValueError: The global train batch size (3 x 1) must be evenly divisible by the number of "
        "generations per prompt (8). Given the current train batch size, the valid values for the number "
        "of generations are: [3]."
    )
    calculator.get_by_role("button", name="Explain", exact=True).click()
    ui.expect_text(calculator.locator(".wb-explain"), r"Recognised.*older TRL")
    calculator.get_by_role("button", name="Load into the calculator").click()
    ui.expect_text(calculator.locator(".wb-badge"), SEED_001_MESSAGE)


def test_heatmap_and_framework_table_follow_the_inputs(ui, calculator):
    ui.set_number("num_processes", 3, calculator)
    ui.set_number("vllm_gpus", 1, calculator)
    table = calculator.locator("table.wb-table")
    ui.expect_text(table, r"Open-R1")
    ui.expect_text(table, r"4 GPUs in all: 1 serve vLLM, 3 train")
    assert calculator.locator(".js-plotly-plot").count() == 1
