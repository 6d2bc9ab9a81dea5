"""Sign-in and sign-out on the served dashboard: Gradio's login page, with the server side made safe for a class.

Gradio 6.31's own `/login` checks the password on the server's event loop
(PBKDF2, 600,000 rounds: a few sign-ins at once froze every page),
has no limit on wrong passwords, keeps a session until the server restarts,
and signs out on a GET `/logout`, which any other site can make a signed-in
browser send (an image tag is enough). `SignIn` answers those paths instead,
on the FastAPI app the Gradio app is mounted on (`server.serve` adds its
routes before the mount, so they take precedence):

- `POST /login` takes the same form and answers what Gradio's login page
  expects (200 signed in, 400 "Incorrect credentials."). The password is
  checked in a small thread pool (half the cores: a burst of sign-ins leaves
  the rest to the pages and the runs); a name or address with too many wrong
  passwords gets 429 and how long to wait (access/sign_in_limits.py), which
  `PAGE_JS` shows on the login page. A sign-in posted from another site's
  page (a foreign `Origin`) is refused.
- The session is a token in `SessionTokens` (access/sessions.py), which
  replaces the sessions of Gradio's app (ui/gradio_compat/: the one place
  that touches them): every Gradio route and the dashboard's JSON routes read
  it, so a token past its hours is refused by all of them. The
  cookie is HttpOnly, SameSite=Lax (a cross-site request carries no
  session), Secure when the page is served over HTTPS, and lives as long.
- `POST /logout` ends the session on the server, and only when the request
  comes from the dashboard's own page (its `Origin`, or `Referer`, names the
  host it was sent to): the Sign out button (`sign_out_button`) posts it.
  `GET /logout` signs no one out.

Where the installed Gradio keeps its sessions differently, gradio_compat says
so at start and Gradio's own sign-in serves instead.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import math
import os
from concurrent.futures import ThreadPoolExecutor
from urllib.parse import urlsplit

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, PlainTextResponse

from workbench.access.sessions import SessionTokens
from workbench.access.sign_in_limits import FailedSignIns, SignInLimits, wait_message
from workbench.ui import gradio_compat

log = logging.getLogger("workbench.sign_in")

SIGN_OUT_ID = "wb-sign-out"
WAIT_NOTE_ID = "wb-sign-in-wait"
DEFAULT_PORTS = {"http": "80", "https": "443"}

# Runs first in the page (server.EarlyScript). Gradio's login form shows "Incorrect Credentials" for a 400
# and reloads on a 200, and shows nothing for any other answer: a 429's wait is shown here, in place of
# the form's message, and cleared by the next answer.
PAGE_JS = f"""<script>
(() => {{
  const fetchBefore = window.fetch.bind(window);
  const isLogin = (input) => {{
    try {{ return /\\/login\\/?$/.test(new URL(input && input.url ? input.url : String(input), location.href).pathname); }}
    catch (error) {{ return false; }}
  }};
  const showWait = (text) => {{
    let note = document.getElementById("{WAIT_NOTE_ID}");
    // Gradio's "Incorrect Credentials" of the attempt before would read as the answer to this one.
    document.querySelectorAll("{gradio_compat.LOGIN_WRONG_SELECTOR}").forEach((old) => {{
      old.style.display = text ? "none" : "";
    }});
    if (!text) {{ note && note.remove(); return; }}
    if (!note) {{
      note = document.createElement("p");
      note.id = "{WAIT_NOTE_ID}";
      note.setAttribute("role", "alert");
      note.style.cssText = "color: var(--error-text-color, #b91c1c); margin: 8px 0; font-weight: 600;";
      const anchor = document.querySelector("{gradio_compat.LOGIN_MESSAGE_SELECTOR}") || document.querySelector("h2");
      anchor ? anchor.insertAdjacentElement("afterend", note) : document.body.prepend(note);
    }}
    note.textContent = text;
  }};
  window.fetch = async (input, init) => {{
    const response = await fetchBefore(input, init);
    if (isLogin(input)) {{
      if (response.status === 429) {{
        const answer = await response.clone().json().catch(() => ({{}}));
        showWait(answer.detail || "Too many wrong passwords: wait a few minutes, then sign in again.");
      }} else {{
        showWait("");
      }}
    }}
    return response;
  }};
}})();
</script>"""

# One of the page's scripts (run once the app has loaded): a click on the Sign out button posts /logout,
# which checks the page's Origin, then the reload shows the login page. The listener sits on the document,
# so it outlives any re-render of the button, and the button needs no Gradio event. A 405 means Gradio's own
# sign-in serves (gradio_compat found its sessions changed), which signs out by following the link.
SIGN_OUT_JS = f"""
() => {{
  document.addEventListener("click", async (event) => {{
    if (!event.target.closest || !event.target.closest("#{SIGN_OUT_ID}")) return;
    const answer = await fetch("logout", {{ method: "POST", credentials: "same-origin" }});
    if (answer.status === 405) {{ window.location.href = "logout"; return; }}
    window.location.reload();
  }});
}}
"""


def sign_out_button(page_scripts: list[str]):
    """A small Sign out button (the app's header, on a dashboard with accounts); its script joins `page_scripts`."""
    import gradio as gr

    page_scripts.append(SIGN_OUT_JS)
    return gr.Button("Sign out", size="sm", variant="secondary", scale=0, min_width=96, elem_id=SIGN_OUT_ID)


def _authority(scheme: str, netloc: str) -> str:
    """host[:port] in lower case, without the scheme's default port."""
    netloc = netloc.lower()
    host, colon, port = netloc.rpartition(":")
    if not colon or netloc.endswith("]"):  # no port given (an IPv6 address has colons of its own)
        return netloc
    return host if port == DEFAULT_PORTS.get(scheme) else netloc


def from_own_page(request: Request, allow_missing: bool = False) -> bool:
    """True when the request's Origin (or Referer) is the host it was sent to: the dashboard's own page.

    A browser names the page a POST comes from, and no other site can make it
    lie. `allow_missing`: a request that names no page (a script, Gradio's
    Python client) passes; a browser always names one on a POST.
    """
    source = request.headers.get("origin") or request.headers.get("referer")
    if not source or source == "null":
        return allow_missing and not source
    parts = urlsplit(source)
    if parts.scheme not in DEFAULT_PORTS or not parts.netloc:
        return False
    scheme = request.url.scheme
    hosts = [request.headers.get("host"), request.headers.get("x-forwarded-host")]
    origin = _authority(parts.scheme, parts.netloc)
    return any(host and _authority(scheme, host.split(",")[0].strip()) == origin for host in hosts)


def hash_workers() -> int:
    """Threads that check passwords at once: half the cores this process may use, at least one."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 2)
    return max(1, cores // 2)


class SignIn:
    """The sign-in routes of one served app, its sessions and its failed attempts."""

    def __init__(self, session_s: float, limits: SignInLimits = SignInLimits()):
        self.tokens = SessionTokens(session_s)
        self.failures = FailedSignIns(limits)
        self._pool = ThreadPoolExecutor(max_workers=hash_workers(), thread_name_prefix="sign-in")
        self.app = None  # Gradio's App, once mounted (attach)

    def add_routes(self, api: FastAPI) -> None:
        """Answer /login and /logout on `api`; call before the Gradio app is mounted on it."""
        for path in ("/login", "/login/"):
            api.add_api_route(path, self.login, methods=["POST"], include_in_schema=False)
        for path in ("/logout", "/logout/"):
            api.add_api_route(path, self.logout, methods=["POST"], include_in_schema=False)
            api.add_api_route(path, self.logout_by_link, methods=["GET"], include_in_schema=False)

    def attach(self, gradio_app) -> None:
        """Make the mounted Gradio app keep its sessions here (its routes read `tokens`)."""
        gradio_compat.keep_sessions_in(gradio_app, self.tokens)
        self.app = gradio_app

    async def login(self, request: Request):
        if not from_own_page(request, allow_missing=True):
            return PlainTextResponse("Sign in from the dashboard's own page.", status_code=403)
        form = await request.form()
        name_field, password_field = gradio_compat.LOGIN_FIELDS
        name, password = str(form.get(name_field, "")).strip(), str(form.get(password_field, ""))
        address = request.client.host if request.client else ""
        # No account name is longer than 64 characters: longer ones share one count, and a stream of
        # huge made-up names holds no memory.
        counted = name[:65]
        wait = self.failures.attempt(counted, address)
        if wait:
            return JSONResponse(
                {"detail": wait_message(wait)}, status_code=429, headers={"Retry-After": str(math.ceil(wait))}
            )
        check = gradio_compat.password_check(self.app)
        try:
            if inspect.iscoroutinefunction(check):
                matched = bool(await check(name, password))
            else:  # PBKDF2 in a thread: the event loop keeps answering every other page meanwhile
                matched = bool(await asyncio.get_running_loop().run_in_executor(self._pool, check, name, password))
        except BaseException:
            self.failures.failed(counted, address)
            raise
        if not matched:
            self.failures.failed(counted, address)
            if self.failures.wait_s(counted, address):
                log.warning("sign-in: %r from %s must wait after too many wrong passwords", counted, address)
            return JSONResponse({"detail": "Incorrect credentials."}, status_code=gradio_compat.LOGIN_WRONG_STATUS)
        self.failures.succeeded(counted, address)
        token = self.tokens.issue(name)
        response = JSONResponse({"success": True})
        secure = request.url.scheme == "https"
        over_https, over_http = self._cookie_names()
        response.set_cookie(
            over_https if secure else over_http,
            token,
            max_age=max(1, int(self.tokens.max_age_s)),
            path="/",
            httponly=True,
            samesite="lax",
            secure=secure,
        )
        response.delete_cookie(over_http if secure else over_https, path="/")  # an older session's, if any
        return response

    async def logout(self, request: Request):
        if not from_own_page(request):
            return PlainTextResponse("Sign out with the Sign out button on the dashboard's own page.", status_code=403)
        for cookie in self._cookie_names():
            self.tokens.end(request.cookies.get(cookie))
        response = JSONResponse({"success": True})
        for cookie in self._cookie_names():
            response.delete_cookie(cookie, path="/")
        return response

    async def logout_by_link(self, request: Request):  # noqa: ARG002 (the route's signature)
        return PlainTextResponse(
            "Signing out takes a POST from the dashboard's own page: use its Sign out button.",
            status_code=405,
            headers={"Allow": "POST"},
        )

    def _cookie_names(self) -> tuple[str, str]:
        """(the cookie over HTTPS, the cookie over plain HTTP): the two names Gradio's routes read."""
        return gradio_compat.session_cookie_names(self.app)
