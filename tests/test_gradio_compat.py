"""ui/gradio_compat/ against the installed Gradio: each patch's target is there and on Gradio's code path,
and a missing target gives one warning and Gradio's own behaviour.

One test per patch runs the patch where Gradio uses what it patches (the
queue's loops, the Plot component, the routes that read the sessions, the
built page scripts), so a Gradio upgrade that moves a target fails here, in
seconds, naming the patch. The "missing" tests stand in for such an upgrade
by taking the target away (monkeypatch) or by handing the checks a copy of
Gradio's page scripts with the target rewritten. tests/test_cheap_skips.py
and the frame test of tests/test_ui_polling_browser.py check the two largest
patches end to end.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import json
import re
import warnings
from pathlib import Path

import gradio as gr
import pytest
from app_events import Page
from fastapi.testclient import TestClient

from workbench.access.sessions import SessionTokens
from workbench.errors import WorkbenchError
from workbench.ui import gradio_compat, server
from workbench.ui.app import refusals_as_messages

REPO = Path(__file__).resolve().parents[1]
CACHED_CHECKS = (
    gradio_compat.frame_throttle_problem,
    gradio_compat.sign_in_problem,
    gradio_compat.login_messages_problem,
    gradio_compat.plot_data_problem,
    gradio_compat.plot_redraws_problem,
)


@pytest.fixture(autouse=True)
def fresh_checks(monkeypatch):
    """Each test finds every patch unchecked and none off, as a fresh server process does."""
    monkeypatch.setattr(gradio_compat, "OFF", {})
    for check in CACHED_CHECKS:
        check.cache_clear()
    yield
    for check in CACHED_CHECKS:
        check.cache_clear()


@contextlib.contextmanager
def no_warning():
    """A context in which a GradioChanged warning fails the test."""
    with warnings.catch_warnings():
        warnings.simplefilter("error", gradio_compat.GradioChanged)
        yield


def one_warning(patch: str):
    return pytest.warns(
        gradio_compat.GradioChanged,
        match=rf"Gradio {re.escape(gradio_compat.installed_version())} "
        rf".*written for Gradio {re.escape(gradio_compat.WRITTEN_FOR)}.*Patch '{patch}' is off",
    )


def assets_copy(tmp_path: Path, pattern: str, old: str, new: str) -> Path:
    """A copy of Gradio's built page scripts matching `pattern`, with `old` replaced by `new` in each."""
    folder = tmp_path / "assets"
    folder.mkdir(parents=True)
    for path in gradio_compat.frontend_assets().glob(pattern):
        text = path.read_text(encoding="utf-8")
        assert old in text, f"{path.name} no longer holds {old!r}"
        (folder / path.name).write_text(text.replace(old, new), encoding="utf-8")
    return folder


def two_output_app() -> gr.Blocks:
    with gr.Blocks() as app:
        text, number = gr.Textbox(), gr.Number()
        gr.Button().click(lambda: gr.skip(), outputs=[text, number])
    return app


def test_written_for_the_gradio_requirements_pins():
    pins = re.findall(r"^gradio==(\S+)", (REPO / "requirements.txt").read_text(), flags=re.M)
    assert pins == [gradio_compat.WRITTEN_FOR]
    assert gradio_compat.installed_version() == gr.__version__


def test_every_patch_says_why_what_when_it_can_go_and_life_without_it():
    for name, patch in gradio_compat.PATCHES.items():
        assert patch.name == name and all(
            len(text) > 20 for text in (patch.why, patch.touches, patch.gone_when, patch.without)
        ), name
    # Every internal attribute the architecture test keeps out of other modules is one this module uses.
    source = "".join(path.read_text() for path in (REPO / "workbench" / "ui" / "gradio_compat").glob("*.py"))
    for attribute in gradio_compat.INTERNAL_ATTRIBUTES:
        assert re.search(rf"\.{attribute}\b", source), attribute


def test_a_missing_target_warns_once_naming_the_patch_and_both_versions():
    with one_warning("quiet_queue") as caught:
        assert gradio_compat.ready("quiet_queue", "Queue.start_processing no longer reads sleep_when_free") is False
    assert "Without it, the queue polls every millisecond again" in str(caught[0].message)
    assert gradio_compat.OFF == {"quiet_queue": "Queue.start_processing no longer reads sleep_when_free"}
    with no_warning():
        assert gradio_compat.ready("quiet_queue", "Queue.start_processing no longer reads sleep_when_free") is False
        assert gradio_compat.ready("cheap_skips", None) is True


def run_in_own_loop(coroutine):
    """Run `coroutine` to its end in a loop of its own, on a thread of its own: a session's Playwright browser
    keeps an event loop marked running in this one."""
    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(asyncio.run, coroutine).result()


# ---- quiet_queue -----------------------------------------------------------------------------------------


def idle_sleeps(app: gr.Blocks, monkeypatch, seconds: float = 0.3) -> set[float]:
    """The sleeps Gradio's own queue loops take while the queue stays empty for `seconds`."""
    taken = []
    real_sleep = asyncio.sleep

    async def sleep(delay, *args, **kwargs):
        taken.append(delay)
        return await real_sleep(delay, *args, **kwargs)

    async def idle():
        queue = app._queue
        loops = [asyncio.ensure_future(queue.start_processing()), asyncio.ensure_future(queue.start_progress_updates())]
        await real_sleep(seconds)
        queue.stopped = True
        await asyncio.gather(*loops)

    monkeypatch.setattr(asyncio, "sleep", sleep)
    run_in_own_loop(idle())
    monkeypatch.setattr(asyncio, "sleep", real_sleep)
    return set(taken)


def test_quiet_queue_sets_the_sleeps_gradio_s_queue_loops_take(monkeypatch):
    assert idle_sleeps(gr.Blocks(), monkeypatch) == {0.001, 0.01}  # Gradio's own, on Linux
    app = gr.Blocks()
    with no_warning():
        gradio_compat.quiet_queue(app)
    assert idle_sleeps(app, monkeypatch) == {gradio_compat.QUEUE_IDLE_SLEEP_S}


def test_quiet_queue_leaves_a_queue_that_no_longer_reads_its_sleep_alone(monkeypatch):
    app = gr.Blocks()
    queue_type = type(app._queue)

    async def start_processing(self):  # a Gradio whose loop waits another way
        return None

    monkeypatch.setattr(queue_type, "start_processing", start_processing)
    with one_warning("quiet_queue"):
        gradio_compat.quiet_queue(app)
    assert app._queue.sleep_when_free == 0.001
    del app._queue.progress_update_sleep_when_free  # renamed: the patch must not create the old name
    gradio_compat.OFF.clear()
    with one_warning("quiet_queue"):
        gradio_compat.quiet_queue(app)
    assert not hasattr(app._queue, "progress_update_sleep_when_free")


# ---- cheap_skips (end to end: tests/test_cheap_skips.py) -------------------------------------------------


def test_cheap_skips_finds_its_targets_and_wraps_postprocessing():
    app = two_output_app()
    with no_warning():
        gradio_compat.cheap_skips(app)
    assert "postprocess_data" in vars(app)
    assert (
        gradio_compat.stream_stop_problem(gradio_compat.mounted_app(server.server_app(app, "127.0.0.1", 7860))) is None
    )


def test_cheap_skips_leaves_gradio_s_postprocessing_when_a_target_is_gone(monkeypatch):
    import gradio.blocks

    original = gradio.blocks.postprocess_update_dict

    def changed(block, update_dict, postprocess=True, *, cache=None):  # a Gradio whose helper took a new shape
        return original(block, update_dict, postprocess)

    monkeypatch.setattr(gradio.blocks, "postprocess_update_dict", changed)
    app = two_output_app()
    with one_warning("cheap_skips"):
        gradio_compat.cheap_skips(app)
    assert "postprocess_data" not in vars(app)  # Gradio's own method answers
    assert Page(app).run(next(iter(app.fns.values())), [])["data"] == [{"__type__": "update"}] * 2


# ---- frame_throttle (end to end: tests/test_ui_polling_browser.py) ---------------------------------------


def test_the_status_tracker_still_hands_requestanimationframe_the_clock_the_throttle_slows():
    trackers = list(gradio_compat.frontend_assets().glob(gradio_compat.STATUS_TRACKER_ASSETS))
    assert len(trackers) == 1, trackers
    source = trackers[0].read_text(encoding="utf-8")
    # Its reference to requestAnimationFrame is taken when the script loads: the throttle must come first.
    assert re.search(r"=\s*typeof window\s*<\s*`u`\s*\?\s*window\.requestAnimationFrame\b", source)
    callbacks = gradio_compat.clock_callbacks(source)
    assert callbacks == ["()=>{F(Pe,(performance.now()-w(de))/1e3),W&&ze()}"]
    with no_warning():
        assert gradio_compat.frame_throttle_script() == gradio_compat.FRAME_THROTTLE_JS
    # The page script tests a callback as is_clock_callback does.
    assert (
        f"source.length < {gradio_compat.CLOCK_CALLBACK_MAX_CHARS} && "
        'source.includes("performance.now()") && source.includes("/1e3")' in gradio_compat.FRAME_THROTTLE_JS
    )


def test_no_throttle_script_when_the_clock_changed(tmp_path):
    assets = assets_copy(tmp_path, gradio_compat.STATUS_TRACKER_ASSETS, "/1e3),W&&ze()", "*.001),W&&ze()")
    with one_warning("frame_throttle"):
        assert gradio_compat.frame_throttle_script(assets) == ""
    assert "no longer hands requestAnimationFrame the clock" in gradio_compat.OFF["frame_throttle"]
    assert gradio_compat.frame_throttle_problem(tmp_path) == "Gradio's page has no statustracker-*.js"


# ---- plot_redraws (end to end: tests/test_ui_polling_browser.py) -----------------------------------------


def test_gradio_s_plotly_script_still_sets_the_window_plotly_the_redraw_script_wraps():
    scripts = list(gradio_compat.frontend_assets().glob(gradio_compat.PLOTLY_ASSETS))
    assert len(scripts) == 1, scripts
    source = scripts[0].read_text(encoding="utf-8")
    # 6.31 draws a new value with react, then asks for a resize, on the Plotly object it also sets on window.
    assert "return window.Plotly=e,e" in source and ".default.react(g,e.data,e.layout,e.config)" in source
    with no_warning():
        assert gradio_compat.plot_redraws_script() == gradio_compat.PLOT_REDRAWS_JS


def test_no_redraw_script_when_gradio_s_plotly_script_changed(tmp_path):
    assets = assets_copy(tmp_path, gradio_compat.PLOTLY_ASSETS, "window.Plotly=e", "globalThis.wbOther=e")
    with one_warning("plot_redraws"):
        assert gradio_compat.plot_redraws_script(assets) == ""
    assert "no longer sets window.Plotly" in gradio_compat.OFF["plot_redraws"]
    assert gradio_compat.plot_redraws_problem(tmp_path) == "Gradio's page has no PlotlyPlot-*.js"


# ---- sign_in and login_messages (end to end: tests/test_sign_in_server.py) -------------------------------


def served(auth=None):
    """The FastAPI app server.serve would run for a small Blocks, and a client for it (no lifespan: no queue)."""
    api = server.server_app(two_output_app(), "127.0.0.1", 7860, auth=auth)
    return api, TestClient(api, base_url="http://127.0.0.1:7860")


def test_gradio_s_routes_read_the_sessions_sign_in_keeps():
    with no_warning():
        api, client = served(auth=[("alice", "right")])
    gradio_app = gradio_compat.mounted_app(api)
    assert isinstance(gradio_app.tokens, SessionTokens)
    assert gradio_compat.session_cookie_names(gradio_app) == (
        f"access-token-{gradio_app.cookie_id}",
        f"access-token-unsecure-{gradio_app.cookie_id}",
    )
    assert client.post("/login", data={"username": "alice", "password": "wrong"}).status_code == 400
    assert client.post("/login", data={"username": "alice", "password": "right"}).status_code == 200
    assert client.get("/gradio_api/user").json() == "alice"  # Gradio's get_current_user, through our sessions
    (token,) = list(gradio_app.tokens)
    gradio_app.tokens.end(token)
    assert client.get("/gradio_api/user").json() is None
    assert gradio_compat.password_check(gradio_app)("alice", "right") is True


def test_the_login_page_posts_the_form_sign_in_answers_and_shows_its_messages():
    assert gradio_compat.sign_in_problem() is None
    assert gradio_compat.login_messages_problem() is None
    (page,) = [path.read_text() for path in gradio_compat.frontend_assets().glob(gradio_compat.LOGIN_PAGE_ASSETS)]
    assert 'class="creds' in page and 'class="auth' in page


def test_gradio_s_own_sign_in_serves_when_its_sessions_moved(monkeypatch):
    from gradio.routes import App

    create_app = App.create_app

    def moved(*args, **kwargs):  # a Gradio whose routes read the session some other way
        return create_app(*args, **kwargs)

    monkeypatch.setattr(App, "create_app", staticmethod(moved))
    with one_warning("sign_in"):
        api, client = served(auth=[("alice", "right")])
    assert not [route for route in api.routes if getattr(route, "path", None) in ("/login", "/logout")]
    gradio_app = gradio_compat.mounted_app(api)
    assert type(gradio_app.tokens) is dict  # Gradio's own sessions
    assert client.post("/login", data={"username": "alice", "password": "right"}).status_code == 200
    assert client.get("/gradio_api/user").json() == "alice"


def test_a_login_page_without_its_messages_warns(tmp_path):
    assets = assets_copy(tmp_path, gradio_compat.LOGIN_PAGE_ASSETS, 'class="creds', 'class="wrong')
    with one_warning("login_messages"):
        assert gradio_compat.check_login_messages(assets) is False
    assert gradio_compat.sign_in_problem(assets) is None  # the form itself still works
    no_form = assets_copy(tmp_path / "b", gradio_compat.LOGIN_PAGE_ASSETS, "append(`password`", "append(`secret`")
    assert "no longer posts username and password" in gradio_compat.sign_in_problem(no_form)


# ---- route_timing ------------------------------------------------------------------------------------------


def test_a_route_s_time_lands_among_gradio_s_traces():
    from gradio import profiling

    assert gradio_compat.route_timing_problem(profiling) is None
    before = len(profiling.collector.get_all())
    gradio_compat.add_route_trace("/workbench/changes", 3.5)
    (trace,) = profiling.collector.get_all()[before:]
    assert (trace["fn_name"], trace["fn_call_ms"], trace["total_ms"]) == ("/workbench/changes", 3.5, 3.5)


def test_routes_go_untimed_when_gradio_s_profiling_changed(monkeypatch):
    from gradio import profiling

    monkeypatch.setattr(profiling, "PROFILING_ENABLED", False)
    with no_warning():
        assert gradio_compat.route_timing_on() is False  # off: nothing checked
    monkeypatch.setattr(profiling, "PROFILING_ENABLED", True)
    with no_warning():
        assert gradio_compat.route_timing_on() is True
    monkeypatch.delattr(profiling, "collector")
    with one_warning("route_timing"):
        assert gradio_compat.route_timing_on() is False


# ---- plot_data ---------------------------------------------------------------------------------------------

FIGURE = json.dumps({"data": [{"type": "scatter", "x": [1, 2], "y": [3, 4]}], "layout": {"title": {"text": "r"}}})


def test_gr_plot_sends_the_figure_json_as_it_is():
    value = gradio_compat.plotly_value(FIGURE)
    sent = gr.Plot().postprocess(value)
    assert sent is value and sent.plot == FIGURE and sent.type == "plotly"


def test_a_figure_goes_through_plotly_when_plot_data_is_gone(monkeypatch):
    import gradio.components.plot

    monkeypatch.delattr(gradio.components.plot, "PlotData")
    with one_warning("plot_data"):
        value = gradio_compat.plotly_value(FIGURE)
    monkeypatch.undo()
    sent = json.loads(gr.Plot().postprocess(value).plot)
    assert sent["data"][0]["x"] == [1, 2] and sent["layout"]["title"]["text"] == "r"


# ---- refusal_messages --------------------------------------------------------------------------------------


def refusing_app() -> gr.Blocks:
    def handler():
        raise WorkbenchError(field="steps", rule="a whole number", fix="e.g. 10")

    with gr.Blocks() as app:
        gr.Button().click(handler, outputs=[gr.Textbox()])
    return app


def test_a_refusal_a_handler_lets_through_shows_its_message():
    app = refusing_app()
    with no_warning():
        gradio_compat.wrap_handlers(app, refusals_as_messages)
    with pytest.raises(gr.Error, match="steps: a whole number"):
        Page(app).run(next(iter(app.fns.values())), [])


def test_handlers_stay_gradio_s_when_it_calls_them_another_way(monkeypatch):
    call_function = gr.Blocks.call_function

    async def moved(self, *args, **kwargs):  # a Gradio that finds the handler elsewhere
        return await call_function(self, *args, **kwargs)

    monkeypatch.setattr(gr.Blocks, "call_function", moved)
    app = refusing_app()
    (block_fn,) = app.fns.values()
    handler = block_fn.fn
    with one_warning("refusal_messages"):
        gradio_compat.wrap_handlers(app, refusals_as_messages)
    assert block_fn.fn is handler


def test_stopping_sets_the_event_gradio_s_heartbeat_streams_wait_on():
    gradio_app = gradio_compat.mounted_app(server.server_app(gr.Blocks(), "127.0.0.1", 7860))

    async def stop():  # as the server's signal handler does, on the loop that serves
        with no_warning():
            gradio_compat.stop_streams(gradio_app, asyncio.get_running_loop())
        await asyncio.wait_for(gradio_app.stop_event.wait(), timeout=5)

    run_in_own_loop(stop())


def test_streams_are_left_to_the_grace_period_when_the_heartbeat_no_longer_waits_on_the_event(monkeypatch):
    gradio_app = gradio_compat.mounted_app(server.server_app(gr.Blocks(), "127.0.0.1", 7860))

    def create_app(*args, **kwargs):  # a Gradio whose heartbeat ends another way
        def heartbeat():
            def iterator():
                return "data: ALIVE"

            return iterator

        return heartbeat

    monkeypatch.setattr(type(gradio_app), "create_app", staticmethod(create_app))

    async def stop():
        with one_warning("stream_stop"):
            gradio_compat.stop_streams(gradio_app, asyncio.get_running_loop())
        await asyncio.sleep(0.1)
        return gradio_app.stop_event.is_set()

    assert run_in_own_loop(stop()) is False


def test_every_check_passes_on_the_app_the_dashboard_builds(tmp_path):
    from workbench.ui.app import build_app

    with no_warning():
        app = build_app(tmp_path / "runs")
    for problem in (
        gradio_compat.quiet_queue_problem(app),
        gradio_compat.cheap_skips_problem(app),
        gradio_compat.events_problem(app),
        gradio_compat.frame_throttle_problem(),
        gradio_compat.sign_in_problem(),
        gradio_compat.login_messages_problem(),
        gradio_compat.plot_data_problem(),
        gradio_compat.plot_redraws_problem(),
    ):
        assert problem is None
    assert "postprocess_data" in vars(app)
