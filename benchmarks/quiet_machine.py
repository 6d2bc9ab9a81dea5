"""Whether the machine is quiet enough for a step time to mean something, said before and after a benchmark.

A benchmark that compares two ways of running the same steps (a launched run against one in the foreground) is
only worth quoting when nothing else took the cores meanwhile. `look()` reads the load average and measures other
processes' share of the CPU over a couple of seconds (workbench/sources/cpu_busy.py: /proc/stat against this
process's tree, so the benchmark's own runs never count as others); `require_quiet` refuses to start on a busy
machine unless asked to go on anyway, and then says loudly, at the start and in the results, that the figures are
noisy.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from workbench.sources import cpu_busy  # noqa: E402
from workbench.tuning.machine import cpu_name  # noqa: E402

# quiet: others took at most a tenth of the machine, and the 1-minute load average is at most a third of the cores
QUIET_OTHERS_SHARE = 0.10
QUIET_LOAD_PER_CORE = 0.33
LOOK_SECONDS = 2.0


def verdict(load_1min: float, others_share: float, cores: int) -> str | None:
    """Why the machine is not quiet, or None when it is (pure)."""
    reasons = []
    if others_share > QUIET_OTHERS_SHARE:
        reasons.append(f"other processes took {others_share:.0%} of the CPU (quiet: <= {QUIET_OTHERS_SHARE:.0%})")
    if load_1min > QUIET_LOAD_PER_CORE * cores:
        reasons.append(
            f"the load average is {load_1min:.2f} on {cores} cores (quiet: <= {QUIET_LOAD_PER_CORE * cores:.2f})"
        )
    return "; ".join(reasons) or None


def look(seconds: float = LOOK_SECONDS) -> dict:
    """The machine now: its CPU, the load averages, others' share of the CPU over `seconds`, and the verdict."""
    busy = cpu_busy.measure(seconds)
    load = [round(x, 2) for x in os.getloadavg()]
    return {
        "cpu": cpu_name(),
        "cores": busy.cores,
        "load_average": load,
        "others_share": round(busy.others_share, 3),
        "not_quiet": verdict(load[0], busy.others_share, busy.cores),
    }


def describe(state: dict, when: str) -> str:
    return (
        f"{when}: {state['cpu']}, {state['cores']} cores; load average {' '.join(map(str, state['load_average']))}; "
        f"other processes {state['others_share']:.0%} of the CPU"
    )


def warning(reason: str) -> str:
    line = "!" * 100
    return f"{line}\nNOT A QUIET MACHINE: {reason}.\nThese timings are noisy: do not quote them as the figure.\n{line}"


def require_quiet(go_on_when_busy: bool, flag: str = "--busy-ok") -> dict:
    """`look()` at the start: printed; a busy machine ends the benchmark (SystemExit naming `flag`) unless
    `go_on_when_busy`, which prints a loud warning instead."""
    state = look()
    print(describe(state, "at the start"), flush=True)
    if state["not_quiet"]:
        if not go_on_when_busy:
            raise SystemExit(
                f"not a quiet machine: {state['not_quiet']}. Step times measured now would measure the other work "
                f"as much as the runs; wait for a quiet machine, or pass {flag} to measure anyway (the figures are "
                f"then marked noisy)."
            )
        print(warning(state["not_quiet"]), flush=True)
    return state
