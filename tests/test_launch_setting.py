"""A launched run trains under the same setting as the same run typed as `workbench train` in a terminal.

Read from /proc of the two real training processes (benchmarks/process_setting.py): the environment (allocator,
threads, the speed choice handed over), nice and scheduling policy, CPU affinity, cgroups, oom_score_adj, the
threads running and the libraries mapped. What may differ is what launching is for: a session of its own (it
outlives its caller), the run folder as its working folder, its output in the run's log.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import tiny_settings

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

from process_setting import differences, setting_of, wait_training  # noqa: E402

from workbench.jobs import launcher  # noqa: E402
from workbench.runstore import runfolder  # noqa: E402
from workbench.spec.config import RunConfig  # noqa: E402
from workbench.tuning import cache, for_config  # noqa: E402
from workbench.tuning.choice import Candidate, SpeedChoice  # noqa: E402

pytestmark = pytest.mark.slow

# what launching changes on purpose
LAUNCHING = {"own_session", "cwd_is_run_dir", "stdout", "stderr"}


def kept_choice_for(config: RunConfig) -> SpeedChoice:
    """A choice as this machine's probe would keep it for `config` (the suite's runs do not probe)."""
    chosen = Candidate(shared_prompt_pass=True)
    choice = SpeedChoice(
        for_config.key_for(config), chosen, "this CPU", 1.0, {Candidate().label(): 2.0, chosen.label(): 1.0}
    )
    assert cache.store(choice)
    return choice


def test_a_run_launched_as_the_dashboard_writes_it_trains_as_the_same_run_in_the_foreground(
    tiny_model, tmp_path, monkeypatch
):
    monkeypatch.setenv("WORKBENCH_CACHE", str(tmp_path / "cache"))  # this test's own speed choices
    # the command line leaves device on auto; the dashboard's Setup tab writes cpu on a machine without GPUs
    typed = RunConfig.from_dict(tiny_settings(model=tiny_model, device="auto", max_steps=200, save_steps=200))
    written = typed.with_changes(device="cpu")
    kept = kept_choice_for(typed)
    typed.save(tmp_path / "typed.json")

    foreground_dir = tmp_path / "foreground"
    command = [sys.executable, "-m", "workbench", "train", "--config", str(tmp_path / "typed.json")]
    process = subprocess.Popen(
        [*command, "--run-dir", str(foreground_dir)], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT
    )
    try:
        foreground = setting_of(wait_training(foreground_dir, lambda: process.pid, timeout=300))
    finally:
        process.send_signal(signal.SIGTERM)  # a graceful stop: it ends its step and saves
        process.communicate(timeout=120)

    runs = tmp_path / "runs"
    run_dir = runs / launcher.start(written, runs)
    try:
        launched = setting_of(wait_training(run_dir, lambda: runfolder.read_status(run_dir).get("pid"), timeout=300))
    finally:
        launcher.stop(run_dir.name, runs, timeout=60)

    found = differences(foreground, launched, ignore_env=("PWD", "OLDPWD"))
    assert set(found) <= LAUNCHING, found
    assert launched["environment"][for_config.CHOICE_ENV] == foreground["environment"][for_config.CHOICE_ENV]
    assert (launched["nice"], launched["affinity"]) == (os.nice(0), sorted(os.sched_getaffinity(0)))
    for folder in (foreground_dir, run_dir):  # both took the kept choice, neither measured one of its own
        record = runfolder.read_status(folder)["speed_choice"]
        assert record["source"] == "measured earlier on this machine" and record["chosen"] == kept.chosen.label()
