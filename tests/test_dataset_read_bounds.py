"""Everything the server reads of a user's dataset has a size bound before it is decoded (issue 52).

The Setup tab's preview and the check before a launch read a dataset's first rows in the server's own process.
Each hostile file here is small on disk and huge once decoded: a Parquet decompression bomb (zstd, no
dictionary), a dictionary bomb (one big dictionary entry repeated), a JSON line, a JSON array item and a CSV
cell longer than the bound (sparse files), an Arrow file of compressed batches in a save_to_disk folder. Each is
refused with one message naming the file, the limit and WORKBENCH_MAX_DATA_READ_MB, and, measured in a fresh
process, pyarrow allocates nothing near the decoded size. A long prompt's preview stays small HTML.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from helpers import tiny_config, write_hub_dataset

from workbench.jobs import launcher
from workbench.spec import columns
from workbench.spec.config_checks import ConfigError
from workbench.ui.data_preview_view import data_preview_html

MIB = 2**20
ENV = "WORKBENCH_MAX_DATA_READ_MB"


def _parquet_bomb(path, rows: int, value_mib: int, dictionary: bool) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    value = "x" * (value_mib * MIB)
    if dictionary:  # one entry, repeated: the dictionary page is the only big thing, and it compresses
        table = pa.table({"prompt": pa.array([value] * rows).dictionary_encode()})
    else:
        table = pa.table({"prompt": [value] * rows})
    pq.write_table(table, path, compression="zstd", compression_level=19, use_dictionary=dictionary)


@pytest.fixture
def small_bound(monkeypatch):
    monkeypatch.setenv(ENV, "4")


@pytest.mark.parametrize(
    ("rows", "value_mib", "dictionary", "refused"),
    [(12, 8, False, "row group 1"), (200, 2, True, "row 1")],
    ids=["zstd-bomb", "dictionary-bomb"],
)
def test_a_parquet_bomb_is_refused_in_the_preview_before_it_is_decoded(tmp_path, rows, value_mib, dictionary, refused):
    """The zstd bomb by its row group's declared size; the dictionary bomb (its row group declares 2 MiB: one
    entry) by its first row's size, measured on the dictionary before the row is expanded."""
    path = tmp_path / "bomb.parquet"
    _parquet_bomb(path, rows=rows, value_mib=value_mib, dictionary=dictionary)
    assert path.stat().st_size < MIB  # 96 or 400 MiB once decoded
    code = (
        "import json, pyarrow as pa\n"
        "from workbench.spec import columns\n"
        f"shown = columns.preview(columns.DataChoice('demo', {str(path)!r}), [])\n"
        "print(json.dumps([shown.error, pa.default_memory_pool().max_memory()]))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env={**_env(), ENV: "4"}
    )
    error, peak = json.loads(done.stdout.strip().splitlines()[-1])
    assert str(path) in error and ENV in error and refused in error, error
    # a few times the 4 MiB bound at most (a page decompressed, its dictionary built), never the decoded size
    assert peak < 16 * MIB, f"pyarrow allocated {peak / MIB:.0f} MiB for a refused file"


def test_a_parquet_bomb_is_refused_by_the_launch_check(tmp_path, small_bound):
    path = tmp_path / "bomb.parquet"
    _parquet_bomb(path, rows=12, value_mib=8, dictionary=False)
    with pytest.raises(ConfigError) as refused:
        launcher.check_launch(tiny_config(task="demo", dataset_name=str(path)), import_reward_file=False)
    assert ENV in str(refused.value) and "row group 1" in str(refused.value)


def test_a_parquet_file_is_read_up_to_the_row_group_that_does_not_fit(tmp_path, small_bound):
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = tmp_path / "mixed.parquet"
    small = [f"q{i}" for i in range(10)]
    with pq.ParquetWriter(path, pa.schema([("prompt", pa.string())]), compression="zstd") as writer:
        writer.write_table(pa.table({"prompt": small}))
        writer.write_table(pa.table({"prompt": ["y" * (8 * MIB)] * 2}))  # past the bound: never decoded
    shown = columns.preview(columns.DataChoice("demo", str(path)), [], count=20)
    assert shown.error == "" and [row["prompt"] for row in shown.rows] == small


def test_a_bomb_in_a_hub_layout_folder_and_a_huge_readme_are_refused(tmp_path, small_bound):
    folder = write_hub_dataset(tmp_path / "hub", {"default": {"train": [{"prompt": "q"}]}})
    _parquet_bomb(folder / "default" / "train-00000-of-00001.parquet", rows=12, value_mib=8, dictionary=False)
    shown = columns.preview(columns.DataChoice("demo", str(folder)), [])
    assert "row group 1" in shown.error and ENV in shown.error, shown.error
    with open(folder / "README.md", "ab") as handle:  # its front matter is read whole: past 1/16 of the bound
        handle.truncate(64 * MIB)
    shown = columns.preview(columns.DataChoice("demo", str(folder)), [])
    assert "README.md" in shown.error and ENV in shown.error, shown.error


def _long_line(path, size: int) -> None:
    """A file whose first row is `size` bytes long, written sparse (no byte of it past its start is stored)."""
    start = {".jsonl": b'{"prompt": "', ".json": b'[{"prompt": "', ".csv": b'prompt\n"'}[path.suffix]
    with open(path, "wb") as handle:
        handle.write(start)
        handle.truncate(size)


@pytest.mark.parametrize("suffix", [".jsonl", ".json", ".csv"])
def test_a_row_longer_than_the_bound_is_refused_unread(tmp_path, small_bound, suffix):
    path = tmp_path / f"long{suffix}"
    _long_line(path, 256 * MIB)  # on disk: one block
    shown = columns.preview(columns.DataChoice("demo", str(path)), [])
    assert str(path) in shown.error and ENV in shown.error and "1.0 MiB" in shown.error, shown.error


def test_a_gigabyte_json_line_is_refused_under_the_default_bound(tmp_path, monkeypatch):
    monkeypatch.delenv(ENV, raising=False)
    path = tmp_path / "line.jsonl"
    _long_line(path, 2**30)
    shown = columns.preview(columns.DataChoice("demo", str(path)), [])
    assert "line 1" in shown.error and ENV in shown.error


def test_rows_after_the_bound_are_left_out_not_refused(tmp_path, small_bound):
    path = tmp_path / "data.jsonl"
    lines = [json.dumps({"prompt": f"q{i}"}) for i in range(3)] + [json.dumps({"prompt": "z" * (2 * MIB)})]
    path.write_text("\n".join(lines) + "\n")
    shown = columns.preview(columns.DataChoice("demo", str(path)), [])
    assert shown.error == "" and [row["prompt"] for row in shown.rows] == ["q0", "q1", "q2"]


def test_a_save_to_disk_folder_with_compressed_arrow_batches_is_refused(tmp_path, small_bound):
    import pyarrow as pa
    from datasets import Dataset

    folder = tmp_path / "saved"
    Dataset.from_dict({"prompt": ["a", "b"]}).save_to_disk(str(folder))
    arrow = next(folder.glob("*.arrow"))
    table = pa.table({"prompt": ["x" * MIB] * 64})  # 64 MiB decompressed, a few KiB stored
    with pa.ipc.new_stream(str(arrow), table.schema, options=pa.ipc.IpcWriteOptions(compression="zstd")) as out:
        out.write_table(table)
    shown = columns.preview(columns.DataChoice("demo", str(folder)), [])
    assert "compressed" in shown.error and str(arrow) in shown.error


def test_an_honest_save_to_disk_folder_and_its_split_slice_still_read(tmp_path, small_bound):
    from datasets import Dataset

    folder = tmp_path / "saved"
    Dataset.from_dict({"prompt": ["a", "b", "c"], "n": [1, 2, 3]}).save_to_disk(str(folder))
    shown = columns.preview(columns.DataChoice("demo", str(folder), split="train[1:]"), [])
    assert shown.error == "" and shown.rows == [{"prompt": "b", "n": 2}, {"prompt": "c", "n": 3}]


def test_a_40_mib_prompt_previews_as_small_html(tmp_path):
    path = tmp_path / "long_prompt.jsonl"
    prompt = "<b>" * (4 * MIB // 3)
    path.write_text(json.dumps({"prompt": prompt, "answer": "&" * MIB}) + "\n")
    choice = columns.DataChoice(
        "demo",
        str(path),
        chat_template="none",
        mapping=columns.data_mapping.ColumnMapping(solution_column="answer"),
    )
    shown = columns.preview(choice, [])
    assert shown.model_text == prompt
    html = data_preview_html(shown)
    assert len(html) < 200_000, f"{len(html):,} characters of HTML"
    assert "more characters" in html and "<b>" not in html.split("wb-model-text")[1][:1000]


def _env() -> dict:
    import os

    return {key: value for key, value in os.environ.items() if key != ENV}
