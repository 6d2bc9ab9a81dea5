"""Gradio's sign-in as ui/sign_in.py stands in for it: where Gradio's app keeps sessions and passwords, the cookies
its routes read, and what its login page posts and shows.
"""

from __future__ import annotations

import functools
import hmac
import re
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path

from workbench.ui.gradio_compat.gradio_compat_patches import code_reads, frontend_assets, nested_code, ready

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
    return [
        path.read_text(encoding="utf-8", errors="replace")
        for path in sorted((assets or frontend_assets()).glob(LOGIN_PAGE_ASSETS))
    ]


@functools.cache
def sign_in_problem(assets: Path | None = None) -> str | None:
    """What is missing for ui/sign_in.py to stand in for Gradio's sign-in (None: nothing)."""
    from gradio.routes import App

    if not code_reads(App.__init__, "tokens", "auth", "auth_dependency", "cookie_id"):
        return "Gradio's App no longer keeps tokens, auth, auth_dependency and cookie_id"
    reader = nested_code(App.create_app.__code__, "get_current_user")
    if (
        reader is None
        or not {"cookies", "cookie_id", "tokens", "get"} <= set(reader.co_names)
        or not set(SESSION_COOKIES) <= {const for const in reader.co_consts if isinstance(const, str)}
    ):
        return "Gradio's get_current_user no longer reads app.tokens through the access-token-<cookie_id> cookies"
    quote = "[`'\"]"
    page_rules = [rf"append\(\s*{quote}{field}{quote}" for field in LOGIN_FIELDS]
    page_rules += [rf"{quote}login{quote}", rf"status\s*===?\s*{LOGIN_WRONG_STATUS}"]
    if not any(all(re.search(rule, page) for rule in page_rules) for page in _login_pages(assets)):
        return (
            f"Gradio's login page ({LOGIN_PAGE_ASSETS}) no longer posts {' and '.join(LOGIN_FIELDS)} to login "
            f"and reads {LOGIN_WRONG_STATUS} as a wrong password"
        )
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
