"""Serve the dashboard: the Gradio app mounted on a FastAPI app, made cheap to leave open.

A dashboard left open beside a training run shares the machine's cores with
it, so what the page and the server do while nothing happens is measured and
kept small (`benchmarks/bench_launch_path.py` prints it per training step):

- Gradio's queue waits for work by sleeping 1 ms at a time (two loops, about
  1,100 wake-ups a second): about 9% of a core for a server with no page
  open. `quiet_queue` makes it wake 50 times a second instead; an event
  waits at most 20 ms longer to start.
- Gradio 6.31's page keeps one status tracker's elapsed-time clock running
  after its component stopped being pending: a `requestAnimationFrame` loop
  that makes the browser draw 60 frames a second forever (about 8% of a core
  in headless Chromium, on every tab). `FRAME_THROTTLE_JS` runs first in the
  page, before Gradio's scripts take their reference to
  `requestAnimationFrame`, and runs such clock callbacks 4 times a second;
  every other frame callback (plotly, transitions) is untouched. It counts
  what it slowed in `window.wbFrameThrottle` so a browser test can check the
  loop is still the one it was written for.

The page itself is the one `gr.Blocks.launch` would serve: same theme, CSS,
scripts and routes, except where a shared dashboard needs more: sign-in and
sign-out are ui/sign_in.py's (sessions that expire, a wait after wrong
passwords, sign-out only from the page itself), no other site gets a CORS
answer (`same_origin_only`), FastAPI's /docs and /openapi.json are off, and
it serves HTTPS when given a certificate.

With Gradio's own profiling on (`GRADIO_PROFILING=1` in the server's
environment: each event's queue wait, preprocess, handler and postprocess
times, served at `/gradio_api/profiling/traces`), the page's JSON routes are
timed too (`RouteTimer`) and listed there under their path, so a benchmark
reads the server's time per refresh and per poll from the server itself
(benchmarks/bench_load.py). Off, nothing is timed.
"""

from __future__ import annotations

import time

import gradio as gr
from fastapi import HTTPException, Request

from workbench.access.sessions import DEFAULT_SESSION_HOURS
from workbench.access.sign_in_limits import SignInLimits
from workbench.ui import sign_in

# Seconds Gradio's queue sleeps between looks at an empty queue (its default is 0.001).
QUEUE_IDLE_SLEEP_S = 0.02

# A clock callback is short and reads performance.now() to count seconds: in
# Gradio 6.31's status tracker it is `()=>{F(Pe,(performance.now()-w(de))/1e3),W&&ze()}`.
FRAME_THROTTLE_JS = """<script>
(() => {
  const nextFrame = window.requestAnimationFrame.bind(window);
  const state = { slowed: 0, frames: 0 };
  window.wbFrameThrottle = state;
  window.requestAnimationFrame = (callback) => {
    state.frames += 1;
    const source = String(callback);
    if (source.length < 120 && source.includes("performance.now()") && source.includes("/1e3")) {
      state.slowed += 1;
      return -setTimeout(() => nextFrame(callback), 250);
    }
    return nextFrame(callback);
  };
  const cancelFrame = window.cancelAnimationFrame.bind(window);
  window.cancelAnimationFrame = (id) => (id < 0 ? clearTimeout(-id) : cancelFrame(id));
})();
</script>"""


def quiet_queue(blocks: gr.Blocks, idle_sleep_s: float = QUEUE_IDLE_SLEEP_S) -> None:
    """Make the queue's idle loops wake every `idle_sleep_s` instead of every millisecond."""
    queue = blocks._queue  # gradio has no setting for these two sleeps
    queue.sleep_when_free = idle_sleep_s
    queue.progress_update_sleep_when_free = idle_sleep_s


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


class EarlyScript:
    """ASGI middleware: put `script` first in the <head> of the app's HTML page, before Gradio's own scripts.

    Gradio adds `head=` content from its own scripts after they have loaded,
    too late for a script that must run before them. Only GET requests for
    the page itself are touched; every other request (the queue's event
    streams, files, the API) passes straight through.
    """

    def __init__(self, app, script: str):
        self.app = app
        self.script = script.encode()

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http" or scope["method"] != "GET" or scope["path"] not in ("/", ""):
            await self.app(scope, receive, send)
            return
        start: dict = {}
        body = bytearray()

        async def capture(message):
            if message["type"] == "http.response.start":
                start.update(message)
                return
            body.extend(message.get("body", b""))
            if message.get("more_body"):
                return
            headers = [(k, v) for k, v in start.get("headers", []) if k.lower() != b"content-length"]
            page = bytes(body)
            if any(k.lower() == b"content-type" and v.startswith(b"text/html") for k, v in headers):
                page = page.replace(b"<head>", b"<head>" + self.script, 1)
            headers.append((b"content-length", str(len(page)).encode()))
            await send({**start, "headers": headers})
            await send({"type": "http.response.body", "body": page})

        await self.app(scope, receive, capture)


class RouteTimer:
    """ASGI middleware: the time from a request for one of `paths` to its answer's last byte, in Gradio's profile.

    Added only while Gradio's profiling is on; each request becomes a trace
    (`fn_name` = the path, `total_ms`) beside the traces of Gradio's events.
    """

    def __init__(self, app, paths):
        self.app = app
        self.paths = set(paths)

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http" or scope["path"] not in self.paths:
            await self.app(scope, receive, send)
            return
        from gradio import profiling

        start = time.monotonic()
        try:
            await self.app(scope, receive, send)
        finally:
            trace = profiling.RequestTrace(fn_name=scope["path"])
            trace.fn_call_ms = trace.total_ms = (time.monotonic() - start) * 1000
            profiling.collector.add(trace)


def same_origin_only(api) -> None:
    """Answer no other site's cross-origin request: no Access-Control-Allow-Origin for a foreign Origin.

    Gradio's own CORS middleware echoes any Origin back, with credentials
    allowed, whenever the Host is not a loopback name: served on a network
    address, any site a signed-in student visits could read the dashboard's
    answers with the student's cookie. Starlette's CORSMiddleware with no
    allowed origin answers none, and Gradio leaves CORS to a parent app that
    configures it (its `mount_gradio_app` says so). The page itself is
    same-origin and needs no CORS header.
    """
    from starlette.middleware.cors import CORSMiddleware

    api.add_middleware(CORSMiddleware, allow_origins=[])


def serve(blocks: gr.Blocks, host: str, port: int, *, ssl_certfile: str | None = None,
          ssl_keyfile: str | None = None, session_hours: float = DEFAULT_SESSION_HOURS,
          sign_in_limits: SignInLimits = SignInLimits(), **mount_options) -> None:
    """Serve `blocks` at http(s)://host:port/ until interrupted (mount_options: theme, css, js, auth, ...).

    `blocks.api_routes` (path -> handler, from ui/app.build_app) become GET
    routes beside the app: small JSON answers the page's own scripts ask for,
    behind the same sign-in as the app when `auth` is given. A handler is
    called as `handler(user, query)`: the signed-in name (None without
    sign-in) and the query parameters, so it answers only what that user may see.
    With `auth`, sign-in and sign-out are ui/sign_in.py's: sessions that last
    `session_hours`, and a wait after too many wrong passwords (`sign_in_limits`).
    `ssl_certfile`/`ssl_keyfile` (PEM, checked by access/tls.check_tls) serve HTTPS.
    """
    import fastapi
    import uvicorn

    from gradio import profiling

    # FastAPI's /docs and /openapi.json (the outer app's, and the mounted Gradio app's own /openapi.json)
    # would list every route to anyone, signed in or not: off. Gradio's API page stays behind sign-in.
    api = fastapi.FastAPI(docs_url=None, redoc_url=None, openapi_url=None)
    mount_options["app_kwargs"] = {"openapi_url": None, **mount_options.get("app_kwargs", {})}
    signing_in = sign_in.SignIn(session_hours * 3600, sign_in_limits) if mount_options.get("auth") else None
    api.add_middleware(EarlyScript, script=FRAME_THROTTLE_JS + (sign_in.PAGE_JS if signing_in else ""))
    same_origin_only(api)
    if signing_in:
        signing_in.add_routes(api)
    routes = getattr(blocks, "api_routes", {})
    if profiling.PROFILING_ENABLED:
        api.add_middleware(RouteTimer, paths=routes)
    mounted: dict = {}

    def route(handler):
        def answer(request: Request):
            return handler(require_sign_in(mounted["app"], request), request.query_params)
        return answer

    # Added before the app is mounted: the mount at "" would otherwise answer these paths itself.
    for path, handler in routes.items():
        api.add_api_route(path, route(handler), methods=["GET"])
    api = gr.mount_gradio_app(api, blocks, path="", server_name=host, server_port=port, **mount_options)
    mounted["app"] = next(route.app for route in api.routes if getattr(route, "path", None) == "")
    if signing_in:
        signing_in.attach(mounted["app"])
    quiet_queue(blocks)
    print(f"GRPO Workbench: {'https' if ssl_certfile else 'http'}://{host}:{port}/", flush=True)
    uvicorn.run(api, host=host, port=port, log_level="warning", ssl_certfile=ssl_certfile, ssl_keyfile=ssl_keyfile)


def require_sign_in(gradio_app, request: Request) -> str | None:
    """The signed-in user's name; 401 without the session cookie of one, when the app has sign-in.

    The same rule as gradio's own routes (its `login_check`): the cookie
    set at sign-in names a token kept in `gradio_app.tokens`, which maps it
    to the user's name while the session lasts (ui/sign_in.py). None when the
    app has no sign-in.
    """
    if gradio_app.auth is None and gradio_app.auth_dependency is None:
        return None
    token = request.cookies.get(f"access-token-{gradio_app.cookie_id}") or \
        request.cookies.get(f"access-token-unsecure-{gradio_app.cookie_id}")
    user = gradio_app.tokens.get(token)
    if user is None:
        raise HTTPException(status_code=401, detail="Not signed in")
    return user
