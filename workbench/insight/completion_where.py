"""The completions explorer's `where` filter: comparisons on a completion's fields, read by a small parser.

`parse_where("reward<0.2 and (length>40 or not truncated==true)")` gives a `Where`: a tree of comparisons
(`<`, `<=`, `>`, `>=`, `==`, `!=` between a field and a number, true/false or a quoted string; `rewards.NAME` is
one reward function's score) joined by `and`, `or`, `not` and parentheses. The text is split into tokens by one
regular expression and read by recursive descent: it is never evaluated as code (no eval, exec or compile) and
never put into a query language's text, so `__import__('os')` or `reward<0.2; drop` are simply not understood,
and the error says which token was not.

A `Where` answers for a pyarrow table (`mask`) or for one row as a dict (`matches`), with the same logic: a
comparison with a missing value (None) is unknown, unknown stays unknown through `not`, `and` and `or` (as in
SQL), and a row matches only when the whole filter is true, so a missing value never matches.

`parse_steps` reads the other typed part of a query, a step range (`10:50`), for the CLI's `--steps` and the Explore
tab's step box alike.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from workbench.errors import WorkbenchError

NUMBER_FIELDS = ("step", "group", "index", "reward", "advantage", "length")
BOOL_FIELDS = ("truncated", "reward_error", "correct")
TEXT_FIELDS = ("prompt", "completion")
REWARD_PREFIX = "rewards."
OPERATORS = ("<=", ">=", "==", "!=", "<", ">")
# The longest filter read: a filter is typed by a person, and a parser's depth grows with the text.
MAX_WHERE_CHARS = 2000
MAX_DEPTH = 50

_TOKEN = re.compile(
    r"""\s*(?:
    (?P<number>[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?)
    |(?P<string>"[^"\\]*"|'[^'\\]*')
    |(?P<op><=|>=|==|!=|<|>)
    |(?P<paren>[()])
    |(?P<name>[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_-]*)?)
    )""",
    re.VERBOSE,
)
_FIX = (
    "write comparisons such as `reward<0.2 and length>40`, `truncated==true`, `rewards.NAME>=1` or "
    "`prompt=='text'`, joined by and/or/not and parentheses"
)


def _refuse(rule: str) -> WorkbenchError:
    return WorkbenchError(field="where", rule=rule, fix=_FIX)


@dataclass(frozen=True)
class Compare:
    """`field op value`: field is a FIELDS name or rewards.NAME."""

    field: str
    op: str
    value: Any


@dataclass(frozen=True)
class Not:
    part: Any


@dataclass(frozen=True)
class Both:
    """`and` (kind "and") or `or` (kind "or") of two parts."""

    kind: str
    left: Any
    right: Any


@dataclass(frozen=True)
class Where:
    """A parsed filter; `tree` is None for an empty one (every row matches)."""

    text: str
    tree: Any = None

    @property
    def fields(self) -> set[str]:
        """The fields the filter reads."""
        found: set[str] = set()
        _collect(self.tree, found)
        return found

    def matches(self, row: dict) -> bool:
        """Whether the row (a dict in FIELDS, `rewards` a dict) matches."""
        return self.tree is None or _row_value(self.tree, row) is True

    def mask(self, table):
        """A pyarrow boolean array: the rows of `table` that match (columns named as the fields; `rewards.NAME`
        columns, absent ones read as missing)."""
        import pyarrow as pa
        import pyarrow.compute as pc

        if self.tree is None:
            return pa.array([True] * table.num_rows, pa.bool_()) if table.num_rows else pa.array([], pa.bool_())
        return pc.fill_null(_table_value(self.tree, table), False)


def _collect(tree, found: set[str]) -> None:
    if isinstance(tree, Compare):
        found.add(tree.field)
    elif isinstance(tree, Not):
        _collect(tree.part, found)
    elif isinstance(tree, Both):
        _collect(tree.left, found)
        _collect(tree.right, found)


# ---------------------------------------------------------------- reading the text


def _tokens(text: str) -> list[tuple[str, str]]:
    tokens, position = [], 0
    stripped = text.rstrip()
    while position < len(stripped):
        match = _TOKEN.match(stripped, position)
        if match is None or match.end() == position:  # the parser says so when it gets there
            tokens.append(("unknown", stripped[position:].lstrip()[:20]))
            break
        kind = match.lastgroup
        tokens.append((kind, match.group(kind)))
        position = match.end()
    return tokens


class _Parser:
    def __init__(self, tokens: list[tuple[str, str]]):
        self.tokens = tokens
        self.at = 0
        self.depth = 0

    def peek(self) -> tuple[str, str] | None:
        return self.tokens[self.at] if self.at < len(self.tokens) else None

    def take(self) -> tuple[str, str]:
        token = self.peek()
        if token is None:
            raise _refuse("the filter ends where a comparison or `)` was expected")
        if token[0] == "unknown":
            raise _refuse(f"`{token[1]}` is not understood")
        self.at += 1
        return token

    def word(self, word: str) -> bool:
        token = self.peek()
        if token is not None and token[0] == "name" and token[1].lower() == word:
            self.at += 1
            return True
        return False

    def either(self):
        part = self.both()
        while self.word("or"):
            part = Both("or", part, self.both())
        return part

    def both(self):
        part = self.negated()
        while self.word("and"):
            part = Both("and", part, self.negated())
        return part

    def negated(self):
        self.depth += 1
        if self.depth > MAX_DEPTH:
            raise _refuse(f"more than {MAX_DEPTH} nested `not` or parentheses")
        try:
            if self.word("not"):
                return Not(self.negated())
            if self.peek() == ("paren", "("):
                self.at += 1
                inner = self.either()
                if self.take() != ("paren", ")"):
                    raise _refuse("a `(` is not closed")
                return inner
            return self.comparison()
        finally:
            self.depth -= 1

    def comparison(self) -> Compare:
        kind, name = self.take()
        if kind != "name":
            raise _refuse(f"`{name}` is not a field (expected one of {', '.join(_field_names())})")
        field = _field(name)
        kind, op = self.take()
        if kind != "op":
            raise _refuse(f"`{op}` after `{name}` is not a comparison (use one of {' '.join(OPERATORS)})")
        return Compare(field, op, _value(field, op, self.take()))


def _field_names() -> list[str]:
    return [*NUMBER_FIELDS, *BOOL_FIELDS, *TEXT_FIELDS, "rewards.NAME"]


def _field(name: str) -> str:
    if name in NUMBER_FIELDS or name in BOOL_FIELDS or name in TEXT_FIELDS:
        return name
    if name.startswith(REWARD_PREFIX) and len(name) > len(REWARD_PREFIX):
        return name
    raise _refuse(f"`{name}` is not a field (expected one of {', '.join(_field_names())})")


def _value(field: str, op: str, token: tuple[str, str]) -> Any:
    kind, text = token
    if field in BOOL_FIELDS:
        if kind != "name" or text.lower() not in ("true", "false") or op not in ("==", "!="):
            raise _refuse(f"`{field}` is true or false: compare it with == or != to true or false")
        return text.lower() == "true"
    if field in TEXT_FIELDS:
        if kind != "string" or op not in ("==", "!="):
            raise _refuse(f"`{field}` is text: compare it with == or != to a quoted string (or use the search)")
        return text[1:-1]
    if kind != "number":
        raise _refuse(f"`{field}` is a number: `{text}` is not a number")
    return float(text)


def parse_where(text: str) -> Where:
    """The filter `text` means; "" (or only spaces) is no filter. Raises WorkbenchError(field="where")."""
    if not isinstance(text, str):
        raise _refuse("the filter must be text")
    if len(text) > MAX_WHERE_CHARS:
        raise _refuse(f"the filter is longer than {MAX_WHERE_CHARS} characters")
    tokens = _tokens(text)
    if not tokens:
        return Where(text)
    parser = _Parser(tokens)
    tree = parser.either()
    if parser.peek() is not None:
        raise _refuse(f"`{parser.peek()[1]}` is not understood (expected `and`, `or` or the end here)")
    return Where(text, tree)


# ---------------------------------------------------------------- answering


def _compare(left, op: str, right) -> bool:
    return {
        "<": left < right,
        "<=": left <= right,
        ">": left > right,
        ">=": left >= right,
        "==": left == right,
        "!=": left != right,
    }[op]


def row_field(row: dict, field: str) -> Any:
    """The value of `field` in a row dict (rewards.NAME from its rewards), None when missing."""
    if field.startswith(REWARD_PREFIX):
        rewards = row.get("rewards")
        return rewards.get(field[len(REWARD_PREFIX) :]) if isinstance(rewards, dict) else None
    return row.get(field)


def _row_value(tree, row: dict) -> bool | None:
    """True, False or None (unknown) for one row, in SQL's three-valued logic."""
    if isinstance(tree, Compare):
        value = row_field(row, tree.field)
        return None if value is None else _compare(value, tree.op, tree.value)
    if isinstance(tree, Not):
        inner = _row_value(tree.part, row)
        return None if inner is None else not inner
    left, right = _row_value(tree.left, row), _row_value(tree.right, row)
    if tree.kind == "and":
        return False if left is False or right is False else (None if None in (left, right) else True)
    return True if left is True or right is True else (None if None in (left, right) else False)


_ARROW_OPS = {"<": "less", "<=": "less_equal", ">": "greater", ">=": "greater_equal", "==": "equal", "!=": "not_equal"}


def _table_value(tree, table):
    import pyarrow as pa
    import pyarrow.compute as pc

    if isinstance(tree, Compare):
        if tree.field not in table.column_names:  # a reward function this run has not got: every value missing
            return pa.nulls(table.num_rows, pa.bool_())
        return getattr(pc, _ARROW_OPS[tree.op])(table[tree.field], tree.value)
    if isinstance(tree, Not):
        return pc.invert(_table_value(tree.part, table))
    join = pc.and_kleene if tree.kind == "and" else pc.or_kleene
    return join(_table_value(tree.left, table), _table_value(tree.right, table))


_STEPS = re.compile(r"^\s*(\d*)\s*(?::\s*(\d*))?\s*$")


def parse_steps(text: str | None) -> tuple[int | None, int | None]:
    """A step range, `"10:50"`, `"10:"`, `":50"` or `"7"` (one step), as (first, last); empty: every step.
    WorkbenchError naming `steps` for anything else, and for a range whose first step comes after its last."""
    match = _STEPS.match(text or "")
    if not match:
        raise WorkbenchError(
            field="steps", rule=f"{str(text)[:40]!r} is not a step range", fix="write e.g. 10:50, 10:, :50 or 7"
        )
    first, last = match.group(1), match.group(2)
    if match.group(0).strip() and ":" not in match.group(0):
        return (int(first), int(first)) if first else (None, None)
    ends = (int(first) if first else None, int(last) if last else None)
    if ends[0] is not None and ends[1] is not None and ends[0] > ends[1]:
        raise WorkbenchError(
            field="steps",
            rule=f"{ends[0]} is after {ends[1]}",
            fix=f"write the first step first, e.g. {ends[1]}:{ends[0]}",
        )
    return ends
