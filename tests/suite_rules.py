"""`slow` means slow, checked on every run (a pytest plugin loaded by conftest.py).

`make test-fast` runs the tests not marked `slow` (nor `browser`) and must stay seconds, so a test
that is not marked `slow`:

- fails if its own time passes `slow_after_s` seconds ([tool.pytest.ini_options] in pyproject.toml; under
  pytest-xdist, that times the number of workers: see `slow_limit`).
  Its own time is its call plus the setup of its function-scoped fixtures; module- and session-scoped
  fixtures are left out (they are paid once, by whichever test asks first, which depends on the order
  and, under pytest-xdist, on the worker). It is wall-clock time less the time the test's thread
  waited for a CPU that other processes held (the kernel's run-queue wait, /proc/self/schedstat), so
  other work on a shared machine, or the other workers, do not make a fast test look slow.
- fails if it loads model weights in the test process (a safetensors file opened through
  `safetensors.safe_open`, which transformers, peft and `safetensors.torch` all use). The check wraps
  `safetensors.safe_open` at configure time, before a test module imports transformers; what a
  module- or session-scoped fixture loads is left out, as its time is.

Either failure says what to do: mark the test `@pytest.mark.slow`, or make it faster.
"""

from __future__ import annotations

import time

import pytest

OWN_S = pytest.StashKey[float]()
WEIGHTS_LOADED = pytest.StashKey[list]()
SCHEDSTAT = "/proc/self/schedstat"  # "<ns on a CPU> <ns waiting for a CPU> <time slices>" of the main thread


def own_clock() -> float:
    """Seconds that pass while this thread runs or sleeps, not while it waits for a CPU held by others."""
    try:
        with open(SCHEDSTAT) as stats:
            waited_s = int(stats.read().split()[1]) / 1e9
    except (OSError, IndexError, ValueError):  # no schedstat (not Linux): wall-clock time
        waited_s = 0.0
    return time.perf_counter() - waited_s


class _Shared:
    """Own seconds spent setting up module- and session-scoped fixtures since the last `take()`."""

    def __init__(self):
        self.seconds = 0.0
        self.depth = 0

    def take(self) -> float:
        seconds, self.seconds = self.seconds, 0.0
        return seconds


_shared = _Shared()
_watch = {"item": None}  # the test running now, when it is not marked slow


def pytest_addoption(parser):
    parser.addini(
        "slow_after_s", "seconds a test not marked slow may take (its call and function-scoped setup)", default="5"
    )


def pytest_configure(config):
    _guard_weights()


def _guard_weights() -> None:
    import safetensors

    real = safetensors.safe_open
    if getattr(real, "wraps_for_suite_rules", False):
        return

    def safe_open(filename, *args, **kwargs):
        item = _watch["item"]
        if item is not None and not _shared.depth:  # a shared fixture's build is left out, as its time is
            item.stash.setdefault(WEIGHTS_LOADED, []).append(str(filename))
        return real(filename, *args, **kwargs)

    safe_open.wraps_for_suite_rules = True
    safetensors.safe_open = safe_open


def _is_slow(item) -> bool:
    return item.get_closest_marker("slow") is not None


@pytest.hookimpl(wrapper=True)
def pytest_fixture_setup(fixturedef, request):
    if fixturedef.scope == "function" or _shared.depth:
        return (yield)
    _shared.depth += 1
    started = own_clock()
    try:
        return (yield)
    finally:
        _shared.depth -= 1
        _shared.seconds += own_clock() - started


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item, nextitem):
    _watch["item"] = None if _is_slow(item) else item
    try:
        return (yield)
    finally:
        _watch["item"] = None


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item):
    _shared.take()
    started = own_clock()
    try:
        return (yield)
    finally:
        item.stash[OWN_S] = own_clock() - started - _shared.take()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item):
    started = own_clock()
    try:
        return (yield)
    finally:
        item.stash[OWN_S] = item.stash.get(OWN_S, 0.0) + own_clock() - started - _shared.take()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    report = yield
    if call.when == "call" and report.passed and not _is_slow(item):
        problem = _problem(item, item.stash.get(OWN_S, 0.0))
        if problem:
            report.outcome = "failed"
            report.longrepr = f"{item.nodeid}: {problem}"
    return report


def slow_limit(config) -> float:
    """`slow_after_s`, or under pytest-xdist that times the number of workers.

    The own clock leaves out the time this thread waited for a CPU, but not the time the processes a test starts
    (a CLI, an app) waited: beside the other workers on shared cores they take up to that many times longer. The
    strict limit holds where it matters, in the one process of `make test-fast`.
    """
    limit = float(config.getini("slow_after_s"))
    workers = getattr(config, "workerinput", {}).get("workercount", 1)
    return limit * max(1, int(workers))


def _problem(item, own_s: float) -> str | None:
    limit = slow_limit(item.config)
    fix = "mark it @pytest.mark.slow (make test-fast leaves it out), or make it faster"
    if own_s > limit:
        return f"took {own_s:.1f} s of its own, over slow_after_s = {limit:g} s, and is not marked slow: {fix}"
    loaded = item.stash.get(WEIGHTS_LOADED, [])
    if loaded:
        return f"loaded model weights ({', '.join(sorted(set(loaded)))}) and is not marked slow: {fix}"
    return None
