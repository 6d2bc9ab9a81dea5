"""What is wrong with a config: one problem (the field, the rule it breaks, a fix) and the error that lists them.

`RunConfig` raises `ConfigError` when a value cannot be read as its field's
type; `spec/config_checks.py` collects every `ConfigProblem` of a config that
cannot run. Pure: standard library only, besides the workbench's base error.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from workbench.errors import WorkbenchError


@dataclass
class ConfigProblem:
    """One thing wrong with a config: the field, the rule it breaks, and a fix."""

    field: str
    rule: str
    fix: str

    def __str__(self) -> str:
        return f"{self.field}: {self.rule}" + (f"; {self.fix}" if self.fix else "")


def problem_from(field_name: str, exc: Exception) -> ConfigProblem:
    """A ConfigProblem from an error whose message already names the field and a fix."""
    return ConfigProblem(field_name, str(exc).removeprefix(f"{field_name}: "), "")


class ConfigError(WorkbenchError):
    """A config that cannot run; `problems` lists each one, the message says them all."""

    def __init__(self, problems: list[ConfigProblem], plan: Any = None):
        self.problems = list(problems)
        self.plan = plan
        first = self.problems[0] if self.problems else ConfigProblem("", "", "")
        super().__init__("\n".join(str(p) for p in self.problems), field=first.field, rule=first.rule, fix=first.fix)
