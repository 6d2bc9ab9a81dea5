"""`python -m workbench completions RUN [...]`: a run's completions, filtered, searched, sorted and exported.

    python -m workbench completions runs/20261122-031502-demo --steps 10:50 --where "reward<0.2 and length>40" \\
        --sort advantage --desc --limit 20 --json
    python -m workbench completions runs/20261122-031502-demo --where "truncated==true" --csv truncated.csv

With --json it prints a JSON list with one object per completion: `step`, `group`, `prompt`, `completion`,
`rewards` ({function: score}), `reward`, `advantage`, `length`, `truncated`; without it, a table. --csv and
--parquet write every matching row (not only --limit of them) with every field (`insight/completion_search`
FIELDS). --where takes comparisons on those fields joined by and/or/not (`insight/completion_where`); it is
never run as code. Bad input exits 2 with one line naming the argument, the rule and a fix.
"""

from __future__ import annotations

import json
import sys

from workbench.cli import ArgumentError
from workbench.cli.report_command import add_run_arguments, find_run
from workbench.insight.completion_where import parse_steps

JSON_FIELDS = ("step", "group", "prompt", "completion", "rewards", "reward", "advantage", "length", "truncated")
# How much of a prompt and a completion a table row shows.
TABLE_TEXT_CHARS = 60


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser(
        "completions",
        help="list a run's completions: filter (--where), search, sort, page, export to CSV or Parquet",
        description="List a run's completions from completions.jsonl, filtered by step range and comparisons "
        "on their fields, sorted by any of them, as a table, JSON, CSV or Parquet.",
    )
    add_run_arguments(parser)
    parser.add_argument("--steps", help="a step range A:B (inclusive; either end may be left out: 10:, :50, 7)")
    parser.add_argument(
        "--where",
        default="",
        help="comparisons joined by and/or/not, e.g. 'reward<0.2 and length>40', 'truncated==true', 'rewards.NAME>=1'",
    )
    parser.add_argument("--search", default="", help="only completions whose prompt or text holds this (any case)")
    parser.add_argument("--sort", default="step", help="the field to sort by (default step)")
    parser.add_argument("--desc", action="store_true", help="sort from the largest down")
    parser.add_argument("--limit", type=int, default=50, help="how many rows to print (default 50)")
    parser.add_argument("--offset", type=int, default=0, help="rows to skip before the first printed")
    parser.add_argument("--json", action="store_true", help="print a JSON list, one object per completion")
    out = parser.add_mutually_exclusive_group()
    out.add_argument("--csv", metavar="FILE", help="write every matching row to this CSV file")
    out.add_argument("--parquet", metavar="FILE", help="write every matching row to this Parquet file")
    parser.set_defaults(run=run)


def _short(text, width: int = TABLE_TEXT_CHARS) -> str:
    # a run wrote the text: control characters (terminal escapes) are shown as `?`, never sent to the terminal
    text = "".join(c if c.isprintable() else "?" for c in " ".join(str(text or "").split()))
    return text if len(text) <= width else text[: width - 1] + "…"


def _number(value) -> str:
    return "—" if value is None else f"{value:+.3f}" if isinstance(value, float) else str(value)


def print_table(rows: list[dict], total: int, offset: int) -> None:
    print(
        f"{'step':>6} {'group':>5} {'#':>3} {'reward':>7} {'advantage':>9} {'length':>6} {'cut':>3}  prompt | completion"
    )
    for row in rows:
        cut = "yes" if row["truncated"] else ""
        print(
            f"{row['step']!s:>6} {row['group']!s:>5} {row['index']!s:>3} {_number(row['reward']):>7} "
            f"{_number(row['advantage']):>9} {row['length']!s:>6} {cut:>3}  {_short(row['prompt'], 30)} | "
            f"{_short(row['completion'])}"
        )
    shown = f"{offset + 1}-{offset + len(rows)}" if rows else "none"
    print(f"{total} completions match; rows {shown} shown")


def run(args) -> int:
    from workbench.errors import WorkbenchError
    from workbench.insight import completion_search

    run_dir = find_run(args.source, args.runs_dir)
    try:
        query = completion_search.CompletionQuery(
            steps=parse_steps(args.steps),
            where=args.where,
            search=args.search,
            sort=args.sort,
            desc=args.desc,
            offset=args.offset,
            limit=args.limit,
        )
        if args.csv or args.parquet:
            path, fmt = (args.csv, "csv") if args.csv else (args.parquet, "parquet")
            count = completion_search.export_completions(run_dir, query, path, fmt)
            print(f"wrote {count} completions to {path}", file=sys.stderr)
            return 0
        page = completion_search.search_completions(run_dir, query)
    except WorkbenchError as exc:
        raise ArgumentError(f"--{exc.field or 'where'}: {str(exc).removeprefix(exc.field + ': ')}") from None
    except OSError as exc:
        raise ArgumentError(f"--csv/--parquet: cannot write {exc.filename or ''} ({exc.strerror})") from None
    if page.left_out:
        print(f"note: the run's oldest {page.left_out:,} completions are not searched (too many rows)", file=sys.stderr)
    if args.json:
        print(json.dumps([{name: row[name] for name in JSON_FIELDS} for row in page.rows]))
    else:
        print_table(page.rows, page.total, args.offset)
    return 0
