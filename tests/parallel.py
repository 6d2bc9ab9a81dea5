"""The suite in parallel with pytest-xdist (a pytest plugin loaded by conftest.py).

- Workers: a run of the whole suite, or of folders, uses `test_workers` pytest-xdist workers
  ([tool.pytest.ini_options] in pyproject.toml) with `--dist loadfile`: each file runs whole on one
  worker, so its module-scoped fixtures (a trained run, a served app) are built once. A run of named
  files or tests stays in this process, as do `-s`, `--pdb` and `--collect-only`. `-n N` on the
  command line chooses for itself (`-n 0`: one process).
- Order: under xdist the files that took longest last time start first (their seconds are kept in
  pytest's cache), so no long file starts last and leaves the other workers idle; without a record
  (a fresh clone) the files listed in `start_first` lead. Files with a `serial` test come last. Within
  a file, tests marked `one_at_a_time` run first, to free their resource early.
- `@pytest.mark.serial`: a test that times things, or needs the CPU to itself. Under xdist it starts
  once no other test is running, and no other test starts until it ends (a readers-writer lock on two
  files the workers share: a gate taken in turn, and a room held shared by every test, alone by it).
- Threads: under xdist every test process and what it starts computes on one thread (`one_thread_each`).
- `@pytest.mark.one_at_a_time("vllm")`: tests naming the same resource never run at once under xdist,
  while other tests go on beside them. A CPU vLLM server takes every core: two at once each take
  more than twice as long.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

import pytest
from helpers import file_lock

SECONDS_KEY = "workbench/file_seconds"


def pytest_addoption(parser):
    parser.addini("test_workers", "pytest-xdist workers for a run of the whole suite (0: one process)", default="3")
    parser.addini(
        "start_first",
        "test files to start first under xdist when pytest's cache has no timings",
        type="linelist",
        default=[],
    )


# ---------------------------------------------------------------- how many workers


def _whole_suite(config) -> bool:
    """No file or test named: the configured test paths, or folders only."""
    if config.args_source != pytest.Config.ArgsSource.ARGS:
        return True
    return all(Path(config.invocation_params.dir, arg).is_dir() for arg in config.args)


@pytest.hookimpl(tryfirst=True)
def pytest_cmdline_main(config):
    if not config.pluginmanager.hasplugin("xdist") or hasattr(config, "workerinput"):
        return
    option = config.option
    if option.numprocesses is not None or option.collectonly or option.usepdb or option.capture == "no":
        return
    if _whole_suite(config):
        option.numprocesses = int(os.environ.get("PYTEST_XDIST_AUTO_NUM_WORKERS") or config.getini("test_workers"))
        if option.dist == "no":
            option.dist = "loadfile"
        option.loadscopereorder = False  # xdist would send files with more tests first: keep ours
    if option.numprocesses:
        one_thread_each()


def one_thread_each() -> None:
    """Every worker, and every process a test starts (trainers, notebook kernels, vLLM servers), computes on one
    thread, unless the caller chose.

    Workers beside each other on a 2-core machine, each with two OpenMP threads, wait at every OpenMP barrier for
    a thread the kernel has parked: measured here, notebook 02 beside a 2-thread torch loop took 120 s with two
    threads and 64 s with one (alone: 39 s and 45 s). Set before the workers start, so they inherit it; a run's
    launcher keeps a caller's OMP_NUM_THREADS (jobs/commands.py), and a CPU vLLM server binds its threads to the
    cores unless told not to.
    """
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    os.environ.setdefault("VLLM_CPU_OMP_THREADS_BIND", "nobind")


# ---------------------------------------------------------------- longest files first


def _file_of(nodeid: str) -> str:
    return nodeid.split("::", 1)[0]


def pytest_collection_modifyitems(session, config, items):
    if not hasattr(config, "workerinput"):
        return  # one process: the order of the files as written
    cache = getattr(config, "cache", None)  # none with -p no:cacheprovider
    seconds = cache.get(SECONDS_KEY, {}) if cache else {}
    first = config.getini("start_first")
    if seconds:
        weight = lambda name: -seconds.get(name, 0.0)  # noqa: E731
    else:
        weight = lambda name: first.index(name) if name in first else len(first)  # noqa: E731
    order, waits = {}, set()
    for item in items:
        order.setdefault(_file_of(item.nodeid), len(order))
        if item.get_closest_marker("serial"):
            waits.add(_file_of(item.nodeid))
    # Files with a serial test go last, when the other workers run short tests: a serial test waits for
    # every test under way to end. A stable sort by file: each file's tests stay together and keep their
    # order, except that a test holding a shared resource (one_at_a_time) leads its file, so that it frees the
    # resource as early as it can: notebook 05's vLLM server, run in the middle of its file, held the "vllm"
    # lock while the rollout tests' worker sat waiting for it (36.6 s idle in a fresh clone's suite). Every
    # worker sorts alike.
    items.sort(
        key=lambda item: (
            _file_of(item.nodeid) in waits,
            weight(_file_of(item.nodeid)),
            order[_file_of(item.nodeid)],
            item.get_closest_marker("one_at_a_time") is None,
        )
    )


class _FileSeconds:
    """Seconds each file took in this run (setup, call and teardown), kept in pytest's cache at the end."""

    def __init__(self):
        self.seconds: dict[str, float] = {}

    def pytest_runtest_logreport(self, report):
        name = _file_of(report.nodeid)
        self.seconds[name] = self.seconds.get(name, 0.0) + report.duration

    def pytest_sessionfinish(self, session):
        if self.seconds and getattr(session.config, "cache", None) is not None:
            kept = session.config.cache.get(SECONDS_KEY, {})
            session.config.cache.set(SECONDS_KEY, {**kept, **{k: round(v, 2) for k, v in self.seconds.items()}})


def pytest_configure(config):
    if getattr(config.option, "numprocesses", None) and not hasattr(config, "workerinput"):
        # the controller sees every worker's reports
        config.pluginmanager.register(_FileSeconds(), "workbench-file-seconds")


# ---------------------------------------------------------------- serial tests


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item, nextitem):
    if not hasattr(item.config, "workerinput"):
        return (yield)
    shared = Path(item.config.option.basetemp).parent  # the workers' base temp folders share this parent
    alone = item.get_closest_marker("serial") is not None
    resources = sorted({name for mark in item.iter_markers("one_at_a_time") for name in mark.args})
    with contextlib.ExitStack() as held:
        with file_lock(shared / "serial.gate"):  # taken in turn: a serial test waiting here holds back new tests
            held.enter_context(file_lock(shared / "serial.room", shared=not alone))
        for name in resources:  # in one order, so two tests never hold one each and wait for the other's
            held.enter_context(file_lock(shared / f"resource.{name}"))
        return (yield)
