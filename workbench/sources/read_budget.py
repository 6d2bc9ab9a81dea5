"""How much of a user's dataset the server may decode for one check or preview, and the refusal when it is past.

The Setup tab's preview and the check before a launch read the first rows of a
dataset in the server's own process (outside any sandbox), so a small file
that decodes to gigabytes (a Parquet decompression bomb, a JSON line of a
gigabyte) would take the server's memory. A `Budget` is made per action from
WORKBENCH_MAX_DATA_READ_MB (default 256): the units decoded (Parquet row
groups) must fit it together, each as its file declares it before a byte of
its data is read, and the rows kept (JSON lines and CSV text as read,
Arrow rows by their values' sizes) share a quarter of it, since a character
may take four bytes in Python. A unit or row that does not fit ends the read
with the rows so far, or, before the first row, is refused naming the file,
the limit and the setting. The training run reads the whole dataset inside
its own sandbox, under its memory limit.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from workbench.sources.dataset_error import DatasetError

MAX_READ_ENV = "WORKBENCH_MAX_DATA_READ_MB"
DEFAULT_MAX_READ_MB = 256
ROWS_SHARE = 4  # the rows kept get 1/ROWS_SHARE of the limit: one UTF-8 byte may be four in a Python str
METADATA_SHARE = 16  # a footer, a message header or a small file read whole (README, state.json) gets 1/16
# What a line read costs at the least, whatever its bytes: a bytes object and a turn of the reader's loop (a file of
# blank lines is millions of them).
LINE_COST = 64
# The Python objects JSON text decodes to beyond its own bytes, charged to the units' limit before it is decoded:
# each container is an object (an empty dict `{}`, two bytes of text, is 64 bytes), and each value after a
# separator takes a slot and, as often as not, an object of its own.
CONTAINER_COST = 64
VALUE_COST = 40


def max_read_bytes(environ: Mapping[str, str] | None = None) -> int:
    """The limit in bytes: $WORKBENCH_MAX_DATA_READ_MB MiB, or DEFAULT_MAX_READ_MB when unset."""
    text = ((os.environ if environ is None else environ).get(MAX_READ_ENV) or "").strip()
    if not text:
        return DEFAULT_MAX_READ_MB * 2**20
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not value > 0 or value != value:
        raise DatasetError(
            field=MAX_READ_ENV,
            rule=f"{text[:40]!r} is not a positive number of MiB",
            fix=f"set it to e.g. {DEFAULT_MAX_READ_MB}, or unset it for the default",
        )
    return int(value * 2**20)


@dataclass
class Budget:
    """One action's budget: `limit` bytes for the units it decodes, `limit // ROWS_SHARE` for the rows it keeps."""

    limit: int
    rows_used: int = 0
    decoded: int = 0  # bytes of the units decoded so far
    rows: int = 0  # rows kept so far
    stopped: bool = False  # a unit or row did not fit after the first row: the read ended there

    @classmethod
    def from_env(cls) -> Budget:
        return cls(max_read_bytes())

    @property
    def rows_left(self) -> int:
        return self.limit // ROWS_SHARE - self.rows_used

    def unit_fits(self, size: int, path: Path, what: str) -> bool:
        """Whether a unit of `size` bytes may be decoded (it is counted when it may); the units of one action
        share the limit, so that many small ones cost no more than one big one. False (stop) after the first
        row, refused before it."""
        if self.decoded + size <= self.limit:
            self.decoded += size
            return True
        return self._stop_or_refuse(path, what, size, self.limit)

    def objects_fit(self, text: str | bytes, path: Path, what: str) -> bool:
        """Whether the objects JSON `text` decodes to may be made (`json_objects_cost`, counted when they may)."""
        return self.unit_fits(json_objects_cost(text), path, what)

    def row_fits(self, size: int, path: Path, what: str) -> bool:
        """Whether one more row of `size` bytes may be kept (it is counted when it does)."""
        if size <= self.rows_left:
            self.rows_used += size
            self.rows += 1
            return True
        return self._stop_or_refuse(path, what, size, self.limit // ROWS_SHARE)

    def cut(self, path: Path, what: str) -> None:
        """The limit ends inside `what` (a line, an item, a row), unread past it: the read stops there, or, before
        the first row, is refused."""
        self._stop_or_refuse(path, what, None, self.limit // ROWS_SHARE)

    def _stop_or_refuse(self, path: Path, what: str, size: int | None, limit: int) -> bool:
        if self.rows:
            self.stopped = True
            return False
        raise refusal(path, what, size, limit)


def json_objects_cost(text: str | bytes) -> int:
    """At least the bytes of Python objects `json.loads(text)` makes beyond the text itself (a bracket or brace
    inside a string is counted too: the bound errs high)."""
    brace, bracket, comma, colon = ("{", "[", ",", ":") if isinstance(text, str) else (b"{", b"[", b",", b":")
    count = text.count
    return CONTAINER_COST * (count(brace) + count(bracket)) + VALUE_COST * (count(comma) + count(colon))


def objects_prefix(text: str, room: int, chunk: int = 1 << 20) -> tuple[int, int]:
    """(the length of the longest prefix of `text`, in whole chunks, whose JSON objects cost at most `room`;
    that cost)."""
    end = spent = 0
    while end < len(text):
        cost = json_objects_cost(text[end : end + chunk])
        if spent + cost > room:
            break
        spent += cost
        end += chunk
    return min(end, len(text)), spent


def lines_prefix(text: str, max_lines: int, chunk: int = 1 << 20) -> int:
    """The length of the longest prefix of `text` holding at most `max_lines` line ends."""
    end = 0
    while end < len(text):
        piece = text[end : end + chunk]
        found = piece.count("\n")
        if found > max_lines:  # the line end that is one too many lies in this piece: bisect for it
            low, high = 0, len(piece)
            while low < high:
                middle = (low + high) // 2
                low, high = (middle + 1, high) if piece.count("\n", 0, middle + 1) <= max_lines else (low, middle)
            return end + low
        max_lines -= found
        end += chunk
    return len(text)


def check_small_files(paths, budget: Budget) -> None:
    """Refuse any of `paths` (files a reader reads whole: a README's front matter, save_to_disk's JSON files)
    that is past the budget's share for them, before it is opened."""
    bound = budget.limit // METADATA_SHARE
    for path in paths:
        try:
            size = os.stat(path).st_size
        except OSError:  # not there: the reader says so
            continue
        if size > bound:
            raise refusal(Path(path), Path(path).name, size, bound)


def refusal(path: Path, what: str, size: int | None, limit: int) -> DatasetError:
    """The one message a bound that bites gives: the file, what is too big, the limit and the setting."""
    past = f"{size / 2**20:.1f} MiB, past" if size is not None else "past"
    setting = f"{MAX_READ_ENV}={max_read_mb_text()}"
    share = setting if limit >= max_read_bytes_or(limit) else f"a share of {setting}"
    return DatasetError(
        f"dataset_name '{path}': {what} is {past} the {limit / 2**20:.1f} MiB the server decodes of a "
        f"dataset to check or preview it ({share}); write it in smaller pieces "
        f"(shorter rows, Parquet row groups of fewer rows), or ask the admin to raise {MAX_READ_ENV}"
    )


def max_read_bytes_or(default: int) -> int:
    try:
        return max_read_bytes()
    except DatasetError:
        return default


def max_read_mb_text() -> str:
    try:
        return f"{max_read_bytes() / 2**20:g}"
    except DatasetError:
        return "?"
