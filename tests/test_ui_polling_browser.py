"""Watching costs little, and nothing where no one looks: measured in a real Chromium.

The dashboard's polling competes with training for the CPU on a small
machine. The Runs tab's timer runs only while that tab is open and the
browser tab visible; the Train tab sends a Gradio event only when the run
folder changed (its page script asks a cheap route otherwise); and the page
does not draw frames while idle, nor a figure twice. These tests count the page's requests (each
event is one `queue/join` request), the animation frames it asks for and the redraws it leaves out.
"""

from __future__ import annotations

import json
import os
import time

import pytest
from browser_fixtures import UI

from workbench.runstore import runfolder
from workbench.ui import train_view

pytestmark = [pytest.mark.browser, pytest.mark.slow]

# The Runs tab refreshes every 3 s; a quiet window this long would have seen two ticks.
WINDOW_S = 7.0
# How long two ticks may take to arrive on a busy 2-core machine.
TICKS_TIMEOUT_S = 60.0

SET_VISIBILITY_JS = """(hidden) => {
    Object.defineProperty(document, "hidden", {value: hidden, configurable: true});
    Object.defineProperty(document, "visibilityState", {value: hidden ? "hidden" : "visible", configurable: true});
    document.dispatchEvent(new Event("visibilitychange"));
}"""


class RequestCounter:
    """Counts the page's event requests (`queue/join`) from the moment it is reset.

    It waits with `page.wait_for_timeout`, never `time.sleep`: playwright's sync
    API delivers request events only while the test is inside one of its calls.
    """

    def __init__(self, page):
        self.page = page
        self.count = 0
        page.on("request", self._seen)

    def _seen(self, request) -> None:
        if request.method == "POST" and "queue/join" in request.url:
            self.count += 1
        if request.method == "GET" and "workbench/changes" in request.url:
            self.looks += 1

    looks = 0  # the Train tab's cheap questions (GET workbench/changes), not events

    def over(self, seconds: float) -> int:
        """Requests sent during the next `seconds`, after a pause that lets one already on its way land."""
        self.page.wait_for_timeout(1500)
        self.count = 0
        self.page.wait_for_timeout(seconds * 1000)
        return self.count

    def quiet(self, seconds: float, timeout: float = TICKS_TIMEOUT_S) -> bool:
        """True once a window of `seconds` passed with no request, False after `timeout` seconds.

        The page's load events take longer on a busy machine; a timer that ticks more often than
        the window never leaves one quiet, so waiting for a quiet window proves the same.
        """
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.over(seconds) == 0:
                return True
        return False

    def arrive(self, wanted: int, timeout: float = TICKS_TIMEOUT_S) -> bool:
        """True once `wanted` requests were sent from now on, False after `timeout` seconds."""
        self.count = 0
        deadline = time.monotonic() + timeout
        while self.count < wanted and time.monotonic() < deadline:
            self.page.wait_for_timeout(200)
        return self.count >= wanted


def test_timers_run_only_for_the_open_tab_of_a_visible_page(app_factory, tmp_path, page):
    ui = UI(page, app_factory(tmp_path / "runs"))
    counter = RequestCounter(page)
    ui.open()
    assert counter.quiet(WINDOW_S), "the Calculator tab has no timer: nothing should poll"

    ui.open_tab("Runs")
    assert counter.arrive(2), "the open Runs tab refreshes every few seconds"

    page.evaluate(SET_VISIBILITY_JS, True)
    assert counter.over(WINDOW_S) == 0, "a hidden page must not poll"

    page.evaluate(SET_VISIBILITY_JS, False)
    assert counter.arrive(2), "showing the page again resumes the open tab's timer"

    ui.open_tab("Setup")
    assert counter.over(WINDOW_S) == 0, "leaving the Runs tab stops its timer"


def finished_run(runs_dir, run_id="20260101-000000-demo-tiny"):
    """A finished run folder as the trainer leaves it: config, final status, two metric lines."""
    run_dir = runs_dir / run_id
    run_dir.mkdir(parents=True)
    (run_dir / runfolder.CONFIG_FILE).write_text(json.dumps({"model": "tiny", "task": "demo", "max_steps": 2}))
    runfolder.update_status(
        run_dir, state="finished", step=2, total_steps=2, started_at=1000.0, updated_at=1010.0, pid=1
    )
    with open(run_dir / runfolder.METRICS_FILE, "w", encoding="utf-8") as handle:
        for step in (1, 2):
            handle.write(json.dumps({"step": step, "reward": 0.1 * step, "step_time": 5.0}) + "\n")
    return run_dir


def append_metrics(run_dir, step: int) -> None:
    with open(run_dir / runfolder.METRICS_FILE, "a", encoding="utf-8") as handle:
        handle.write(json.dumps({"step": step, "reward": 0.1 * step, "step_time": 5.0}) + "\n")


# Steps drawn on the reward figure (its traces' distinct x values).
STEPS_DRAWN_JS = (
    "() => new Set(document.querySelector('#wb-plot-reward .js-plotly-plot').data"
    ".flatMap(t => Array.from(t.x || []))).size"
)


def test_the_train_tab_sends_events_only_when_the_run_folder_changes(app_factory, tmp_path, page):
    runs_dir = tmp_path / "runs"
    run_dir = finished_run(runs_dir)
    ui = UI(page, app_factory(runs_dir))
    counter = RequestCounter(page)
    ui.open("Train")
    ui.expect_text(page.locator("#wb-train-progress"), rf"{run_dir.name}.*finished.*step 2 / 2")
    page.wait_for_timeout(2000)
    counter.looks = 0
    assert counter.over(WINDOW_S) == 0, "an unchanged run folder must not cost a Gradio event"
    assert counter.looks >= 1, "the page's script keeps asking whether the run folder changed"

    # Resumed elsewhere (the live process is ours), on the CPU: a new step lands; the page asks for one redraw.
    config = json.loads((run_dir / runfolder.CONFIG_FILE).read_text())
    (run_dir / runfolder.CONFIG_FILE).write_text(json.dumps({**config, "device": "cpu"}))
    runfolder.update_status(run_dir, state="training", step=3, total_steps=4, pid=os.getpid())
    append_metrics(run_dir, 3)
    assert counter.arrive(1), "a changed run folder is redrawn (at once: its state changed)"
    ui.expect_text(page.locator("#wb-train-progress"), r"training.*step 3 / 4")
    # Gradio draws the new reward figure in a new div; the one it drops is not asked to draw it too.
    page.wait_for_function("() => window.wbPlotRedraws && window.wbPlotRedraws.dropped > 0")

    # The next step of the live run shows in the bar at once, from the page's question, and the figures follow
    # once a CPU run's redraw spacing has passed since the last redraw.
    counter.count = 0
    append_metrics(run_dir, 4)
    runfolder.update_status(run_dir, step=4)
    ui.expect_text(page.locator("#wb-train-progress"), r"step 4 / 4", timeout=10_000)
    assert counter.count == 0, "the bar shows a live run's new step before any event"
    assert counter.arrive(1, timeout=train_view.CPU_RUN_REDRAW_SECONDS + 30), "then the figures are redrawn"
    page.wait_for_function(f"() => ({STEPS_DRAWN_JS})() === 4")

    ui.open_tab("Setup")
    page.wait_for_timeout(1500)
    counter.looks = 0
    assert counter.over(WINDOW_S) == 0 and counter.looks == 0, "another open tab: the Train tab asks nothing"


def test_an_idle_page_draws_a_few_frames_a_second_not_sixty(app_factory, tmp_path, page):
    """Gradio 6.31 leaves a status tracker's clock asking for every frame; the page's throttle slows it.

    If this fails with `slowed` at 0 and many frames, gradio changed that clock:
    look at FRAME_THROTTLE_JS in workbench/ui/gradio_compat/ again (tests/test_gradio_compat.py says
    whether the status tracker's clock callback is still the one it matches).
    """
    ui = UI(page, app_factory(tmp_path / "runs"))
    ui.open()
    page.wait_for_timeout(8000)  # the page's load events and their transitions are over
    # On a busy machine the load's transitions run longer: the slowest of a few windows counts,
    # while an unthrottled clock asks for every frame in every window.
    deadline = time.monotonic() + TICKS_TIMEOUT_S
    rates = []
    while time.monotonic() < deadline:
        before = page.evaluate("() => ({...window.wbFrameThrottle})")
        page.wait_for_timeout(5000)
        after = page.evaluate("() => ({...window.wbFrameThrottle})")
        rates.append((after["frames"] - before["frames"]) / 5)
        if rates[-1] < 10:
            break
    assert min(rates) < 10, f"an idle page asked for {min(rates):.0f} frames a second at the least"
    assert after["slowed"] > before["slowed"], "the throttle no longer finds gradio's clock callback"
