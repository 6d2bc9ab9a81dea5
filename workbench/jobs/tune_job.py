"""The speed probe for a run about to start in its sandbox, run outside it first when this machine has no choice yet.

A sandboxed run cannot keep what it measures (its code could write anything into the server's cache), so without this
every sandboxed launch of a new model or shape would measure again, inside its sandbox. Instead the sandbox's starter
(workbench/jobs/sandbox.py, the server's side) runs `python -m workbench tune` on the config the launcher recorded,
which keeps the choice, and hands it to the run in its environment (workbench/tuning/for_config.py). The probe runs no
code of the run's: the model the launcher checked, the built-in prompts and rewards of its task (workbench/trainer/
speed_probe.py). Its lines go to the run's log.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
from functools import partial
from pathlib import Path

from workbench.jobs.sandbox_init import set_limits
from workbench.runstore import runfolder
from workbench.spec.config import RunConfig
from workbench.tuning import for_config

TUNE_TIMEOUT_S = 900  # a probe that takes longer than this is ended, and the run takes TRL's path


def choice_env(run_dir: Path, recorded: dict, env: dict, memory_limit: int | None = None) -> dict[str, str]:
    """What to add to the sandboxed run's environment: this machine's choice for the config the launcher recorded,
    measured now if need be, allocating at most `memory_limit` bytes (a sandboxed process's limit); nothing when that
    fails (the run then measures inside its sandbox, keeping nothing)."""
    try:
        config = RunConfig.from_dict(recorded)
    except Exception as exc:  # the run's own check_config says what is wrong with it, in its own words
        print(f"[workbench] no speed probe before the sandbox: {type(exc).__name__}: {exc}", flush=True)
        return {}
    if for_config.CHOICE_ENV in env or env.get(for_config.PROBE_ENV) == "off" or for_config.needs_no_choice(config):
        return {}
    kept = for_config.launcher_env(config)
    if kept:
        return kept
    runfolder.update_status(run_dir, state="tuning")
    with tempfile.TemporaryDirectory(prefix="workbench-tune-") as folder:
        path = Path(folder) / "config.json"
        config.save(path)
        try:
            # outside the sandbox, but within the memory a run of the sandbox may take (RLIMIT_DATA, as inside)
            subprocess.run([sys.executable, "-m", "workbench", "tune", "--config", str(path)], stdin=subprocess.DEVNULL,
                           stdout=sys.stdout, stderr=sys.stderr, timeout=TUNE_TIMEOUT_S, env=env, check=False,
                           cwd=str(Path(__file__).resolve().parents[2]),
                           preexec_fn=partial(set_limits, memory_limit, None))
        except subprocess.TimeoutExpired:
            print(f"[workbench] the speed probe took over {TUNE_TIMEOUT_S} s and was ended", flush=True)
    return for_config.launcher_env(config)
