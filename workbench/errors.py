"""The one error type for input the workbench refuses, before anything loads.

Every refusal names the field, the rule it breaks and a fix. The UI and the
CLI catch `WorkbenchError` and show its message; anything else is a bug and
surfaces as one. Each part of the package subclasses it (InputError,
ConfigError, ModelError, ...) so callers can still tell them apart.
"""

from __future__ import annotations

import re

# "field: rule; fix" is how most messages begin; the field is read back from it.
_FIELD_PREFIX = re.compile(r"^([A-Za-z_][\w.\[\]-]*): ")


class WorkbenchError(ValueError):
    """Refused input: `field` (may be ""), the `rule` it breaks, and a `fix` (may be part of the rule's text)."""

    def __init__(self, message: str = "", *, field: str = "", rule: str = "", fix: str = ""):
        if not message:
            message = f"{field}: {rule}" if field else rule
            if fix:
                message += f"; {fix}"
        super().__init__(message)
        if not field:
            match = _FIELD_PREFIX.match(message)
            field = match.group(1) if match else ""
        self.field = field
        self.rule = rule or (message[len(field) + 2 :] if field and message.startswith(f"{field}: ") else message)
        self.fix = fix
