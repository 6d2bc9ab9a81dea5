"""Time a few training steps under each installed allocator, on this machine (`python -m workbench tune --allocators`).

Each allocator gets a real foreground run, `python -m workbench train` on the demo task, started under that
allocator as the launcher starts runs (workbench/jobs/allocator.py); the step time is TRL's own `step_time`, the
first step left out (it pays one-off costs). What wins is kept by workbench/tuning/allocator_kept.py.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

from workbench.errors import WorkbenchError
from workbench.jobs import allocator
from workbench.runstore import runfolder
from workbench.spec.lever_decisions import LeverDecision

REPO = Path(__file__).resolve().parents[2]
RUN_TIMEOUT_S = 900


def step_seconds(name: str, model: str, steps: int, runs_dir: Path) -> float:
    """The median step time of a `steps`-step demo run of `model` under allocator `name`."""
    run_dir = runs_dir / name
    command = [
        sys.executable,
        "-m",
        "workbench",
        "train",
        "--model",
        model,
        "--task",
        "demo",
        "--max-steps",
        str(steps),
        "--run-dir",
        str(run_dir),
        "--set",
        "save_steps=100000",
        "--set",
        "device=cpu",
        "--set",
        "eval_strategy=no",
    ]
    env = {key: value for key, value in os.environ.items() if key != allocator.APPLIED_ENV_VAR}
    env[allocator.ALLOCATOR_ENV_VAR] = name
    done = subprocess.run(
        command,
        cwd=REPO,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        timeout=RUN_TIMEOUT_S,
        check=False,
    )
    known, decision = LeverDecision.read(runfolder.read_status(run_dir).get("allocator"))
    recorded = decision.value if known else None
    times = [m["step_time"] for m in runfolder.read_jsonl(run_dir / runfolder.METRICS_FILE) if "step_time" in m][1:]
    if done.returncode != 0 or recorded != name or not times:
        raise WorkbenchError(
            field="allocator",
            rule=f"the {name} run did not train ({recorded=}): {done.stderr[-400:].strip()}",
            fix="read the message; `tune --allocators` again",
        )
    return statistics.median(times)


def measure(names: list[str], model: str, steps: int, progress: Callable[[str], None]) -> dict[str, float]:
    """Median step seconds per allocator in `names`, one run each, in order."""
    seconds = {}
    with tempfile.TemporaryDirectory(prefix="workbench-allocators-") as folder:
        for index, name in enumerate(names, start=1):
            progress(f"timing {index}/{len(names)}: {name} ({steps} steps of the demo)")
            seconds[name] = step_seconds(name, model, steps, Path(folder))
            progress(f"  {name}: {seconds[name]:.2f} s a step")
    return seconds
