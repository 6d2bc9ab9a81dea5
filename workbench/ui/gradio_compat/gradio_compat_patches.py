"""The register of Gradio patches and the means every check shares.

`PATCHES` says of each reach past Gradio's public API why it exists, what it
touches, when it can go and what the dashboard does without it; `ready` turns a
check's finding into "apply" or one `GradioChanged` warning; the small readers of
Gradio's code objects (`code_reads`, `nested_code`, `parameter_names`) are what
the checks in the other gradio_compat modules look at.
"""

from __future__ import annotations

import importlib
import inspect
import sys
import warnings
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

# The Gradio every patch below was written for and checked against: requirements.txt's pin.
WRITTEN_FOR = "6.31.0"

# The attributes of Gradio's objects without a leading "_" that this module touches and no other module may
# (on anything but `self`): the architecture test reads this tuple from the source. A new tie joins it here.
INTERNAL_ATTRIBUTES = (
    "fns",
    "postprocess_data",
    "preprocess_data",
    "sleep_when_free",
    "progress_update_sleep_when_free",
    "tokens",
    "cookie_id",
    "auth",
    "auth_dependency",
    "stop_event",
)


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


PATCHES = {
    patch.name: patch
    for patch in (
        Patch(
            "quiet_queue",
            why="Gradio's queue waits for work by sleeping 1 ms at a time in its event loop and 10 ms in its "
            "progress loop: a thousand wake-ups a second or so, a steady share of a core for a server with "
            "no page open. "
            "Here both sleep 20 ms; an event waits at most 20 ms longer to start.",
            touches="Blocks._queue.sleep_when_free and .progress_update_sleep_when_free, read by "
            "Queue.start_processing and Queue.start_progress_updates",
            gone_when="Gradio's queue waits on an event instead of polling, or takes these sleeps as a setting "
            "(bench_launch_path.py then shows no idle cost with the patch off)",
            without="the queue polls every millisecond again (a steady share of a core on an idle server)",
        ),
        Patch(
            "cheap_skips",
            why="Gradio 6.31 builds a component anew (and its session config) for every output an "
            "event leaves unchanged; a Train tab refresh skips most of its outputs. A bare skip takes Gradio's "
            "path for a finished generator's output and its answer is put back as Gradio sends it.",
            touches="Blocks.postprocess_data (wrapped on the app), gradio.blocks.postprocess_update_dict and "
            "convert_component_dict_to_list, components._Keywords.FINISHED_ITERATING, Block._id, "
            "Block.stateful",
            gone_when='tests/test_cheap_skips.py fails with "Gradio no longer builds a component for a skip"',
            without="every skipped output costs a component's building again; the page gets the same answers",
        ),
        Patch(
            "frame_throttle",
            why="Gradio 6.31's page keeps one status tracker's elapsed-time clock asking for every animation "
            "frame after its component stopped being pending: an idle page draws 60 frames a second (a steady "
            "share of a core in the browser). A script served first in the page runs that clock 4 times a second.",
            touches="the clock callback in gradio/templates/frontend/assets/statustracker-*.js, "
            "()=>{F(Pe,(performance.now()-w(de))/1e3),W&&ze()} in 6.31, recognised by its length and text",
            gone_when="an idle page draws under 10 frames a second with nothing slowed "
            "(tests/test_ui_polling_browser.py's frame test then fails on `slowed`)",
            without="an idle dashboard page draws 60 frames a second again",
        ),
        Patch(
            "plot_redraws",
            why="Gradio 6.31's gr.Plot draws each new figure in a new div (a new value re-creates its keyed plot), "
            "after asking the div it is about to drop to draw the same figure with Plotly.react: every update "
            "was drawn twice, and a Train tab refresh redraws five figures. A script served first in the page "
            "wraps Plotly.react when Gradio's plotly script sets window.Plotly: a react on a div that already "
            "shows a figure waits for the current task to end, and is left out when the div has left the page.",
            touches="window.Plotly, which gradio/templates/frontend/assets/PlotlyPlot-*.js sets (`window.Plotly=`) "
            "and whose react draws a gr.Plot",
            gone_when="Gradio's Plot keeps its div across values (window.wbPlotRedraws.dropped then stays 0 while a "
            "Train tab refresh redraws its figures: tests/test_ui_polling_browser.py)",
            without="each new figure is drawn twice again (the Train tab's refresh costs the browser more)",
        ),
        Patch(
            "sign_in",
            why="Gradio's own /login checks passwords on the event loop, has no limit on wrong passwords, keeps a "
            "session until the server restarts and signs out on a GET; ui/sign_in.py answers /login and "
            "/logout instead and keeps the sessions where every Gradio route reads them.",
            touches="App.tokens (replaced by access.sessions.SessionTokens), App.auth, App.auth_dependency, the "
            "access-token-<App.cookie_id> cookies Gradio's get_current_user reads, and the login page's "
            "form (username and password posted to `login`; 400 wrong, 200 signed in)",
            gone_when="Gradio's own sign-in checks passwords off the event loop, limits attempts, expires "
            "sessions and signs out by POST only (tests/test_sign_in_server.py against it)",
            without="Gradio's own sign-in serves: sessions last until the server restarts, no wait after wrong "
            "passwords, and sign-out is Gradio's GET /logout",
        ),
        Patch(
            "login_messages",
            why="the login page shows the wait after too many wrong passwords (sign_in.PAGE_JS) next to the "
            "page's own message, and hides Gradio's \"Incorrect Credentials\" of the attempt before",
            touches='the login page\'s <p class="auth"> and <p class="creds"> in '
            "gradio/templates/frontend/assets/Login-*.js",
            gone_when="Gradio's login page shows a 429's message itself",
            without='the wait is shown above the form, and an older "Incorrect Credentials" may stay beside it',
        ),
        Patch(
            "route_timing",
            why="with Gradio's profiling on, the page's JSON routes are listed beside Gradio's event traces at "
            "/gradio_api/profiling/traces, so a benchmark reads the server's time per poll from the server",
            touches="gradio.profiling.PROFILING_ENABLED, RequestTrace(fn_name, fn_call_ms, total_ms), collector.add",
            gone_when="Gradio's profiling times the parent app's routes itself",
            without="only Gradio's own events are timed",
        ),
        Patch(
            "plot_data",
            why="the figures reach gr.Plot as the JSON of plain lists (insight.figure_drawing.figure_json), faster "
            "than a plotly Figure's to_json and without building a Figure from a dict",
            touches="gradio.components.plot.PlotData, which gr.Plot.postprocess passes through unchanged",
            gone_when="gr.Plot takes a figure's JSON through its public API",
            without="each figure's JSON is read back into a plotly Figure, which gr.Plot converts again (slower, "
            "the same picture)",
        ),
        Patch(
            "browser_files",
            why="Gradio refuses a file path it did not receive only in an app started by Blocks.launch() (it "
            "checks when blocks.has_launched, which mount_gradio_app never sets): a crafted event could make "
            "the server copy any file it can read. Every event's inputs are checked before Gradio reads them "
            "(ui/browser_files.py holds the rule).",
            touches="Blocks.preprocess_data(block_fn, inputs, state, explicit_call), wrapped on the app, and "
            "gradio.utils.get_upload_folder",
            gone_when="Gradio checks the files a mounted app's events name (tests/test_browser_files.py passes "
            "with the patch off)",
            without="a crafted event could make the server read any file; a dashboard with accounts refuses to start",
        ),
        Patch(
            "upload_quota",
            why="Gradio's upload route writes any number of files (each up to max_file_size) from a signed-in page "
            "into its cache; on a shared dashboard each user's uploads through it are held to their upload caps "
            "(access/cache_quota.py, ui/server.py's UploadQuota in front of the route)",
            touches="the route's path (gradio.route_utils.API_PREFIX + \"/upload\", served by App.create_app's "
            "upload_file through upload_fn into uploaded_file_dir) and its answer, a JSON list of the paths "
            "written",
            gone_when="Gradio caps what one user may upload in all (then tests/test_upload_quota.py passes with the "
            "patch off)",
            without="uploads through Gradio's route are capped per file only (max_file_size), not per user",
        ),
        Patch(
            "stream_stop",
            why="every open page keeps a heartbeat stream open, which ends only when App.stop_event is set; "
            "Gradio sets it in Blocks.close(), which a mounted app served by uvicorn never calls, so "
            "Ctrl-C or SIGTERM waited for every open tab to close (ui/server.py sets it when uvicorn is "
            "told to stop)",
            touches="App.stop_event (an asyncio.Event), awaited by the heartbeat route in App.create_app",
            gone_when="a mounted Gradio app ends its streams on the ASGI server's shutdown itself (a served "
            "page then no longer delays Ctrl-C with the patch off)",
            without="a server with pages open stops after ui/server.SHUTDOWN_GRACE_S, cutting their streams "
            "off with an error in its log",
        ),
        Patch(
            "refusal_messages",
            why="a WorkbenchError a handler lets through (a value no widget sends but a crafted request can) is "
            'shown as its message instead of Gradio\'s bare "Error"; wrapping every registered handler once '
            "keeps the tabs free of it",
            touches="Blocks.fns and each BlockFunction.fn, which Blocks.call_function calls",
            gone_when="Gradio offers a public hook for an app's exceptions",
            without='such a refusal shows as Gradio\'s bare "Error" (the refusals the tabs expect still show in '
            "their panels)",
        ),
    )
}

# Patches found off in this process, and why: each is warned about once, when first found.
# Patches found off in this process, and why: each is warned about once, when first found. `ready` reads it
# from the package (gradio_compat.OFF), so a fresh dict put there (as each test of the checks does) is the one used.
OFF: dict[str, str] = {}


def off_patches() -> dict[str, str]:
    """The package's record of patches found off (gradio_compat.OFF, whichever dict it holds now)."""
    return sys.modules[__package__].OFF


class GradioChanged(UserWarning):
    """A patch's target in Gradio is gone or changed: the patch is off and Gradio's own behaviour is kept."""


def ready(name: str, problem: str | None) -> bool:
    """True when patch `name`'s target passed its check (`problem` is None); else warn once and say False."""
    if problem is None:
        return True
    off = off_patches()
    if name not in off:
        off[name] = problem
        warnings.warn(
            GradioChanged(
                f"Gradio {installed_version()} is installed; the workbench was written for Gradio {WRITTEN_FOR}. "
                f"Patch {name!r} is off: {problem}. Without it, {PATCHES[name].without}. "
                f"What it was for and when it can go: workbench/ui/gradio_compat/"
            ),
            stacklevel=3,
        )
    return False


def frontend_assets() -> Path:
    """The folder of Gradio's built page scripts, as the installed Gradio serves them."""
    import gradio

    return Path(gradio.__file__).resolve().parent / "templates" / "frontend" / "assets"


def code_reads(function, *names: str) -> bool:
    """True when `function`'s own code reads (or writes) every attribute in `names`."""
    code = getattr(function, "__code__", None)
    return code is not None and set(names) <= set(code.co_names)


def nested_code(code, name: str):
    """The code object of the function `name` defined anywhere inside `code` (None when there is none)."""
    for const in code.co_consts:
        if inspect.iscode(const):
            if const.co_name == name:
                return const
            found = nested_code(const, name)
            if found is not None:
                return found
    return None


def parameter_names(function) -> list[str]:
    """The names of `function`'s parameters ([] when it has no signature to read)."""
    try:
        return list(inspect.signature(function).parameters)
    except (TypeError, ValueError):
        return []


def optional_module(name: str):
    """The module `name`, or None when it cannot be imported."""
    try:
        return importlib.import_module(name)
    except ImportError:
        return None
