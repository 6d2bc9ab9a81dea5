"""A run's config.json as a page shows it: each RunConfig field typed and bounded, or named as unreadable.

A sandboxed run's code can rewrite its config.json. What the server decides from, and what a table shows of
a launched run, is the launcher's record of the config (runstore/launch_records.py `recorded_config`);
config.json is read only for a run with no record, and then through `shown_config`: a value that is not of
its field's type (as RunConfig would take it) or holds more than `run_status.MAX_CHARS` is left out and its
name listed under `unreadable_fields`, as `RunStatus.shown` does for status.json. Pure.
"""

from __future__ import annotations

from typing import Any

from workbench.spec.config import field_names, field_type
from workbench.spec.field_values import convert
from workbench.spec.run_status import MAX_CHARS, UNREADABLE_FIELDS, within_chars


def shown_config(data: Any) -> dict:
    """config.json's object with only the RunConfig fields that read as their type, within MAX_CHARS; the other
    fields it names listed under UNREADABLE_FIELDS; keys that name no field left out ({} for a non-object)."""
    if not isinstance(data, dict):
        return {}
    known, shown, unreadable = set(field_names()), {}, []
    for name, value in data.items():
        if name not in known:
            continue
        try:
            if not within_chars(value, MAX_CHARS[str] if isinstance(value, str) else MAX_CHARS[dict]):
                raise ValueError(name)
            shown[name] = convert(field_type(name), value)
        except (TypeError, ValueError, IndexError):  # IndexError: a list's item of no type at all
            unreadable.append(name)
    if unreadable:
        shown[UNREADABLE_FIELDS] = sorted(unreadable)
    return shown
