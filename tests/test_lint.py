"""The codebase is clean under its linter and formatter: ruff, configured in pyproject.toml ([tool.ruff]),
pinned in requirements.txt and installed into .venv by `make test`.

`ruff check` runs pyflakes, pycodestyle, import order, bugbear and pyupgrade; `ruff format --check` holds the
layout. To fix what they find: `.venv/bin/ruff check --fix . && .venv/bin/ruff format .`.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def ruff(*args: str) -> subprocess.CompletedProcess:
    # `python -m ruff` finds the binary the venv's ruff wheel installed, whichever venv runs the tests
    return subprocess.run([sys.executable, "-m", "ruff", *args], cwd=REPO, capture_output=True, text=True, timeout=120)


def test_ruff_finds_nothing_to_fix():
    done = ruff("check", "--no-cache", "--output-format", "concise", ".")
    assert done.returncode == 0, done.stdout[-6000:] + done.stderr[-2000:]


def test_the_code_is_laid_out_as_ruff_formats_it():
    done = ruff("format", "--no-cache", "--check", ".")
    assert done.returncode == 0, done.stdout[-6000:] + done.stderr[-2000:]


def test_the_linter_would_find_a_real_mistake(tmp_path):
    # the configuration is read and its rules are on: an unused import and a mutable default fail
    bad = tmp_path / "bad.py"
    bad.write_text("import os\n\n\ndef f(x=[]):\n    return x\n")
    done = ruff("check", "--no-cache", "--config", str(REPO / "pyproject.toml"), str(bad))
    assert done.returncode == 1 and "F401" in done.stdout and "B006" in done.stdout, done.stdout
