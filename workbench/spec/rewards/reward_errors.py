"""The errors of rewards: one that cannot be found, loaded or used, a function that fails, one that hangs, a bad file.

Each message says how to fix it; a function's error names the function.
"""

from __future__ import annotations

from workbench.errors import WorkbenchError


class RewardError(WorkbenchError):
    """A reward cannot be found, loaded, or used; the message says how to fix it."""


class RewardFunctionError(RewardError):
    """A reward function raised or returned something TRL cannot use."""

    def __init__(self, function_name: str, message: str):
        super().__init__(f"reward function '{function_name}' {message}")
        self.function_name = function_name


class RewardTimeoutError(RewardFunctionError):
    """A reward function outlasted reward_timeout_s: a hang, which ends the run whatever reward_errors says."""


class RewardFileError(RewardError):
    """A reward file is missing, does not import, or defines no reward function."""
