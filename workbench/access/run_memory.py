"""How much memory one run may ask for on a shared dashboard: what its device has, or the admin's share.

The Setup tab estimates a run's peak memory (workbench/spec/memory.py). On an
open dashboard an estimate past the device's free memory is a warning; on a
dashboard with accounts a run whose estimate is past the limit is refused
before launch (the live plan never says "Ready to launch", the launch and the
smoke test refuse it), naming the setting that drives the estimate.

The limit is the smaller of

- the device's memory in all (the smallest chosen GPU's, or the machine's RAM
  for a CPU run): such a run can never start. Not what is free now: a launch
  waits in the GPU queue for the run holding its device, and the memory panel
  warns when it needs more than is free at the moment;
- the admin's share per run, WORKBENCH_MAX_RUN_MEMORY_GB (GiB, whole or
  decimal; unset: no share), so one student cannot take the machine's memory.

Pure standard library.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from workbench.errors import WorkbenchError

MAX_RUN_MEMORY_ENV = "WORKBENCH_MAX_RUN_MEMORY_GB"
GIB = 2**30


class MemoryLimitError(WorkbenchError):
    """A run refused for the memory its estimate needs; the message names the setting, the limit and a fix."""


def run_share(environ: Mapping[str, str] | None = None) -> int | None:
    """The admin's share per run in bytes ($WORKBENCH_MAX_RUN_MEMORY_GB), None when unset; refused when not a
    positive number (checked when the app starts)."""
    text = ((os.environ if environ is None else environ).get(MAX_RUN_MEMORY_ENV) or "").strip()
    if not text:
        return None
    try:
        share = float(text)
    except ValueError:
        share = -1.0
    if not 0 < share < float("inf"):
        raise MemoryLimitError(
            field=MAX_RUN_MEMORY_ENV,
            rule=f"{text[:40]!r} is not a positive number of GiB",
            fix="set it to the GiB one run may use, e.g. 16, or unset it for no share",
        )
    return int(share * GIB)


def memory_limit(device_bytes: int | None, share: int | None, device: str) -> tuple[int, str] | None:
    """(bytes, what they are) of the smaller limit: the device's memory in all (None: unknown) and the admin's
    share (`run_share()`); None when neither is known. `device`: "cpu" or "cuda"."""
    limits = []
    if device_bytes:
        limits.append((device_bytes, "this machine has in all" if device == "cpu" else "the GPU has in all"))
    if share:
        limits.append((share, f"each run may use here ({MAX_RUN_MEMORY_ENV})"))
    return min(limits) if limits else None


def memory_refusal(needed: int, limit: tuple[int, str] | None, field: str) -> MemoryLimitError | None:
    """The refusal of a run whose estimate `needed` (bytes) is past `limit` (`memory_limit`), naming `field`, the
    setting that drives the estimate; None when it fits or there is no limit."""
    if limit is None or needed <= limit[0]:
        return None
    return MemoryLimitError(
        field=field,
        rule=f"the run's memory estimate is about {needed / GIB:,.1f} GiB at its peak, over the "
        f"{limit[0] / GIB:,.1f} GiB {limit[1]}",
        fix=f"lower {field} (it drives the estimate; the memory panel shows each part), or turn on "
        "gradient_checkpointing, or ask whoever runs the server for a larger share",
    )
