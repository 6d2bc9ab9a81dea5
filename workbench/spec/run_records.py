"""The records of a run's JSON-lines files as the trainer writes them, and the lines a reader skips.

`metrics.jsonl` and `completions.jsonl` (workbench/runstore/runfolder.py) hold
one JSON object a line. A file cut by a full disk, copied between machines or
edited by hand may hold a line that is not text (bytes that are not UTF-8),
not JSON, or not such a record (`"rewards": [1]`, `"step": "3"`). Every
reader skips that line, keeps the others, and says so: a `Skipped` counts the
lines and names the first with its reason, the dashboard and the report show
it as a note, and the reader logs it once per file.

`metric_problem` and `completion_problem` are the one rule of what a record
must look like (what is wrong with it, or None): a record that passes breaks
no reader. `well_formed` applies the rule to records handed over already
read (a notebook's own reading). Pure, standard library.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

# Fields of a completion record and what each may hold besides null (recorder.completion_records writes them).
NUMBER_FIELDS = ("group", "reward", "advantage", "length")
TEXT_FIELDS = ("prompt", "completion")  # text, or chat messages (a list or one message)


@dataclass(frozen=True)
class Skipped:
    """The lines of one file a reader passed over: how many, and where the first lay and why."""

    count: int = 0
    first: str = ""  # e.g. "byte 812: rewards is [1], not an object {function: score}"

    def __add__(self, other: Skipped) -> Skipped:
        if not other.count:
            return self
        return Skipped(self.count + other.count, self.first or other.first)

    def note(self, name: str) -> str:
        """One sentence for a page or a log: `name` is the file's name."""
        lines = "1 line" if self.count == 1 else f"{self.count:,} lines"
        return (
            f"{name}: {lines} could not be read and {'was' if self.count == 1 else 'were'} skipped "
            f"(the first at {self.first}); the other records are shown."
        )


def shown(value: Any, limit: int = 40) -> str:
    """A value as it reads in the file, cut to `limit` characters."""
    try:
        text = json.dumps(value, ensure_ascii=False, allow_nan=True)
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def is_number(value: Any) -> bool:
    """A JSON number (true and false are not numbers here, though Python counts them as ints)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def object_problem(record: Any) -> str | None:
    """What any JSON-lines reader refuses: a line whose value is not a JSON object (a list, a number)."""
    return None if isinstance(record, dict) else f"{shown(record)} is not a JSON object"


def _step_problem(record: dict, required: bool) -> str | None:
    if "step" not in record:
        return "it has no step" if required else None
    step = record["step"]
    if not is_number(step) or not math.isfinite(step):
        return f"step is {shown(step)}, not a number"
    return None


def metric_problem(record: Any) -> str | None:
    """What is wrong with a metrics.jsonl record, or None.

    An object whose step, when given, is a number. A value that is not a
    number (text, null, a list) is no reason to skip the step's other
    metrics: a figure shows it as a gap (`metric_frames.metrics_frame`).
    """
    return object_problem(record) or _step_problem(record, required=False)


def completion_problem(record: Any) -> str | None:
    """What is wrong with a completions.jsonl record, or None.

    An object with a numeric step; when present, `group`, `reward`,
    `advantage` and `length` are numbers or null, `rewards` an object
    {function: score or null}, `reward_errors` an object {function: error text}, `truncated` true, false or
    null, `prompt`
    and `completion` text or chat messages.
    """
    problem = object_problem(record) or _step_problem(record, required=True)
    if problem:
        return problem
    for name in NUMBER_FIELDS:
        value = record.get(name)
        if value is not None and not is_number(value):
            return f"{name} is {shown(value)}, not a number"
    rewards = record.get("rewards")
    if rewards is not None:
        if not isinstance(rewards, dict):
            return f"rewards is {shown(rewards)}, not an object {{function: score}}"
        for name, score in rewards.items():
            if score is not None and not is_number(score):
                return f"rewards[{shown(name)}] is {shown(score)}, not a number"
    errors = record.get("reward_errors")
    if errors is not None and (not isinstance(errors, dict) or not all(isinstance(e, str) for e in errors.values())):
        return f"reward_errors is {shown(errors)}, not an object {{function: error}}"
    truncated = record.get("truncated")
    if truncated is not None and not isinstance(truncated, bool):
        return f"truncated is {shown(truncated)}, not true or false"
    for name in TEXT_FIELDS:
        value = record.get(name)
        if value is not None and not isinstance(value, (str, list, dict)):
            return f"{name} is {shown(value)}, not text"
    return None


def well_formed(records: Iterable[Any], problem: Callable[[Any], str | None]) -> list:
    """The records that pass `problem` (metric_problem or completion_problem), in order."""
    return [record for record in records if problem(record) is None]
