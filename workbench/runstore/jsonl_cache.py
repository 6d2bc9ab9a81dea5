"""Reading a run's growing JSON-lines files without reading a byte twice.

A long run's `completions.jsonl` holds hundreds of thousands of lines (10,000
steps of 64 completions: about 300 MB), and every page that opens the run,
and every tick of a page watching it, would otherwise parse all of them to
show one step. Two readers here read only what they have not read before:

- `index_steps(path, previous)`: a `StepIndex`, where each step's lines lie
  (stretches of consecutive lines of one step, as byte ranges, in file
  order), without parsing a line as JSON: the trainer writes every record as
  `{"step": N, ...`, and a line written otherwise is parsed to find its step.
  `read_span` then parses only the lines of the step asked for.
- `read_records(path, previous)`: the newest records of a file (`metrics.jsonl`),
  parsed once, as many as one reader keeps (`kept_records`: a run's code can
  write millions of small records; the page says what was left out).

Given the result of an earlier call for the same file, each reads only the
bytes appended since: the result holds the file's identity (device, inode),
the offset it read up to and the last bytes before that offset, so a file
replaced by a resume's rewrite (`runfolder.keep_steps_up_to`), cut shorter,
or put where a deleted one was (an inode number used again) is read again
from the start. Checking those last bytes is part of the same read: a call
reads FINGERPRINT_BYTES more than was appended.
As everywhere in the run folder, files open through `safe_files` (a link,
FIFO or folder in a file's place reads as missing), a half-written last line is left for the
next call, and a line that cannot be read (not UTF-8, not JSON, a record of
the wrong shape) is skipped, counted in the result and logged once per file
(`runfolder.parse_lines`).

`step_index(path)` and `records(path)` keep those results per process, for
every page and tab that reads the same file: a cache of what the file said,
checked against the file on every call, so it never changes an answer, only
how much is read. It holds the few files read most recently.

Standard library (and orjson, where installed, to parse faster, `runfolder.loads`): importable without torch or
gradio.
"""

from __future__ import annotations

import itertools
import os
import re
import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from workbench.runstore import runfolder, safe_files
from workbench.runstore.kept_records import Kept, limits
from workbench.spec.run_records import Skipped

# How much of a file is read at once while indexing it.
CHUNK_BYTES = 8 << 20
# Bytes before the offset read up to that must be unchanged for a file to count as the one read before.
FINGERPRINT_BYTES = runfolder.TAIL_BYTES
# Files whose results the process keeps: step indexes are small (a few numbers a step), records are not.
INDEXES_KEPT = 64
RECORDS_KEPT = 8

# Numbers each read of a file from its start (RecordsRead.generation).
_GENERATIONS = itertools.count(1)
# A stretch of consecutive lines that all begin with the same `{"step": N` (as the recorder writes them).
_STRETCH = re.compile(rb'\{"step": (-?\d+)[,}][^\n]*\n(?:\{"step": \1[,}][^\n]*\n)*')


def _step_of(record: Any) -> int | float | None:
    step = record.get("step") if isinstance(record, dict) else None
    if isinstance(step, bool) or not isinstance(step, (int, float)) or step != step:
        return None
    return step


@dataclass(frozen=True)
class StepIndex:
    """Where each step's lines lie in a JSON-lines file, up to `offset` (the end of its last complete line).

    `stretches` are (step, start, end) byte ranges of consecutive lines of one
    step, in file order; a line without a step (or not JSON) is passed over
    inside the stretch around it. A step that appears in two stretches was
    written twice (a resume): its later stretch holds its newest round.
    """

    identity: tuple[int, int] | None = None
    offset: int = 0
    tail: bytes = b""  # the last FINGERPRINT_BYTES before `offset`
    stretches: tuple[tuple[int | float, int, int], ...] = ()
    # step -> (start, end) of its last stretch
    last: dict = field(default_factory=dict)
    # Bytes this call read from the file (0 when nothing was appended).
    bytes_read: int = field(default=0, compare=False)

    @property
    def steps(self) -> list:
        """Every step that has lines, ascending."""
        return sorted(self.last)

    def span_of(self, step: int | float) -> tuple[int, int] | None:
        """(start, end) of the step's last stretch, or None when the step has no lines."""
        return self.last.get(step)


@dataclass(frozen=True)
class RecordsRead:
    """The newest records of a JSON-lines file up to `offset`, in file order, as many as one reader keeps
    (`kept_records`: the admin's limits); `kept` says what was left out. Do not change the list: it is shared.

    `kept.dropped` is how many records of this read of the file came before `records[0]`: a reader that took
    `n` of them takes `records[max(0, n - kept.dropped):]` next (`since`)."""

    identity: tuple[int, int] | None = None
    offset: int = 0
    tail: bytes = b""  # the last FINGERPRINT_BYTES before `offset`
    kept: Kept = Kept()
    bytes_read: int = field(default=0, compare=False)
    skipped: Skipped = Skipped()  # lines up to `offset` that could not be read
    generation: int = 0  # which read of the file from its start this is: counts go on only within one

    @property
    def records(self) -> list:
        return self.kept.records

    @property
    def count(self) -> int:
        """How many records this read of the file has produced, those let go included."""
        return self.kept.dropped + len(self.kept.records)

    def since(self, count: int) -> list:
        """The records after the first `count` of this read of the file (all kept ones when it let those go)."""
        return self.kept.records[max(0, count - self.kept.dropped) :]


def _continue_from(handle, previous, fresh):
    """`previous` when the open file still begins with what it read, else `fresh` (read again from 0).

    Leaves the handle at the offset to read from; returns (result to extend, bytes read to check).
    """
    info = os.fstat(handle.fileno())
    identity = (info.st_dev, info.st_ino)
    if previous is None or previous.identity != identity or info.st_size < previous.offset:
        return fresh(identity), 0
    start = previous.offset - len(previous.tail)
    handle.seek(start)
    if handle.read(len(previous.tail)) != previous.tail:
        handle.seek(0)
        return fresh(identity), len(previous.tail)
    return previous, len(previous.tail)


def _tail(previous_tail: bytes, added: bytes) -> bytes:
    return (previous_tail + added)[-FINGERPRINT_BYTES:]


def index_steps(path: str | os.PathLike, previous: StepIndex | None = None) -> StepIndex:
    """The step index of `path`, reading only what `previous` (an index of the same file) has not read."""
    try:
        with safe_files.open_file(path) as handle:
            previous, read = _continue_from(handle, previous, lambda identity: StepIndex(identity=identity))
            stretches = list(previous.stretches)
            last = dict(previous.last)
            offset, tail = previous.offset, previous.tail
            # Read into one buffer; the start of a line cut by the chunk's end moves to its front.
            buffer = bytearray(CHUNK_BYTES)
            carried = 0
            while True:
                if carried == len(buffer) < runfolder.READ_CHUNK_BYTES:  # a line longer than the buffer
                    buffer.extend(bytes(len(buffer)))
                elif carried == len(buffer):  # longer than a reader holds (runfolder.whole_lines): passed over
                    tail = _tail(tail, bytes(buffer[-FINGERPRINT_BYTES:]))
                    offset += carried
                    carried = 0
                with memoryview(buffer) as view:
                    count = handle.readinto(view[carried:])
                if not count:
                    break
                read += count
                size = carried + count
                end = buffer.rfind(b"\n", 0, size) + 1
                if end:
                    _index_lines(buffer, end, offset, stretches, last)
                    tail = _tail(tail, bytes(buffer[max(0, end - FINGERPRINT_BYTES) : end]))
                    offset += end
                    buffer[: size - end] = buffer[end:size]
                carried = size - end
    except OSError:  # missing, unreadable or no regular file: nothing written yet, as far as a reader can tell
        return previous or StepIndex()
    if offset == previous.offset:
        return replace(previous, bytes_read=read)
    return StepIndex(previous.identity, offset, tail, tuple(stretches), last, read)


def _index_lines(body: bytes, size: int, base: int, stretches: list, last: dict) -> None:
    """Add the whole lines of `body[:size]` (from byte `base` of the file) to stretches and last."""
    position = 0
    match_stretch = _STRETCH.match
    while position < size:
        match = match_stretch(body, position, size)
        if match is not None:
            step, end = int(match.group(1)), match.end()
        else:  # a line written some other way: parse it to find its step
            end = body.index(b"\n", position) + 1
            try:
                step = _step_of(runfolder.loads(bytes(body[position:end])))
            except (ValueError, RecursionError):
                step = None
        start = base + position
        if stretches and (step is None or stretches[-1][0] == step) and stretches[-1][2] == start:
            step = stretches[-1][0]
            start = stretches[-1][1]
            stretches[-1] = (step, start, base + end)
            last[step] = (start, base + end)
        elif step is not None:
            stretches.append((step, start, base + end))
            last[step] = (start, base + end)
        position = end


def read_span(path: str | os.PathLike, start: int, end: int) -> tuple[list[dict], Skipped]:
    """The records on the whole lines between bytes `start` and `end` (a stretch of a StepIndex), and the
    lines there that could not be read."""
    try:
        chunk = safe_files.read_bytes(path, start, max(0, end - start))
    except OSError:
        return [], Skipped()
    return _parse_lines(path, chunk[: chunk.rfind(b"\n") + 1], start)


def _parse_lines(path, chunk: bytes, base: int) -> tuple[list[dict], Skipped]:
    records, skipped = runfolder.parse_lines(chunk, base, runfolder.rule_of(path))
    runfolder.say_skipped(path, skipped)
    return records, skipped


def read_records(path: str | os.PathLike, previous: RecordsRead | None = None) -> RecordsRead:
    """The newest records of `path` (`kept_records.limits`), parsing only the lines appended since `previous`
    (a read of the same file), and of those at most the last `most_bytes`."""
    try:
        with safe_files.open_file(path) as handle:
            previous, read = _continue_from(
                handle, previous, lambda identity: RecordsRead(identity=identity, generation=next(_GENERATIONS))
            )
            kept, offset, skipped, tail = runfolder.read_kept(
                path, handle, previous.offset, previous.kept, limits(), previous.tail
            )
            tail = tail[-FINGERPRINT_BYTES:]
            read += max(0, os.fstat(handle.fileno()).st_size - previous.offset)  # every byte up to the end
    except OSError:
        return previous or RecordsRead()
    if offset == previous.offset:
        return replace(previous, bytes_read=read)
    return RecordsRead(previous.identity, offset, tail, kept, read, previous.skipped + skipped, previous.generation)


# ---------------------------------------------------------------- kept per process


class _Kept:
    """The latest result per file for one reader, the `size` most recently used files, one lock per file."""

    def __init__(self, read: Callable[[Path, Any], Any], size: int):
        self.read = read
        self.size = size
        self.lock = threading.Lock()
        self.entries: OrderedDict[str, list] = OrderedDict()  # path -> [lock, result]

    def get(self, path: str | os.PathLike):
        key = os.path.abspath(path)
        with self.lock:
            entry = self.entries.get(key)
            if entry is None:
                entry = self.entries[key] = [threading.Lock(), None]
            self.entries.move_to_end(key)
            while len(self.entries) > self.size:
                self.entries.popitem(last=False)
        with entry[0]:  # one reader extends a file's result at a time; the others then find it extended
            entry[1] = self.read(Path(key), entry[1])
            return entry[1]

    def clear(self) -> None:
        with self.lock:
            self.entries.clear()


_INDEXES = _Kept(index_steps, INDEXES_KEPT)
_RECORDS = _Kept(read_records, RECORDS_KEPT)


def step_index(path: str | os.PathLike) -> StepIndex:
    """The step index of `path`, extended by what was appended since this process last indexed it."""
    return _INDEXES.get(path)


def records(path: str | os.PathLike) -> RecordsRead:
    """The newest records of `path` (`read_records`), parsing only what was appended since this process last read
    it."""
    return _RECORDS.get(path)


def records_of_step(path: str | os.PathLike, step: int | float) -> list[dict]:
    """The records of `step`'s last stretch of lines in `path` (its newest round is among them), or []."""
    span = step_index(path).span_of(step)
    if span is None:
        return []
    return [record for record in read_span(path, *span)[0] if _step_of(record) == step]


def forget() -> None:
    """Drop what this process keeps (for tests that count what is read)."""
    _INDEXES.clear()
    _RECORDS.clear()
