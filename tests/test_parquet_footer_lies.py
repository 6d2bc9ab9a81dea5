"""A Parquet file whose footer lies about its sizes is bounded by its page headers (issue 52, the attack round).

Found by attacking the fixed shared server as a hostile student. The preview's bound read each row group's
decoded size from the footer (its column chunks' `total_uncompressed_size`, the row group's `total_byte_size`),
which the file's writer chooses: the zstd bomb of the issue (30 values of 40 MiB, a 39 KB file) with those two
numbers rewritten as 1000 passed the bound, and pyarrow, which decodes by the page headers, took the preview to
1.46 GiB. Now each column chunk's page headers are read first (sources/parquet_pages.py) and the larger of the
two sizes is the one the budget sees. And a column of nulls only (pyarrow's `null` type) previews, where
measuring its rows raised ValueError.
"""

from __future__ import annotations

import json
import subprocess
import sys

MIB = 2**20


def _zigzag_varint(number: int) -> bytes:
    value, out = (number << 1) ^ (number >> 63), b""
    while True:
        byte, value = value & 0x7F, value >> 7
        if not value:
            return out + bytes([byte])
        out += bytes([byte | 0x80])


def lying_bomb(path) -> None:
    """The issue's zstd bomb (240 MiB decoded), its footer's uncompressed sizes rewritten as 1000 (Thrift
    compact varints)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(
        pa.table({"prompt": ["x" * (8 * MIB)] * 30}),
        path,
        compression="zstd",
        compression_level=19,
        use_dictionary=False,
    )
    data = path.read_bytes()
    length = int.from_bytes(data[-8:-4], "little")
    footer = data[-8 - length : -8]
    group = pq.read_metadata(path).row_group(0)
    for size in {group.column(0).total_uncompressed_size, group.total_byte_size}:
        footer = footer.replace(_zigzag_varint(size), _zigzag_varint(1000))
    path.write_bytes(data[: -8 - length] + footer + len(footer).to_bytes(4, "little") + b"PAR1")
    assert pq.read_metadata(path).row_group(0).total_byte_size == 1000


def test_a_footer_that_lies_about_sizes_is_refused_before_its_row_group_is_decoded(tmp_path, monkeypatch):
    """Read as the preview does, in a fresh process, under a 4 MiB bound: refused, and the process's peak stays
    far below the 240 MiB the row group decodes to."""
    monkeypatch.setenv("WORKBENCH_MAX_DATA_READ_MB", "4")
    path = tmp_path / "liar.parquet"
    lying_bomb(path)
    assert path.stat().st_size < MIB
    code = (
        "import json, sys\n"
        "from workbench.sources import dataset_reading\n"
        "try:\n"
        "    said = f'{len(dataset_reading.first_rows(sys.argv[1], 200))} rows'\n"
        "except dataset_reading.DatasetError as exc:\n"
        "    said = str(exc)\n"
        "peak = next(line for line in open('/proc/self/status') if line.startswith('VmHWM'))\n"
        "print(json.dumps([said, int(peak.split()[1]) * 1024]))\n"
    )
    out = subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr[-2000:]
    said, peak = json.loads(out.stdout)
    assert "row group 1" in said and "WORKBENCH_MAX_DATA_READ_MB" in said, said
    assert peak < 160 * MIB, f"the preview took {peak / MIB:.0f} MiB"


def test_a_column_of_nulls_only_previews(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    from workbench.sources import dataset_reading

    path = tmp_path / "nulls.parquet"
    pq.write_table(pa.table({"prompt": ["What is 2 + 2?"] * 3, "answer": pa.nulls(3)}), path)
    assert dataset_reading.first_rows(path, 200) == [{"prompt": "What is 2 + 2?", "answer": None}] * 3
