"""gradio_compat.cheap_skips: an output an event leaves unchanged costs nothing, and the page gets what Gradio sends.

Each case runs the same events on two apps, one as the workbench builds it
(with cheap_skips) and one with Gradio's own postprocessing put back, and
compares every answer the page would get.
"""

import json
import os
import re

import gradio as gr
from app_events import Page, find_event
from gradio import state_holder
from helpers import STEPS, append_step

from workbench.runstore import runfolder
from workbench.ui import gradio_compat
from workbench.ui.app import build_app

# What Gradio answers for a skipped output (an HTML component's answer also has empty props).
SKIP_ANSWERS = ({"__type__": "update"}, {"props": {"__type__": "update"}, "__type__": "update"})


def without_clock(value):
    """The progress bar's elapsed seconds differ between two apps asked a moment apart."""
    return re.sub(r'data-elapsed="[^"]*"', "", value) if isinstance(value, str) else value


def gradio_own(app: gr.Blocks) -> gr.Blocks:
    del app.postprocess_data  # the instance's patch: the class's method answers again
    return app


def components_built(monkeypatch) -> list:
    """Block ids Gradio stores a new component for in a session, from the moment it is called."""
    built = []
    real = state_holder.SessionState._update_config

    def counted(self, block_id):
        built.append(block_id)
        return real(self, block_id)

    monkeypatch.setattr(state_holder.SessionState, "_update_config", counted)
    return built


def test_train_tab_answers_are_gradio_s_and_skips_build_nothing(tmp_path, monkeypatch):
    run_dir = tmp_path / "runs" / "20260101-000000-demo"
    run_dir.mkdir(parents=True)
    (run_dir / runfolder.CONFIG_FILE).write_text(json.dumps({"model": "tiny", "task": "demo", "num_generations": 4}))
    runfolder.update_status(
        run_dir, state="training", step=0, total_steps=STEPS * 2, started_at=1000.0, pid=os.getpid()
    )
    for step in range(1, 4):
        append_step(run_dir, step)
    apps = {"patched": build_app(tmp_path / "runs"), "gradio": gradio_own(build_app(tmp_path / "runs"))}
    pages = {name: Page(app) for name, app in apps.items()}
    events = {
        name: {event: find_event(app, "workbench.ui.train_tab", event) for event in ("on_load", "on_refresh")}
        for name, app in apps.items()
    }
    built = components_built(monkeypatch)
    answers: dict = {name: [] for name in apps}
    skips_built: dict = {}

    def both(event: str, inputs: list) -> None:
        for name in apps:
            del built[:]
            answer = pages[name].run(events[name][event], inputs)
            answers[name].append(answer["data"])
            skipped = {
                events[name][event].outputs[i]._id for i, value in enumerate(answer["data"]) if value in SKIP_ANSWERS
            }
            skips_built[name] = skipped & set(built)

    both("on_load", [None, 0.5])
    both("on_refresh", [None, None, 0.5])  # nothing new: most outputs are skipped
    assert skips_built["gradio"], "Gradio no longer builds a component for a skip: cheap_skips can go"
    assert skips_built["patched"] == set()
    append_step(run_dir, 4)
    both("on_refresh", [None, None, 0.5])
    assert skips_built["patched"] == set()
    for ours, theirs in zip(answers["patched"], answers["gradio"]):
        assert [without_clock(value) for value in ours] == [without_clock(value) for value in theirs]
    assert {"__type__": "update"} in answers["patched"][1]  # skips there were


def test_a_single_skip_and_a_state_s_skip_are_answered_as_gradio_does():
    def build() -> tuple[gr.Blocks, list]:
        with gr.Blocks() as app:
            text, number, state = gr.Textbox(), gr.Number(), gr.State(5)
            button = gr.Button()
            button.click(lambda: gr.skip(), outputs=[text, number, state])
            button.click(lambda: {text: "changed"}, outputs=[text, number, state])
            button.click(lambda: ["a", gr.skip(), gr.skip()], outputs=[text, number, state])
        return app, [fn for fn in app.fns.values()]

    patched, patched_events = build()
    gradio_compat.cheap_skips(patched)
    plain, plain_events = build()
    for ours, theirs in zip(patched_events, plain_events):
        assert Page(patched).run(ours, [])["data"] == Page(plain).run(theirs, [])["data"]
