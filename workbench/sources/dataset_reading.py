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
import io
import itertools
import json
from collections.abc import Iterator
from itertools import islice
from pathlib import Path
from typing import Any

from workbench.sources import columnar_bounds, read_budget
from workbench.sources.dataset_error import DatasetError
from workbench.sources.read_budget import Budget

SUPPORTED = (".jsonl", ".json", ".csv", ".parquet")
ROLES = ("system", "user", "assistant", "tool")
CHECK_ROWS = 200  # rows the quick check reads: enough to catch a wrong shape, cheap on a big file
FIX_EXAMPLE = 'a JSONL line looks like {"prompt": "What is 2 + 2?", "answer": "4"}'


def check_dataset_path(path: str | Path) -> list[str]:
    """Refuse, cheaply, a dataset a run could not use: missing, wrong format, empty, no usable `prompt`.

    Returns its columns (those of the first row, as `datasets` reads them).
    """
    path = existing(path)
    rows = first_rows(path, CHECK_ROWS)
    _check_rows(path, rows)
    return list(rows[0])


def first_rows(path: str | Path, count: int, budget: Budget | None = None) -> list[dict]:
    """The first `count` rows as they are stored (unchecked), decoded within `budget` (one made from the admin's
    setting when None: see sources/read_budget.py); DatasetError when the file cannot be read or is past it."""
    path = existing(path)
    budget = budget or Budget.from_env()
    if path.is_file():
        return list(islice(iter_rows(path, budget), count))
    columnar_bounds.check_saved_folder(path, budget)
    dataset = _load_folder(path)  # a datasets folder: opening it memory-maps the arrow files, no copy
    return saved_rows(dataset, range(min(count, len(dataset))), path, budget)


def saved_rows(dataset, rows: range, path: Path, budget: Budget) -> list[dict]:
    """Rows `rows` of a memory-mapped `datasets.Dataset`, each measured before it is decoded (columnar_bounds)."""
    arrow = dataset.with_format("arrow")
    return list(columnar_bounds.table_rows(lambda row: arrow[row : row + 1], rows, path, budget))


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


def iter_rows(path: Path, budget: Budget | None = None) -> Iterator[dict]:
    """The rows of a data file as stored, one at a time (a Parquet file is read in batches).

    With a `budget` (the server's checks and previews) no more is read or decoded than it allows; without one
    (the training run, in its sandbox) the whole file is read.
    """
    suffix = path.suffix.lower()
    if suffix == ".parquet":
        yield from columnar_bounds.parquet_rows(path, budget) if budget else _iter_parquet(path)
    elif suffix == ".csv":
        yield from _iter_csv(path, budget)
    elif suffix == ".json" and _starts_with(path, "["):
        yield from _iter_json_array(path, budget)
    else:
        yield from _iter_jsonl(path, budget)


def _starts_with(path: Path, char: str) -> bool:
    with open(path, "rb") as handle:
        head = handle.read(4096).decode("utf-8", "replace").lstrip()
    return head.startswith(char)


def _iter_jsonl(path: Path, budget: Budget | None) -> Iterator[dict]:
    with open(path, "rb") as handle:
        for number, line in _lines(handle, path, budget):
            if not line.strip():
                continue
            if budget and not budget.objects_fit(line, path, f"line {number}"):  # before a byte is decoded
                return
            try:
                row = json.loads(line.decode("utf-8"))
            except json.JSONDecodeError as exc:
                raise DatasetError(
                    f"dataset_path '{path}': line {number} is not valid JSON ({exc.msg}); "
                    f"each line must be one JSON object - {FIX_EXAMPLE}"
                ) from None
            except RecursionError:
                raise _too_deep(path, f"line {number}") from None
            if not isinstance(row, dict):
                raise DatasetError(
                    f"dataset_path '{path}': line {number} is a JSON {type(row).__name__}, not an object; {FIX_EXAMPLE}"
                )
            if budget and not budget.row_fits(len(line), path, f"line {number}"):
                return
            yield row


def _lines(handle, path: Path, budget: Budget | None) -> Iterator[tuple[int, bytes]]:
    """(number, bytes) of each line; with a budget, a line is read only up to what is left of it, never past."""
    number = 0
    while True:
        left = budget.rows_left if budget else -1
        line = handle.readline(left + 1 if budget else -1)
        number += 1
        if not line:
            return
        if budget and len(line) > left:  # longer than what is left: not decoded, not read further
            budget.cut(path, f"line {number}")
            return
        if budget and not line.strip():
            budget.rows_used += max(len(line), read_budget.LINE_COST)  # blank lines are read too
        yield number, line


def _read_text(path: Path, budget: Budget | None) -> tuple[str, bool]:
    """(the file's text, or its first part the budget allows; whether it was cut there)."""
    with open(path, "rb") as handle:
        data = handle.read(budget.rows_left + 1 if budget else -1)
    cut = budget is not None and len(data) > budget.rows_left
    if cut:
        data = data[: budget.rows_left]
    try:
        return data.decode("utf-8"), cut
    except UnicodeDecodeError as exc:
        if cut and exc.start >= len(data) - 3:  # a character split by the cut
            return data[: exc.start].decode("utf-8"), cut
        raise


def _too_deep(path: Path, what: str) -> DatasetError:
    return DatasetError(
        f"dataset_path '{path}': {what} is JSON nested deeper than Python reads; store each row flat - {FIX_EXAMPLE}"
    )


def _iter_json_array(path: Path, budget: Budget | None) -> Iterator[dict]:
    text, cut = _read_text(path, budget)
    if budget:  # the objects the items decode to are bounded before any is decoded: the text past the bound is cut
        keep, cost = read_budget.objects_prefix(text, budget.limit - budget.decoded)
        budget.decoded += cost
        text, cut = (text[:keep], True) if keep < len(text) else (text, cut)
    decoder, position = json.JSONDecoder(), text.index("[") + 1
    for number in itertools.count(1):
        position = _skip(text, position, ",")
        if text.startswith("]", position) or (position >= len(text) and not cut):
            return
        try:
            row, end = decoder.raw_decode(text, position)
        except RecursionError:
            raise _too_deep(path, f"item {number} of the array") from None
        except json.JSONDecodeError as exc:
            if cut:  # the item the budget cut: stop before it (refused when it is the first)
                budget.cut(path, f"item {number} of the array")
                return
            raise DatasetError(
                f"dataset_path '{path}': not valid JSON ({exc.msg} at line {exc.lineno}); fix the file"
            ) from None
        if not isinstance(row, dict):
            raise DatasetError(f"dataset_path '{path}': item {number} of the array is not an object; {FIX_EXAMPLE}")
        if budget and not budget.row_fits(end - position, path, f"item {number} of the array"):
            return
        position = end
        yield row


def _skip(text: str, position: int, separator: str) -> int:
    """The position after whitespace and at most one `separator` (and the whitespace after it)."""
    while position < len(text) and text[position] in " \t\r\n":
        position += 1
    if text.startswith(separator, position):
        position += 1
        while position < len(text) and text[position] in " \t\r\n":
            position += 1
    return position


def _iter_csv(path: Path, budget: Budget | None) -> Iterator[dict]:
    text, cut = _read_text(path, budget)
    if budget:  # each line costs the reader a turn of its loop, a blank one too: millions of them are cut
        keep = read_budget.lines_prefix(text, budget.rows_left // read_budget.LINE_COST)
        text, cut = (text[:keep], True) if keep < len(text) else (text, cut)
    csv.field_size_limit(max(csv.field_size_limit(), len(text)))  # a long cell is the budget's to bound
    # Row by row, never the whole text's rows at once: 64 MiB of one-letter rows are 30 million dicts.
    rows = _with_last(csv.DictReader(io.StringIO(text, newline="")), path)
    for number, (row, last) in enumerate(rows, start=1):
        if cut and last:  # the last row is the one the budget cut
            break
        prompt = row.get("prompt")
        if budget and _messages_text(prompt) and not budget.objects_fit(prompt, path, f"row {number}'s prompt"):
            return
        if budget and not budget.row_fits(
            sum(len(str(k)) + len(str(v)) for k, v in row.items()), path, f"row {number}"
        ):
            return
        # a CSV cell cannot hold a list, so chat messages come as JSON text
        yield {key: _decode_messages(value, path, number) if key == "prompt" else value for key, value in row.items()}
    if cut and not budget.rows:  # no whole row before the cut: refused
        budget.cut(path, "row 1")


def _with_last(rows: Iterator[dict], path: Path) -> Iterator[tuple[dict, bool]]:
    """(row, whether it is the last) for each row of a CSV reader, reading one row ahead."""
    try:
        row = next(rows, None)
        while row is not None:
            following = next(rows, None)
            yield row, following is None
            row = following
    except csv.Error as exc:
        raise DatasetError(f"dataset_path '{path}': not a readable CSV file ({exc}); fix the file") from None


def _messages_text(value: Any) -> bool:
    return isinstance(value, str) and value.lstrip().startswith("[{")


def _decode_messages(value: Any, path: Path | None = None, number: int = 0) -> Any:
    if _messages_text(value):
        try:
            decoded = json.loads(value)
        except RecursionError:
            raise _too_deep(path, f"row {number}'s prompt") from None
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
