"""A run's `completions.jsonl` as columnar parts in the workbench cache, so the explorer never parses it twice.

Why: a 10,000-step run holds 640,000 completions (about 300 MB of JSON lines); parsing them takes many seconds, and
every query would. Each part holds the rows of one stretch of the file (at most `PART_BYTES` of it, cut from one
`runfolder.READ_CHUNK_BYTES` chunk read at a time, so building one holds one chunk in memory), in file order, as
columns: the numbers and flags the filters and sorts read (`step`, `group`, `reward`, `advantage`, `length`,
`truncated`, `reward_error`, one `rewards.NAME` column per reward function) and the text a page shows (`prompt`,
stored once per distinct prompt, `completion`, `rewards_json`).

Why Arrow IPC files rather than Parquet: they are read memory-mapped, so a text search runs its kernel straight over
the file's pages (the operating system's page cache, not the process's memory, holds them) and a page of rows
touches only its rows; Parquet would decode every text column into memory first, which costs more than the search
itself. The parts take about as much disk as the JSON lines they come from.

Where: `<workbench cache>-completions/<hash of the file's path>/` (`~/.cache/grpo-workbench-completions` by default,
beside `$WORKBENCH_CACHE`: `model_files.completions_cache_dir`), outside every run folder, written by the reader
(the server or the CLI) only, never by the trainer, in folders private to the server's user (0700): it holds what
runs wrote. Beside the workbench cache, not in it: a sandbox shows the workbench cache (the converted models) read-
only and makes everything in it readable for the run's uid (`jobs/sandbox.share_read_only`), which showed one user's
completions to another user's run (tests/test_attack_explorer_cache_leak.py); this folder is never shared, and a
sandbox sees it empty (jobs/sandbox_exposure), wherever it lies.

Kept honest like `runstore/jsonl_cache.py` keeps its indexes: the manifest holds the file's identity (device,
inode), the offset read up to and the bytes just before it. A file replaced (a resume's rewrite,
`runfolder.keep_steps_up_to`) is read again from the start and its old parts deleted; one cut shorter or changed in
place before that offset has its newest part read again (`_changed_in_place`: a look costs at most one part); a file
only appended to gets one new part for what was appended (a small last part is read again with it, so a watched run
does not leave one part per step). The run's file is read only through `safe_files` (a link or FIFO in its place
reads as missing) and `runfolder.parse_lines` (a line of the wrong shape is skipped, as every reader skips it). One
process or thread brings a file's parts up to date at a time (`flock` on the folder's `.lock`); a reader that finds
a part gone (replaced meanwhile) asks again.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import secrets
import threading
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from workbench.runstore import kept_records, runfolder, safe_files
from workbench.spec.chat import transcript_text
from workbench.spec.numbers import finite_number

MANIFEST = "manifest.json"
LOCK_FILE = ".lock"
VERSION = 1
FINGERPRINT_BYTES = 64
# The most of the file one part holds (a longer line: that line): what a look reads again at most when a run
# changes its file in place (`_changed_in_place`).
PART_BYTES = 2 << 20
# A last part smaller than this is read again with what is appended after it (a watched run does not leave one
# part per step).
SMALL_PART_BYTES = PART_BYTES // 2
# Reward functions given their own column per part; more (a hostile run's thousands) stay in rewards_json only.
MAX_REWARD_COLUMNS = 32
REWARD_PREFIX = "rewards."
NUMBER_COLUMNS = ("step", "group", "reward", "advantage", "length")
FLAG_COLUMNS = ("truncated", "reward_error")
TEXT_COLUMNS = ("prompt", "completion", "rewards_json")
# Runs whose loaded columns this process keeps.
TABLES_KEPT = 2
# The most disk every run's parts together may take: past it, the runs read longest ago lose theirs (`prune`).
MAX_CACHE_BYTES = 100 << 30
# The most rows of one run a query loads (the newest parts that hold them): a run's code can write many tiny
# records within its disk limit, and the server holds each loaded row's number columns in memory.
MAX_ROWS = 4_000_000


@dataclass(frozen=True)
class Part:
    file: str  # the part's file name in the cache folder
    start: int
    end: int
    rows: int


@dataclass(frozen=True)
class Manifest:
    identity: tuple[int, int] | None = None
    offset: int = 0
    tail: str = ""  # hex of the FINGERPRINT_BYTES before offset
    parts: tuple[Part, ...] = ()

    def to_json(self, source: str = "") -> bytes:
        return json.dumps(
            {
                "version": VERSION,
                "source": source,  # the file's path (`keyed_path`): its run deleted, `prune` deletes the folder
                "identity": list(self.identity) if self.identity else None,
                "offset": self.offset,
                "tail": self.tail,
                "parts": [vars(p) for p in self.parts],
            }
        ).encode()


def cache_root(cache_dir: str | os.PathLike | None = None) -> Path:
    """The folder every run's parts lie under: `cache_dir`, else the one beside the workbench cache
    (not the model cache: every sandbox sees that one, and every run's uid may read it)."""
    if cache_dir is not None:
        return Path(cache_dir)
    from workbench.sources.model_files import completions_cache_dir

    return completions_cache_dir()


def keyed_path(path) -> str:
    """The path a cache folder is named by: the real path of the file's folder, and the file's own name."""
    path = Path(path)
    return os.path.join(os.path.realpath(path.parent), path.name)


def folder_for(path: Path, cache_dir: str | os.PathLike | None = None) -> Path:
    """The cache folder of one completions file, named by a hash of its path: its folder's real path and its own
    name, never what a link in the file's place points at (a run's code may put a link to another run's file
    there: named by the target, that run's cache would be cleared as this file's, which reads as missing)."""
    key = hashlib.sha256(os.fsencode(keyed_path(path))).hexdigest()[:32]
    return cache_root(cache_dir) / key


def _read_manifest(folder: Path) -> Manifest:
    try:
        data = json.loads((folder / MANIFEST).read_bytes())
        parts = tuple(Part(str(p["file"]), int(p["start"]), int(p["end"]), int(p["rows"])) for p in data["parts"])
        identity = tuple(data["identity"]) if data["identity"] else None
        if data.get("version") != VERSION or any("/" in p.file or p.file.startswith(".") for p in parts):
            return Manifest()
        if not all((folder / p.file).is_file() for p in parts):  # a part gone (another reader's update): read again
            return Manifest()
        return Manifest(identity, int(data["offset"]), str(data["tail"]), parts)
    except (OSError, ValueError, KeyError, TypeError):
        return Manifest()


def _write_atomic(path: Path, write) -> None:
    temporary = path.with_name(f".{path.name}.{secrets.token_hex(6)}")
    try:
        write(temporary)
        os.replace(temporary, path)
    finally:
        temporary.unlink(missing_ok=True)


# ---------------------------------------------------------------- rows to columns


def _text(value) -> str | None:
    if value is None or isinstance(value, str):
        return value
    return transcript_text(value)


def _numbers(values: list) -> pa.Array:
    """Finite numbers as float64, anything else (None, NaN, infinities, an integer past float's range) null."""
    try:
        array = pa.array(values, pa.float64())
    except (pa.ArrowException, OverflowError, TypeError, ValueError):
        array = pa.array([finite_number(v) for v in values], pa.float64())
    return pc.if_else(pc.is_finite(array), array, pa.scalar(None, pa.float64()))


def part_table(records: list[dict]) -> pa.Table:
    """The columns of one part, from its records (as `runfolder.parse_lines` read them: `completion_problem`'s
    shape, so numbers are numbers or null and texts text, chat messages or null)."""
    arrays = {name: _numbers([r.get(name) for r in records]) for name in NUMBER_COLUMNS}
    arrays["truncated"] = pa.array([r.get("truncated") for r in records], pa.bool_())
    arrays["reward_error"] = pa.array([bool(r.get("reward_errors")) for r in records], pa.bool_())
    for name in ("prompt", "completion"):
        arrays[name] = pa.array([_text(r.get(name)) for r in records], pa.string())
    # prompts repeat (G completions share one): stored once each
    arrays["prompt"] = arrays["prompt"].dictionary_encode()
    scores = [r.get("rewards") or {} for r in records]
    arrays["rewards_json"] = pa.array(  # most records of a tiny run have no scores: "{}" without the encoder
        [json.dumps({str(k): finite_number(v) for k, v in s.items()}) if s else "{}" for s in scores], pa.string()
    )
    names = list(dict.fromkeys(name for s in scores for name in s))[:MAX_REWARD_COLUMNS]
    arrays.update({REWARD_PREFIX + str(name): _numbers([s.get(name) for s in scores]) for name in names})
    return pa.table(arrays)


def _write_part(table: pa.Table, target: Path) -> None:
    with pa.OSFile(os.fspath(target), "wb") as sink, pa.ipc.new_file(sink, table.schema) as writer:
        writer.write_table(table)


def open_part(path: Path) -> pa.Table:
    """A part's columns, memory-mapped: nothing is read or copied until a kernel touches it."""
    with pa.memory_map(os.fspath(path)) as source:
        return pa.ipc.open_file(source).read_all()


# ---------------------------------------------------------------- keeping the parts current


def _still_valid(handle, manifest: Manifest, identity: tuple[int, int]) -> bool:
    size = os.fstat(handle.fileno()).st_size
    if manifest.identity != identity or size < manifest.offset:
        return False
    tail = bytes.fromhex(manifest.tail)
    handle.seek(manifest.offset - len(tail))
    return handle.read(len(tail)) == tail


def _changed_in_place(handle, manifest: Manifest, size: int) -> Manifest:
    """What to keep of a file changed in place (the same file, cut shorter or its last bytes read changed): its
    parts that end within the file, but the last of them, which is read again with what follows it.

    The trainer only appends, and a resume writes a new file (a new identity, read from the start): a change in
    place is a run's own code rewriting its records, and reading the whole file again on each look would let it
    make every look cost its whole file (up to the run's disk limit). This way a look costs at most one part
    (PART_BYTES, and a small one before it) besides what was appended; the older parts show what they held when read."""
    kept = [part for part in manifest.parts if part.end <= size]
    if len(kept) == len(manifest.parts):  # nothing cut off: the last part is the one that changed
        kept.pop()
    offset = kept[-1].end if kept else 0
    handle.seek(max(0, offset - FINGERPRINT_BYTES))
    tail = handle.read(offset - max(0, offset - FINGERPRINT_BYTES))
    return Manifest(manifest.identity, offset, tail.hex(), tuple(kept))


def _parse_from(path: Path, handle, offset: int, folder: Path, identity) -> tuple[list[Part], int, bytes]:
    """New parts for the whole lines of the open file from `offset`: one part per chunk read."""
    parts, tail = [], b""
    rule = runfolder.rule_of(path)
    for base, lines, _too_long in runfolder.whole_lines(handle, offset):
        for start, stop in kept_records.pieces(lines, PART_BYTES):
            records, skipped = runfolder.parse_lines(lines[start:stop], base + start, rule)
            runfolder.say_skipped(path, skipped)
            name = f"part-{identity[1]}-{base + start}-{base + stop}.arrow"
            table = part_table(records)
            _write_atomic(folder / name, lambda target, t=table: _write_part(t, target))
            parts.append(Part(name, base + start, base + stop, table.num_rows))
        if lines:
            tail = (tail + lines[-FINGERPRINT_BYTES:])[-FINGERPRINT_BYTES:]
        offset = base + (len(lines) if lines else runfolder.READ_CHUNK_BYTES)
    return parts, offset, tail


def update(path: Path, cache_dir: str | os.PathLike | None = None) -> tuple[Path, Manifest]:
    """The cache folder and current manifest of the completions file `path`, brought up to date (one process or
    thread at a time per file, `flock`: the others then find it done)."""
    folder = folder_for(path, cache_dir)
    folder.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    if not folder.is_dir():  # a run looked at for the first time: the cache grows, so it is pruned first
        prune(folder.parent)
    folder.mkdir(exist_ok=True, mode=0o700)
    with open(folder / LOCK_FILE, "a") as lock:
        fcntl.flock(lock.fileno(), fcntl.LOCK_EX)
        return _update(path, folder)


def _update(path: Path, folder: Path) -> tuple[Path, Manifest]:
    os.utime(folder)  # when the run was last read: `prune` deletes the least recently read first
    manifest = _read_manifest(folder)
    if not all((folder / part.file).is_file() for part in manifest.parts):  # removed by hand: read again
        manifest = Manifest()
    try:
        with safe_files.open_file(path) as handle:
            info = os.fstat(handle.fileno())
            identity = (info.st_dev, info.st_ino)
            if manifest.identity != identity:  # a new file (a resume's rewrite): read from the start
                manifest = Manifest(identity)
            elif not _still_valid(handle, manifest, identity):
                manifest = _changed_in_place(handle, manifest, info.st_size)
            if info.st_size == manifest.offset:
                return folder, manifest
            kept = list(manifest.parts)
            tail = bytes.fromhex(manifest.tail)
            if kept and kept[-1].end - kept[-1].start < SMALL_PART_BYTES:  # read a small last part again
                start = kept.pop().start
                handle.seek(max(0, start - FINGERPRINT_BYTES))
                tail = handle.read(start - max(0, start - FINGERPRINT_BYTES))
            else:
                start = manifest.offset
            parts, offset, new_tail = _parse_from(path, handle, start, folder, identity)
    except OSError:  # no file (or no regular file): no completions (the parts stay until the file is read again)
        return folder, Manifest()
    tail = (tail + new_tail)[-FINGERPRINT_BYTES:]
    manifest = Manifest(identity, offset, tail.hex(), tuple(kept + parts))
    _write_atomic(folder / MANIFEST, lambda target: target.write_bytes(manifest.to_json(keyed_path(path))))
    return folder, _forget_others(folder, manifest)


def _source_gone(folder: Path) -> bool:
    """Whether the run folder of the file this cache folder holds is gone (the run deleted)."""
    try:
        source = json.loads((folder / MANIFEST).read_bytes()).get("source")
    except (OSError, ValueError, AttributeError):
        return False
    return isinstance(source, str) and bool(source) and not os.path.isdir(os.path.dirname(source))


def prune(root: Path, most: int | None = None) -> None:
    """Delete the cache folders of deleted runs (what a student wrote leaves with the run, and a run deleted and
    made again cannot grow the cache without end), then, while the parts take more than `most` bytes
    (MAX_CACHE_BYTES), those of the runs read longest ago (read again when next looked at)."""
    import shutil

    most = MAX_CACHE_BYTES if most is None else most
    kept = []
    for folder in root.iterdir() if root.is_dir() else ():
        if folder.is_symlink() or not folder.is_dir():
            continue
        if _source_gone(folder):
            shutil.rmtree(folder, ignore_errors=True)
            continue
        size = sum(entry.stat().st_size for entry in folder.iterdir() if entry.is_file())
        kept.append((folder.stat().st_mtime, size, folder))
    total = sum(size for _, size, _ in kept)
    for _, size, folder in sorted(kept, key=lambda entry: entry[0]):
        if total <= most:
            break
        shutil.rmtree(folder, ignore_errors=True)
        total -= size


def _forget_others(folder: Path, manifest: Manifest) -> Manifest:
    """Delete the parts the manifest no longer names (a file read again from the start)."""
    named = {p.file for p in manifest.parts}
    for entry in folder.glob("part-*"):
        if entry.name not in named:
            entry.unlink(missing_ok=True)
    return manifest


# ---------------------------------------------------------------- reading the parts


def loaded_parts(manifest: Manifest, most: int | None = None) -> int:
    """How many of the manifest's first parts a query leaves out: the oldest, so the newest hold at most `most`
    (MAX_ROWS) rows (at least the last part is loaded)."""
    most = MAX_ROWS if most is None else most
    rows, first = 0, len(manifest.parts)
    while first > 0 and (rows + manifest.parts[first - 1].rows <= most or first == len(manifest.parts)):
        first -= 1
        rows += manifest.parts[first].rows
    return first


def read_columns(folder: Path, manifest: Manifest, wanted) -> pa.Table:
    """The columns (those `wanted` accepts) of the parts in file order (the newest MAX_ROWS rows' parts:
    `loaded_parts`), with `part` (its number in the manifest) and `row` (its place there)."""
    tables, scores = [], {}
    skipped = loaded_parts(manifest)
    for number, part in enumerate(manifest.parts):
        if number < skipped:
            continue
        table = open_part(folder / part.file)
        names = [name for name in table.column_names if wanted(name)]
        # the run's first MAX_REWARD_COLUMNS reward names only (every score stays in rewards_json): a run naming
        # new ones in each part would otherwise give every row of the joined table a column per name
        for name in names:
            if name.startswith(REWARD_PREFIX) and len(scores) < MAX_REWARD_COLUMNS:
                scores.setdefault(name)
        table = table.select([name for name in names if not name.startswith(REWARD_PREFIX) or name in scores])
        table = table.append_column("part", pa.array(np.full(table.num_rows, number, np.int32)))
        tables.append(table.append_column("row", pa.array(np.arange(table.num_rows, dtype=np.int32))))
    if not tables:
        empty = part_table([])
        tables = [empty.select([n for n in empty.column_names if wanted(n)])]
        tables = [
            tables[0].append_column("part", pa.array([], pa.int32())).append_column("row", pa.array([], pa.int32()))
        ]
    return pa.concat_tables(tables, promote_options="default")


def read_rows(folder: Path, manifest: Manifest, places: list[tuple[int, int]], columns: list[str]) -> list[dict]:
    """The `columns` of the rows at `places` ((part, row) pairs), in that order."""
    by_part: dict[int, list[int]] = {}
    for part, row in places:
        by_part.setdefault(part, []).append(row)
    found: dict[tuple[int, int], dict] = {}
    for part, rows in by_part.items():
        table = open_part(folder / manifest.parts[part].file).select(columns).take(rows)
        for row, values in zip(rows, table.to_pylist()):
            found[(part, row)] = values
    return [found[place] for place in places]


def scan_parts(folder: Path, manifest: Manifest, columns: list[str]):
    """Each part's `columns` in turn, memory-mapped."""
    for part in manifest.parts:
        yield open_part(folder / part.file).select(columns)


class Kept:
    """What this process keeps per run: the loaded number columns, rebuilt when the manifest changes."""

    def __init__(self, size: int = TABLES_KEPT):
        self.size = size
        self.lock = threading.Lock()
        self.entries: OrderedDict = OrderedDict()

    def get(self, key, manifest: Manifest, build):
        with self.lock:
            entry = self.entries.get(key)
            if entry is not None and entry[0] == manifest:
                self.entries.move_to_end(key)
                return entry[1]
        value = build()
        with self.lock:
            self.entries[key] = (manifest, value)
            self.entries.move_to_end(key)
            while len(self.entries) > self.size:
                self.entries.popitem(last=False)
        return value

    def clear(self) -> None:
        with self.lock:
            self.entries.clear()
