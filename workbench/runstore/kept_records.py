"""How many of a run file's records one reader keeps: the newest, at most a number of them and of their bytes.

A run's code can write many small valid records within its disk limit (2 GiB of one-number metric lines), and a
reader that kept every one as a dict would hold several times the file's size in the server's memory, and parse
all of it on each first look. So every server-side reader of metrics.jsonl (the Train tab, the Runs tab's
overlays, the report) and of completions.jsonl for the report keeps the newest records only: it reads at most the
last `Limits.most_bytes` of the file, and keeps at most `Limits.most_records` records and about that many bytes
of their lines; what it left out it says (`left_out_note`). The admin sets both: WORKBENCH_MAX_RUN_RECORDS and
WORKBENCH_MAX_RUN_RECORDS_MB. Standard library; pure but for reading the environment.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

RECORDS_ENV = "WORKBENCH_MAX_RUN_RECORDS"
BYTES_ENV = "WORKBENCH_MAX_RUN_RECORDS_MB"
DEFAULT_RECORDS = 20_000
DEFAULT_MB = 16
# Lines are parsed this much at a time, so a reader holds at most one such piece's records beyond those it keeps.
PIECE_BYTES = 1 << 20


@dataclass(frozen=True)
class Limits:
    """The most records and bytes of their lines one reader keeps of one file."""

    most_records: int = DEFAULT_RECORDS
    most_bytes: int = DEFAULT_MB << 20


def _positive(env: dict, name: str, default: float) -> float:
    try:
        value = float(env.get(name, ""))
    except ValueError:
        return default
    return value if value > 0 and value == value and value != float("inf") else default


def limits(env: dict | None = None) -> Limits:
    """The admin's limits from the server's environment, or the defaults (a value that is not a positive number)."""
    env = os.environ if env is None else env
    return Limits(int(_positive(env, RECORDS_ENV, DEFAULT_RECORDS)), int(_positive(env, BYTES_ENV, DEFAULT_MB) * 2**20))


@dataclass(frozen=True)
class Kept:
    """The newest records a reader keeps, each with about the bytes of its line, and what it left out.

    `dropped`: records read and let go (the oldest first); `unread_bytes`: bytes at the file's start never read
    (before the window of the last `most_bytes`). Do not change the lists: results share them."""

    records: list = field(default_factory=list)
    sizes: list = field(default_factory=list)
    kept_bytes: int = 0
    dropped: int = 0
    unread_bytes: int = 0

    @property
    def left_out(self) -> bool:
        return bool(self.dropped or self.unread_bytes)


def keep(kept: Kept, new: list, piece_bytes: int, bounds: Limits) -> Kept:
    """`kept` with the records `new` (parsed from `piece_bytes` bytes of lines) appended, and the oldest let go
    while more than `bounds` allows are kept (the newest record always stays)."""
    if not new:
        return kept
    each = piece_bytes // len(new)
    records, sizes = kept.records + new, kept.sizes + [each] * len(new)
    total = kept.kept_bytes + each * len(new)
    cut = 0
    while len(records) - cut > 1 and (len(records) - cut > bounds.most_records or total > bounds.most_bytes):
        total -= sizes[cut]
        cut += 1
    if cut:
        records, sizes = records[cut:], sizes[cut:]
    return Kept(records, sizes, total, kept.dropped + cut, kept.unread_bytes)


def pieces(lines: bytes, most: int = PIECE_BYTES) -> list[tuple[int, int]]:
    """(start, stop) of the runs of whole `lines` parsed one at a time: at most `most` bytes each (a longer line:
    that line), each cut after a line end."""
    found, start = [], 0
    while start < len(lines):
        stop = len(lines)
        if stop - start > most:
            stop = lines.rfind(b"\n", start, start + most) + 1 or lines.index(b"\n", start + most) + 1
        found.append((start, stop))
        start = stop
    return found


def left_out_note(name: str, kept: Kept, bounds: Limits, what: str = "steps") -> str:
    """One sentence for a page: what the reader of `name` left out, the limit that made it, and the settings."""
    parts = []
    if kept.unread_bytes:
        parts.append(f"its first {kept.unread_bytes / 2**20:,.1f} MiB")
    if kept.dropped:
        parts.append(f"{kept.dropped:,} older records")
    return (
        f"{name}: showing the newest {len(kept.records):,} {what if len(kept.records) != 1 else what[:-1]}; "
        f"{' and '.join(parts)} are left out (a reader "
        f"keeps at most {bounds.most_records:,} records and {bounds.most_bytes / 2**20:g} MiB of a run file; the "
        f"admin raises the limits with {RECORDS_ENV} and {BYTES_ENV})."
    )
