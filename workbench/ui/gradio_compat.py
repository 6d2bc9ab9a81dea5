"""Every tie to Gradio's internals, in one place, each checked against the installed Gradio before it is used.

Written for Gradio 6.31.0 (`WRITTEN_FOR`, the version requirements.txt pins).
The dashboard reaches past Gradio's public API only here, in the patches that
`PATCHES` lists: what each one is for, what it touches, how to tell it is no
longer needed, and what the dashboard does without it. Before a patch is
applied its target is checked (the attribute or function is there with the
shape and the use the patch relies on, read from Gradio's code objects and
built page scripts, not from its version number). When a target is gone or
changed, one `GradioChanged` warning names the patch, the installed and the
expected Gradio version and what changes without it, and Gradio's own
behaviour is kept: a patch is either applied to what it was written for or
not applied, never applied to nothing.

tests/test_gradio_compat.py runs every check against the installed Gradio
and each patch on Gradio's own code path, so an upgrade that moves a target
fails there first; tests/test_architecture.py keeps every other module of the
package to Gradio's public API (the rule: ARCHITECTURE.md).
"""

from __future__ import annotations

import functools
import hmac
import importlib
import inspect
import json
import os
import re
import warnings
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # imported where used: sign_in.py's pure rules and the checks' tests load this module cheaply
    import gradio as gr

# The Gradio every patch below was written for and checked against: requirements.txt's pin.
WRITTEN_FOR = "6.31.0"

# The attributes of Gradio's objects without a leading "_" that this module touches and no other module may
# (on anything but `self`): the architecture test reads this tuple from the source. A new tie joins it here.
INTERNAL_ATTRIBUTES = ("fns", "postprocess_data", "preprocess_data", "sleep_when_free",
                       "progress_update_sleep_when_free", "tokens", "cookie_id", "auth", "auth_dependency", "stop_event")


def installed_version() -> str:
    """The installed Gradio's version, from its package metadata."""
    try:
        return metadata.version("gradio")
    except metadata.PackageNotFoundError:
        return "unknown"


@dataclass(frozen=True)
class Patch:
    """One reach past Gradio's public API: why, what it touches, when it can go, and life without it."""

    name: str
    why: str
    touches: str
    gone_when: str
    without: str


PATCHES = {patch.name: patch for patch in (
    Patch("quiet_queue",
          why="Gradio's queue waits for work by sleeping 1 ms at a time in its event loop and 10 ms in its "
              "progress loop: about 1,100 wake-ups a second, 9% of a core for a server with no page open. "
              "Here both sleep 20 ms; an event waits at most 20 ms longer to start.",
          touches="Blocks._queue.sleep_when_free and .progress_update_sleep_when_free, read by "
                  "Queue.start_processing and Queue.start_progress_updates",
          gone_when="Gradio's queue waits on an event instead of polling, or takes these sleeps as a setting "
                    "(bench_launch_path.py then shows no idle cost with the patch off)",
          without="the queue polls every millisecond again (about 9% of a core on an idle server)"),
    Patch("cheap_skips",
          why="Gradio 6.31 builds a component anew (and its session config, about 1.5 ms) for every output an "
              "event leaves unchanged; a Train tab refresh skips most of its outputs. A bare skip takes Gradio's "
              "path for a finished generator's output and its answer is put back as Gradio sends it.",
          touches="Blocks.postprocess_data (wrapped on the app), gradio.blocks.postprocess_update_dict and "
                  "convert_component_dict_to_list, components._Keywords.FINISHED_ITERATING, Block._id, "
                  "Block.stateful",
          gone_when="tests/test_cheap_skips.py fails with \"Gradio no longer builds a component for a skip\"",
          without="every skipped output costs its 1.5 ms again; the page gets the same answers"),
    Patch("frame_throttle",
          why="Gradio 6.31's page keeps one status tracker's elapsed-time clock asking for every animation "
              "frame after its component stopped being pending: an idle page draws 60 frames a second (8-10% "
              "of a core in Chromium). A script served first in the page runs that clock 4 times a second.",
          touches="the clock callback in gradio/templates/frontend/assets/statustracker-*.js, "
                  "()=>{F(Pe,(performance.now()-w(de))/1e3),W&&ze()} in 6.31, recognised by its length and text",
          gone_when="an idle page draws under 10 frames a second with nothing slowed "
                    "(tests/test_ui_polling_browser.py's frame test then fails on `slowed`)",
          without="an idle dashboard page draws 60 frames a second again"),
    Patch("plot_redraws",
          why="Gradio 6.31's gr.Plot draws each new figure in a new div (a new value re-creates its keyed plot), "
              "after asking the div it is about to drop to draw the same figure with Plotly.react: every update "
              "was drawn twice, and a Train tab refresh redraws five figures. A script served first in the page "
              "wraps Plotly.react when Gradio's plotly script sets window.Plotly: a react on a div that already "
              "shows a figure waits for the current task to end, and is left out when the div has left the page.",
          touches="window.Plotly, which gradio/templates/frontend/assets/PlotlyPlot-*.js sets (`window.Plotly=`) "
                  "and whose react draws a gr.Plot",
          gone_when="Gradio's Plot keeps its div across values (window.wbPlotRedraws.dropped then stays 0 while a "
                    "Train tab refresh redraws its figures: tests/test_ui_polling_browser.py)",
          without="each new figure is drawn twice again (the Train tab's refresh costs the browser about a third "
                  "more)"),
    Patch("sign_in",
          why="Gradio's own /login checks passwords on the event loop, has no limit on wrong passwords, keeps a "
              "session until the server restarts and signs out on a GET; ui/sign_in.py answers /login and "
              "/logout instead and keeps the sessions where every Gradio route reads them.",
          touches="App.tokens (replaced by access.sessions.SessionTokens), App.auth, App.auth_dependency, the "
                  "access-token-<App.cookie_id> cookies Gradio's get_current_user reads, and the login page's "
                  "form (username and password posted to `login`; 400 wrong, 200 signed in)",
          gone_when="Gradio's own sign-in checks passwords off the event loop, limits attempts, expires "
                    "sessions and signs out by POST only (tests/test_sign_in_server.py against it)",
          without="Gradio's own sign-in serves: sessions last until the server restarts, no wait after wrong "
                  "passwords, and sign-out is Gradio's GET /logout"),
    Patch("login_messages",
          why="the login page shows the wait after too many wrong passwords (sign_in.PAGE_JS) next to the "
              "page's own message, and hides Gradio's \"Incorrect Credentials\" of the attempt before",
          touches="the login page's <p class=\"auth\"> and <p class=\"creds\"> in "
                  "gradio/templates/frontend/assets/Login-*.js",
          gone_when="Gradio's login page shows a 429's message itself",
          without="the wait is shown above the form, and an older \"Incorrect Credentials\" may stay beside it"),
    Patch("route_timing",
          why="with Gradio's profiling on, the page's JSON routes are listed beside Gradio's event traces at "
              "/gradio_api/profiling/traces, so a benchmark reads the server's time per poll from the server",
          touches="gradio.profiling.PROFILING_ENABLED, RequestTrace(fn_name, fn_call_ms, total_ms), "
                  "collector.add",
          gone_when="Gradio's profiling times the parent app's routes itself",
          without="only Gradio's own events are timed"),
    Patch("plot_data",
          why="the figures reach gr.Plot as the JSON of plain lists (insight.figures.figure_json), faster than "
              "a plotly Figure's to_json and without building a Figure from a dict",
          touches="gradio.components.plot.PlotData, which gr.Plot.postprocess passes through unchanged",
          gone_when="gr.Plot takes a figure's JSON through its public API",
          without="each figure's JSON is read back into a plotly Figure, which gr.Plot converts again (slower, "
                  "the same picture)"),
    Patch("browser_files",
          why="Gradio refuses a file path it did not receive only in an app started by Blocks.launch() (it "
              "checks when blocks.has_launched, which mount_gradio_app never sets): a crafted event could make "
              "the server copy any file it can read. Every event's inputs are checked before Gradio reads them "
              "(ui/browser_files.py holds the rule).",
          touches="Blocks.preprocess_data(block_fn, inputs, state, explicit_call), wrapped on the app, and "
                  "gradio.utils.get_upload_folder",
          gone_when="Gradio checks the files a mounted app's events name (tests/test_browser_files.py passes "
                    "with the patch off)",
          without="a crafted event could make the server read any file; a dashboard with accounts refuses to "
                  "start"),
    Patch("upload_quota",
          why="Gradio's upload route writes any number of files (each up to max_file_size) from a signed-in page "
              "into its cache; on a shared dashboard each user's uploads through it are held to their upload caps "
              "(access/cache_quota.py, ui/server.py's UploadQuota in front of the route)",
          touches="the route's path (gradio.route_utils.API_PREFIX + \"/upload\", served by App.create_app's "
                  "upload_file through upload_fn into uploaded_file_dir) and its answer, a JSON list of the paths "
                  "written",
          gone_when="Gradio caps what one user may upload in all (then tests/test_upload_quota.py passes with the "
                    "patch off)",
          without="uploads through Gradio's route are capped per file only (max_file_size), not per user"),
    Patch("stream_stop",
          why="every open page keeps a heartbeat stream open, which ends only when App.stop_event is set; "
              "Gradio sets it in Blocks.close(), which a mounted app served by uvicorn never calls, so "
              "Ctrl-C or SIGTERM waited for every open tab to close (ui/server.py sets it when uvicorn is "
              "told to stop)",
          touches="App.stop_event (an asyncio.Event), awaited by the heartbeat route in App.create_app",
          gone_when="a mounted Gradio app ends its streams on the ASGI server's shutdown itself (a served "
                    "page then no longer delays Ctrl-C with the patch off)",
          without="a server with pages open stops after ui/server.SHUTDOWN_GRACE_S, cutting their streams "
                  "off with an error in its log"),
    Patch("refusal_messages",
          why="a WorkbenchError a handler lets through (a value no widget sends but a crafted request can) is "
              "shown as its message instead of Gradio's bare \"Error\"; wrapping every registered handler once "
              "keeps the tabs free of it",
          touches="Blocks.fns and each BlockFunction.fn, which Blocks.call_function calls",
          gone_when="Gradio offers a public hook for an app's exceptions",
          without="such a refusal shows as Gradio's bare \"Error\" (the refusals the tabs expect still show in "
                  "their panels)"),
)}

# Patches found off in this process, and why: each is warned about once, when first found.
OFF: dict[str, str] = {}


class GradioChanged(UserWarning):
    """A patch's target in Gradio is gone or changed: the patch is off and Gradio's own behaviour is kept."""


def ready(name: str, problem: str | None) -> bool:
    """True when patch `name`'s target passed its check (`problem` is None); else warn once and say False."""
    if problem is None:
        return True
    if name not in OFF:
        OFF[name] = problem
        warnings.warn(GradioChanged(
            f"Gradio {installed_version()} is installed; the workbench was written for Gradio {WRITTEN_FOR}. "
            f"Patch {name!r} is off: {problem}. Without it, {PATCHES[name].without}. "
            f"What it was for and when it can go: workbench/ui/gradio_compat.py"), stacklevel=3)
    return False


def frontend_assets() -> Path:
    """The folder of Gradio's built page scripts, as the installed Gradio serves them."""
    import gradio

    return Path(gradio.__file__).resolve().parent / "templates" / "frontend" / "assets"


def _reads(function, *names: str) -> bool:
    """True when `function`'s own code reads (or writes) every attribute in `names`."""
    code = getattr(function, "__code__", None)
    return code is not None and set(names) <= set(code.co_names)


def _nested_code(code, name: str):
    """The code object of the function `name` defined anywhere inside `code` (None when there is none)."""
    for const in code.co_consts:
        if inspect.iscode(const):
            if const.co_name == name:
                return const
            found = _nested_code(const, name)
            if found is not None:
                return found
    return None


def _parameters(function) -> list[str]:
    try:
        return list(inspect.signature(function).parameters)
    except (TypeError, ValueError):
        return []


def _module(name: str):
    try:
        return importlib.import_module(name)
    except ImportError:
        return None


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
        if not _reads(getattr(type(queue), loop, None), attribute):
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
    heartbeat = _nested_code(create_app.__code__, "heartbeat") if hasattr(create_app, "__code__") else None
    stream = _nested_code(heartbeat, "iterator") if heartbeat is not None else None
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
    if not inspect.iscoroutinefunction(method) or \
            _parameters(method) != ["self", "block_fn", "predictions", "state"]:
        return "Blocks.postprocess_data(self, block_fn, predictions, state) is no longer that coroutine"
    if not _reads(method, "FINISHED_ITERATING"):
        return "Blocks.postprocess_data no longer passes over an output marked FINISHED_ITERATING"
    if getattr(getattr(components, "_Keywords", None), "FINISHED_ITERATING", None) is None:
        return "gradio.components._Keywords.FINISHED_ITERATING is gone"
    for function, parameters in (("postprocess_update_dict", ["block", "update_dict", "postprocess"]),
                                 ("convert_component_dict_to_list", ["outputs", "predictions"])):
        if _parameters(getattr(gradio_blocks, function, None)) != parameters:
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
    component anew and its config for the session (about 1.5 ms each), for
    an answer that says only "unchanged". A Train tab refresh leaves most of
    its ~18 outputs alone, so skips were half of its server time. Here a bare
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
            skipped = [i for i, value in enumerate(predictions)
                       if isinstance(value, dict) and value == gr.skip() and not outputs[i].stateful]
            predictions = [components._Keywords.FINISHED_ITERATING if i in skipped else value
                           for i, value in enumerate(predictions)]
        output = await original(blocks, block_fn, predictions, state)
        for i in skipped:
            output[i] = skip_answer(outputs[i])
        return output

    blocks.postprocess_data = postprocess_data


# ---- frame_throttle ----------------------------------------------------------------------------------

# A clock callback is short and reads performance.now() to count seconds: in Gradio 6.31's status tracker
# it is `()=>{F(Pe,(performance.now()-w(de))/1e3),W&&ze()}`. The page script and `is_clock_callback` both
# recognise it by these.
CLOCK_CALLBACK_MAX_CHARS = 120
CLOCK_CALLBACK_MARKS = ("performance.now()", "/1e3")
CLOCK_CALLBACK_SLOWED_MS = 250
STATUS_TRACKER_ASSETS = "statustracker-*.js"

FRAME_THROTTLE_JS = """<script>
(() => {
  const nextFrame = window.requestAnimationFrame.bind(window);
  const state = { slowed: 0, frames: 0 };
  window.wbFrameThrottle = state;
  window.requestAnimationFrame = (callback) => {
    state.frames += 1;
    const source = String(callback);
    if (source.length < %(max_chars)d && %(marks)s) {
      state.slowed += 1;
      return -setTimeout(() => nextFrame(callback), %(slowed_ms)d);
    }
    return nextFrame(callback);
  };
  const cancelFrame = window.cancelAnimationFrame.bind(window);
  window.cancelAnimationFrame = (id) => (id < 0 ? clearTimeout(-id) : cancelFrame(id));
})();
</script>""" % {"max_chars": CLOCK_CALLBACK_MAX_CHARS, "slowed_ms": CLOCK_CALLBACK_SLOWED_MS,
                "marks": " && ".join(f"source.includes({json.dumps(mark)})" for mark in CLOCK_CALLBACK_MARKS)}

# `x=window.requestAnimationFrame` as minified (`typeof window<"u"?window.requestAnimationFrame:...` in 6.31):
# a reference taken when the script loads, which is why the throttle must run before Gradio's scripts.
_FRAME_ALIAS = re.compile(r"([\w$]+)\s*=\s*(?:typeof\s+window\s*[!=<>]+\s*[`'\"]u(?:ndefined)?[`'\"]\s*\?\s*)?"
                          r"window\.requestAnimationFrame\b")
_ARROW_CALL = re.compile(r"([\w$.]+)\(\s*(\(\)\s*=>\s*\{)")


def is_clock_callback(source: str) -> bool:
    """True for a frame callback FRAME_THROTTLE_JS slows (the same test as the page script's)."""
    return len(source) < CLOCK_CALLBACK_MAX_CHARS and all(mark in source for mark in CLOCK_CALLBACK_MARKS)


def clock_callbacks(script: str) -> list[str]:
    """The callbacks `script` hands to requestAnimationFrame that FRAME_THROTTLE_JS slows, as the page sees them."""
    frame_calls = {"requestAnimationFrame", "window.requestAnimationFrame", *_FRAME_ALIAS.findall(script)}
    found = []
    for call in _ARROW_CALL.finditer(script):
        if call.group(1) not in frame_calls:
            continue
        start, depth = call.start(2), 0
        for end in range(call.end(2) - 1, min(len(script), start + CLOCK_CALLBACK_MAX_CHARS)):
            depth += {"{": 1, "}": -1}.get(script[end], 0)
            if depth == 0:
                if is_clock_callback(script[start:end + 1]):
                    found.append(script[start:end + 1])
                break
    return found


@functools.cache
def frame_throttle_problem(assets: Path | None = None) -> str | None:
    """What is missing for the frame throttle in Gradio's built page scripts (None: nothing)."""
    trackers = sorted((assets or frontend_assets()).glob(STATUS_TRACKER_ASSETS))
    if not trackers:
        return f"Gradio's page has no {STATUS_TRACKER_ASSETS}"
    if not any(clock_callbacks(path.read_text(encoding="utf-8", errors="replace")) for path in trackers):
        return "Gradio's status tracker no longer hands requestAnimationFrame the clock callback it slows"
    return None


def frame_throttle_script(assets: Path | None = None) -> str:
    """FRAME_THROTTLE_JS while Gradio's status tracker still has the clock it slows; "" (nothing) otherwise."""
    return FRAME_THROTTLE_JS if ready("frame_throttle", frame_throttle_problem(assets)) else ""


# ---- plot_redraws ------------------------------------------------------------------------------------

PLOTLY_ASSETS = "PlotlyPlot-*.js"

# A react on a div that shows a figure runs after the current task, and only if the div is still in the page:
# Gradio 6.31 asks the div it drops for a new one to draw the new figure first. `deferred` and `dropped` count.
PLOT_REDRAWS_JS = """<script>
(() => {
  const state = { deferred: 0, dropped: 0 };
  window.wbPlotRedraws = state;
  let plotly;
  const wrap = (Plotly) => {
    if (!Plotly || typeof Plotly.react !== "function" || Plotly.wbReact) return;
    const react = Plotly.react;
    Plotly.wbReact = react;
    Plotly.react = function (div, ...figure) {
      if (!div || !div._fullLayout) return react.call(this, div, ...figure);  // a first drawing: at once
      state.deferred += 1;
      return new Promise((resolve, reject) => setTimeout(() => {
        if (!div.isConnected) {
          state.dropped += 1;
          resolve(div);
          return;
        }
        Promise.resolve(react.call(Plotly, div, ...figure)).then(resolve, reject);
      }, 0));
    };
  };
  Object.defineProperty(window, "Plotly", {
    configurable: true, enumerable: true, get: () => plotly, set: (value) => { plotly = value; wrap(value); },
  });
})();
</script>"""


@functools.cache
def plot_redraws_problem(assets: Path | None = None) -> str | None:
    """What is missing for PLOT_REDRAWS_JS in Gradio's built page scripts (None: nothing)."""
    scripts = sorted((assets or frontend_assets()).glob(PLOTLY_ASSETS))
    if not scripts:
        return f"Gradio's page has no {PLOTLY_ASSETS}"
    sources = [path.read_text(encoding="utf-8", errors="replace") for path in scripts]
    if not any(re.search(r"\bwindow\.Plotly\s*=[^=]", source) for source in sources):
        return "Gradio's plotly script no longer sets window.Plotly"
    if not any(".react(" in source for source in sources):
        return "Gradio's plotly script no longer draws a plot with Plotly.react"
    return None


def plot_redraws_script(assets: Path | None = None) -> str:
    """PLOT_REDRAWS_JS while Gradio's plotly script still sets the window.Plotly it wraps; "" otherwise."""
    return PLOT_REDRAWS_JS if ready("plot_redraws", plot_redraws_problem(assets)) else ""


# ---- sign_in and login_messages ----------------------------------------------------------------------

# The cookies that name a session: over HTTPS, then over plain HTTP, each followed by the app's cookie_id.
SESSION_COOKIES = ("access-token-", "access-token-unsecure-")
# The fields the login page posts, and the answers it understands.
LOGIN_FIELDS = ("username", "password")
LOGIN_WRONG_STATUS = 400
# The login page's message under its title, and its "Incorrect Credentials" line (sign_in.PAGE_JS).
LOGIN_MESSAGE_SELECTOR = "p.auth"
LOGIN_WRONG_SELECTOR = "p.creds"
LOGIN_PAGE_ASSETS = "Login-*.js"


def _login_pages(assets: Path | None) -> list[str]:
    return [path.read_text(encoding="utf-8", errors="replace")
            for path in sorted((assets or frontend_assets()).glob(LOGIN_PAGE_ASSETS))]


@functools.cache
def sign_in_problem(assets: Path | None = None) -> str | None:
    """What is missing for ui/sign_in.py to stand in for Gradio's sign-in (None: nothing)."""
    from gradio.routes import App

    if not _reads(App.__init__, "tokens", "auth", "auth_dependency", "cookie_id"):
        return "Gradio's App no longer keeps tokens, auth, auth_dependency and cookie_id"
    reader = _nested_code(App.create_app.__code__, "get_current_user")
    if reader is None or not {"cookies", "cookie_id", "tokens", "get"} <= set(reader.co_names) or \
            not set(SESSION_COOKIES) <= {const for const in reader.co_consts if isinstance(const, str)}:
        return "Gradio's get_current_user no longer reads app.tokens through the access-token-<cookie_id> cookies"
    quote = "[`'\"]"
    page_rules = [rf"append\(\s*{quote}{field}{quote}" for field in LOGIN_FIELDS]
    page_rules += [rf"{quote}login{quote}", rf"status\s*===?\s*{LOGIN_WRONG_STATUS}"]
    if not any(all(re.search(rule, page) for rule in page_rules) for page in _login_pages(assets)):
        return (f"Gradio's login page ({LOGIN_PAGE_ASSETS}) no longer posts {' and '.join(LOGIN_FIELDS)} to login "
                f"and reads {LOGIN_WRONG_STATUS} as a wrong password")
    return None


def own_sign_in(assets: Path | None = None) -> bool:
    """True when ui/sign_in.py can answer /login and /logout in place of Gradio's (checked once)."""
    return ready("sign_in", sign_in_problem(assets))


@functools.cache
def login_messages_problem(assets: Path | None = None) -> str | None:
    """What is missing on Gradio's login page for sign_in.PAGE_JS to place its wait note (None: nothing)."""
    classes = [selector.split(".", 1)[1] for selector in (LOGIN_MESSAGE_SELECTOR, LOGIN_WRONG_SELECTOR)]
    if not any(all(re.search(rf"class=\"{name}\b", page) for name in classes) for page in _login_pages(assets)):
        return f"Gradio's login page no longer shows {LOGIN_MESSAGE_SELECTOR} and {LOGIN_WRONG_SELECTOR}"
    return None


def check_login_messages(assets: Path | None = None) -> bool:
    """True when the login page has the messages sign_in.PAGE_JS places its note by (warns once when not)."""
    return ready("login_messages", login_messages_problem(assets))


def mounted_app(api):
    """Gradio's App that `gr.mount_gradio_app(api, blocks, path="")` mounted on the FastAPI app `api`."""
    return next(route.app for route in api.routes if getattr(route, "path", None) == "")


def keep_sessions_in(gradio_app, tokens: Mapping) -> None:
    """Make every Gradio route of `gradio_app` read its sessions (token -> user name) from `tokens`."""
    gradio_app.tokens = tokens


def session_cookie_names(gradio_app) -> tuple[str, str]:
    """(the session cookie over HTTPS, the one over plain HTTP): the two names Gradio's routes read."""
    return tuple(f"{prefix}{gradio_app.cookie_id}" for prefix in SESSION_COOKIES)


def has_sign_in(gradio_app) -> bool:
    """True when the mounted app asks who is signed in (served with `auth`, or an auth dependency)."""
    return gradio_app.auth is not None or gradio_app.auth_dependency is not None


def session_user(gradio_app, cookies: Mapping[str, str]) -> str | None:
    """The user whose live session the request's `cookies` name, as Gradio's own routes read it; else None."""
    for name in session_cookie_names(gradio_app):
        if cookies.get(name):
            return gradio_app.tokens.get(cookies[name])
    return None


def password_check(gradio_app) -> Callable[[str, str], bool | Awaitable[bool]]:
    """The mounted app's password check: the `auth` function it was served with, or one over its accounts.

    Gradio keeps `auth=[(name, password), ...]` as a dict name -> password;
    the comparison takes the same time whether or not the password matches.
    """
    auth = gradio_app.auth
    if callable(auth):
        return auth

    def matches(name: str, password: str) -> bool:
        expected = (auth or {}).get(name)
        return expected is not None and hmac.compare_digest(password.encode(), str(expected).encode())
    return matches


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
    profiling = _module("gradio.profiling")
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

    plot_data = getattr(_module("gradio.components.plot"), "PlotData", None)
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
    return _module("gradio.utils").get_upload_folder()


def guard_inputs_problem(blocks: gr.Blocks) -> str | None:
    """What is missing for checking every event's inputs before Gradio reads them (None: nothing)."""
    utils = _module("gradio.utils")
    if not callable(getattr(utils, "get_upload_folder", None)):
        return "gradio.utils.get_upload_folder is gone"
    method = getattr(type(blocks), "preprocess_data", None)
    if method is None or _parameters(method)[:5] != ["self", "block_fn", "inputs", "state", "explicit_call"]:
        return "Blocks.preprocess_data(block_fn, inputs, state, explicit_call) changed"
    if not _reads(type(blocks).process_api, "preprocess_data"):
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
        raise GradioChanged(f"Gradio {installed_version()} is installed; the workbench was written for Gradio "
                            f"{WRITTEN_FOR}. Patch 'browser_files' cannot be applied: {problem}, so a crafted "
                            "event could read any file; a dashboard with accounts does not start without it")
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

    if not isinstance(getattr(_module("gradio.route_utils"), "API_PREFIX", None), str):
        return "gradio.route_utils.API_PREFIX is gone"
    code = getattr(getattr(App, "create_app", None), "__code__", None)
    upload = _nested_code(code, "upload_file") if code is not None else None
    if upload is None or UPLOAD_ROUTE not in code.co_consts or \
            not {"upload_fn", "uploaded_file_dir"} <= set(upload.co_names):
        return f"App.create_app no longer serves POST {UPLOAD_ROUTE} through upload_fn into uploaded_file_dir"
    return None


def upload_route() -> str | None:
    """The path of Gradio's upload route in an app mounted at "" (`/gradio_api/upload`); None (warned once) when
    the installed Gradio's route is not the one this was written for."""
    if not ready("upload_quota", upload_route_problem()):
        return None
    return _module("gradio.route_utils").API_PREFIX + UPLOAD_ROUTE


# ---- refusal_messages --------------------------------------------------------------------------------

def events_problem(blocks: gr.Blocks) -> str | None:
    """What is missing for reading and replacing the handlers of `blocks`' events (None: nothing)."""
    fns = getattr(blocks, "fns", None)
    if not isinstance(fns, Mapping):
        return "gr.Blocks.fns is no longer a mapping of its events"
    if not _reads(type(blocks).call_function, "fns", "fn"):
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
