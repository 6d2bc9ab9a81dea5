"""Gradio patches on the server side: the queue's idle sleeps, skipped outputs, open streams at shutdown, route
timing, figures for gr.Plot, the check of every event's inputs, the upload route and the wrapping of handlers.

Each patch's why, touches, gone_when and without are in gradio_compat_patches.PATCHES; each `*_problem`
function here is its check, and the patch is applied only when the check finds nothing missing.
"""

from __future__ import annotations

import functools
import inspect
import os
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from workbench.ui.gradio_compat.gradio_compat_patches import (
    WRITTEN_FOR,
    GradioChanged,
    code_reads,
    installed_version,
    nested_code,
    optional_module,
    parameter_names,
    ready,
)

if TYPE_CHECKING:  # imported where used: sign_in.py's pure rules and the checks' tests load this module cheaply
    import gradio as gr


# ---- quiet_queue -------------------------------------------------------------------------------------

# Seconds Gradio's queue sleeps between looks at an empty queue (its defaults: 0.001 and 0.01).
QUEUE_IDLE_SLEEP_S = 0.02
QUEUE_SLEEPS = {"sleep_when_free": "start_processing", "progress_update_sleep_when_free": "start_progress_updates"}


def quiet_queue_problem(blocks: gr.Blocks) -> str | None:
    """What is missing for `quiet_queue` on `blocks` (None: nothing)."""
    queue = getattr(blocks, "_queue", None)
    if queue is None:
        return "gr.Blocks has no _queue"
    for attribute, loop in QUEUE_SLEEPS.items():
        if not isinstance(getattr(queue, attribute, None), (int, float)):
            return f"Gradio's queue has no number {attribute}"
        if not code_reads(getattr(type(queue), loop, None), attribute):
            return f"Queue.{loop} no longer reads {attribute}"
    return None


def quiet_queue(blocks: gr.Blocks, idle_sleep_s: float = QUEUE_IDLE_SLEEP_S) -> None:
    """Make the queue's idle loops wake every `idle_sleep_s` instead of every millisecond."""
    if not ready("quiet_queue", quiet_queue_problem(blocks)):
        return
    for attribute in QUEUE_SLEEPS:  # gradio has no setting for these two sleeps
        setattr(blocks._queue, attribute, idle_sleep_s)


# ---- stream_stop -------------------------------------------------------------------------------------


def stream_stop_problem(gradio_app) -> str | None:
    """What is missing for `stop_streams` on the mounted Gradio app (None: nothing)."""
    import asyncio

    if not isinstance(getattr(gradio_app, "stop_event", None), asyncio.Event):
        return "the Gradio app has no asyncio.Event stop_event"
    create_app = getattr(type(gradio_app), "create_app", None)
    heartbeat = nested_code(create_app.__code__, "heartbeat") if hasattr(create_app, "__code__") else None
    stream = nested_code(heartbeat, "iterator") if heartbeat is not None else None
    if stream is None or "stop_event" not in stream.co_names:
        return "App.create_app's heartbeat stream no longer waits on stop_event"
    return None


def stop_streams(gradio_app, loop) -> None:
    """End every open page's heartbeat stream (call from any thread, a signal handler included, with the
    event loop that serves the app)."""
    if ready("stream_stop", stream_stop_problem(gradio_app)):
        loop.call_soon_threadsafe(gradio_app.stop_event.set)


# ---- cheap_skips -------------------------------------------------------------------------------------


def cheap_skips_problem(blocks: gr.Blocks) -> str | None:
    """What is missing for `cheap_skips` on `blocks` (None: nothing)."""
    from gradio import blocks as gradio_blocks
    from gradio import components

    method = getattr(type(blocks), "postprocess_data", None)
    if not inspect.iscoroutinefunction(method) or parameter_names(method) != [
        "self",
        "block_fn",
        "predictions",
        "state",
    ]:
        return "Blocks.postprocess_data(self, block_fn, predictions, state) is no longer that coroutine"
    if not code_reads(method, "FINISHED_ITERATING"):
        return "Blocks.postprocess_data no longer passes over an output marked FINISHED_ITERATING"
    if getattr(getattr(components, "_Keywords", None), "FINISHED_ITERATING", None) is None:
        return "gradio.components._Keywords.FINISHED_ITERATING is gone"
    for function, parameters in (
        ("postprocess_update_dict", ["block", "update_dict", "postprocess"]),
        ("convert_component_dict_to_list", ["outputs", "predictions"]),
    ):
        if parameter_names(getattr(gradio_blocks, function, None)) != parameters:
            return f"gradio.blocks.{function}({', '.join(parameters)}) is gone"
    events = events_problem(blocks)
    if events:
        return events
    for block_fn in blocks.fns.values():
        for block in getattr(block_fn, "outputs", None) or ():
            if not hasattr(block, "_id") or not hasattr(block, "stateful"):
                return f"an output component ({type(block).__name__}) has no _id or stateful"
    return None


def cheap_skips(blocks: gr.Blocks) -> None:
    """Make an output an event leaves unchanged (`gr.skip()`, or left out of the dict it returns) cost nothing.

    Gradio 6.31 treats such an output as an empty update: it builds the
    component anew and its config for the session, for an answer that says
    only "unchanged". A Train tab refresh leaves most of its outputs alone,
    so skips were a large part of its server time. Here a bare
    skip takes Gradio's path for a finished generator's output (nothing
    built, nothing stored) and its answer is then put back: the page gets
    exactly what Gradio sends for a skip (tests/test_cheap_skips.py compares
    the two on the Train tab's events).
    """
    if not ready("cheap_skips", cheap_skips_problem(blocks)):
        return
    import gradio as gr
    from gradio import components
    from gradio.blocks import convert_component_dict_to_list, postprocess_update_dict

    original = type(blocks).postprocess_data
    answers: dict[int, dict] = {}  # block id -> Gradio's answer for its skip (the same every time)

    def skip_answer(block) -> dict:
        if block._id not in answers:
            answers[block._id] = postprocess_update_dict(block=block, update_dict=gr.skip(), postprocess=False)
        return dict(answers[block._id])

    async def postprocess_data(block_fn, predictions, state):
        outputs = list(block_fn.outputs)
        if len(outputs) > 1 and isinstance(predictions, dict) and predictions == gr.skip():
            predictions = [gr.skip() for _ in outputs]  # one skip for every output, as Gradio reads it
        elif isinstance(predictions, dict) and len(predictions) > 0:
            predictions = convert_component_dict_to_list(outputs, predictions)
        skipped = []
        if isinstance(predictions, list) and len(outputs) > 1 and len(predictions) == len(outputs):
            # a State's skip already costs nothing, and Gradio answers it with None
            skipped = [
                i
                for i, value in enumerate(predictions)
                if isinstance(value, dict) and value == gr.skip() and not outputs[i].stateful
            ]
            predictions = [
                components._Keywords.FINISHED_ITERATING if i in skipped else value
                for i, value in enumerate(predictions)
            ]
        output = await original(blocks, block_fn, predictions, state)
        for i in skipped:
            output[i] = skip_answer(outputs[i])
        return output

    blocks.postprocess_data = postprocess_data


# ---- route_timing ------------------------------------------------------------------------------------

PROFILING_ENV = "GRADIO_PROFILING"
TRACE_FIELDS = ("fn_name", "fn_call_ms", "total_ms")


def route_timing_problem(profiling) -> str | None:
    """What is missing in `gradio.profiling` (the module, or None) to list a route's time (None: nothing)."""
    if profiling is None:
        return "gradio.profiling is gone"
    fields = set(getattr(getattr(profiling, "RequestTrace", None), "__dataclass_fields__", {}))
    if not set(TRACE_FIELDS) <= fields:
        return f"gradio.profiling.RequestTrace has no {', '.join(TRACE_FIELDS)}"
    if not callable(getattr(getattr(profiling, "collector", None), "add", None)):
        return "gradio.profiling.collector.add is gone"
    return None


def route_timing_on() -> bool:
    """True when Gradio's profiling is on and the page's routes can join its traces."""
    profiling = optional_module("gradio.profiling")
    enabled = getattr(profiling, "PROFILING_ENABLED", None)
    if enabled is False or (enabled is None and not os.environ.get(PROFILING_ENV)):
        return False  # nobody asked for profiling: nothing to check
    return ready("route_timing", route_timing_problem(profiling))


def add_route_trace(path: str, milliseconds: float) -> None:
    """List one answer of the route `path`, which took `milliseconds`, among Gradio's traces."""
    from gradio import profiling

    trace = profiling.RequestTrace(fn_name=path)
    trace.fn_call_ms = trace.total_ms = milliseconds
    profiling.collector.add(trace)


# ---- plot_data ---------------------------------------------------------------------------------------


@functools.cache
def plot_data_problem() -> str | None:
    """What is missing for handing gr.Plot a figure's JSON as it is (None: nothing)."""
    import gradio as gr

    plot_data = getattr(optional_module("gradio.components.plot"), "PlotData", None)
    if plot_data is None:
        return "gradio.components.plot.PlotData is gone"
    try:
        value = plot_data(type="plotly", plot="{}")
        passed = gr.Plot().postprocess(value) is value
    except Exception as exc:  # noqa: BLE001 (any change in its shape means the same: not usable)
        return f"gradio.components.plot.PlotData(type, plot) no longer builds ({exc})"
    return None if passed else "gr.Plot.postprocess no longer passes a PlotData through"


def plotly_value(plot_json: str) -> Any:
    """A value for gr.Plot from a plotly figure's JSON: Gradio's PlotData as it is, else a plotly Figure."""
    if ready("plot_data", plot_data_problem()):
        from gradio.components.plot import PlotData

        return PlotData(type="plotly", plot=plot_json)
    import plotly.io

    return plotly.io.from_json(plot_json)


# ---- browser_files -----------------------------------------------------------------------------------


def upload_folder() -> str:
    """Where Gradio's upload route puts what the browser sends."""
    return optional_module("gradio.utils").get_upload_folder()


def guard_inputs_problem(blocks: gr.Blocks) -> str | None:
    """What is missing for checking every event's inputs before Gradio reads them (None: nothing)."""
    utils = optional_module("gradio.utils")
    if not callable(getattr(utils, "get_upload_folder", None)):
        return "gradio.utils.get_upload_folder is gone"
    method = getattr(type(blocks), "preprocess_data", None)
    if method is None or parameter_names(method)[:5] != ["self", "block_fn", "inputs", "state", "explicit_call"]:
        return "Blocks.preprocess_data(block_fn, inputs, state, explicit_call) changed"
    if not code_reads(type(blocks).process_api, "preprocess_data"):
        return "Blocks.process_api no longer reads an event's inputs through preprocess_data"
    return None


def guard_inputs(blocks: gr.Blocks, refusal: Callable[[Any], str | None], required: bool) -> None:
    """Refuse every event from a browser whose inputs `refusal(inputs)` objects to, before Gradio reads them.

    `required` (a dashboard with accounts): a Gradio where this cannot be done
    raises GradioChanged instead of serving without the check.
    """
    import gradio as gr

    problem = guard_inputs_problem(blocks)
    if problem and required:
        raise GradioChanged(
            f"Gradio {installed_version()} is installed; the workbench was written for Gradio "
            f"{WRITTEN_FOR}. Patch 'browser_files' cannot be applied: {problem}, so a crafted "
            "event could read any file; a dashboard with accounts does not start without it"
        )
    if not ready("browser_files", problem):
        return
    original = blocks.preprocess_data

    async def preprocess_data(block_fn, inputs, state, explicit_call: bool = False):
        if not explicit_call:  # a call from Python, not from a browser, passes as in Gradio
            refused = refusal(inputs)
            if refused:
                raise gr.Error(refused, print_exception=False)
        return await original(block_fn, inputs, state, explicit_call)

    blocks.preprocess_data = preprocess_data


# ---- upload_quota ------------------------------------------------------------------------------------

UPLOAD_ROUTE = "/upload"  # Gradio's upload route, under its API prefix: POST multipart "files", answers their paths


def upload_route_problem() -> str | None:
    """What is missing for holding Gradio's upload route to a per-user quota (None: nothing)."""
    from gradio.routes import App

    if not isinstance(getattr(optional_module("gradio.route_utils"), "API_PREFIX", None), str):
        return "gradio.route_utils.API_PREFIX is gone"
    code = getattr(getattr(App, "create_app", None), "__code__", None)
    upload = nested_code(code, "upload_file") if code is not None else None
    if (
        upload is None
        or UPLOAD_ROUTE not in code.co_consts
        or not {"upload_fn", "uploaded_file_dir"} <= set(upload.co_names)
    ):
        return f"App.create_app no longer serves POST {UPLOAD_ROUTE} through upload_fn into uploaded_file_dir"
    return None


def upload_route() -> str | None:
    """The path of Gradio's upload route in an app mounted at "" (`/gradio_api/upload`); None (warned once) when
    the installed Gradio's route is not the one this was written for."""
    if not ready("upload_quota", upload_route_problem()):
        return None
    return optional_module("gradio.route_utils").API_PREFIX + UPLOAD_ROUTE


# ---- refusal_messages --------------------------------------------------------------------------------


def events_problem(blocks: gr.Blocks) -> str | None:
    """What is missing for reading and replacing the handlers of `blocks`' events (None: nothing)."""
    fns = getattr(blocks, "fns", None)
    if not isinstance(fns, Mapping):
        return "gr.Blocks.fns is no longer a mapping of its events"
    if not code_reads(type(blocks).call_function, "fns", "fn"):
        return "Blocks.call_function no longer calls the handler it finds in fns"
    if not all(hasattr(block_fn, "fn") for block_fn in fns.values()):
        return "an event of gr.Blocks.fns has no fn"
    return None


def wrap_handlers(blocks: gr.Blocks, wrap: Callable[[Callable], Callable]) -> None:
    """Replace every event handler `fn` of `blocks` with `wrap(fn)`, where Gradio looks for it when it runs."""
    if not ready("refusal_messages", events_problem(blocks)):
        return
    for block_fn in blocks.fns.values():
        if block_fn.fn is not None:
            block_fn.fn = wrap(block_fn.fn)
