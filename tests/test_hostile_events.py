"""Hostile input in every event of every tab, and hostile text inside a run's own files.

The app is built as `app.py` builds it, on a runs folder holding one run
whose config, metrics and completions carry markup, huge and odd unicode
text (as a crafted or corrupted run folder would). Then every event handler
of every tab is called the way Gradio calls it: first with each input's
starting value, then with each hostile value (and the run's id) in each input
the browser sends, one at a time, after Gradio's own reading of it (each
component's `preprocess`, which already refuses some: a slider value out of
its range, a choice off the list). A handler may refuse with a message
(`gr.Error` is one); it may never raise anything else, and no HTML or
Markdown it returns may carry a live tag.

The Setup form's fields feed several events (plan, preview, smoke test,
export, launch) through one reader, `config_from_values`; each field's
hostile values are walked through it once, by tests/test_hostile_input.py,
so here those fields keep their starting values.
"""

from __future__ import annotations

import inspect
import json
import shutil

import gradio as gr
import pytest
from gradio.helpers import special_args
from helpers import HOSTILE

from workbench.jobs import launcher, signal_job
from workbench.modeltools import probes
from workbench.runstore import runfolder
from workbench.spec.config import RunConfig
from workbench.trainer.recorder import completion_records
from workbench.ui.app import build_app

pytestmark = [
    pytest.mark.slow,
    # a dropdown handed a value off its list says so in a warning carrying the value (10 MB)
    pytest.mark.filterwarnings("ignore::UserWarning"),
]

RUN_ID = "20261123-000000-hostile"
MARKUP = HOSTILE["markup"]
ODD_TEXTS = [MARKUP, HOSTILE["unicode"], "y" * 200_000, "", "line\n" * 500, "```\n<b>fenced</b>\n```"]
LIVE_TAGS = ("<script", "<img")
# Gradio events a browser cannot feed: a State lives on the server.
SERVER_SIDE = (gr.State,)
# The hostile run as a page offers it (a run picker's choice, a runs-to-compare selection).
OFFERED = (RUN_ID, [RUN_ID])
CHOICES = (gr.Dropdown, gr.CheckboxGroup, gr.Radio)


def write_hostile_run(runs_dir) -> None:
    """A finished 3-step run whose texts are hostile: run name, reward names, prompts and completions."""
    run_dir = runs_dir / RUN_ID
    if run_dir.is_dir():
        return
    run_dir.mkdir(parents=True)
    config = RunConfig.for_task("demo", model="tiny", run_name=MARKUP).to_dict()
    config["reward_names"] = [MARKUP, "brevity"]
    (run_dir / runfolder.CONFIG_FILE).write_text(json.dumps(config))
    runfolder.write_json_atomic(
        run_dir / runfolder.STATUS_FILE,
        {
            "state": "failed",
            "step": 3,
            "total_steps": 3,
            "started_at": 1_700_000_000.0,
            "updated_at": 1_700_000_100.0,
            "pid": None,
            "error": {"message": MARKUP, "hint": MARKUP, "type": MARKUP},
        },
    )
    (run_dir / runfolder.LOG_FILE).write_text(f"{MARKUP}\n" * 20)
    for step in (1, 2, 3):
        runfolder.append_jsonl(
            run_dir / runfolder.METRICS_FILE,
            [
                {
                    "step": step,
                    "loss": 0.1,
                    "kl": 0.01 * step,
                    "reward": 0.3 * step,
                    "reward_std": 0.2,
                    "completions/mean_length": 8.0,
                    f"rewards/{MARKUP}/mean": 0.5,
                    "step_time": 1.0,
                }
            ],
        )
        count = len(ODD_TEXTS)
        logs = {
            "prompt": [MARKUP] * (count // 2) + [HOSTILE["unicode"]] * (count - count // 2),
            "completion": ODD_TEXTS,
            "advantages": [(-1) ** i * 0.5 for i in range(count)],
            "rewards": {MARKUP: [0.5, float("nan"), float("inf"), 1.0, 0.0, 2.0], "brevity": [1.0] * count},
        }
        runfolder.append_jsonl(
            run_dir / runfolder.COMPLETIONS_FILE,
            completion_records(logs, step, count // 2, [1.0, 1.0], [8] * count, [False] * count),
        )


@pytest.fixture(scope="module")
def runs_dir(tmp_path_factory):
    runs = tmp_path_factory.mktemp("hostile-events") / "runs"
    write_hostile_run(runs)
    return runs


@pytest.fixture(scope="module")
def app(runs_dir):
    return build_app(runs_dir)


def events(app) -> list:
    return [fn for fn in app.fns.values() if fn.fn is not None]


def starting_values(fn) -> list:
    return [getattr(component, "value", None) for component in fn.inputs]


def collect(result, limit: int = 50) -> list:
    """The outputs of one call; a generator (a streaming handler) is followed to its end."""
    if inspect.isgenerator(result):
        return [item for _, item in zip(range(limit), result)]
    return [result]


def html_outputs(fn, outputs) -> list[str]:
    """The text of every HTML or Markdown output in one answer of `fn`."""
    texts = []
    for output in outputs:
        if isinstance(output, dict):
            pairs = list(output.items())
        else:
            values = list(output) if isinstance(output, (list, tuple)) and len(fn.outputs) > 1 else [output]
            pairs = list(zip(fn.outputs, values))
        for component, value in pairs:
            if isinstance(component, (gr.HTML, gr.Markdown)):
                value = getattr(value, "value", value)
                if isinstance(value, dict):
                    value = value.get("value")
                texts.append("" if value is None else str(value))
    return texts


def clean_up(runs_dir, outputs) -> None:
    """Cancel sampling jobs an answer started and signal checks; stop and remove runs a launch started."""
    for output in outputs:
        for value in (
            output.values() if isinstance(output, dict) else output if isinstance(output, (list, tuple)) else [output]
        ):
            if isinstance(value, probes.ProbeJob):
                probes.cancel_job(value)
            if isinstance(value, signal_job.SignalJob):
                signal_job.cancel_signal_check(value)
    for run_dir in runfolder.list_run_dirs(runs_dir):
        if run_dir.name != RUN_ID:
            launcher.stop(run_dir.name, runs_dir, timeout=20)
            shutil.rmtree(run_dir, ignore_errors=True)
    write_hostile_run(runs_dir)  # a Delete may have taken it


class RefusedByGradio(Exception):
    """Gradio's own reading of the input refused it before any handler ran."""


def as_gradio_gives(fn, values: list) -> list:
    """The values a handler receives for what the browser sent: each input read by its component."""
    if not fn.preprocess:
        return list(values)
    given = []
    for component, value in zip(fn.inputs, values):
        if isinstance(component, SERVER_SIDE) or (isinstance(component, CHOICES) and value in OFFERED):
            given.append(value)  # a State is never sent; the run's id is among the choices its page was given
            continue
        try:
            given.append(component.preprocess(value))
        except Exception as exc:
            raise RefusedByGradio(f"{type(component).__name__}: {exc}") from exc
    return given


def call(fn, values: list, runs_dir) -> list:
    try:
        given = as_gradio_gives(fn, values)
    except RefusedByGradio:
        return []
    args, *_ = special_args(fn.fn, given, request=None)
    try:
        outputs = collect(fn.fn(*args))
    except gr.Error:
        return []  # a refusal Gradio shows as a message
    clean_up(runs_dir, outputs)
    return outputs


def test_the_app_has_the_events_this_test_walks(app):
    names = {fn.name for fn in events(app)}
    assert {"on_launch", "on_pick", "on_answer", "delete", "update_calculator"} <= names, names


def setup_form(app) -> set[int]:
    """The Setup form's fields (as ids): the inputs of its live plan event."""
    plans = [fn for fn in events(app) if fn.name == "live_plan"]  # setup_tab.update_plan for the event's user
    assert len(plans) == 1
    return {id(component) for component in plans[0].inputs}


@pytest.mark.parametrize("tab", ["Calculator", "Setup", "Train", "Compare", "Runs", "Explore", "page"])
def test_every_event_survives_hostile_values(app, runs_dir, tab):
    form = setup_form(app)
    walked = 0
    for fn in events(app):
        if tab_of(fn) != tab:
            continue
        walked += 1
        start = starting_values(fn)
        cases = [("starting values", start)]
        for slot, component in enumerate(fn.inputs):
            if isinstance(component, SERVER_SIDE) or id(component) in form:
                continue
            for label, value in [*HOSTILE.items(), ("the hostile run's id", RUN_ID), ("the hostile run", [RUN_ID])]:
                cases.append(
                    (f"input {slot} ({type(component).__name__}) = {label}", [*start[:slot], value, *start[slot + 1 :]])
                )
        for case, values in cases:
            try:
                outputs = call(fn, values, runs_dir)
            except Exception as exc:  # the test's point: name the event and the value that broke through
                pytest.fail(f"{tab} event {fn.name}, {case}: {type(exc).__name__}: {str(exc)[:300]}")
            for text in html_outputs(fn, outputs):
                assert not any(tag in text for tag in LIVE_TAGS), f"{tab} event {fn.name}, {case}: live markup"
    assert walked or tab == "page", f"no event found for the {tab} tab"


def tab_of(fn) -> str:
    """The tab an event's handler was written in, from its module; `page` for the app's own events."""
    module = getattr(inspect.unwrap(fn.fn), "__module__", "") or ""
    for label in ("calculator", "setup", "train", "compare", "runs"):
        if module.endswith(f"ui.{label}_tab"):
            return label.capitalize()
    if module.endswith("ui.explorer_tab"):
        return "Explore"
    return "page"


def test_group_cards_of_the_hostile_run_show_its_text_escaped(app, runs_dir):
    picks = [fn for fn in events(app) if fn.name == "on_pick"]
    assert picks
    fn = picks[0]
    values = starting_values(fn)
    values[0] = RUN_ID
    outputs = call(fn, values, runs_dir)
    html = "\n".join(html_outputs(fn, outputs))
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html  # shown, as text
    assert HOSTILE["unicode"].strip() in html
