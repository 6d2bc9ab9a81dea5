"""The Setup tab as a newcomer meets it, in a real headless Chromium at 1400x1000.

- The default view holds what a first run needs and fits in 2,000 px; the landmarks outside checks use stay
  (`#wb-tabs`, a tab named Setup, a dropdown labelled exactly `task`).
- One person's action is one plan update: a task choice, a preset (a recipe) and a typed field each reach the
  verdict in at most 3 events (Gradio sends one request per event, chained ones included), and the verdict the
  page shows matches the fields it shows: after a task or a preset, at every moment the page is sampled (their
  values and the verdict land in one answer), after a typed field once the answer is in.
- The first-run strip above the tabs says what the demo does and how long it takes on this machine, and its
  button launches the demo and shows the Train tab following it.
- While other processes keep the cores busy, the strip and the Setup tab's launch line say so, with their share.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest
from browser_fixtures import UI, UI_TIMEOUT_MS, EventCounter
from playwright.sync_api import expect

from workbench.jobs import launcher
from workbench.runstore import runfolder
from workbench.spec.config import RunConfig
from workbench.spec.tasks import TASKS

pytestmark = [pytest.mark.browser, pytest.mark.slow]

VIEWPORT = {"width": 1400, "height": 1000}
MAX_EVENTS = 3
MAX_HEIGHT_PX = 2000
# The verdict's own words for the two numbers it names (calculator_view.badge_html).
SAMPLE_JS = """([generations, steps, badge]) => {
  window.wbSamples = [];
  const started = performance.now();
  const timer = setInterval(() => {
    window.wbSamples.push([generations.value, steps.value, badge.innerText]);
    if (performance.now() - started > 4000) clearInterval(timer);
  }, 25);
}"""


@pytest.fixture
def setup(browser, app_server, tmp_path):
    context = browser.new_context(viewport=VIEWPORT)
    context.set_default_timeout(UI_TIMEOUT_MS)
    page = context.new_page()
    events = EventCounter(page)
    ui = UI(page, app_server, tmp_path)
    ui.open("Setup")
    tab = ui.panel("Setup")
    ui.expect_text(tab.locator(".wb-badge").first, r"Valid|Invalid", timeout=90_000)
    events.quiet()
    yield ui, tab, events
    context.close()


def badge_matches(generations: str, steps: str, badge: str) -> bool:
    """Whether the verdict's text names the G and the step count the fields show."""
    if badge.startswith("Valid"):
        return f"G={generations} completions" in badge and f", {steps} optimizer steps" in badge
    named = re.search(r"num_generations \((\d+)\)", badge)
    return named is None or named.group(1) == generations


def fields_and_verdict(ui: UI, setup) -> tuple[str, str, str]:
    badge = setup.locator(".wb-badge").first
    return (
        ui.number("num_generations", setup).input_value(),
        ui.number("max_steps", setup).input_value(),
        badge.inner_text(),
    )


def sampled(ui: UI, setup, gesture, events: EventCounter) -> tuple[int, list]:
    """The events of one gesture, and what the page showed (G, max_steps, the verdict) every 25 ms meanwhile."""
    handles = [
        ui.number("num_generations", setup).element_handle(),
        ui.number("max_steps", setup).element_handle(),
        setup.locator(".wb-badge").first.element_handle(),
    ]
    ui.page.evaluate(SAMPLE_JS, handles)
    sent = events.during(gesture)
    return sent, ui.page.evaluate("() => window.wbSamples")


def test_the_first_view_fits_and_keeps_its_landmarks(setup):
    ui, tab, _events = setup
    page = ui.page
    assert page.locator("#wb-tabs").count() == 1
    expect(page.get_by_role("tab", name="Setup", exact=True)).to_be_visible()
    expect(tab.get_by_label("task", exact=True)).to_be_visible()
    expect(tab.get_by_label("model", exact=True)).to_be_visible()
    expect(tab.get_by_role("textbox", name=re.compile(r"^dataset_name"))).to_be_visible()
    expect(tab.get_by_role("checkbox", name="mentions_answer", exact=True)).to_be_checked()
    expect(tab.get_by_text("CPU processes", exact=True)).to_be_visible()
    expect(tab.get_by_role("button", name="Launch", exact=True)).to_be_enabled()
    ui.expect_text(tab, r"Ready to launch")
    ui.expect_text(tab, r"About [\d.]+ GiB per training process")
    assert tab.get_by_label("learning_rate", exact=True).count() == 0  # in a closed group, not on the page
    # information in grey, not in the warning colour: the default demo has nothing wrong with it
    assert tab.locator(".wb-warnings").count() == 0
    ui.expect_text(tab.locator(".wb-infos"), r"max_steps=50 runs [\d.]+ epochs")
    assert page.evaluate("() => document.documentElement.scrollHeight") <= MAX_HEIGHT_PX
    ui.settle()
    ui.screenshot("setup_first_view.png", full_page=True)


def test_a_task_a_preset_and_a_field_each_reach_the_verdict_in_one_update(setup):
    ui, tab, events = setup
    ui.reveal("num_generations", tab)  # Batch and length: to read what the verdict should say
    ui.reveal("recipe", tab)
    events.quiet()

    # a task: its presets and the verdict of them land together
    task = "arithmetic"
    sent, samples = sampled(ui, tab, lambda: ui.choose("task", f"{task}: {TASKS[task].title}", tab), events)
    assert sent <= MAX_EVENTS, f"a task choice sent {sent} events"
    expect(ui.number("max_completion_length", tab)).to_have_value(str(RunConfig.for_task(task).max_completion_length))
    expect(ui.number("num_generations", tab)).to_have_value(str(RunConfig.for_task(task).num_generations))
    assert badge_matches(*fields_and_verdict(ui, tab)), fields_and_verdict(ui, tab)
    assert all(badge_matches(*sample) for sample in samples), [s for s in samples if not badge_matches(*s)][:3]

    # a preset: the recipe's settings and the verdict of them land together
    sent, samples = sampled(ui, tab, lambda: ui.choose("recipe", "DAPO: dapo", tab), events)
    assert sent <= MAX_EVENTS, f"a recipe sent {sent} events"
    ui.expect_text(tab.locator("#wb-recipe-note"), r"DAPO")
    ui.reveal("loss_type", tab)
    expect(tab.get_by_label("loss_type", exact=True)).to_have_value("dapo")
    assert badge_matches(*fields_and_verdict(ui, tab)), fields_and_verdict(ui, tab)
    assert all(badge_matches(*sample) for sample in samples), [s for s in samples if not badge_matches(*s)][:3]

    # a typed field: the verdict of the value typed
    sent = events.during(lambda: ui.set_number("num_generations", 3, tab))
    assert sent <= MAX_EVENTS, f"typing a field sent {sent} events"
    ui.expect_text(tab.locator(".wb-badge").first, r"must be divisible by num_generations \(3\)")
    ui.expect_text(tab, r"Not ready to launch")
    expect(tab.get_by_role("button", name="Launch", exact=True)).to_be_disabled()
    assert badge_matches(*fields_and_verdict(ui, tab))

    # the verdict's first fix: the fields it changes and the verdict of them again in one answer
    fix = tab.locator("#wb-suggestion-0")
    ui.expect_text(fix, r"Apply: ")
    sent = events.during(fix.click)
    assert sent <= MAX_EVENTS
    ui.expect_text(tab.locator(".wb-badge").first, r"Valid: TRL 1.16 accepts these settings")
    assert badge_matches(*fields_and_verdict(ui, tab))
    expect(tab.get_by_role("button", name="Launch", exact=True)).to_be_enabled()


def test_the_first_run_strip_launches_the_demo_from_any_tab(page, app_factory, tmp_path):
    server = app_factory(tmp_path / "runs")
    ui = UI(page, server, tmp_path)
    ui.open()  # the first tab a newcomer lands on
    strip = page.locator("#wb-first-run")
    demo = RunConfig.for_task(RunConfig().task)
    ui.expect_text(strip, rf"The demo trains {demo.model} with LoRA on the {demo.task} task for {demo.max_steps} steps")
    # how long, from this machine's own measurement or saying there is none yet: never a figure from elsewhere
    ui.expect_text(strip, r"as its speed probe measured|not measured on this machine yet")
    for tab in ("Runs", "Calculator"):
        ui.open_tab(tab)
        expect(strip.get_by_role("button", name="Launch the demo")).to_be_visible()
    ui.settle()
    ui.screenshot("first_run.png")
    try:
        strip.get_by_role("button", name="Launch the demo").click()
        ui.expect_text(strip, r"Launched \S+demo")
        expect(page.get_by_role("tab", name="Train", exact=True)).to_have_attribute("aria-selected", "true")
        runs = runfolder.list_run_dirs(server.runs_dir)
        assert len(runs) == 1 and "demo" in runs[0].name
        config = runfolder.read_json(runs[0] / runfolder.CONFIG_FILE)
        assert (config["task"], config["model"], config["max_steps"]) == (demo.task, demo.model, demo.max_steps)
        ui.expect_text(page.locator("#wb-train-progress"), re.escape(runs[0].name), timeout=60_000)
    finally:
        for run_dir in runfolder.list_run_dirs(server.runs_dir):
            launcher.stop(run_dir.name, server.runs_dir, timeout=20)


def test_the_strip_and_the_launch_line_say_when_other_processes_keep_the_cpu_busy(page, app_factory, tmp_path):
    server = app_factory(tmp_path / "runs")
    # one spinner a core, started by this test: outside the app server's process tree, so others' work to it
    spin = "import time\nend = time.monotonic() + 120\nwhile time.monotonic() < end: pass\n"
    spinners = [subprocess.Popen([sys.executable, "-c", spin]) for _ in range(os.cpu_count())]
    try:
        ui = UI(page, server, tmp_path)
        ui.open("Setup")
        busy = r"This machine is busy: other processes took \d+% of its \d+ cores over the last [\d.]+ s, and times here grow"
        ui.expect_text(page.locator("#wb-first-run"), busy)
        ui.expect_text(ui.panel("Setup").locator(".wb-launch-line"), busy, timeout=90_000)
        ui.settle()
        ui.screenshot("first_run_busy.png")
    finally:
        for process in spinners:
            process.kill()
            process.wait()
