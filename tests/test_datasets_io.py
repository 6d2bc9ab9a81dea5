"""User datasets: every supported format loads with extra columns kept; each bad input is refused clearly."""

import csv
import json

import pytest

from workbench.sources.dataset_reading import (
    DatasetError,
    check_dataset_path,
    load_user_dataset,
)

CHAT = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "What is 2 + 2?"}]
ROWS = [
    {"prompt": "What is 2 + 2?", "answer": "4", "keywords": ["four"]},
    {"prompt": "What is 3 + 3?", "answer": "6", "keywords": ["six"]},
]


def write_jsonl(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def write_csv(path, rows):
    with open(path, "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    return path


def write_parquet(path, rows):
    from datasets import Dataset

    Dataset.from_list(rows).to_parquet(str(path))
    return path


def write_folder(path, rows):
    from datasets import Dataset

    Dataset.from_list(rows).save_to_disk(str(path))
    return path


WRITERS = {
    "jsonl": lambda tmp, rows: write_jsonl(tmp / "data.jsonl", rows),
    "json_array": lambda tmp, rows: (tmp / "data.json").write_text(json.dumps(rows)) and tmp / "data.json",
    "csv": lambda tmp, rows: write_csv(tmp / "data.csv", [{**r, "keywords": ",".join(r["keywords"])} for r in rows]),
    "parquet": lambda tmp, rows: write_parquet(tmp / "data.parquet", rows),
    "datasets_folder": lambda tmp, rows: write_folder(tmp / "saved", rows),
}


@pytest.mark.parametrize("fmt", list(WRITERS), ids=list(WRITERS))
def test_every_format_loads_with_extra_columns(tmp_path, fmt):
    path = WRITERS[fmt](tmp_path, ROWS)
    check_dataset_path(path)
    dataset = load_user_dataset(path)
    assert len(dataset) == 2
    assert dataset.column_names[:2] == ["prompt", "answer"] and "keywords" in dataset.column_names
    assert dataset[1]["prompt"] == "What is 3 + 3?" and dataset[1]["answer"] == "6"


@pytest.mark.parametrize("fmt", ["jsonl", "parquet", "datasets_folder"], ids=["jsonl", "parquet", "folder"])
def test_chat_prompts_load(tmp_path, fmt):
    path = WRITERS[fmt](tmp_path, [{"prompt": CHAT, "answer": "4", "keywords": []}])
    assert load_user_dataset(path)[0]["prompt"] == CHAT


def test_chat_prompts_in_a_csv_cell_are_decoded(tmp_path):
    path = write_csv(tmp_path / "chat.csv", [{"prompt": json.dumps(CHAT), "answer": "4"}])
    assert load_user_dataset(path)[0]["prompt"] == CHAT


def test_dataset_dict_folder_uses_the_train_split(tmp_path):
    from datasets import Dataset, DatasetDict

    DatasetDict({"train": Dataset.from_list(ROWS), "test": Dataset.from_list(ROWS[:1])}).save_to_disk(
        str(tmp_path / "dd")
    )
    assert len(load_user_dataset(tmp_path / "dd")) == 2


BAD_INPUTS = {
    "missing": (lambda tmp: tmp / "absent.jsonl", r"no file or folder at '.*absent\.jsonl'.*give the path"),
    "extension": (lambda tmp: _write(tmp / "data.txt", "hello"), r"\.txt is not a supported format; save it as"),
    "empty": (lambda tmp: _write(tmp / "data.jsonl", ""), r"the file is empty"),
    "blank_lines": (lambda tmp: _write(tmp / "data.jsonl", "\n\n"), r"no rows"),
    "header_only_csv": (lambda tmp: _write(tmp / "data.csv", "prompt,answer\n"), r"no rows"),
    "no_prompt": (
        lambda tmp: write_jsonl(tmp / "data.jsonl", [{"question": "q", "answer": "a"}]),
        r"no `prompt` column \(columns: question, answer\); rename",
    ),
    "bad_json": (lambda tmp: _write(tmp / "data.jsonl", '{"prompt": "a"}\n{"prompt": \n'), r"line 2 is not valid JSON"),
    "not_object": (lambda tmp: _write(tmp / "data.jsonl", '["a"]\n'), r"line 1 is a JSON list, not an object"),
    "empty_prompt": (
        lambda tmp: write_jsonl(tmp / "data.jsonl", [{"prompt": "a"}, {"prompt": " "}]),
        r"row 2: the `prompt` is empty",
    ),
    "number_prompt": (lambda tmp: write_jsonl(tmp / "data.jsonl", [{"prompt": 7}]), r"row 1: the `prompt` is int"),
    "bad_message": (
        lambda tmp: write_jsonl(tmp / "data.jsonl", [{"prompt": [{"text": "hi"}]}]),
        r"row 1: .*each message needs a `role`",
    ),
    "mixed_kinds": (
        lambda tmp: write_jsonl(tmp / "data.jsonl", [{"prompt": "a"}, {"prompt": CHAT}]),
        r"some prompts are text and some are chat messages",
    ),
    "not_a_datasets_folder": (
        lambda tmp: (tmp / "folder").mkdir() or tmp / "folder",
        r"written by `datasets` `save_to_disk`",
    ),
    "broken_parquet": (lambda tmp: _write(tmp / "data.parquet", "not parquet"), r"not a readable Parquet file"),
}


def _write(path, text):
    path.write_text(text)
    return path


@pytest.mark.parametrize("case", list(BAD_INPUTS), ids=list(BAD_INPUTS))
def test_bad_dataset_is_refused_naming_path_rule_and_fix(tmp_path, case):
    make, pattern = BAD_INPUTS[case]
    path = make(tmp_path)
    for read in (check_dataset_path, load_user_dataset):
        with pytest.raises(DatasetError, match=pattern) as info:
            read(path)
        assert str(path) in str(info.value) and str(info.value).startswith("dataset_path")
        assert info.value.__cause__ is None


def test_check_reads_only_the_first_rows(tmp_path):
    # a bad row far down is left to the full load: the quick check stays quick on big files
    rows = [{"prompt": f"q{i}"} for i in range(500)] + [{"prompt": ""}]
    path = write_jsonl(tmp_path / "big.jsonl", rows)
    check_dataset_path(path)
    with pytest.raises(DatasetError, match=r"row 501: the `prompt` is empty"):
        load_user_dataset(path)
