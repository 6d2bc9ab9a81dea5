"""The dashboard stops at once when told to, with pages open: Ctrl-C, in a real Chromium.

Every open page holds a Gradio heartbeat stream open; uvicorn's shutdown waits for open requests, so before
ui/server.py ended those streams a Ctrl-C with a tab open never stopped the server.
"""

from __future__ import annotations

import signal
import time

import pytest
from browser_fixtures import UI, start_app

from workbench.ui import server

pytestmark = [pytest.mark.browser, pytest.mark.slow]

# What stopping may take: the heartbeat streams end at once; a page's event stream open at that moment gets
# SHUTDOWN_GRACE_S to finish (its event was cut short by the page's heartbeat ending), then it is cancelled.
PROMPT_S = server.SHUTDOWN_GRACE_S + 1.5


def test_ctrl_c_stops_the_server_at_once_with_the_train_tab_open(page, tmp_path):
    """SIGTERM takes the same path (uvicorn handles both), which every browser test's teardown takes."""
    app = start_app(tmp_path / "runs", log_dir=tmp_path)
    try:
        ui = UI(page, app)
        ui.open("Train")
        page.wait_for_timeout(1000)  # the page's streams are open and its timers have ticked
        asked = time.monotonic()
        app.process.send_signal(signal.SIGINT)
        code = app.process.wait(timeout=30)
        took = time.monotonic() - asked
    finally:
        app.stop()
    log = app.log_tail()
    assert took < PROMPT_S, f"stopping took {took:.1f} s with a page open:\n{log}"
    assert "Traceback" not in log, log
    assert code == 0 and "GRPO Workbench stopped" in log, log
