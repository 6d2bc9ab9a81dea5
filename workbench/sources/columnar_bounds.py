"""The first rows of a Parquet file or a `save_to_disk` folder, decoded only as far as a `read_budget.Budget` allows.

A Parquet file says, before any data page is read, how big each row group is
once decoded (its footer: each column chunk's uncompressed size and number of
values); pyarrow decodes a whole row group at once, so one whose declared size
is past the budget is never read. String columns are read as dictionaries,
so a small dictionary page repeated over many rows stays small; each row's
values are measured in Arrow (dictionary entries, list items, struct fields)
before it becomes Python objects. The footer itself is bounded by its length,
read from the file's last bytes.

A `save_to_disk` folder's Arrow files are memory-mapped by `datasets`, not
decoded, unless their batches are compressed (then `datasets` decompresses the
whole file on opening it): each message's header is read first and a
compressed one refused; `datasets` itself never writes one.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

from workbench.sources import parquet_pages
from workbench.sources.dataset_error import DatasetError
from workbench.sources.read_budget import METADATA_SHARE, Budget, check_small_files, refusal

VALUE_BYTES = 16  # counted per value: an offset, a dictionary index, levels, validity, a fixed-width value
MAX_PAGES = 1 << 16  # page headers read per column chunk before its row group is decoded (4 KiB pages of 256 MiB)
SAVED_JSON = ("dataset_info.json", "state.json", "dataset_dict.json")  # what load_from_disk reads whole


def parquet_rows(path: Path, budget: Budget) -> Iterator[dict]:
    """The rows of a Parquet file, row group by row group, while each fits `budget` (see the module)."""
    import pyarrow.parquet as pq

    footer = _footer_bytes(path)
    if footer > budget.limit // METADATA_SHARE:
        raise refusal(path, "its Parquet metadata (footer)", footer, budget.limit // METADATA_SHARE)
    try:
        meta = pq.read_metadata(path)
        strings = [
            meta.schema.column(i).path
            for i in range(meta.num_columns)
            if meta.schema.column(i).physical_type == "BYTE_ARRAY"
        ]
        parquet = pq.ParquetFile(path, metadata=meta, read_dictionary=strings)
    except Exception as exc:  # pyarrow's many error types for a broken file
        raise DatasetError(f"dataset_path '{path}': not a readable Parquet file ({exc}); write it again") from None
    for index in range(meta.num_row_groups):
        declared = max(row_group_bytes(meta.row_group(index)), _pages_bytes(path, meta.row_group(index)))
        if not budget.unit_fits(declared, path, f"row group {index + 1} (decoded, as the file declares it)"):
            return
        try:
            table = parquet.read_row_group(index)
        except Exception as exc:  # a page that does not match its header
            raise DatasetError(f"dataset_path '{path}': row group {index + 1} cannot be read ({exc})") from None
        yield from table_rows(lambda row, table=table: table.slice(row, 1), range(table.num_rows), path, budget)
        del table  # freed before the next row group is decoded
        if budget.stopped:
            return


def row_group_bytes(group) -> int:
    """A row group's decoded size as its metadata declares it: the column chunks' uncompressed sizes, and a few
    bytes per value and row for what encodings leave out (offsets, indices, levels: a run of a million nulls
    is a few bytes on disk)."""
    chunks = [group.column(i) for i in range(group.num_columns)]
    pages = sum(max(0, chunk.total_uncompressed_size) for chunk in chunks)
    values = sum(max(0, chunk.num_values) for chunk in chunks)
    return max(pages, max(0, group.total_byte_size)) + (values + max(0, group.num_rows)) * VALUE_BYTES


def _pages_bytes(path: Path, group) -> int:
    """A row group's decoded size as its page headers declare it (the footer's sizes may lie: pyarrow decodes by
    the headers): the pages' uncompressed sizes, and a few bytes per value they hold."""
    try:
        with open(path, "rb") as handle:
            pages = [
                parquet_pages.chunk_pages(handle, *parquet_pages.chunk_range(group.column(i)), MAX_PAGES)
                for i in range(group.num_columns)
            ]
    except (OSError, parquet_pages.PagesUnreadable) as exc:
        raise DatasetError(f"dataset_path '{path}': not a readable Parquet file ({exc}); write it again") from None
    return sum(size + values * VALUE_BYTES for size, values in pages)


def _footer_bytes(path: Path) -> int:
    with open(path, "rb") as handle:
        size = handle.seek(0, 2)
        if size < 12:
            raise DatasetError(f"dataset_path '{path}': not a readable Parquet file (too short); write it again")
        handle.seek(size - 8)
        tail = handle.read(8)
    if tail[4:] != b"PAR1":
        raise DatasetError(f"dataset_path '{path}': not a readable Parquet file (no PAR1 footer); write it again")
    return int.from_bytes(tail[:4], "little")


def table_rows(row_at: Callable, rows: Iterable[int], path: Path, budget: Budget) -> Iterator[dict]:
    """Rows (`row_at(i)`: row i as a one-row Arrow table) as dicts, each measured in Arrow and counted against
    `budget` before it becomes Python objects."""
    for index in rows:
        row = row_at(index)
        size = VALUE_BYTES + sum(dense_bytes(column) for column in row.columns)
        if not budget.row_fits(size, path, f"row {index + 1}"):
            return
        yield row.to_pylist()[0]


def dense_bytes(array) -> int:
    """About the bytes `array`'s values take once expanded (every dictionary entry and list item counted)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if isinstance(array, pa.ChunkedArray):
        return sum(dense_bytes(chunk) for chunk in array.chunks)
    kind, count = array.type, len(array)
    if pa.types.is_dictionary(kind):
        used = pc.unique(array.indices.drop_null())
        entries = {int(i): dense_bytes(array.dictionary.slice(int(i), 1)) for i in used.to_pylist()}
        counts = pc.value_counts(array.indices.drop_null())
        return count * VALUE_BYTES + sum(entries[int(c["values"])] * int(c["counts"]) for c in counts.to_pylist())
    if pa.types.is_string(kind) or pa.types.is_binary(kind) or _is(kind, "large_string", "large_binary"):
        return count * VALUE_BYTES + int(pc.sum(pc.binary_length(array)).as_py() or 0)
    if _is(kind, "string_view", "binary_view"):
        return count * VALUE_BYTES + int(pc.sum(pc.binary_length(array)).as_py() or 0)
    if pa.types.is_struct(kind):
        return count * VALUE_BYTES + sum(dense_bytes(child) for child in array.flatten())
    if hasattr(array, "flatten"):  # list, large list, fixed-size list, list view, map
        return count * VALUE_BYTES + dense_bytes(array.flatten())
    if kind.num_fields:  # a union or run-end encoded array: datasets writes neither
        raise DatasetError(f"a column of type {kind} cannot be previewed; store it as plain values")
    try:
        width = kind.bit_width // 8
    except ValueError:  # no fixed width: a column of nulls only (pyarrow's `null` type)
        width = 0
    return count * max(VALUE_BYTES, width)


def _is(kind, *names: str) -> bool:
    return str(kind) in names


# ---------------------------------------------------------------- save_to_disk folders


def check_saved_folder(folder: Path, budget: Budget) -> None:
    """Refuse, before `load_from_disk` opens it, a save_to_disk folder whose JSON files are past the budget's
    share or whose Arrow files hold compressed batches (decompressed whole on opening) or huge headers."""
    paths = sorted(folder.rglob("*"))
    check_small_files([path for path in paths if path.name in SAVED_JSON], budget)
    for path in paths:
        if path.suffix == ".arrow" and path.is_file():
            _check_arrow_file(path, budget.limit // METADATA_SHARE)


def _check_arrow_file(path: Path, bound: int) -> None:
    import pyarrow as pa

    try:
        with pa.memory_map(str(path)) as source:  # message bodies stay in the map: only headers are read
            for message in pa.ipc.MessageReader.open_stream(source):
                header = message.metadata.to_pybytes()
                if len(header) > bound:
                    raise refusal(path, "an Arrow message header", len(header), bound)
                if message.type in ("record batch", "dictionary batch") and _compressed(header):
                    raise DatasetError(
                        f"dataset_name '{path}': its Arrow batches are compressed, which the server would "
                        "decompress whole to read the first rows; save it again with datasets' save_to_disk "
                        "(it writes them uncompressed)"
                    )
    except (pa.ArrowInvalid, OSError, struct.error) as exc:
        raise DatasetError(f"dataset_name '{path}': not a readable Arrow file ({exc}); save it again") from None


def _compressed(header: bytes) -> bool:
    """Whether an IPC message's flatbuffer header (a RecordBatch, or a DictionaryBatch's) names a compression."""
    root = struct.unpack_from("<I", header, 0)[0]
    batch = _table_field(header, root, 2)  # Message.header
    if batch is not None and _field_offset(header, root, 1) and header[root + _field_offset(header, root, 1)] == 2:
        batch = _table_field(header, batch, 1)  # DictionaryBatch.data
    return batch is not None and _field_offset(header, batch, 3) != 0  # RecordBatch.compression


def _field_offset(buffer: bytes, table: int, index: int) -> int:
    vtable = table - struct.unpack_from("<i", buffer, table)[0]
    size = struct.unpack_from("<H", buffer, vtable)[0]
    slot = 4 + 2 * index
    return struct.unpack_from("<H", buffer, vtable + slot)[0] if slot < size else 0


def _table_field(buffer: bytes, table: int, index: int) -> int | None:
    offset = _field_offset(buffer, table, index)
    if not offset:
        return None
    return table + offset + struct.unpack_from("<I", buffer, table + offset)[0]
