"""Small files of run folders parsed once per version of the file, for listing thousands of runs quickly.

The Runs tab reads every run folder every 3 s: each run's status.json,
config.json and the end of its metrics.jsonl. A finished run's files never
change again, so `cached(path, read)` keeps what `read(path)` returned and
gives it back while the file's identity (device, inode, size, modification
time in ns) is the one it had, checked with one `lstat` per call (through
`safe_files`: a link is never followed); any
rewrite (the trainer replaces status.json atomically, a new inode) reads the
file again. A read that raises is not kept. Per process, and not for what
decides anything (stop, resume, the queue read the files themselves).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from workbench.runstore import runfolder, safe_files

T = TypeVar("T")
# (path, what was read) -> (the file's identity, the value): one entry per file and reader.
_KEPT: dict[tuple[str, str], tuple[tuple[int, int, int, int], Any]] = {}
# A runs folder can hold many thousands of runs; past this many entries the cache starts over.
MAX_ENTRIES = 100_000


def cached(
    path: str | os.PathLike, read: Callable[[Path], T], name: str = "", keep: Callable[[T], bool] = lambda value: True
) -> T:
    """`read(path)`, kept until the file changes; a missing file is read every time (`read` decides).

    `keep(value)` False: the value is not kept (it depends on more than the file, e.g. a live process).
    """
    path = os.fspath(path)  # strings, not Path objects: this runs for every file of every run, every 3 s
    info = safe_files.lstat(path)  # the name's own: a link is never followed (and `read` reads it as missing)
    if info is None:
        return read(Path(path))
    key = (path, name or read.__qualname__)
    identity = (info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns)
    kept = _KEPT.get(key)
    if kept is not None and kept[0] == identity:
        return kept[1]
    value = read(Path(path))
    if not keep(value):
        _KEPT.pop(key, None)
        return value
    if len(_KEPT) >= MAX_ENTRIES:
        _KEPT.clear()
    _KEPT[key] = (identity, value)
    return value


def read_json_object(path: str | os.PathLike) -> dict:
    """`runfolder.read_json_object`, parsed once per version; a copy the caller may change at the top level."""
    return dict(cached(path, runfolder.read_json_object))


def last_metric(run_dir: str | os.PathLike, name: str) -> float | None:
    """`runfolder.last_metric`, read once per version of metrics.jsonl."""
    return cached(
        os.path.join(run_dir, runfolder.METRICS_FILE), lambda _: runfolder.last_metric(run_dir, name), f"last {name}"
    )
