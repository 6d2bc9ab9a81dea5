"""The command line from anywhere: the venv's `workbench` command works, and the package run by a Python that lacks
its dependencies says in one line how to run it (exit 2), never a traceback."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from workbench.cli import outside_venv

REPO = Path(__file__).resolve().parents[1]


def _bare_python() -> str:
    """A Python without the workbench's dependencies (the machine's own), or skip."""
    for name in ("/usr/bin/python3", shutil.which("python3")):
        if not name or Path(name).resolve().is_relative_to(Path(sys.prefix).resolve()):
            continue
        probe = subprocess.run([name, "-c", "import pandas, psutil"], capture_output=True, timeout=60)
        if probe.returncode != 0:
            return name
    pytest.skip("no Python outside the venv that lacks the workbench's dependencies")


def _run_folder(tmp_path: Path) -> Path:
    run = tmp_path / "runs" / "r1"
    run.mkdir(parents=True)
    (run / "config.json").write_text("{}")
    (run / "status.json").write_text(json.dumps({"state": "running", "step": 1}))
    return run


def test_a_python_without_the_dependencies_gets_one_line_and_status_2(tmp_path):
    run = _run_folder(tmp_path)
    done = subprocess.run(
        [_bare_python(), "-m", "workbench", "watch", str(run)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert f"{REPO / '.venv' / 'bin' / 'workbench'} watch {run}" in lines[0]
    assert "make setup" in lines[0]


def test_the_venvs_workbench_command_runs_the_command_line():
    command = Path(sys.prefix) / "bin" / "workbench"
    assert command.exists(), "pyproject.toml's [project.scripts] puts `workbench` in the venv (make setup)"
    done = subprocess.run(
        [str(command), "calc", "--per-device-train-batch-size", "2", "--num-generations", "2", "--json"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["valid"] is True


def test_inside_the_venv_a_missing_package_is_no_setup_problem():
    """Inside the venv the command itself must name what is missing (an optional package such as vLLM), and a
    missing workbench module is a bug: neither is turned into the venv's advice."""
    outside = ModuleNotFoundError("No module named 'psutil'", name="psutil")
    assert outside_venv.message(outside, "/usr/bin/python3", "/usr", ["runs"]) is not None
    venv = str(outside_venv.CHECKOUT / ".venv")
    assert outside_venv.message(outside, f"{venv}/bin/python", venv, ["runs"]) is None
    ours = ModuleNotFoundError("No module named 'workbench.nothing'", name="workbench.nothing")
    assert outside_venv.message(ours, "/usr/bin/python3", "/usr", ["runs"]) is None
