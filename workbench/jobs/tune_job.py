"""The speed probe for a run about to start in its sandbox, run outside it first when this machine has no choice yet.

A sandboxed run cannot keep what it measures (its code could write anything into the server's cache), so without this
every sandboxed launch of a new model or shape would measure again, inside its sandbox. Instead the sandbox's starter
(workbench/jobs/sandbox.py, the server's side) runs `python -m workbench tune` on the config the launcher recorded,
which keeps the choice, and hands it to the run in its environment (workbench/tuning/for_config.py). The probe runs no
code of the run's: the model the launcher checked, the built-in prompts and rewards of its task (workbench/trainer/
speed_probe.py). Its lines go to the run's log.

The model folder may be one the student's own earlier run wrote (its merged model: the path rule allows it), and this
process reads it as the server, outside the sandbox, where a link leads anywhere: a folder in the runs folder reached
through a link, or holding a link or anything but files and folders (a FIFO, a device), is left to the run to measure
in its sandbox, where the same links lead nowhere (`model_left_to_the_run`; tests/test_attack_tune_model_links.py).
"""

from __future__ import annotations

import os
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
MAX_MODEL_ENTRIES = 10_000  # a model folder's files and folders looked at before the probe; more: left to the run


def model_left_to_the_run(model, runs_root: Path) -> str | None:
    """Why the probe outside the sandbox must not read `model` (the config's model field), or None.

    What lies in the runs folder, sandboxed code may have written: there the way to the folder may hold no link, and
    the folder only files and folders (each looked at without following a link, at most MAX_MODEL_ENTRIES)."""
    if not isinstance(model, str) or not os.path.isabs(os.path.expanduser(model.strip())):
        return None  # a bundled name or a hub id: the workbench's own cache
    typed, root = os.path.abspath(os.path.expanduser(model.strip())), os.path.realpath(runs_root)
    real = os.path.realpath(typed)
    inside = [path for path in (typed, real) if path == root or path.startswith(root.rstrip("/") + "/")]
    if not inside:
        return None
    parts = Path(typed).parts
    for count in range(2, len(parts) + 1):  # a link on the way, in the runs folder
        step = os.path.join(*parts[:count])
        if os.path.islink(step) and os.path.realpath(os.path.dirname(step)).startswith(root.rstrip("/") + "/"):
            return f"{step} is a link"
    pending, seen = [real], 0
    while pending:
        try:
            entries = list(os.scandir(pending.pop()))
        except OSError as exc:
            return f"{exc.filename} cannot be listed ({exc.strerror})"
        for entry in entries:
            seen += 1
            if seen > MAX_MODEL_ENTRIES:
                return f"it holds more than {MAX_MODEL_ENTRIES} files"
            if entry.is_dir(follow_symlinks=False):
                pending.append(entry.path)
            elif entry.is_symlink() or not entry.is_file(follow_symlinks=False):
                return f"{entry.path} is a link or not a file"
    return None


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
    refused = model_left_to_the_run(recorded.get("model"), run_dir.parent)
    if refused:  # not even a kept choice: its key names the folder a link leads to
        print(
            f"[workbench] no speed probe before the sandbox: the model folder is left to the run ({refused})",
            flush=True,
        )
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
            subprocess.run(
                [sys.executable, "-m", "workbench", "tune", "--config", str(path)],
                stdin=subprocess.DEVNULL,
                stdout=sys.stdout,
                stderr=sys.stderr,
                timeout=TUNE_TIMEOUT_S,
                env=env,
                check=False,
                cwd=str(Path(__file__).resolve().parents[2]),
                preexec_fn=partial(set_limits, memory_limit, None),
            )
        except subprocess.TimeoutExpired:
            print(f"[workbench] the speed probe took over {TUNE_TIMEOUT_S} s and was ended", flush=True)
    return for_config.launcher_env(config)
