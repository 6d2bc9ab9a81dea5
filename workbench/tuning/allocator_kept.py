"""This machine's measured allocator: which C allocator trained fastest here, kept beside the speed choices.

The allocator is chosen before a training process starts (LD_PRELOAD and glibc's variables are read at start-up), so
the in-process speed probe cannot time it. `python -m workbench tune --allocators` runs a few steps of the demo once
per installed allocator (workbench/jobs/allocator_probe.py) and keeps the winner here, under this machine's
fingerprint (CPU, cores, library versions). A launch reads it (workbench/jobs/allocator.py); with none kept for this
machine, runs use glibc's own allocator, what a process gets without the workbench. Like the speed choices, the file
lives in the server's cache folder, never in a run folder, and is never written from inside a sandbox.
"""

from __future__ import annotations

import hashlib
import json
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from workbench.runstore import runfolder
from workbench.tuning import cache, machine
from workbench.tuning.choice import MIN_GAIN

ALLOCATOR_FILE = "allocator-choice.json"
# the allocator a process has without the workbench: kept unless another one is measured faster by MIN_GAIN
PLAIN = "glibc"


def machine_key() -> str:
    """What an allocator measured here depends on: this machine's fingerprint."""
    return hashlib.sha1(json.dumps(machine.fingerprint(), sort_keys=True).encode()).hexdigest()[:16]


@dataclass(frozen=True)
class AllocatorChoice:
    """What `tune --allocators` measured on one machine: median step seconds per allocator, and the winner."""

    key: str
    allocator: str
    seconds: dict[str, float] = field(default_factory=dict)
    cpu: str = ""
    measured_at: float = 0.0

    @classmethod
    def from_dict(cls, data: dict) -> AllocatorChoice:
        seconds = {str(name): float(value) for name, value in dict(data.get("seconds") or {}).items()}
        return cls(
            str(data["key"]),
            str(data["allocator"]),
            seconds,
            str(data.get("cpu", "")),
            float(data.get("measured_at", 0.0)),
        )


def pick(seconds: dict[str, float]) -> str:
    """The fastest allocator, unless glibc's own is within MIN_GAIN of it (a preloaded library must earn its place)."""
    best = min(seconds, key=seconds.get)
    if PLAIN in seconds and seconds[PLAIN] <= seconds[best] * (1 + MIN_GAIN):
        return PLAIN
    return best


def measured(seconds: dict[str, float]) -> AllocatorChoice:
    """The record of a measurement made now, on this machine."""
    return AllocatorChoice(machine_key(), pick(seconds), dict(seconds), machine.cpu_name(), time.time())


def path_of(folder: Path | None = None) -> Path:
    from workbench.sources.model_files import cache_dir

    return (folder or cache_dir()) / ALLOCATOR_FILE


def kept(path: Path | None = None) -> AllocatorChoice | None:
    """The allocator measured on this machine (its fingerprint unchanged since), or None."""
    data = runfolder.read_json(path or path_of(), default=None)
    try:
        choice = AllocatorChoice.from_dict(data) if isinstance(data, dict) else None
    except (KeyError, TypeError, ValueError):
        return None
    return choice if choice is not None and choice.key == machine_key() else None


def keep(choice: AllocatorChoice, path: Path | None = None) -> bool:
    """Keep `choice`; False (nothing written) inside a sandbox or where the folder cannot be written."""
    return cache.write_kept(path or path_of(), asdict(choice))
