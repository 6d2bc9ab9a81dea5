"""Numbers read from run files, and durations written for people: one rule each, shared by every layer.

Run files are JSON written by other versions, other processes and sometimes
by hand, so a number may arrive as text, a boolean, NaN or be missing.
`finite_number` is the one reading of such a value; `format_duration` the one
way a length of time is shown (the Train tab, the Runs table, the report).
Pure standard library.
"""

from __future__ import annotations

import math
from typing import Any


def finite_number(value: Any) -> float | None:
    """`value` as a finite float; None for missing, booleans, NaN, infinities and anything not a number."""
    if isinstance(value, bool) or value is None:
        return None
    try:
        number = float(value)
    except (TypeError, ValueError, OverflowError):  # OverflowError: a JSON integer past float's range (10**400)
        return None
    return number if math.isfinite(number) else None


def format_duration(seconds: float | None) -> str:
    """`42 s`, `3 min 05 s`, `1 h 02 min`; an em dash when unknown or negative."""
    if seconds is None or seconds < 0:
        return "—"
    seconds = int(round(seconds))
    if seconds < 60:
        return f"{seconds} s"
    minutes, secs = divmod(seconds, 60)
    if minutes < 60:
        return f"{minutes} min {secs:02d} s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes:02d} min"
