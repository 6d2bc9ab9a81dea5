"""How many wrong passwords a name, or an address, may send before it must wait.

Each sign-in check costs a noticeable slice of a core (PBKDF2, 600,000 rounds), and a
class's passwords are often short: without a limit, a script could try a
name's passwords as fast as the server hashes them. The rules:

- a name that failed `per_name` times within `window_s` waits `wait_s` after
  its last failure (5 in 5 minutes, then 5 minutes), whoever sends it;
- an address that failed `per_address` times within `window_s` waits the
  same. Its limit is higher (20) because a class behind one school router
  shares an address, and a few typos each must not lock everyone out;
- a refused attempt is not checked and does not count (a wait does not grow
  while someone keeps trying); after the wait, one attempt: a right password
  clears the name's failures, a wrong one starts the wait again.

Checks run in threads, so several attempts for one name can be under way at
once: `attempt` counts a name's attempts in flight with its failures, and
refuses one that could take the count past the limit before the others are
known, so ten attempts sent at once for one name still meet the limit at the
fifth. An address's attempts in flight do not count: a class signing in at
once from one router is not a burst of failures. Names that were never
accounts count like real ones, so a wait says nothing about which names exist.

Pure standard library; the server (ui/sign_in.py) calls it from its event loop.
"""

from __future__ import annotations

import math
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

from workbench.errors import WorkbenchError

SIGN_IN_WAIT_ENV = "WORKBENCH_SIGN_IN_WAIT_S"
# Beyond this many names or addresses tracked, those with no failure left in the window are forgotten.
MAX_TRACKED = 10_000


@dataclass(frozen=True)
class SignInLimits:
    per_name: int = 5
    per_address: int = 20
    window_s: float = 300.0
    wait_s: float = 300.0


def limits_from_env(environ: dict) -> SignInLimits:
    """The default limits, with the wait from WORKBENCH_SIGN_IN_WAIT_S (seconds) when it is set."""
    value = environ.get(SIGN_IN_WAIT_ENV, "").strip()
    if not value:
        return SignInLimits()
    try:
        wait_s = float(value)
    except ValueError:
        wait_s = math.nan
    if not (0 < wait_s <= 86_400):
        raise WorkbenchError(
            field=SIGN_IN_WAIT_ENV,
            rule=f"seconds a name or address waits after too many wrong passwords, "
            f"above 0 and at most 86400; got {value[:40]!r}",
            fix=f"e.g. {SIGN_IN_WAIT_ENV}=300, or leave it unset for 5 minutes",
        )
    return SignInLimits(wait_s=wait_s)


def describe_wait(seconds: float) -> str:
    """'4 min 10 s', '40 s': how long to wait, rounded up to the second."""
    total = max(1, math.ceil(seconds))
    minutes, rest = divmod(total, 60)
    if not minutes:
        return f"{rest} s"
    return f"{minutes} min {rest} s" if rest else f"{minutes} min"


def wait_message(seconds: float) -> str:
    return (
        f"Too many wrong passwords for this name or from this address: "
        f"wait {describe_wait(seconds)}, then sign in again."
    )


class _Record:
    """One name's or address's recent failures, attempts under way, and the end of its wait."""

    __slots__ = ("failures", "in_flight", "locked_until")

    def __init__(self):
        self.failures: deque[float] = deque()
        self.in_flight = 0
        self.locked_until = 0.0


class FailedSignIns:
    """Recent failed sign-ins by name and by address, and how long each must still wait.

    The server calls `attempt(name, address)` before checking a password, and
    then exactly one of `failed` or `succeeded` for each attempt it let through.
    """

    def __init__(self, limits: SignInLimits = SignInLimits(), clock: Callable[[], float] = time.monotonic):
        self.limits = limits
        self._clock = clock
        self._by_name: dict[str, _Record] = {}
        self._by_address: dict[str, _Record] = {}

    def _pairs(self, name: str, address: str):
        return ((self._by_name, name, self.limits.per_name), (self._by_address, address, self.limits.per_address))

    def wait_s(self, name: str, address: str) -> float:
        """Seconds before `name` from `address` may try again; 0 when it may try now."""
        now = self._clock()
        waits = [0.0]
        for table, key, limit in self._pairs(name, address):
            record = self._current(table, key, now)
            if record is None:
                continue
            if record.locked_until > now:
                waits.append(record.locked_until - now)
            elif table is self._by_name and record.in_flight and record.in_flight + len(record.failures) >= limit:
                waits.append(self.limits.wait_s)  # those under way may end in a wait: do not add to them
        return max(waits)

    def attempt(self, name: str, address: str) -> float:
        """Start an attempt: the wait when it is refused (nothing counted), else 0 (now under way)."""
        wait = self.wait_s(name, address)
        if wait > 0:
            return wait
        for table, key, _ in self._pairs(name, address):
            table.setdefault(key, _Record()).in_flight += 1
            if len(table) > MAX_TRACKED:
                self._forget_old(table)
        return 0.0

    def failed(self, name: str, address: str) -> None:
        """The attempt's password was wrong: counted, and a name or address at its limit waits."""
        now = self._clock()
        for table, key, limit in self._pairs(name, address):
            record = table.setdefault(key, _Record())
            record.in_flight = max(0, record.in_flight - 1)
            record.failures.append(now)
            self._current(table, key, now)
            if len(record.failures) >= limit:
                record.locked_until = now + self.limits.wait_s

    def succeeded(self, name: str, address: str) -> None:
        """The attempt's password was right: the name starts afresh; the address keeps its failures."""
        self._by_name.pop(name, None)
        record = self._by_address.get(address)
        if record is not None:
            record.in_flight = max(0, record.in_flight - 1)

    def _current(self, table: dict, key: str, now: float) -> _Record | None:
        """The key's record with failures older than the window dropped; None (and forgotten) when empty."""
        record = table.get(key)
        if record is None:
            return None
        while record.failures and now - record.failures[0] >= self.limits.window_s:
            record.failures.popleft()
        if not record.failures and not record.in_flight and record.locked_until <= now:
            del table[key]
            return None
        return record

    def _forget_old(self, table: dict) -> None:
        now = self._clock()
        for key in list(table):
            self._current(table, key, now)
