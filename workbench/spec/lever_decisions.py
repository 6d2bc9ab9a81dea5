"""What a speed lever (or an automatic choice) decided, as data: `LeverDecision`.

status.json's `merged_generation`, `shared_prompt_pass` and `packed_decode` each hold one, written as a JSON object
`{"value": ..., "why": ..., "measured_on": ...}`; a reader takes the value as it is and turns the record into words
only where it shows it (`sentence`). Status files written before these were records hold a sentence such as
"no (set in the config)": `read` takes that too. Pure: no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

# The reason spec/speed.py gives a lever the config (or the speed choice written into it) set.
SET_IN_CONFIG = "set in the config"


@dataclass(frozen=True)
class LeverDecision:
    """One lever as the run took it: its value, why in plain words, and the machine a speed probe measured it on
    (None when nothing was measured: the config set it, or a rule decided)."""

    value: str  # "yes", "no", or the merged copy's dtype ("float32", "bfloat16")
    why: str = ""
    measured_on: str | None = None

    def to_dict(self) -> dict:
        return {"value": self.value, "why": self.why, "measured_on": self.measured_on}

    def sentence(self) -> str:
        """The decision in words, for a page or a log: "no (why)", or the value alone when there is no why."""
        return f"{self.value} ({self.why})" if self.why else self.value

    @classmethod
    def read(cls, data: Any) -> tuple[bool, LeverDecision | None]:
        """(True, the record) from a status.json value, the written object or an older file's sentence (its value,
        then its reason in brackets); (False, None) from anything else."""
        if isinstance(data, cls):
            return True, data
        if isinstance(data, str):
            value, _, why = data.partition(" (")
            return True, cls(value, why.removesuffix(")") if why else "")
        if (
            isinstance(data, dict)
            and isinstance(data.get("value"), str)
            and isinstance(data.get("why", ""), str)
            and isinstance(data.get("measured_on"), (str, type(None)))
        ):
            return True, cls(data["value"], data.get("why", ""), data.get("measured_on"))
        return False, None
