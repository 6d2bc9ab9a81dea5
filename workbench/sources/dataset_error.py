"""The error a dataset that cannot be used raises; its own module so the readers and their bounds share it."""

from __future__ import annotations

from workbench.errors import WorkbenchError


class DatasetError(WorkbenchError):
    """A dataset file that cannot be used; the message names the path, the rule and a fix."""
