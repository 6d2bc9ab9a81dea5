"""The suite's own rules (tests/suite_rules.py, tests/parallel.py), each run by a real pytest on small test files.

- a test not marked slow fails past `slow_after_s`, or when it loads model weights; marked slow, it passes;
- under pytest-xdist a `serial` test runs with no other test beside it, and two tests naming one
  `one_at_a_time` resource never overlap.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # each case starts a pytest of its own (and two workers for the xdist ones)

TESTS = Path(__file__).resolve().parent
INI = """[pytest]
markers =
    slow: slow
    serial: alone
    one_at_a_time(resource): one at a time
"""
# Each test notes when it ran; the rules are read from the notes.
NOTED = """
import time
from pathlib import Path

import pytest


def note(name, seconds=0.4):
    started = time.time()
    time.sleep(seconds)
    with open(Path(__file__).parent / "notes.txt", "a") as notes:
        notes.write(f"{name} {started} {time.time()}\\n")
"""


@pytest.fixture
def suite(pytester):
    """A folder holding the suite's plugins, a conftest loading them, and the markers declared."""
    for name in ("helpers.py", "suite_rules.py", "parallel.py"):
        shutil.copy(TESTS / name, pytester.path / name)
    pytester.makeconftest('pytest_plugins = ["parallel", "suite_rules"]\n')
    pytester.makeini(INI)
    return pytester


def test_an_unmarked_test_over_the_limit_fails_saying_to_mark_it_slow(suite):
    suite.makepyfile(
        test_made="""
import time
import pytest

def test_unmarked():
    time.sleep(1.0)

@pytest.mark.slow
def test_marked():
    time.sleep(1.0)

def test_quick():
    pass
"""
    )
    result = suite.runpytest_subprocess("-o", "slow_after_s=0.5", "-n", "0", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=2, failed=1)
    result.stdout.fnmatch_lines(
        [
            "*test_unmarked: took 1.0 s of its own, over slow_after_s = 0.5 s, "
            "and is not marked slow: mark it @pytest.mark.slow*"
        ]
    )


def test_an_unmarked_test_that_loads_weights_fails(suite):
    suite.makepyfile(
        test_made="""
import numpy as np
import pytest
from safetensors import safe_open
from safetensors.numpy import save_file

def load(tmp_path):
    save_file({"w": np.zeros(2, dtype=np.float32)}, str(tmp_path / "model.safetensors"))
    with safe_open(str(tmp_path / "model.safetensors"), "np") as weights:
        return list(weights.keys())

def test_unmarked(tmp_path):
    assert load(tmp_path) == ["w"]

@pytest.mark.slow
def test_marked(tmp_path):
    assert load(tmp_path) == ["w"]
"""
    )
    result = suite.runpytest_subprocess("-n", "0", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["*test_unmarked: loaded model weights (*model.safetensors) and is not marked slow*"])


def spans(folder: Path) -> dict[str, tuple[float, float]]:
    rows = [line.split() for line in (folder / "notes.txt").read_text().splitlines()]
    return {name: (float(start), float(end)) for name, start, end in rows}


def overlapping(spans_by_name: dict, name: str) -> list[str]:
    start, end = spans_by_name[name]
    return sorted(other for other, (s, e) in spans_by_name.items() if other != name and s < end and e > start)


def test_under_xdist_a_serial_test_runs_alone_and_a_resource_is_used_one_at_a_time(suite):
    for side in ("a", "b"):
        suite.makepyfile(
            **{
                f"test_{side}": NOTED
                + f"""
@pytest.mark.parametrize("i", range(3))
def test_plain(i):
    note("{side}" + str(i))

@pytest.mark.serial
def test_alone():
    note("alone_{side}")

@pytest.mark.one_at_a_time("server")
def test_server():
    note("server_{side}")
"""
            }
        )
    result = suite.runpytest_subprocess("-n", "2", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=10)
    noted = spans(suite.path)
    assert overlapping(noted, "alone_a") == [] and overlapping(noted, "alone_b") == []
    assert "server_b" not in overlapping(noted, "server_a")
    assert any(overlapping(noted, name) for name in ("a0", "a1", "a2")), "plain tests run side by side"


def test_under_xdist_a_test_holding_a_resource_leads_its_file(suite):
    """So it frees the resource as early as it can for another file's test that waits for it."""
    suite.makepyfile(
        test_made=NOTED
        + """
@pytest.mark.parametrize("i", range(3))
def test_plain(i):
    note("plain" + str(i))

@pytest.mark.one_at_a_time("server")
def test_server():
    note("server")
"""
    )
    result = suite.runpytest_subprocess("-n", "2", "--dist", "loadfile", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=4)
    noted = spans(suite.path)
    assert noted["server"][1] <= min(noted[f"plain{i}"][0] for i in range(3))
