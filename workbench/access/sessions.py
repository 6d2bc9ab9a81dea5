"""Sign-in sessions that end: a token expires after a set time, and sign-out ends it on the server.

Gradio keeps a served app's sessions in `app.tokens`, a mapping from the
token in the session cookie to the user's name, and every one of its routes
(the page's config, the queue, uploads, files) and the dashboard's JSON routes
read it with `tokens.get(token)` (ui/gradio_compat/ checks that the
installed Gradio still does, and is the one module that touches it). Its own
mapping is a plain dict: a token lives as long as the process, and a cookie
copied off a shared computer works until the server restarts.

`SessionTokens` is that mapping with a time of issue per token: a token older
than `max_age_s` reads as absent everywhere at once (and is dropped), and
`end(token)` is sign-out. Times come from a monotonic clock, so setting the
machine's clock neither revives nor ends a session.

Pure standard library.
"""

from __future__ import annotations

import math
import secrets
import time
from collections.abc import Callable, Iterator, MutableMapping

from workbench.errors import WorkbenchError

SESSION_HOURS_ENV = "WORKBENCH_SESSION_HOURS"
# A school day: a class signs in once in the morning, and a cookie left on a shared computer dies overnight.
DEFAULT_SESSION_HOURS = 12.0
# A year: beyond it "never expires" is what was meant, and a cookie's max-age stays a sane number.
MAX_SESSION_HOURS = 24 * 365


def session_hours(value: str | float | None) -> float:
    """Hours a sign-in lasts, from `--session-hours` / WORKBENCH_SESSION_HOURS (None: the default, 12)."""
    if value is None or (isinstance(value, str) and not value.strip()):
        return DEFAULT_SESSION_HOURS
    try:
        hours = float(value)
    except (TypeError, ValueError):
        hours = math.nan
    if not (0 < hours <= MAX_SESSION_HOURS):  # also refuses NaN
        raise WorkbenchError(
            field="--session-hours",
            rule=f"hours a sign-in lasts, a number above 0 and at most {MAX_SESSION_HOURS}; got {str(value)[:40]!r}",
            fix=f"e.g. --session-hours 12 (or {SESSION_HOURS_ENV}=12)",
        )
    return hours


class SessionTokens(MutableMapping):
    """token -> user name, where a token older than `max_age_s` no longer exists."""

    def __init__(self, max_age_s: float, clock: Callable[[], float] = time.monotonic):
        self.max_age_s = float(max_age_s)
        self._clock = clock
        self._users: dict[str, str] = {}
        self._issued: dict[str, float] = {}

    def issue(self, user: str) -> str:
        """A new session for `user`: its token, unguessable (256 bits)."""
        token = secrets.token_urlsafe(32)
        self[token] = user
        return token

    def end(self, token: str | None) -> None:
        """Sign-out: the token stops working at once (nothing happens for an unknown or expired one)."""
        self._users.pop(token, None)
        self._issued.pop(token, None)

    def age_s(self, token: str) -> float | None:
        """Seconds since `token` was issued; None when it is unknown or expired."""
        return self._clock() - self._issued[token] if token in self else None

    def _expired(self, token) -> bool:
        issued = self._issued.get(token)
        return issued is None or self._clock() - issued >= self.max_age_s

    def _drop_expired(self) -> None:
        for token in [t for t in self._users if self._expired(t)]:
            self.end(token)

    def __getitem__(self, token):
        if token not in self._users:
            raise KeyError(token)
        if self._expired(token):
            self.end(token)
            raise KeyError(token)
        return self._users[token]

    def __setitem__(self, token, user) -> None:
        # Each new session sweeps out the expired ones, so a long-running server holds only live tokens.
        self._drop_expired()
        self._users[token] = user
        self._issued[token] = self._clock()

    def __delitem__(self, token) -> None:
        if token not in self._users:
            raise KeyError(token)
        self.end(token)

    def __iter__(self) -> Iterator[str]:
        self._drop_expired()
        return iter(list(self._users))

    def __len__(self) -> int:
        self._drop_expired()
        return len(self._users)
