"""The batch calculator: TRL 1.16's GRPO batch rules, pure Python, no torch or gradio.

- `rules`        what GRPOConfig would say and how many steps GRPOTrainer takes
- `suggestions`  the nearest valid settings to an invalid one
- `planner`      `plan()` = rules + suggestions, the call everything else makes
- `frameworks`   the same inputs read as TRL, Open-R1 and ms-swift
- `explain`      a pasted batch error read back into numbers, reason and fixes

The UI calls these on every keystroke, so nothing here may import a heavy library.
"""

from workbench.calc.explain import Explanation, explain
from workbench.calc.frameworks import FRAMEWORKS, compare_frameworks
from workbench.calc.planner import plan
from workbench.calc.rules import (
    MAX_VALUE,
    NO_LENGTH_ERROR,
    PLAN_DEFAULTS,
    PLAN_NUMBERS,
    InputError,
    Plan,
    Suggestion,
    divisors,
    grid,
    normalise_inputs,
)

__all__ = [
    "FRAMEWORKS",
    "MAX_VALUE",
    "NO_LENGTH_ERROR",
    "PLAN_DEFAULTS",
    "PLAN_NUMBERS",
    "Explanation",
    "InputError",
    "Plan",
    "Suggestion",
    "compare_frameworks",
    "divisors",
    "explain",
    "grid",
    "normalise_inputs",
    "plan",
]
