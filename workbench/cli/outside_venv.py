"""A command run by a Python that lacks the workbench's dependencies: one line saying how to run it instead.

`python -m workbench` on a machine's own Python finds the package (from the checkout) but not torch, pandas or
psutil, which `make setup` installs into the checkout's `.venv`. Its light commands (`--help`, `calc`) work
there; the rest would end in a traceback at their first heavy import. `message` turns that into the one line
that says which Python ran, what it lacks and the venv's command to use (or `make setup` to make it).
"""

from __future__ import annotations

import shlex
from pathlib import Path

CHECKOUT = Path(__file__).resolve().parents[2]


def message(exc: ModuleNotFoundError, executable: str, prefix: str, argv: list[str]) -> str | None:
    """The one line for `exc`, or None where it is no missing dependency of a Python outside the venv: a missing
    workbench module is a bug, and inside the venv a missing package is one the command itself must name."""
    missing = (exc.name or "").split(".")[0]
    if not missing or missing == "workbench":
        return None
    venv = CHECKOUT / ".venv"
    if _same(Path(prefix), venv):
        return None
    command = shlex.join([str(venv / "bin" / "workbench"), *argv])
    made = "makes it first" if not (venv / "bin" / "python").exists() else "installs everything there"
    return (
        f"error: this Python ({executable}) lacks the workbench's dependency {missing!r}: run the command with "
        f"the project's venv: `{command}` (or `source {venv}/bin/activate` first, then `workbench ...`); "
        f"`make setup` in {CHECKOUT} {made}"
    )


def _same(a: Path, b: Path) -> bool:
    try:
        return a.resolve() == b.resolve()
    except OSError:
        return False
