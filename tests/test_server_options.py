"""How ui/server.py mounts Gradio: options a page receives in its config."""

from __future__ import annotations

import gradio as gr
import pytest
from fastapi.testclient import TestClient

from workbench.ui import server


def served_config() -> dict:
    api = server.server_app(gr.Blocks(), "127.0.0.1", 7860)
    return TestClient(api, base_url="http://127.0.0.1:7860").get("/config").json()


def test_the_page_keeps_no_run_history(monkeypatch):
    """Gradio 6's run history rewrote a JSON list of the last 100 events in localStorage at every event:
    a Setup-tab round took 23.5 s with it against 7.8 s without (benchmarks/bench_page_events.py)."""
    monkeypatch.delenv("GRADIO_RUN_HISTORY", raising=False)
    assert served_config()["run_history"] is False


@pytest.mark.parametrize(("setting", "recorded"), [("true", True), ("false", False)])
def test_gradio_s_own_switch_still_decides_when_set(monkeypatch, setting, recorded):
    monkeypatch.setenv("GRADIO_RUN_HISTORY", setting)
    assert served_config()["run_history"] is recorded
