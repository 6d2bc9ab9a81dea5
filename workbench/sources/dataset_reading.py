"""A person's own training data: JSONL, JSON, CSV, Parquet, or a `datasets` folder.

The one rule: a `prompt` column holding text, or chat messages
(`[{"role": "user", "content": "..."}]`). Every other column is kept and
reaches reward functions as TRL passes them (one value per completion).

`check_dataset_path` is the cheap check the config validator runs before a
run starts (it reads at most the first rows, loads no model); it raises
`DatasetError` whose message names the path, the rule and a fix.
`load_user_dataset` reads the whole file into a `datasets.Dataset`; `rows_dataset` turns
rows built in code (a built-in task's) into one.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Iterator
from itertools import islice
from pathlib import Path
from typing import Any

from workbench.errors import WorkbenchError

SUPPORTED = (".jsonl", ".json", ".csv", ".parquet")
ROLES = ("system", "user", "assistant", "tool")
CHECK_ROWS = 200  # rows the quick check reads: enough to catch a wrong shape, cheap on a big file
FIX_EXAMPLE = 'a JSONL line looks like {"prompt": "What is 2 + 2?", "answer": "4"}'


class DatasetError(WorkbenchError):
    """A dataset file that cannot be used; the message names the path, the rule and a fix."""


def check_dataset_path(path: str | Path) -> list[str]:
    """Refuse, cheaply, a dataset a run could not use: missing, wrong format, empty, no usable `prompt`.

    Returns its columns (those of the first row, as `datasets` reads them).
    """
    path = existing(path)
    rows = first_rows(path, CHECK_ROWS)
    _check_rows(path, rows)
    return list(rows[0])


def first_rows(path: str | Path, count: int) -> list[dict]:
    """The first `count` rows as they are stored (unchecked); DatasetError when the file cannot be read."""
    path = existing(path)
    if path.is_file():
        return list(islice(iter_rows(path), count))
    dataset = _load_folder(path)  # a datasets folder: opening it memory-maps the arrow files, no copy
    return dataset.select(range(min(count, len(dataset)))).to_list()


def load_user_dataset(path: str | Path, check_prompt: bool = True):
    """The whole file as a `datasets.Dataset`, every row checked; chat prompts stored in CSV cells are decoded.

    `check_prompt` False: the rows are not checked for a `prompt` column (the column mapping checks its own).
    """
    from datasets import Dataset  # heavy import, only when data is actually read

    path = existing(path)
    if path.is_dir():
        dataset = _load_folder(path)
        if check_prompt:
            _check_rows(path, dataset.to_list())
        return dataset
    rows = list(iter_rows(path))
    if check_prompt:
        _check_rows(path, rows)
    try:
        return Dataset.from_list(rows)
    except Exception as exc:  # arrow cannot hold the column types: say which rule was broken
        raise DatasetError(
            f"dataset_path '{path}': the rows do not share one type per column ({type(exc).__name__}: {exc}); "
            f"give every row the same columns with values of the same type"
        ) from None


# ---------------------------------------------------------------- reading


def rows_dataset(rows: list[dict]):
    """Rows built in code (a built-in task's) as a `datasets.Dataset`, the form TRL's trainer takes."""
    from datasets import Dataset  # heavy import, only when data is actually built

    return Dataset.from_list(rows)


def existing(path: str | Path, field: str = "dataset_path") -> Path:
    """`path` when it is a folder or a supported, non-empty file; DatasetError naming `field` otherwise."""
    path = Path(path).expanduser()
    if not path.exists():
        raise DatasetError(
            f"{field}: no file or folder at '{path}'; give the path of a {'/'.join(SUPPORTED)} file "
            f"or a `datasets.save_to_disk` folder with a `prompt` column, or pick a built-in task"
        )
    if path.is_file() and path.suffix.lower() not in SUPPORTED:
        raise DatasetError(
            f"{field} '{path}': {path.suffix or 'no extension'} is not a supported format; "
            f"save it as {', '.join(SUPPORTED)} or a `datasets.save_to_disk` folder"
        )
    if path.is_file() and path.stat().st_size == 0:
        raise DatasetError(f"{field} '{path}': the file is empty; it needs at least one row with a `prompt`")
    return path


def iter_rows(path: Path) -> Iterator[dict]:
    """The rows of a data file as stored, one at a time (a Parquet file is read in batches)."""
    suffix = path.suffix.lower()
    if suffix == ".parquet":
        yield from _iter_parquet(path)
    elif suffix == ".csv":
        yield from _iter_csv(path)
    elif suffix == ".json" and _starts_with(path, "["):
        yield from _iter_json_array(path)
    else:
        yield from _iter_jsonl(path)


def _starts_with(path: Path, char: str) -> bool:
    with open(path, encoding="utf-8") as handle:
        head = handle.read(4096).lstrip()
    return head.startswith(char)


def _iter_jsonl(path: Path) -> Iterator[dict]:
    with open(path, encoding="utf-8") as handle:
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as exc:
                raise DatasetError(
                    f"dataset_path '{path}': line {number} is not valid JSON ({exc.msg}); "
                    f"each line must be one JSON object - {FIX_EXAMPLE}"
                ) from None
            if not isinstance(row, dict):
                raise DatasetError(
                    f"dataset_path '{path}': line {number} is a JSON {type(row).__name__}, not an object; {FIX_EXAMPLE}"
                )
            yield row


def _iter_json_array(path: Path) -> Iterator[dict]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise DatasetError(
            f"dataset_path '{path}': not valid JSON ({exc.msg} at line {exc.lineno}); fix the file"
        ) from None
    for number, row in enumerate(data, start=1):
        if not isinstance(row, dict):
            raise DatasetError(f"dataset_path '{path}': item {number} of the array is not an object; {FIX_EXAMPLE}")
        yield row


def _iter_csv(path: Path) -> Iterator[dict]:
    with open(path, encoding="utf-8", newline="") as handle:
        for row in csv.DictReader(handle):
            # a CSV cell cannot hold a list, so chat messages come as JSON text
            yield {key: _decode_messages(value) if key == "prompt" else value for key, value in row.items()}


def _decode_messages(value: Any) -> Any:
    if isinstance(value, str) and value.lstrip().startswith("[{"):
        try:
            decoded = json.loads(value)
        except json.JSONDecodeError:
            return value
        if isinstance(decoded, list) and all(isinstance(m, dict) for m in decoded):
            return decoded
    return value


def _iter_parquet(path: Path) -> Iterator[dict]:
    import pyarrow.parquet as pq

    try:
        parquet = pq.ParquetFile(path)
    except Exception as exc:  # pyarrow's many error types for a broken file
        raise DatasetError(f"dataset_path '{path}': not a readable Parquet file ({exc}); write it again") from None
    for batch in parquet.iter_batches(batch_size=CHECK_ROWS):
        yield from batch.to_pylist()


def _load_folder(path: Path):
    from datasets import Dataset, DatasetDict, load_from_disk

    try:
        loaded = load_from_disk(str(path))
    except FileNotFoundError:
        raise DatasetError(
            f"dataset_path '{path}': a folder must be written by `datasets` `save_to_disk`; "
            f"point to such a folder or to a {'/'.join(SUPPORTED)} file"
        ) from None
    if isinstance(loaded, DatasetDict):
        if "train" in loaded:
            return loaded["train"]
        if len(loaded) == 1:
            return next(iter(loaded.values()))
        raise DatasetError(
            f"dataset_path '{path}': the folder holds splits {', '.join(loaded)} and none is `train`; "
            f"save the training split alone, or name it `train`"
        )
    if not isinstance(loaded, Dataset):
        raise DatasetError(f"dataset_path '{path}': unexpected {type(loaded).__name__}; save a `datasets.Dataset`")
    return loaded


# ---------------------------------------------------------------- the rules


def _check_rows(path: Path, rows: list[dict]) -> None:
    if not rows:
        raise DatasetError(f"dataset_path '{path}': no rows; it needs at least one row with a `prompt` - {FIX_EXAMPLE}")
    columns = list(rows[0])
    if "prompt" not in columns:
        raise DatasetError(
            f"dataset_path '{path}': no `prompt` column (columns: {', '.join(columns) or 'none'}); "
            f"rename the column holding the questions to `prompt` - {FIX_EXAMPLE}"
        )
    kinds = set()
    for number, row in enumerate(rows, start=1):
        problem = prompt_problem(row.get("prompt"))
        if problem:
            raise DatasetError(f"dataset_path '{path}': row {number}: {problem}")
        kinds.add("text" if isinstance(row["prompt"], str) else "messages")
    if len(kinds) > 1:
        raise DatasetError(
            f"dataset_path '{path}': some prompts are text and some are chat messages; use one form for every row"
        )


def prompt_problem(prompt: Any) -> str | None:
    """What is wrong with one `prompt` value, or None when it is text or chat messages."""
    if isinstance(prompt, str):
        return None if prompt.strip() else "the `prompt` is empty; every row needs a question or instruction"
    if isinstance(prompt, (list, tuple)) and prompt:
        for message in prompt:
            if not isinstance(message, dict) or "content" not in message or message.get("role") not in ROLES:
                return (
                    f"the `prompt` holds {message!r}, not a chat message; each message needs a `role` "
                    f'({", ".join(ROLES)}) and a `content`, e.g. [{{"role": "user", "content": "Hi"}}]'
                )
        return None
    return (
        f"the `prompt` is {type(prompt).__name__} {prompt!r:.60}; it must be text, or a list of chat messages "
        f'like [{{"role": "user", "content": "Hi"}}]'
    )
