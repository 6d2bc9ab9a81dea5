"""workbench/startup.py: the garbage collector paused while a process imports, resumed before the work."""

from __future__ import annotations

import gc
import subprocess
import sys
import weakref
from pathlib import Path

import pytest

from workbench import startup
from workbench.cli import main

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def paused():
    """The collector paused as `python -m workbench` pauses it; this test process restored afterwards."""
    startup.pause_collection()
    yield
    gc.unfreeze()
    gc.enable()


class Node:
    """An object that can sit in a reference cycle and be watched through a weak reference."""


def test_resume_collects_start_ups_garbage_sets_aside_the_rest_and_collects_again(paused):
    node = Node()
    node.itself = node  # garbage only the cyclic collector frees
    cycle = weakref.ref(node)
    del node
    kept = Node()
    startup.resume_collection()
    assert gc.isenabled()
    assert cycle() is None  # resume's own collection freed it
    assert not any(obj is kept for obj in gc.get_objects())  # set aside: out of the collector's walks
    made_after = Node()
    startup.resume_collection()  # once resumed, nothing to do: what is made later is not set aside
    assert any(obj is made_after for obj in gc.get_objects())


def test_a_command_that_loads_no_model_has_collection_resumed_before_it_runs(paused, capsys):
    assert main(["calc", "--gpus", "1", "--per-device-train-batch-size", "8", "--num-generations", "8"]) == 0
    assert gc.isenabled()


def test_python_m_workbench_pauses_on_its_first_line():
    probe = (
        "import gc, runpy, sys; sys.argv = ['workbench', '--help']\n"
        "try:\n    runpy.run_module('workbench', run_name='__main__')\n"
        "except SystemExit:\n    print('enabled' if gc.isenabled() else 'paused')"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, cwd=ROOT, timeout=60)
    # --help exits while arguments are parsed, before any command would resume it
    assert done.stdout.strip().endswith("paused"), done.stderr
