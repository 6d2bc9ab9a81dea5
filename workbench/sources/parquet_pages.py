"""What a Parquet row group's pages say they decode to, read from the page headers themselves.

A Parquet file's footer declares each column chunk's uncompressed size, but a hostile file may write any number
there: pyarrow decodes by the page headers in the data (each page's own uncompressed size, which the
decompressor allocates and checks), not by the footer. So before a row group is decoded, each of its column
chunks is walked page by page over the byte range pyarrow would read (footer offsets and compressed size), and
each header (Thrift compact protocol) gives the page's uncompressed size and value count. Only headers are read;
no page is decompressed. A header that cannot be parsed, or more pages than `max_pages`, ends the walk with
`PagesUnreadable`.
"""

from __future__ import annotations

from typing import BinaryIO

HEADER_READ = 4096  # the bytes read for one page header: an honest one (statistics included) is far smaller
# PageHeader (parquet.thrift): 2 uncompressed_page_size, 3 compressed_page_size; 5 data_page_header,
# 7 dictionary_page_header and 8 data_page_header_v2 each begin with 1 num_values.
UNCOMPRESSED, COMPRESSED = 2, 3
WITH_VALUES = (5, 7, 8)


class PagesUnreadable(ValueError):
    """A page header that is not one, or more pages than allowed."""


def chunk_range(chunk) -> tuple[int, int]:
    """(start, length) of the bytes pyarrow reads for a column chunk (its footer's offsets and size)."""
    start = chunk.data_page_offset
    if chunk.has_dictionary_page and 0 < (chunk.dictionary_page_offset or 0) < start:
        start = chunk.dictionary_page_offset
    return max(0, start), max(0, chunk.total_compressed_size)


def chunk_pages(handle: BinaryIO, start: int, length: int, max_pages: int) -> tuple[int, int]:
    """(the uncompressed bytes, the values) the pages of the column chunk at `start` declare."""
    position, end, size, values = start, start + length, 0, 0
    for _ in range(max_pages):
        if position >= end:
            return size, values
        handle.seek(position)
        header = handle.read(HEADER_READ)
        fields, used = _struct(header, 0, depth=0)
        if fields.get(UNCOMPRESSED, -1) < 0 or fields.get(COMPRESSED, -1) < 0:
            raise PagesUnreadable(f"the page header at byte {position} gives no page size")
        size += fields[UNCOMPRESSED]
        values += max((fields.get(key, 0) for key in WITH_VALUES), default=0)
        position += used + fields[COMPRESSED]
    raise PagesUnreadable(f"a column chunk holds more than {max_pages} pages")


def _varint(data: bytes, at: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if at >= len(data) or shift > 63:
            raise PagesUnreadable("a page header ends inside a number")
        byte = data[at]
        value |= (byte & 0x7F) << shift
        at, shift = at + 1, shift + 7
        if not byte & 0x80:
            return value, at


def _zigzag(data: bytes, at: int) -> tuple[int, int]:
    value, at = _varint(data, at)
    return (value >> 1) ^ -(value & 1), at


def _struct(data: bytes, at: int, depth: int) -> tuple[dict[int, int], int]:
    """A Thrift compact struct at `at`: ({field id: its integer, or a nested struct's num_values}, where it
    ends). Other fields are skipped."""
    if depth > 8:
        raise PagesUnreadable("a page header nested too deep")
    fields: dict[int, int] = {}
    field = 0
    while True:
        if at >= len(data):
            raise PagesUnreadable("a page header longer than a header may be")
        head = data[at]
        at += 1
        if head == 0:
            return fields, at
        kind, delta = head & 0x0F, head >> 4
        if delta:
            field += delta
        else:
            field, at = _zigzag(data, at)
        if kind in (5, 6):  # i32, i64
            fields[field], at = _zigzag(data, at)
        elif kind == 12:  # a struct: a page kind's header, whose first field is its num_values
            nested, at = _struct(data, at, depth + 1)
            fields[field] = max(0, nested.get(1, 0))
        else:
            at = _skip(data, at, kind, depth)


def _skip(data: bytes, at: int, kind: int, depth: int) -> int:
    """Where a value of Thrift compact type `kind` at `at` ends."""
    if kind in (1, 2):  # bool, in the field header
        return at
    if kind == 3:
        return at + 1
    if kind in (4, 5, 6):
        return _varint(data, at)[1]
    if kind == 7:
        return at + 8
    if kind == 8:
        length, at = _varint(data, at)
        return at + length
    if kind == 12:
        return _struct(data, at, depth + 1)[1]
    if kind in (9, 10):  # list, set
        if at >= len(data):
            raise PagesUnreadable("a page header ends inside a list")
        head = data[at]
        count, at = (head >> 4, at + 1) if head >> 4 != 15 else _varint(data, at + 1)
        if head & 0x0F in (1, 2):  # a list's bools take a byte each
            return at + count
        for _ in range(count):
            at = _skip(data, at, head & 0x0F, depth + 1)
            if at > len(data):
                break
        return at
    if kind == 11:  # map
        count, at = _varint(data, at)
        if count:
            types = data[at] if at < len(data) else 0
            at += 1
            for _ in range(count):
                at = _skip(data, _skip(data, at, types >> 4, depth + 1), types & 0x0F, depth + 1)
                if at > len(data):
                    break
        return at
    raise PagesUnreadable(f"a page header holds a value of unknown type {kind}")
