"""Attack: a student's reward file runs as root, outside the sandbox, in the speed probe a sandboxed run's starter
runs first (issue 43).

Before a sandboxed run starts, its starter (jobs/sandbox.py `start_run`, the server's side, root here) runs
`python -m workbench tune --config <the config the launcher recorded>` outside the sandbox
(jobs/tune_job.py `choice_env`). That config names the student's reward file, and `tune` checked the whole
config with `check_config`, whose default imports the reward file to find its functions: the file's top-level
code ran in the server's process tree as uid 0, with the whole file system and network, before any sandbox
existed. Measured with a real sandboxed launch (launcher.start, bubblewrap, the tiny model): the reward file's
top line wrote `uid=0 sandbox=None` into a folder outside every run folder, and the run then finished as if
nothing had happened. The same check also read the run's dataset rows there, as root.

Fixed in workbench/cli/tune.py: `tune` checks and measures only what the probe reads (speed_probe.probe_config:
the model, the run's shape, a built-in task's prompts), never the reward file or the data; the run's own check
inside its sandbox checks the rest. Here: the starter's own call (`choice_env`) on a recorded config whose reward
file writes a marker when imported; the probe must still measure and hand its choice over.
"""

from __future__ import annotations

import os

import pytest
from helpers import tiny_settings

from workbench.jobs import tune_job
from workbench.runstore import launch_records, runfolder
from workbench.spec.config import RunConfig
from workbench.tuning import for_config

pytestmark = pytest.mark.slow  # a real speed probe of the tiny model (two candidates)

PAYLOAD = """
import os

with open({marker!r}, "a") as handle:  # runs when the file is imported, wherever that is
    handle.write(f"uid={{os.getuid()}} sandbox={{os.environ.get('WORKBENCH_SANDBOX')}}\\n")


def evil(completions, **kwargs):
    return [0.0 for _ in completions]
"""


def test_the_probe_outside_the_sandbox_never_imports_the_students_reward_file(tmp_path, monkeypatch):
    monkeypatch.setenv("WORKBENCH_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv(for_config.PROBE_ENV, raising=False)
    outside = tmp_path / "outside"  # the server's side: no run's sandbox shows it
    outside.mkdir()
    marker = outside / "pwned.txt"
    runs = tmp_path / "runs"
    reward = runs / "uploads" / "alice" / "evil.py"
    reward.parent.mkdir(parents=True)
    reward.write_text(PAYLOAD.format(marker=str(marker)))
    # two levers left to the probe's measuring (the fewest rounds), the reward file the student's
    config = RunConfig.for_task(
        "demo",
        **tiny_settings(
            max_steps=1,
            eval_strategy="no",
            reward_file=str(reward),
            reward_names=["evil"],
            merged_generation="no",
            packed_decode="no",
        ),
    )
    run_dir = runs / "20260101-000001-alice"
    config.save(run_dir / runfolder.CONFIG_FILE)
    launch_records.write_record(
        run_dir, launch_records.LaunchRecord(owner="alice", sandboxed=True, policy={}, config=config.to_dict())
    )
    recorded = launch_records.read_record(run_dir).config

    handed = tune_job.choice_env(run_dir, recorded, dict(os.environ))

    assert not marker.exists(), f"the reward file ran outside the sandbox: {marker.read_text()!r}"
    # the probe itself still measured the model and shape, and the run is handed its choice
    assert for_config.CHOICE_ENV in handed, runfolder.read_log_tail(run_dir)
    assert for_config.handed_over(for_config.key_for(config), handed) is not None
