"""Watching costs nothing where no one looks: in a real Chromium, tab timers run only for the open, visible tab.

The dashboard's polling competes with training for the CPU on a small
machine, so the Train and Runs tabs poll only while they are open and the
browser tab is visible. These tests count the event requests the page sends
(each timer tick is one `queue/join` request) while the page is otherwise idle.
"""

from __future__ import annotations

import time

import pytest
from browser_fixtures import UI

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

    def over(self, seconds: float) -> int:
        """Requests sent during the next `seconds`, after a pause that lets one already on its way land."""
        self.page.wait_for_timeout(1500)
        self.count = 0
        self.page.wait_for_timeout(seconds * 1000)
        return self.count

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
    page.wait_for_timeout(2000)  # the page's load events finish
    assert counter.over(WINDOW_S) == 0, "the Calculator tab has no timer: nothing should poll"

    ui.open_tab("Runs")
    assert counter.arrive(2), "the open Runs tab refreshes every few seconds"

    page.evaluate(SET_VISIBILITY_JS, True)
    assert counter.over(WINDOW_S) == 0, "a hidden page must not poll"

    page.evaluate(SET_VISIBILITY_JS, False)
    assert counter.arrive(2), "showing the page again resumes the open tab's timer"

    ui.open_tab("Setup")
    assert counter.over(WINDOW_S) == 0, "leaving the Runs tab stops its timer"
