"""The Setup tab in a real headless Chromium: CPU hardware line, live plan, one-click fix, command preview,
a smoke test that really trains one step, and a signal check that really samples the tiny model.

Takes setup.png and setup_signal.png (the README's pictures when tools/screenshots.py runs it). A field of a
closed group of settings is shown first by opening its group (`ui.reveal`), as a person would.
"""

from __future__ import annotations

import re

import pytest
from browser_fixtures import UI, UI_TIMEOUT_MS
from playwright.sync_api import expect

from workbench.runstore import runfolder
from workbench.spec.config import RunConfig

pytestmark = [pytest.mark.browser, pytest.mark.slow]
# the Setup tab's closed groups of the plan column
PREVIEW_GROUP = "Check first: the exact command"
SIGNAL_GROUP = "Will it learn?"


@pytest.fixture
def setup(ui):
    ui.open("Setup")
    tab = ui.panel("Setup")
    ui.expect_text(tab.locator(".wb-badge").first, r"Valid|Invalid", timeout=90_000)
    return tab


def test_cpu_machine_says_so_in_one_line(ui, setup):
    ui.expect_text(setup, r"No GPU found")
    assert setup.get_by_text("CPU processes").count() == 1


def test_invalid_batch_is_fixed_by_a_suggestion(ui, setup):
    ui.reveal("num_generations", setup)
    ui.set_number("num_generations", 3, setup)
    badge = setup.locator(".wb-badge").first
    ui.expect_text(badge, r"generation_batch_size \(8\) must be divisible by num_generations \(3\)\.")
    ui.expect_text(setup, r"Not ready to launch")
    suggestion = setup.get_by_role("button", name="Apply: num_generations 3 -> 2")
    suggestion.wait_for()
    suggestion.click()
    ui.expect_text(badge, "Valid: TRL 1.16 accepts these settings")
    ui.expect_text(setup, "Ready to launch")


def test_preview_shows_the_exact_command(ui, setup):
    ui.open_group(PREVIEW_GROUP, setup)
    setup.get_by_role("button", name="Preview command").click()
    command = setup.locator(".wb-command textarea")
    expect(command).to_have_value(
        re.compile(r"-m workbench train --run-dir .* --config .*config\.json"), timeout=30_000
    )
    page = ui.page
    page.evaluate("() => window.scrollTo(0, 0)")
    ui.settle()
    ui.screenshot("setup.png")


def test_smoke_test_runs_one_real_step_and_says_it_passed(page, app_factory, tmp_path):
    # A server of its own, so the smoke run's folder does not show up in other tests' runs.
    ui = UI(page, app_factory(tmp_path / "runs"), tmp_path)
    ui.open("Setup")
    setup = ui.panel("Setup")
    ui.choose("model", "tiny", setup)
    setup.get_by_role("radio", name="1", exact=True).check()  # one CPU process
    ui.reveal("max_completion_length", setup)
    ui.set_number("max_completion_length", 8, setup)
    ui.open_group(PREVIEW_GROUP, setup)
    setup.get_by_role("button", name="Smoke test (1 step)").click()
    ui.expect_text(setup, r"Smoke test passed", timeout=120_000)

    smoke_dirs = runfolder.list_run_dirs(ui.server.runs_dir)
    assert len(smoke_dirs) == 1 and "-smoke-" in smoke_dirs[0].name
    status = runfolder.read_status(smoke_dirs[0])
    assert (status["state"], status["step"], status["smoke_test"]) == ("finished", 1, True)
    assert runfolder.read_json(smoke_dirs[0] / runfolder.CONFIG_FILE)["model"] == "tiny"


def test_signal_check_says_the_tiny_model_cannot_learn_arithmetic(page, app_factory, tmp_path):
    ui = UI(page, app_factory(tmp_path / "runs"), tmp_path)
    ui.open("Setup")
    setup = ui.panel("Setup")
    ui.choose("task", "arithmetic: Arithmetic with a tagged answer", setup)
    # the task presets its settings (max_completion_length among them) when its answer lands: typed before,
    # the 8 below would be overwritten and the check would sample 64 tokens a completion
    preset = RunConfig.for_task("arithmetic").max_completion_length
    assert preset != RunConfig.for_task(RunConfig().task).max_completion_length  # so its arrival can be seen
    ui.reveal("max_completion_length", setup)
    expect(ui.number("max_completion_length", setup)).to_have_value(str(preset), timeout=UI_TIMEOUT_MS)
    ui.choose("model", "tiny", setup)
    ui.set_number("max_completion_length", 8, setup)
    expect(ui.number("max_completion_length", setup)).to_have_value("8", timeout=UI_TIMEOUT_MS)
    ui.reveal("correctness_reward", setup)
    setup.get_by_label("correctness_reward", exact=True).click()  # the rewards the task ticked are offered
    expect(page.get_by_role("option", name="exact_answer", exact=True)).to_be_visible()
    page.keyboard.press("Escape")
    ui.open_group(SIGNAL_GROUP, setup)
    setup.get_by_role("button", name="Check the signal", exact=True).click()
    verdict = setup.locator("#wb-signal-result")
    ui.expect_text(verdict, r"Will not learn", timeout=120_000)
    ui.expect_text(verdict, r"arithmetic on tiny: 0 of 4 groups have any correct answer; nothing will learn")
    ui.expect_text(verdict, r"correct \(exact_answer full marks\)")
    ui.expect_text(verdict, r"mean length [0-8]\.\d tokens")  # sampled with the form's max_completion_length
    # a page that has sent a few dozen events keeps none of them in localStorage (Gradio's run history is off)
    assert page.evaluate("() => Object.keys(localStorage).filter(k => k.startsWith('gradio:run-history'))") == []
    verdict.scroll_into_view_if_needed()
    ui.settle()
    ui.screenshot("setup_signal.png")
