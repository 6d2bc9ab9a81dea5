"""The server's cache of measured speed choices: one JSON file outside every run folder.

`$WORKBENCH_CACHE/speed-choices.json` (the folder converted models live in, ~/.cache/grpo-workbench by default) maps a
key (workbench/tuning/choice.key_of: this machine, the model, the run's shape) to what a probe chose there. It is
written by `python -m workbench tune` and by training processes that run outside a sandbox; a sandboxed run's code can
write its own folder, so nothing of a run folder is ever read into it, and a sandboxed run never writes it (the
sandbox shows the folder read-only, and `store` refuses inside one anyway).

Every sandboxed run can read the file (the folder holds the converted models it loads, shown to it read-only), so an
entry names no local folder: a model folder's path is another user's upload folder or run (tests/
test_attack_tune_outside_sandbox.py); its key, a hash, still tells that folder's choice from any other.
"""

from __future__ import annotations

from pathlib import Path

from workbench.runstore import runfolder
from workbench.tuning.choice import SpeedChoice

CACHE_FILE = "speed-choices.json"
# the newest choices kept: every model and shape a class tries, without the file growing without end
MAX_ENTRIES = 200


def cache_path() -> Path:
    from workbench.sources.model_files import cache_dir

    return cache_dir() / CACHE_FILE


def _entries(path: Path) -> dict:
    data = runfolder.read_json(path, default={})
    return data if isinstance(data, dict) else {}


def lookup(key: str, path: Path | None = None) -> SpeedChoice | None:
    """The choice measured for `key`, or None (none yet, or an entry that does not read as one)."""
    entry = _entries(path or cache_path()).get(key)
    try:
        choice = SpeedChoice.from_dict(entry) if isinstance(entry, dict) else None
    except (KeyError, TypeError, ValueError):
        return None
    return choice if choice is not None and choice.key == key else None


def store(choice: SpeedChoice, path: Path | None = None) -> bool:
    """Keep `choice` under its key; False (nothing written) inside a sandbox or where the folder cannot be written."""
    if runfolder.inside_sandbox():
        return False
    path = path or cache_path()
    # entries kept before they named no folder lose their paths at the next write
    entries = {key: _no_path(entry) for key, entry in _entries(path).items() if key != choice.key}
    entries[choice.key] = _no_path(choice.to_dict())
    newest = sorted(entries.items(), key=lambda item: _measured_at(item[1]))[-MAX_ENTRIES:]
    return write_kept(path, dict(newest))


def write_kept(path: Path, data) -> bool:
    """Write a file of the server's cache folder as JSON; False (nothing written) inside a sandbox or where the
    folder cannot be written. The speed choices and the allocator choice are kept through it."""
    if runfolder.inside_sandbox():
        return False
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        runfolder.write_json_atomic(path, data)
    except OSError:
        return False
    return True


def shown_model(model: str) -> str:
    """The model as an entry names it: a hub id or bundled name as it is, a local folder by no path."""
    return "a local folder" if model.startswith(("/", "~", ".")) else model


def _no_path(entry):
    return {**entry, "model": shown_model(str(entry.get("model", "")))} if isinstance(entry, dict) else entry


def _measured_at(entry) -> float:
    try:
        return float(entry.get("measured_at", 0)) if isinstance(entry, dict) else 0.0
    except (TypeError, ValueError):
        return 0.0
