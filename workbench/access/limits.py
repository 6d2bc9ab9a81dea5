"""How often one user of a shared dashboard may start and stop runs: at most N a minute.

Each launch, smoke test, resume or stop starts or ends processes, checks a
config and writes run folders; a script that presses Launch and Stop in a
loop would keep the server busy for everyone. `ActionLimit.take(user)`
counts one action and refuses (naming the limit and how long to wait) once
the user has had WORKBENCH_MAX_LAUNCHES_PER_MINUTE (default 10; 0 for no
limit) in the last 60 seconds. The count lives in the dashboard's process
(it starts again with the app). Pure standard library.
"""

from __future__ import annotations

import math
import os
import threading
import time
from collections import defaultdict, deque
from collections.abc import Mapping

from workbench.errors import WorkbenchError

MAX_ACTIONS_ENV = "WORKBENCH_MAX_LAUNCHES_PER_MINUTE"
DEFAULT_MAX_ACTIONS = 10
WINDOW_SECONDS = 60.0


class LimitError(WorkbenchError):
    """An action refused because the user reached their limit; the message says how long to wait."""


def max_actions(environ: Mapping[str, str] | None = None) -> int:
    """The limit: $WORKBENCH_MAX_LAUNCHES_PER_MINUTE, DEFAULT_MAX_ACTIONS when unset, 0 for none."""
    text = ((os.environ if environ is None else environ).get(MAX_ACTIONS_ENV) or "").strip()
    if not text:
        return DEFAULT_MAX_ACTIONS
    if not text.isdigit():
        raise LimitError(
            field=MAX_ACTIONS_ENV,
            rule=f"{text[:40]!r} is not a whole number",
            fix=f"set it to 1 or more, 0 for no limit, or unset it for the default {DEFAULT_MAX_ACTIONS}",
        )
    return int(text)


class ActionLimit:
    """At most `limit` actions per user in any `window` seconds (0: no limit); safe across threads."""

    def __init__(self, limit: int, window: float = WINDOW_SECONDS):
        self.limit, self.window = limit, window
        self._times: dict[str, deque] = defaultdict(deque)
        self._lock = threading.Lock()

    def take(self, user: str | None, what: str = "launch", now: float | None = None) -> None:
        """Count one action of `user`, or raise LimitError when they have had `limit` in the window.

        No user (an open dashboard) and a limit of 0 are never limited.
        """
        if not user or self.limit <= 0:
            return
        now = time.monotonic() if now is None else now
        with self._lock:
            times = self._times[user]
            while times and times[0] <= now - self.window:
                times.popleft()
            if len(times) >= self.limit:
                wait = math.ceil(times[0] + self.window - now)
                raise LimitError(
                    field=what,
                    rule=f"{user} has started or stopped runs {len(times)} times in the "
                    f"last {self.window:.0f} s, the most this dashboard allows ({MAX_ACTIONS_ENV})",
                    fix=f"wait {wait} s and try again",
                )
            times.append(now)
