"""Fixtures and rules shared by the whole suite, as pytest plugins, and a few fixtures of its own.

- shared_builds.py: the tiny model, a LoRA adapter of it and a finished tiny run, built once per run
  and shared by the pytest-xdist workers;
- browser_fixtures.py: a real app server and a real headless Chromium;
- parallel.py: how many workers, which files start first, `serial` tests;
- suite_rules.py: `slow` means slow (a test over `slow_after_s`, or one that loads model weights,
  must be marked slow).

What test files share that is not a fixture (waiting on a condition, the tiny run's settings, ...) is
in helpers.py: tests import helpers and fixtures, never other test files.

Collecting the suite imports Gradio, torch and transformers in every worker: the garbage collector is
paused until collection ends, as the workbench's own processes pause it while they start
(workbench/startup.py): 13.1 s of CPU per collecting process with it, 10.2 s without.
"""

from __future__ import annotations

import os
import subprocess

import pytest
from helpers import accounts_text, fill_disk, write_checkpoint

from workbench import startup

pytest_plugins = ["shared_builds", "browser_fixtures", "parallel", "suite_rules", "pytester"]

startup.pause_collection()
# the suite's runs take TRL's path for `auto` instead of a minute's speed probe each (tests/test_tuning.py runs the
# probe itself); set before any run starts, so every process the suite starts inherits it
os.environ.setdefault("WORKBENCH_SPEED_PROBE", "off")


@pytest.hookimpl(tryfirst=True)
def pytest_runtestloop(session):
    """Collection is over (in a worker, or in the process that runs the tests itself); in the controller
    of the workers, which collects nothing, this is where it would have begun."""
    startup.resume_collection()


@pytest.fixture(scope="module")
def accounts():
    """A users file's text: alice and bob (users) and root (admin), password helpers.PASSWORD."""
    return accounts_text()


@pytest.fixture
def make_checkpoint():
    """`make_checkpoint(run_dir, step)`: a complete checkpoint folder, as a resume needs it."""
    return write_checkpoint


@pytest.fixture
def small_disk(tmp_path):
    """`small_disk(size)`: a real tmpfs of `size` (e.g. "4m") to fill up; needs root and mount (else skipped)."""
    mounted = []

    def mount(size: str = "4m"):
        point = tmp_path / f"disk{len(mounted)}"
        point.mkdir()
        if os.geteuid() != 0:
            pytest.skip("mounting a small tmpfs needs root")
        result = subprocess.run(
            ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(point)], capture_output=True, text=True
        )
        if result.returncode != 0:
            pytest.skip(f"cannot mount a tmpfs here: {result.stderr.strip()}")
        mounted.append(point)
        return point

    yield mount
    for point in mounted:
        if subprocess.run(["umount", str(point)], capture_output=True).returncode != 0:
            subprocess.run(["umount", "-l", str(point)], capture_output=True)  # a process still holds a file


@pytest.fixture
def fill():
    """`fill(folder)`: write into `folder` until its disk is full."""
    return fill_disk
