"""Which of a run's `checkpoint-<step>/` folders can be resumed from: each file a resume reads there, whole.

A process killed while saving can leave any file of a checkpoint missing or cut short, and a run's own code can
put links there; a resume from such a folder would fail, or silently restart the optimizer, or read another
run's files. So a checkpoint counts only when every file is a regular file of the run itself and whole (the
safetensors header's length, a zip archive's end record, a JSON object), and readers take the newest one that is.

Standard library only: importable without torch or gradio.
"""

from __future__ import annotations

import json
import os
import zipfile
from pathlib import Path

from workbench.runstore import safe_files

# What resuming a LoRA run needs from a checkpoint (transformers' Trainer): the adapter, the
# optimizer and scheduler (without them it silently restarts both) and the state file.
CHECKPOINT_JSON_FILES = ("adapter_config.json", "trainer_state.json")
CHECKPOINT_TORCH_FILES = ("optimizer.pt", "scheduler.pt")
ADAPTER_WEIGHTS_FILES = ("adapter_model.safetensors", "adapter_model.bin")


def _json_readable(path: Path, root: Path) -> bool:
    try:
        return isinstance(safe_files.load_json(path, root), dict)
    except (OSError, ValueError):  # missing, unreadable, empty, half-written, not UTF-8, no regular file
        return False


def _safetensors_whole(path: Path, root: Path) -> bool:
    """The file is as long as its header says: 8 bytes of header length, the JSON header, the tensors."""
    try:
        with safe_files.open_file(path, root=root) as handle:
            header_length = int.from_bytes(handle.read(8), "little")
            if not 0 < header_length < 100_000_000:
                return False
            header = json.loads(handle.read(header_length))
            size = handle.seek(0, os.SEEK_END)
    except (OSError, ValueError):
        return False
    ends = [
        entry["data_offsets"][1]
        for name, entry in header.items()
        if name != "__metadata__" and isinstance(entry, dict) and "data_offsets" in entry
    ]
    return size == 8 + header_length + max(ends, default=0)


def _torch_file_whole(path: Path, root: Path) -> bool:
    # torch.save writes a zip archive; one cut short has no end-of-archive record
    try:
        with safe_files.open_file(path, root=root) as handle:
            return zipfile.is_zipfile(handle)
    except OSError:
        return False


def checkpoint_complete(path: str | os.PathLike, root: str | os.PathLike | None = None) -> bool:
    """True when a checkpoint folder holds everything a resume reads, each file whole.

    A process killed while saving can leave any of the files missing or cut
    short, even trainer_state.json (another process's save at the same step).
    Only regular files count, and the folder (and every folder between it and
    `root`, the run folder, when given) must not be a link: one that leads to
    another run's files is not this run's checkpoint.
    """
    path = Path(path)
    root = path.parent if root is None else Path(root)
    weights = [path / name for name in ADAPTER_WEIGHTS_FILES if safe_files.is_file(path / name, root=root)]
    if not weights:
        return False
    whole = _safetensors_whole if weights[0].suffix == ".safetensors" else _torch_file_whole
    return (
        whole(weights[0], root)
        and all(_json_readable(path / name, root) for name in CHECKPOINT_JSON_FILES)
        and all(_torch_file_whole(path / name, root) for name in CHECKPOINT_TORCH_FILES)
    )


def checkpoint_dirs(run_dir: str | os.PathLike) -> list[Path]:
    """The run's complete `checkpoint-<step>` folders, oldest first (incomplete ones are left out).

    Only folders of the run itself: a `checkpoint-N` link (into another run,
    anywhere, or to another checkpoint of the run) is not one of its
    checkpoints, and neither is a folder whose files are links.
    """
    found = []
    run_dir = Path(run_dir)
    for name in safe_files.folders(run_dir):
        step = name.removeprefix("checkpoint-")
        if name.startswith("checkpoint-") and step.isdigit() and checkpoint_complete(run_dir / name, run_dir):
            found.append((int(step), run_dir / name))
    return [path for _, path in sorted(found)]


def checkpoint_steps(run_dir: str | os.PathLike) -> list[int]:
    """The steps of the run's complete checkpoints, oldest first."""
    return [int(path.name.removeprefix("checkpoint-")) for path in checkpoint_dirs(run_dir)]


def last_checkpoint(run_dir: str | os.PathLike) -> Path | None:
    """The newest complete checkpoint (an earlier one when the newest was cut short), or None."""
    dirs = checkpoint_dirs(run_dir)
    return dirs[-1] if dirs else None
