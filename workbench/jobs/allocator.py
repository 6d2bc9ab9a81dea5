"""The memory allocator a training process runs with, chosen by name.

PyTorch on CPU allocates and frees large activation buffers every step, and
how the C allocator treats them decides both step time and peak memory. The
choice has to be made before the process starts (environment variables and
`LD_PRELOAD` are read at start-up), so the launcher sets it for background
runs and the foreground CLI re-executes itself with it: both train under the
same allocator, so their step times agree.

`WORKBENCH_ALLOCATOR` overrides the default. The default is measured on the
machine the run runs on: `python -m workbench tune --allocators` times a few
demo steps under each installed allocator and keeps the winner for this
machine (workbench/tuning/allocator_kept.py); until then runs use glibc's own
allocator, as a process started without the workbench does. The training
process records the allocator it ran with in status.json, as a record: the allocator, why, and the machine
it was measured on (`decide`).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from workbench.errors import WorkbenchError
from workbench.spec.lever_decisions import LeverDecision
from workbench.tuning import allocator_kept

ALLOCATOR_ENV_VAR = "WORKBENCH_ALLOCATOR"
# Set in a process already started under its allocator, so the CLI does not re-execute twice.
APPLIED_ENV_VAR = "WORKBENCH_ALLOCATOR_APPLIED"
# The decision the launcher made (a LeverDecision as JSON), for the training process to record as it was made.
DECISION_ENV_VAR = "WORKBENCH_ALLOCATOR_DECISION"

LIBRARY_DIRS = ("/usr/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu", "/usr/lib64", "/usr/lib")
PRELOADED = {"jemalloc": "libjemalloc.so.2", "tcmalloc": "libtcmalloc_minimal.so.4"}
# glibc variants: its defaults; fewer arenas; a fixed 128 KiB threshold that hands freed
# activation buffers back at once (small peak, many page faults); a 4 MiB threshold between the two.
GLIBC_SETTINGS = {
    "glibc": {},
    "glibc-arenas": {"MALLOC_ARENA_MAX": "2"},
    "glibc-trim": {"MALLOC_MMAP_THRESHOLD_": "131072", "MALLOC_TRIM_THRESHOLD_": "131072"},
    "glibc-4m": {"MALLOC_MMAP_THRESHOLD_": "4194304", "MALLOC_TRIM_THRESHOLD_": "33554432"},
}
ALLOCATORS = (*GLIBC_SETTINGS, *PRELOADED)
# Every variable an allocator choice may set, so one choice fully replaces another.
ALLOCATOR_VARIABLES = ("LD_PRELOAD", "MALLOC_ARENA_MAX", "MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_")


def find_library(file_name: str) -> Path | None:
    """The installed shared library `file_name`, or None."""
    for folder in LIBRARY_DIRS:
        path = Path(folder) / file_name
        if path.is_file():
            return path
    return None


def available() -> list[str]:
    """The allocators this machine can run with (the preloaded ones need their Debian package)."""
    return [name for name in ALLOCATORS if name in GLIBC_SETTINGS or find_library(PRELOADED[name])]


def choose(requested: str | None = None) -> str:
    """The allocator to use: `requested`, else $WORKBENCH_ALLOCATOR, else the one measured fastest on this machine.

    An explicit request for an unknown or missing allocator is refused; a kept
    choice whose library is gone, or none kept, is glibc's own.
    """
    return decide(requested).value


def decide(requested: str | None = None) -> LeverDecision:
    """`choose`'s answer as a record: the allocator, why it is the one, and the CPU it was measured on (when a
    `tune --allocators` choice decided)."""
    name = requested or os.environ.get(ALLOCATOR_ENV_VAR) or ""
    if not name:
        choice = allocator_kept.kept()
        if choice is None:
            return LeverDecision(allocator_kept.PLAIN, "none measured on this machine: glibc's own")
        if choice.allocator not in available():
            return LeverDecision(allocator_kept.PLAIN, f"the measured {choice.allocator} is not installed")
        return LeverDecision(choice.allocator, "measured fastest here by `tune --allocators`", choice.cpu or None)
    if name not in ALLOCATORS:
        raise WorkbenchError(
            field=ALLOCATOR_ENV_VAR,
            rule=f"{name!r} is not an allocator the workbench knows",
            fix=f"use one of {', '.join(ALLOCATORS)}",
        )
    if name not in available():
        raise WorkbenchError(
            field=ALLOCATOR_ENV_VAR,
            rule=f"{name} is not installed ({PRELOADED[name]} not found)",
            fix="install it (`make setup` does: Debian's libjemalloc2 / libtcmalloc-minimal4) or choose glibc",
        )
    return LeverDecision(name, f"{ALLOCATOR_ENV_VAR} asks for it")


def allocator_env(name: str, base: dict | None = None, decision: LeverDecision | None = None) -> dict:
    """`base` (default os.environ) with allocator `name`'s variables, replacing any earlier choice; `decision`
    (how `name` was chosen) travels with it for the process to record."""
    env = {k: v for k, v in (os.environ if base is None else base).items() if k not in ALLOCATOR_VARIABLES}
    if name in PRELOADED:
        library = find_library(PRELOADED[name])
        if library is None:
            raise WorkbenchError(field=ALLOCATOR_ENV_VAR, rule=f"{name} is not installed", fix="choose glibc")
        env["LD_PRELOAD"] = str(library)
    else:
        env.update(GLIBC_SETTINGS[name])
    env[ALLOCATOR_ENV_VAR] = name
    env[APPLIED_ENV_VAR] = name
    env[DECISION_ENV_VAR] = json.dumps((decision or LeverDecision(name, "chosen by name")).to_dict())
    return env


def applied() -> str | None:
    """The allocator this process was started under by the workbench, or None."""
    return os.environ.get(APPLIED_ENV_VAR) or None


def applied_decision() -> LeverDecision:
    """What status.json records of this process's allocator: the launcher's decision, or glibc's own when the
    workbench did not start it (a notebook, a test)."""
    name = applied()
    if name is None:
        return LeverDecision(allocator_kept.PLAIN, "not chosen by the workbench")
    try:
        known, decision = LeverDecision.read(json.loads(os.environ.get(DECISION_ENV_VAR) or "null"))
    except ValueError:
        known, decision = False, None
    return decision if known and decision.value == name else LeverDecision(name, "chosen by name")
