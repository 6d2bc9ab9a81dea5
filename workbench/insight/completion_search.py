"""The completions explorer's queries: every completion of a run, filtered, searched, sorted, paged and exported.

`search_completions(run_dir, CompletionQuery(steps=(10, 50), where="reward<0.2 and length>40", search="paris",
sort="advantage", desc=True))` gives one page of rows (dicts in FIELDS) and how many rows match;
`export_completions` writes every matching row to CSV or Parquet.

The engine is pyarrow over memory-mapped Arrow parts of the run's `completions.jsonl` (`completion_cache`), with
numpy for the orderings, not DuckDB: pyarrow is already pinned (the datasets library needs it); a filter is a tree
of comparisons (`completion_where`) turned into kernel calls over number columns, so no query text is ever built
from what a user typed; a stable numpy argsort orders one column of every row; and a text search is one
case-insensitive substring kernel over each part's mapped completions (each distinct prompt matched once). DuckDB
would add a large dependency to do the same over the same files. Memory stays bounded: a query holds the number
columns of the run's rows (a few dozen bytes a row, converted once per run and kept for the next query while the
file has not changed), the text stays in the mapped files, a page reads only its rows, and an export writes a batch
at a time.

Which rows count: a step written twice (a resume that did not cut the file back) shows only its last stretch of
lines, as `groups.groups_for_step` does; `index` is a completion's place in its group there. `correct` is the
run's correctness reward (`spec.reward_choice.correctness_reward_for`) at full marks (`spec.heldout.is_correct`),
None when the run has no correctness reward or its score is missing.
"""

from __future__ import annotations

import csv
import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from workbench.errors import WorkbenchError
from workbench.insight import completion_cache
from workbench.insight.completion_where import BOOL_FIELDS, NUMBER_FIELDS, REWARD_PREFIX, Where, parse_where
from workbench.runstore import launch_records, runfolder

FIELDS = (
    "step",
    "group",
    "index",
    "prompt",
    "completion",
    "rewards",
    "reward",
    "advantage",
    "length",
    "truncated",
    "reward_error",
    "correct",
)
SORTS = (*NUMBER_FIELDS, *BOOL_FIELDS)
INT_FIELDS = ("step", "group", "index", "length")
MAX_LIMIT = 10_000
EXPORT_BATCH_ROWS = 8192
FORMATS = ("csv", "parquet")
# A spreadsheet reads a cell beginning with one of these as a formula (OWASP's CSV injection guidance), also
# after leading spaces or line breaks, which spreadsheets trim (so the test is on the cell with those stripped).
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")
# pyarrow's case-insensitive substring kernel compiles the text as a pattern (fast, but it fails with ArrowInvalid
# past the pattern engine's size): a longer search (a prompt's history searches its whole prompt) is matched as
# plain text in the lower-cased columns instead.
PATTERN_SEARCH_CHARS = 1000
# No line is longer than a read chunk (runfolder.whole_lines skips longer ones): a longer search matches nothing.
MAX_SEARCH_CHARS = runfolder.READ_CHUNK_BYTES

__all__ = ["FIELDS", "CompletionPage", "CompletionQuery", "export_completions", "parse_where", "search_completions"]

_KEPT = completion_cache.Kept()
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_-]{0,63}")


@dataclass(frozen=True)
class CompletionQuery:
    steps: tuple[int | None, int | None] = (None, None)  # first and last step, inclusive; None: open
    where: str = ""
    search: str = ""  # case-insensitive text in the prompt or the completion
    sort: str = "step"
    desc: bool = False
    offset: int = 0
    limit: int = 50


@dataclass
class CompletionPage:
    rows: list[dict]
    total: int  # rows that match, over every page
    fields: tuple[str, ...] = FIELDS
    reward_names: list[str] = field(default_factory=list)
    left_out: int = 0  # the run's oldest rows no query reads (past completion_cache.MAX_ROWS)


# ---------------------------------------------------------------- the run's rows


def _places(stretch: np.ndarray, groups: np.ndarray) -> np.ndarray:
    """Each row's place among the rows of its group in its stretch (rows in file order)."""
    count = len(stretch)
    order = np.lexsort((np.arange(count), groups, stretch))
    starts = np.r_[True, (stretch[order][1:] != stretch[order][:-1]) | (groups[order][1:] != groups[order][:-1])]
    first = np.maximum.accumulate(np.where(starts, np.arange(count), 0))
    index = np.empty(count, np.int64)
    index[order] = np.arange(count) - first
    return index


def _indexes(steps: np.ndarray, groups: np.ndarray, size: int | None) -> tuple[np.ndarray, np.ndarray]:
    """(kept: the rows of each step's newest generation round, index: each row's place in its group there).

    Rounds begin as `resumed.latest_round` tells them: where the step changes, where the group goes back, and
    (with the run's G, `size`) where a group would get more than G completions.
    """
    count = len(steps)
    if not count:
        return np.zeros(0, bool), np.zeros(0, np.int64)
    steps, groups = np.nan_to_num(steps, nan=-1.0), np.nan_to_num(groups, nan=0.0)
    begins = np.r_[True, (steps[1:] != steps[:-1]) | (groups[1:] < groups[:-1])]
    index = _places(np.cumsum(begins), groups)
    if size:
        begins |= (index > 0) & (index % size == 0)
        index = _places(np.cumsum(begins), groups)
    stretch = np.cumsum(begins)
    unique, inverse = np.unique(steps, return_inverse=True)
    last = np.zeros(len(unique), np.int64)
    np.maximum.at(last, inverse, stretch)
    return stretch == last[inverse], index


def _run_facts(run_dir: Path) -> tuple[str, int | None]:
    """(the run's correctness reward or "", its G), from the launcher's record of its config (config.json for a run
    with none); ("", None) when it does not read."""
    from workbench.spec.config import RunConfig
    from workbench.spec.reward_choice import correctness_reward_for
    from workbench.spec.run_status import UNREADABLE_FIELDS

    try:
        config = launch_records.recorded_config(run_dir)
        config.pop(UNREADABLE_FIELDS, None)  # a field config.json held wrongly is its default here
        cfg = RunConfig.from_dict(config)
        return correctness_reward_for(cfg), int(cfg.num_generations) or None
    except (WorkbenchError, TypeError, ValueError):
        return "", None


def _load(run_dir: Path, cache_dir) -> tuple[Path, completion_cache.Manifest, dict]:
    """The cache folder, its manifest, and the run as loaded: `table` (the kept rows' number columns, with
    `index` and `correct`, `part` and `row`), `names` (the reward functions) and `arrays` (columns as numpy)."""
    folder, manifest = completion_cache.update(run_dir / runfolder.COMPLETIONS_FILE, cache_dir)

    def build():
        table = completion_cache.read_columns(
            folder,
            manifest,
            lambda name: (
                name in completion_cache.NUMBER_COLUMNS + completion_cache.FLAG_COLUMNS
                or name.startswith(REWARD_PREFIX)
            ),
        )
        steps = table["step"].to_numpy(zero_copy_only=False)
        groups = table["group"].to_numpy(zero_copy_only=False) if "group" in table.column_names else steps * 0
        correct_name, size = _run_facts(run_dir)
        kept, index = _indexes(steps, groups, size)
        table = table.append_column("index", pa.array(index.astype(np.float64), pa.float64()))
        names = [n[len(REWARD_PREFIX) :] for n in table.column_names if n.startswith(REWARD_PREFIX)]
        column = table[REWARD_PREFIX + correct_name] if correct_name and correct_name in names else None
        if column is None:
            correct = pa.nulls(table.num_rows, pa.bool_())
        else:
            from workbench.spec.heldout import FULL_MARKS

            correct = pc.greater_equal(column, FULL_MARKS)
        table = table.append_column("correct", correct)
        return {"table": table.filter(pa.array(kept)), "names": names, "arrays": {}}

    return folder, manifest, _KEPT.get(str(folder), manifest, build)


# ---------------------------------------------------------------- filtering


def _check(query: CompletionQuery, names: list[str]) -> Where:
    if query.sort not in SORTS and not (query.sort.startswith(REWARD_PREFIX) and query.sort[len(REWARD_PREFIX) :]):
        # only names a person can type (a run names its reward functions: line breaks and terminal escapes there
        # would reach the message, and the terminal that prints it)
        typed = [REWARD_PREFIX + n for n in names if _NAME.fullmatch(n)]
        choices = ", ".join([*SORTS, *typed])
        raise WorkbenchError(
            field="sort", rule=f"`{query.sort}` is not a field to sort by", fix=f"use one of {choices}"
        )
    if not (isinstance(query.offset, int) and query.offset >= 0):
        raise WorkbenchError(field="offset", rule="must be a whole number, 0 or more", fix="give 0 for the first page")
    if not (isinstance(query.limit, int) and 0 <= query.limit <= MAX_LIMIT):
        raise WorkbenchError(field="limit", rule=f"must be a whole number from 0 to {MAX_LIMIT}", fix="give 50")
    if not isinstance(query.search, str) or len(query.search) > MAX_SEARCH_CHARS:
        raise WorkbenchError(
            field="search",
            rule=f"must be text of at most {MAX_SEARCH_CHARS:,} characters",
            fix="search for a shorter part",
        )
    first, last = query.steps
    for value in (first, last):
        if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))):
            raise WorkbenchError(field="steps", rule="each end is a step number or open", fix="write e.g. 10:50")
    if first is not None and last is not None and first > last:
        raise WorkbenchError(field="steps", rule=f"the first step {first} is after the last {last}", fix="swap them")
    return parse_where(query.where)


def _column(loaded: dict, name: str) -> np.ndarray:
    """A number or flag column of the kept rows as floats (missing: NaN), converted once per loaded run."""
    arrays = loaded["arrays"]
    if name not in arrays:
        column = loaded["table"][name]
        arrays[name] = pc.cast(column, pa.float64()).to_numpy(zero_copy_only=False).astype(np.float64)
    return arrays[name]


def _matching(run_dir, query: CompletionQuery, cache_dir) -> tuple:
    """(cache folder, manifest, the kept rows' number columns, the positions there of the rows that match, in the
    order asked, reward names)."""
    folder, manifest, loaded = _load(Path(run_dir), cache_dir)
    table, names = loaded["table"], loaded["names"]
    where = _check(query, names)
    mask = np.ones(table.num_rows, bool)
    first, last = query.steps
    if first is not None or last is not None:
        steps = _column(loaded, "step")
        with np.errstate(invalid="ignore"):
            mask &= (steps >= (-np.inf if first is None else first)) & (steps <= (np.inf if last is None else last))
    if where.fields & {"prompt", "completion"} or query.search:
        mask &= _text_rows(folder, manifest, table, where, query.search, mask)
    elif where.tree is not None:
        mask &= np.asarray(where.mask(table), bool)
    positions = np.flatnonzero(mask)
    if query.sort not in table.column_names:  # a reward function this run has not got: every score missing
        return folder, manifest, table, positions, names
    values = _column(loaded, query.sort)[positions]
    # stable: equal values keep file order; NaN (missing) sorts last either way
    order = np.argsort(-values if query.desc else values, kind="stable")
    return folder, manifest, table, positions[order], names


def _text_rows(folder, manifest, table: pa.Table, where: Where, search: str, candidates: np.ndarray) -> np.ndarray:
    """For each kept row (in `table`'s order: by part, then row): whether it matches the search and the filter,
    reading the parts' text (memory-mapped) one part at a time, and only parts with `candidates`."""
    columns = ["prompt", *(["completion"] if search or "completion" in where.fields else [])]
    bounds = np.searchsorted(table["part"].to_numpy(), np.arange(len(manifest.parts) + 1))
    found = np.zeros(table.num_rows, bool)
    for number, text in enumerate(completion_cache.scan_parts(folder, manifest, columns)):
        start, end = bounds[number], bounds[number + 1]
        if not candidates[start:end].any():
            continue
        rows = table.slice(start, end - start)
        if rows.num_rows != text.num_rows:  # rows of a step written again later are not kept
            text = text.take(rows["row"])
        mask = np.ones(rows.num_rows, bool)
        if search:
            mask = _search_mask(text, search)
        if where.tree is not None:
            for name in columns:
                column = text[name]
                rows = rows.append_column(name, column.cast(pa.string()) if name == "prompt" else column)
            mask &= np.asarray(where.mask(rows), bool)
        found[start:end] = mask
    return found


def _search_mask(text: pa.Table, search: str) -> np.ndarray:
    """Rows whose prompt or completion holds `search`, in any case (a literal, never a pattern)."""
    if len(search) <= PATTERN_SEARCH_CHARS:
        holds = lambda column: pc.match_substring(column, search, ignore_case=True)  # noqa: E731
    else:
        lowered = search.lower()
        holds = lambda column: pc.match_substring(pc.utf8_lower(column), lowered)  # noqa: E731
    # prompts repeat (G completions share one): each distinct prompt is matched once
    prompts = text["prompt"].combine_chunks()
    if isinstance(prompts, pa.DictionaryArray):
        in_prompt = holds(prompts.dictionary).fill_null(False)
        in_prompt = in_prompt.take(prompts.indices).fill_null(False)
    else:
        in_prompt = holds(prompts).fill_null(False)
    in_completion = holds(text["completion"]).fill_null(False)
    return np.asarray(in_prompt, bool) | np.asarray(in_completion.combine_chunks(), bool)


# ---------------------------------------------------------------- rows


def _number(value, name: str):
    if value is None:
        return None
    return int(value) if name in INT_FIELDS and float(value).is_integer() else value


def _rows(folder, manifest, table: pa.Table) -> list[dict]:
    """The rows of `table` (number columns, `part` and `row`) in FIELDS, their text read from the parts."""
    places = list(zip(table["part"].to_pylist(), table["row"].to_pylist()))
    texts = completion_cache.read_rows(folder, manifest, places, ["prompt", "completion", "rewards_json"])
    numbers = table.select([n for n in (*NUMBER_FIELDS, *BOOL_FIELDS) if n in table.column_names]).to_pylist()
    rows = []
    for text, number in zip(texts, numbers):
        row = {name: _number(number.get(name), name) for name in FIELDS}
        row.update(prompt=text["prompt"], completion=text["completion"], rewards=json.loads(text["rewards_json"]))
        row.update({name: number.get(name) for name in BOOL_FIELDS})
        rows.append(row)
    return rows


def search_completions(run_dir, query: CompletionQuery, cache_dir=None) -> CompletionPage:
    """One page of the run's completions that match `query`, and how many match in all."""
    try:
        return _page(run_dir, query, cache_dir)
    except FileNotFoundError:  # another process replaced a part since this one read the manifest: read it again
        return _page(run_dir, query, cache_dir)


def _page(run_dir, query: CompletionQuery, cache_dir) -> CompletionPage:
    folder, manifest, table, positions, names = _matching(run_dir, query, cache_dir)
    page = table.take(positions[query.offset : query.offset + query.limit])
    left_out = sum(part.rows for part in manifest.parts[: completion_cache.loaded_parts(manifest)])
    return CompletionPage(_rows(folder, manifest, page), len(positions), FIELDS, names, left_out)


# ---------------------------------------------------------------- export


def _cell(value):
    """A CSV cell: text a spreadsheet would read as a formula gets a leading `'` (numbers are written as numbers)."""
    if isinstance(value, dict):
        value = json.dumps(value)
    if isinstance(value, str) and (value.startswith(FORMULA_STARTS) or value.lstrip().startswith(FORMULA_STARTS)):
        return "'" + value
    return "" if value is None else value


def export_completions(run_dir, query: CompletionQuery, path, fmt: str, cache_dir=None) -> int:
    """Write every row matching `query` (in its order, every page) to `path` as CSV or Parquet; returns the count."""
    if fmt not in FORMATS:
        raise WorkbenchError(field="format", rule=f"`{fmt}` is not an export format", fix="use csv or parquet")
    try:
        return _export(run_dir, query, Path(path), fmt, cache_dir)
    except FileNotFoundError:  # as in search_completions: a part replaced by another process meanwhile
        return _export(run_dir, query, Path(path), fmt, cache_dir)


def _export(run_dir, query: CompletionQuery, path: Path, fmt: str, cache_dir) -> int:
    folder, manifest, table, positions, _ = _matching(run_dir, query, cache_dir)
    batches = (table.take(positions[i : i + EXPORT_BATCH_ROWS]) for i in range(0, len(positions), EXPORT_BATCH_ROWS))
    if fmt == "csv":
        with open(path, "w", newline="", encoding="utf-8") as handle:
            writer = csv.writer(handle)
            writer.writerow(FIELDS)
            for batch in batches:
                for row in _rows(folder, manifest, batch):
                    writer.writerow([_cell(row[name]) for name in FIELDS])
        return len(positions)
    import pyarrow.parquet as pq

    schema = _export_schema()
    with pq.ParquetWriter(os.fspath(path), schema) as writer:
        for batch in batches:
            rows = _rows(folder, manifest, batch)
            for row in rows:
                row["rewards"] = json.dumps(row["rewards"])
            writer.write_table(pa.Table.from_pylist(rows, schema=schema))
    return len(positions)


def _export_schema() -> pa.Schema:
    types = {name: pa.int64() for name in INT_FIELDS}
    types.update({name: pa.string() for name in ("prompt", "completion", "rewards")})  # rewards: a JSON object
    types.update({name: pa.float64() for name in ("reward", "advantage")})
    types.update({name: pa.bool_() for name in BOOL_FIELDS})
    return pa.schema([(name, types[name]) for name in FIELDS])
