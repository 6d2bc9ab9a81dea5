"""Attack: a run that says it ended while its processes run on no longer counts against its owner's cap.

status.json is the run's to write. A run whose code writes `state: finished` and keeps its processes
going is shown `finished` (then `ending` after 60 s, or never, with `finished_at` in the future); the GPU
queue takes it as holding its devices in the state `ending`, and `queue.check_user_limit` skips every
entry in that state. So with WORKBENCH_MAX_RUNS_PER_USER=1 the same user launches run after run, each of
which says it finished, all of them running. README: "a run that says it ended while its processes still
run 60 s later shows `ending` and counts against its owner's runs until it is gone".
"""

from __future__ import annotations

import time

import pytest
from helpers import sandboxed_run_with_a_live_process, tiny_config

from workbench.jobs import launcher, queue, run_state
from workbench.runstore import runfolder


@pytest.fixture
def lying_run(tmp_path, monkeypatch):
    """alice's run, started by the launcher (its process a sleeper), whose code wrote that it finished."""
    monkeypatch.setenv(queue.MAX_RUNS_ENV, "1")
    runs = tmp_path / "runs"
    run_dir = runs / "20260101-000001-alice"
    process = sandboxed_run_with_a_live_process(run_dir)

    def claim(finished_at: float) -> None:
        runfolder.write_json_atomic(
            run_dir / runfolder.STATUS_FILE,
            {"state": "finished", "finished_at": finished_at, "updated_at": time.time(), "owner": "alice", "step": 1},
        )

    yield runs, run_dir, claim
    process.kill()
    process.wait()
    for other in runfolder.list_run_dirs(runs):
        if other != run_dir:
            launcher.stop(other.name, runs, timeout=2)


@pytest.mark.parametrize("finished_at", ["now", "a minute ago", "in the future"])
def test_a_run_that_says_it_finished_while_running_still_counts_against_the_cap(lying_run, finished_at):
    runs, run_dir, claim = lying_run
    claim({"now": time.time(), "a minute ago": time.time() - 120, "in the future": time.time() + 10**9}[finished_at])
    assert run_state.status_of_dir(run_dir)["state"] in ("finished", run_state.LINGERING)
    with pytest.raises(queue.UserLimitError):
        launcher.start(tiny_config(), runs, owner="alice", import_reward_file=False)
