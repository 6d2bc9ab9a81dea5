"""Serve the dashboard: the Gradio app mounted on a FastAPI app, made cheap to leave open.

A dashboard left open beside a training run shares the machine's cores with
it, so what the page and the server do while nothing happens is measured and
kept small (`benchmarks/bench_launch_path.py` prints it per training step).
Three of the fixes reach into Gradio's internals and live, with the check
that their targets are still there, in ui/gradio_compat/:

- `quiet_queue`: Gradio's queue waits for work by sleeping 1 ms at a time
  (two loops, a thousand wake-ups a second or so): a steady share of a core
  for a server with no page open. It wakes 50 times a second instead; an event
  waits at most 20 ms longer to start.
- `frame_throttle_script`: Gradio 6.31's page keeps one status tracker's
  elapsed-time clock running after its component stopped being pending: a
  `requestAnimationFrame` loop that makes the browser draw 60 frames a
  second forever (a steady share of a core in the browser, on every tab).
  The script runs first in the page (`EarlyScript`), before Gradio's scripts
  take their reference to `requestAnimationFrame`, and runs such clock
  callbacks 4 times a second; every other frame callback (plotly,
  transitions) is untouched. It counts what it slowed in
  `window.wbFrameThrottle` so a browser test can check the loop is still
  the one it was written for.
- `plot_redraws_script`: Gradio 6.31's gr.Plot draws each new figure in a
  new div, after asking the div it drops to draw it too (`Plotly.react`):
  every figure a Train tab refresh sends was drawn twice. Served first in
  the page as well, it leaves out a react on a div that has left the page
  by the end of the task that asked for it (`window.wbPlotRedraws` counts).

The page itself is the one `gr.Blocks.launch` would serve: same theme, CSS,
scripts and routes, except where a shared dashboard needs more: sign-in and
sign-out are ui/sign_in.py's (sessions that expire, a wait after wrong
passwords, sign-out only from the page itself), no other site gets a CORS
answer (`same_origin_only`), FastAPI's /docs and /openapi.json are off, what
each user uploads through Gradio's upload route is held to their upload caps
(`UploadQuota`, access/cache_quota.py), and it serves HTTPS when given a
certificate.

With Gradio's own profiling on (`GRADIO_PROFILING=1` in the server's
environment: each event's queue wait, preprocess, handler and postprocess
times, served at `/gradio_api/profiling/traces`), the page's JSON routes are
timed too (`RouteTimer`) and listed there under their path, so a benchmark
reads the server's time per refresh and per poll from the server itself
(benchmarks/bench_load.py). Off, nothing is timed.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import time
from collections.abc import Callable

import gradio as gr
from fastapi import HTTPException, Request

from workbench.access.cache_quota import CacheLedger
from workbench.access.sessions import DEFAULT_SESSION_HOURS
from workbench.access.sign_in_limits import SignInLimits
from workbench.access.uploads import UploadError
from workbench.ui import gradio_compat, sign_in


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
        start = time.monotonic()
        try:
            await self.app(scope, receive, send)
        finally:
            gradio_compat.add_route_trace(scope["path"], (time.monotonic() - start) * 1000)


class UploadQuota:
    """ASGI middleware: Gradio's upload route under each signed-in user's upload caps (access/cache_quota.py).

    A request must say its size (Content-Length; the server reads no more
    than that): it counts as the user's before its body is read, and one that
    would take them past a cap is answered 413 with the rule, its body never
    read. Once Gradio has written the files, their paths (its answer) count
    instead. A request of nobody signed in goes on to Gradio, which answers 401.
    """

    def __init__(self, app, path: str, user_of: Callable[[dict], str | None], ledger: CacheLedger):
        self.app = app
        self.path = path
        self.user_of = user_of
        self.ledger = ledger

    async def __call__(self, scope, receive, send):
        user = (
            self.user_of(scope)
            if scope["type"] == "http" and scope["method"] == "POST" and scope["path"].rstrip("/") == self.path
            else None
        )
        if user is None:
            await self.app(scope, receive, send)
            return
        size = content_length(scope)
        if size is None:
            await plain_answer(
                send,
                411,
                "upload: the request does not say its size (Content-Length); send the files as a browser does",
            )
            return
        try:
            self.ledger.reserve(user, size)
            try:
                messages = await answer_of(self.app, scope, receive)
                self.ledger.admit(user, written_paths(messages))
            finally:
                self.ledger.release(user, size)
        except UploadError as exc:
            await plain_answer(send, 413, str(exc))
            return
        for message in messages:
            await send(message)


def content_length(scope) -> int | None:
    """The request's Content-Length, or None when it has none (or not a number)."""
    for name, value in scope.get("headers", []):
        if name.lower() == b"content-length":
            return int(value) if value.isdigit() else None
    return None


async def plain_answer(send, status: int, text: str) -> None:
    """Answer `status` with `text` (UTF-8 plain text)."""
    body = text.encode()
    headers = [(b"content-type", b"text/plain; charset=utf-8"), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


async def answer_of(app, scope, receive) -> list[dict]:
    """The ASGI messages `app` answers the request with, kept back (once its background tasks, which move the
    uploaded files into place, are done)."""
    messages: list[dict] = []

    async def keep(message):
        messages.append(message)

    await app(scope, receive, keep)
    return messages


def written_paths(messages: list[dict]) -> list[str]:
    """The paths an upload answer names (Gradio's JSON list); [] for any other answer (a refusal, an error)."""
    start = next((m for m in messages if m["type"] == "http.response.start"), {})
    if start.get("status") != 200:
        return []
    try:
        paths = json.loads(b"".join(m.get("body", b"") for m in messages if m["type"] == "http.response.body"))
    except ValueError:
        return []
    return [path for path in paths if isinstance(path, str)] if isinstance(paths, list) else []


def signed_in_user(gradio_app, scope) -> str | None:
    """The signed-in user a request comes from (its session cookie), as Gradio's routes read it; else None."""
    from starlette.requests import Request

    return gradio_compat.session_user(gradio_app, Request(scope).cookies)


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


SHUTDOWN_GRACE_S = 2  # seconds open requests get to finish once the server is told to stop


def serve(
    blocks: gr.Blocks,
    host: str,
    port: int,
    *,
    ssl_certfile: str | None = None,
    ssl_keyfile: str | None = None,
    **options,
) -> None:
    """Serve `blocks` at http(s)://host:port/ until interrupted (options: those of `server_app`).

    `ssl_certfile`/`ssl_keyfile` (PEM, checked by access/tls.check_tls) serve HTTPS.
    """
    import uvicorn

    api = server_app(blocks, host, port, **options)
    print(f"GRPO Workbench: {'https' if ssl_certfile else 'http'}://{host}:{port}/", flush=True)
    config = uvicorn.Config(
        api,
        host=host,
        port=port,
        log_level="warning",
        ssl_certfile=ssl_certfile,
        ssl_keyfile=ssl_keyfile,
        timeout_graceful_shutdown=SHUTDOWN_GRACE_S,
    )
    try:
        stream_ending_server_class()(config, gradio_compat.mounted_app(api)).run()
    except KeyboardInterrupt:  # Ctrl-C: uvicorn has stopped the server, and raises it again once done
        pass
    print("GRPO Workbench stopped (runs started from it go on: the Runs tab finds them next time)", flush=True)


def drop_cancelled_requests(record: logging.LogRecord) -> bool:
    """A logging filter: False for a request's error that is its cancellation."""
    return not (record.exc_info and isinstance(record.exc_info[1], asyncio.CancelledError))


def stream_ending_server_class():
    """uvicorn's Server, ending the open pages' streams when told to stop (built on first use: uvicorn is
    imported only by a process that serves)."""
    import uvicorn

    class Server(uvicorn.Server):
        """Every open page holds a Gradio heartbeat stream open, and uvicorn's shutdown waits for open
        requests: Ctrl-C or SIGTERM with a tab open would wait for the tab (up to SHUTDOWN_GRACE_S, then cut
        it off with an error). Ending the streams when the signal comes lets the server stop at once."""

        def __init__(self, config, gradio_app):
            super().__init__(config)
            self.gradio_app = gradio_app
            self.loop = None

        async def startup(self, sockets=None):
            self.loop = asyncio.get_running_loop()
            await super().startup(sockets)

        async def shutdown(self, sockets=None):
            # what is still open after SHUTDOWN_GRACE_S (a page's event stream while its timers run) is cancelled:
            # expected when stopping, so not logged as an application error with its traceback
            logging.getLogger("uvicorn.error").addFilter(drop_cancelled_requests)
            await super().shutdown(sockets)

        def handle_exit(self, sig, frame):
            if self.loop is not None:
                gradio_compat.stop_streams(self.gradio_app, self.loop)
            super().handle_exit(sig, frame)

    return Server


def server_app(
    blocks: gr.Blocks,
    host: str,
    port: int,
    *,
    session_hours: float = DEFAULT_SESSION_HOURS,
    sign_in_limits: SignInLimits = SignInLimits(),
    **mount_options,
):
    """The FastAPI app that serves `blocks` (mount_options: theme, css, js, auth, ...), ready for uvicorn.

    `blocks.api_routes` (path -> handler, from ui/app.build_app) become GET
    routes beside the app: small JSON answers the page's own scripts ask for,
    behind the same sign-in as the app when `auth` is given. A handler is
    called as `handler(user, query)`: the signed-in name (None without
    sign-in) and the query parameters, so it answers only what that user may see.
    With `auth`, sign-in and sign-out are ui/sign_in.py's: sessions that last
    `session_hours`, and a wait after too many wrong passwords (`sign_in_limits`).
    Each of gradio_compat's patches is applied only where its target is there (a warning otherwise).
    """
    import fastapi

    # FastAPI's /docs and /openapi.json (the outer app's, and the mounted Gradio app's own /openapi.json)
    # would list every route to anyone, signed in or not: off. Gradio's API page stays behind sign-in.
    api = fastapi.FastAPI(docs_url=None, redoc_url=None, openapi_url=None)
    mount_options["app_kwargs"] = {"openapi_url": None, **mount_options.get("app_kwargs", {})}
    signing_in = None
    if mount_options.get("auth") and gradio_compat.own_sign_in():
        signing_in = sign_in.SignIn(session_hours * 3600, sign_in_limits)
        gradio_compat.check_login_messages()
    script = (
        gradio_compat.frame_throttle_script()
        + gradio_compat.plot_redraws_script()
        + (sign_in.PAGE_JS if signing_in else "")
    )
    if script:
        api.add_middleware(EarlyScript, script=script)
    same_origin_only(api)
    if signing_in:
        signing_in.add_routes(api)
    routes = getattr(blocks, "api_routes", {})
    if gradio_compat.route_timing_on():
        api.add_middleware(RouteTimer, paths=routes)
    mounted: dict = {}
    upload_route = gradio_compat.upload_route() if mount_options.get("auth") else None
    if upload_route:  # each user's uploads through Gradio's own route, under their upload caps
        api.add_middleware(
            UploadQuota,
            path=upload_route,
            ledger=CacheLedger(),
            user_of=lambda scope: signed_in_user(mounted["app"], scope),
        )

    def route(handler):
        def answer(request: Request):
            return handler(require_sign_in(mounted["app"], request), request.query_params)

        return answer

    # Added before the app is mounted: the mount at "" would otherwise answer these paths itself.
    for path, handler in routes.items():
        api.add_api_route(path, route(handler), methods=["GET"])
    # Gradio 6's run history makes the page read, parse, extend and write a JSON list of its last 100 events
    # (every input and output, the whole form's) in localStorage at each event's start, updates and end: with
    # the Setup form and the Train tab's refreshes that was about a third of the page's main-thread time
    # (Chromium's profile of a Setup-tab session; benchmarks/bench_page_events.py), and it records nothing
    # this dashboard shows. Off, unless Gradio's own GRADIO_RUN_HISTORY asks for it.
    mount_options.setdefault("run_history", None if os.environ.get("GRADIO_RUN_HISTORY") else False)
    api = gr.mount_gradio_app(api, blocks, path="", server_name=host, server_port=port, **mount_options)
    mounted["app"] = gradio_compat.mounted_app(api)
    if signing_in:
        signing_in.attach(mounted["app"])
    gradio_compat.quiet_queue(blocks)
    return api


def require_sign_in(gradio_app, request: Request) -> str | None:
    """The signed-in user's name; 401 without the session cookie of one, when the app has sign-in.

    The same rule as gradio's own routes (its `login_check`): the cookie
    set at sign-in names a token kept in the app's sessions, which map it
    to the user's name while the session lasts (ui/sign_in.py). None when the
    app has no sign-in.
    """
    if not gradio_compat.has_sign_in(gradio_app):
        return None
    user = gradio_compat.session_user(gradio_app, request.cookies)
    if user is None:
        raise HTTPException(status_code=401, detail="Not signed in")
    return user
