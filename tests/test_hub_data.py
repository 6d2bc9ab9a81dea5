"""Hub datasets as `datasets` reads them: hub-layout folders built here (README configs, a file per split), the
hub cache's snapshot of a hub id, split slices, and the refusals (unknown config, split, offline hub id)."""

import json

import pytest
from helpers import gsm8k_like_rows, write_hub_dataset

from workbench.sources import hub_datasets
from workbench.sources.dataset_reading import DatasetError


@pytest.fixture
def gsm(tmp_path):
    """A GSM8K-like repository: configs main and socratic, train and test splits, parquet."""
    return write_hub_dataset(
        tmp_path / "gsm8k",
        {
            "main": {"train": gsm8k_like_rows(30), "test": gsm8k_like_rows(5, start=100)},
            "socratic": {"train": gsm8k_like_rows(3, start=200), "test": gsm8k_like_rows(2, start=300)},
        },
    )


@pytest.mark.parametrize(
    "text, name, rows",
    [
        ("train", "train", range(0, 30)),
        ("train[:10]", "train", range(0, 10)),
        ("train[5:8]", "train", range(5, 8)),
        ("train[-3:]", "train", range(27, 30)),
        ("test[:10%]", "test", range(0, 3)),
    ],
    ids=["whole", "head", "middle", "tail", "percent"],
)
def test_split_slices_read_as_datasets_reads_them(text, name, rows):
    split = hub_datasets.parse_split(text)
    assert (split.name, split.rows(30)) == (name, rows)


@pytest.mark.parametrize("text", ["", "train[:", "train[1:2:3]", "tr ain"], ids=["empty", "open", "step", "space"])
def test_a_split_that_is_no_slice_is_refused_naming_the_field(text):
    with pytest.raises(DatasetError, match=r"^dataset_train_split: .* write e\.g\. train, train\[:200\]"):
        hub_datasets.parse_split(text)


def test_a_hub_layout_folder_lists_its_configs_and_splits(gsm):
    source = hub_datasets.locate(str(gsm))
    assert source.kind == hub_datasets.FOLDER and source.cached
    assert hub_datasets.config_names(source) == ["main", "socratic"]
    assert hub_datasets.split_names(source, "socratic") == ["train", "test"]


def test_first_rows_of_a_slice_read_one_file_only(gsm):
    source = hub_datasets.locate(str(gsm))
    rows = hub_datasets.first_rows(source, "main", hub_datasets.parse_split("train[4:]"), 2)
    assert rows == gsm8k_like_rows(2, start=4)
    assert hub_datasets.first_rows(source, "socratic", hub_datasets.parse_split("test"), 9) == gsm8k_like_rows(
        2, start=300
    )


def test_load_split_reads_the_slice_through_datasets(gsm):
    dataset = hub_datasets.load_split(hub_datasets.locate(str(gsm)), "main", hub_datasets.parse_split("train[:12]"))
    assert len(dataset) == 12 and dataset.column_names == ["question", "answer"]
    assert dataset[11] == gsm8k_like_rows(1, start=11)[0]


def test_an_unknown_config_lists_the_configs(gsm):
    with pytest.raises(DatasetError, match=r"^dataset_config: 'mian' is not a config of .*configs: main, socratic"):
        hub_datasets.first_rows(hub_datasets.locate(str(gsm)), "mian", hub_datasets.parse_split("train"), 1)


def test_an_unknown_split_lists_the_splits(gsm):
    with pytest.raises(DatasetError, match=r"^dataset_train_split: 'validation' is not a split .*splits: train, test"):
        hub_datasets.first_rows(hub_datasets.locate(str(gsm)), "main", hub_datasets.parse_split("validation"), 1)


def test_json_lines_per_split_read_too(tmp_path):
    folder = write_hub_dataset(tmp_path / "jl", {"default": {"train": [{"q": "a"}, {"q": "b"}]}}, fmt="jsonl")
    source = hub_datasets.locate(str(folder))
    assert hub_datasets.first_rows(source, "", hub_datasets.parse_split("train"), 5) == [{"q": "a"}, {"q": "b"}]
    assert hub_datasets.load_split(source, "", hub_datasets.parse_split("train[1:]"))["q"] == ["b"]


def test_save_to_disk_folders_and_files_read_their_slice(tmp_path):
    from datasets import Dataset, DatasetDict

    rows = [{"prompt": f"p{i}"} for i in range(6)]
    DatasetDict({"train": Dataset.from_list(rows), "eval": Dataset.from_list(rows[:2])}).save_to_disk(tmp_path / "s")
    saved = hub_datasets.locate(str(tmp_path / "s"))
    assert saved.kind == hub_datasets.SAVED and hub_datasets.split_names(saved) == ["train", "eval"]
    assert hub_datasets.first_rows(saved, "", hub_datasets.parse_split("train[2:4]"), 9) == rows[2:4]
    assert hub_datasets.load_split(saved, "", hub_datasets.parse_split("eval"))["prompt"] == ["p0", "p1"]
    path = tmp_path / "p.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    file = hub_datasets.locate(str(path))
    assert file.kind == hub_datasets.FILE
    assert hub_datasets.load_split(file, "", hub_datasets.parse_split("train[:3]"))["prompt"] == ["p0", "p1", "p2"]
    with pytest.raises(DatasetError, match=r"^dataset_train_split: 'test' is not a split .*: a data file is one split"):
        hub_datasets.first_rows(file, "", hub_datasets.parse_split("test"), 1)


def test_a_cached_hub_id_is_read_from_its_snapshot(tmp_path, monkeypatch):
    import huggingface_hub.constants

    cache = tmp_path / "hub"
    repo = cache / "datasets--openai--gsm8k"
    write_hub_dataset(repo / "snapshots" / "abc123", {"main": {"train": gsm8k_like_rows(4)}})
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text("abc123")
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(cache))
    source = hub_datasets.locate("openai/gsm8k")
    assert (source.kind, source.hub_id, source.cached) == (hub_datasets.HUB, "openai/gsm8k", True)
    assert hub_datasets.load_split(source, "main", hub_datasets.parse_split("train"))["question"] == [
        row["question"] for row in gsm8k_like_rows(4)
    ]


def test_an_uncached_hub_id_offline_is_refused_with_how_to_download_it(tmp_path, monkeypatch):
    import huggingface_hub.constants

    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(tmp_path))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    source = hub_datasets.locate("openai/gsm8k")
    assert not source.cached
    problem = hub_datasets.hub_problem(source.hub_id)
    assert problem.startswith("dataset_name: 'openai/gsm8k' is not in the hub cache and this process is offline")
    assert "`hf download --repo-type dataset openai/gsm8k --local-dir DIR`, then set dataset_name=DIR" in problem


def test_what_is_neither_a_path_nor_a_hub_id_is_refused():
    with pytest.raises(DatasetError, match=r"^dataset_name: no file or folder at 'no/such/place/here'"):
        hub_datasets.locate("no/such/place/here")


def test_an_unreachable_hub_is_refused_quickly_and_asked_once_a_minute(tmp_path, monkeypatch):
    import time

    import huggingface_hub.constants

    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.delenv("HF_DATASETS_OFFLINE", raising=False)
    monkeypatch.setattr(huggingface_hub.constants, "ENDPOINT", "http://127.0.0.1:9")  # nothing listens there
    hub_datasets._hub_answer.cache_clear()
    started = time.perf_counter()
    problem = hub_datasets.hub_problem("someone/some-data")
    assert problem.startswith(
        "dataset_name: 'someone/some-data' is not in the hub cache and the hub cannot be reached ("
    )
    assert "hf download --repo-type dataset someone/some-data --local-dir DIR" in problem
    assert time.perf_counter() - started < hub_datasets.HUB_TIMEOUT_S + 1
    assert hub_datasets.hub_problem("someone/some-data") == problem and hub_datasets._hub_answer.cache_info().hits == 1
