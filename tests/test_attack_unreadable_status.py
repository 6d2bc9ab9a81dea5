"""Attack: a live run makes its status.json unreadable, and the queue and the per-user cap forget it.

A status.json that is not a JSON object (`{`), or one over the new 4 MiB cap, reads as `unreadable`, and
one may say `unreadable` or `lost` itself; both count as final. `run_state.status_of_dir` returns an
unreadable one before laying the launcher's record over it, `_lingers` never turns either into `ending`,
and `gpu_queue.queue_entries` skips both altogether. So a run whose code breaks its own
status.json while it keeps training holds no device (the next launch starts at once on the CPU or GPU it
uses, two runs on one GPU) and counts against no cap (with WORKBENCH_MAX_RUNS_PER_USER=1 the same user
launches again and again). The launcher's record says its process runs; that is what must decide.
"""

from __future__ import annotations

import pytest
from helpers import sandboxed_run_with_a_live_process, tiny_config

from workbench.jobs import gpu_queue, launcher, queue
from workbench.runstore import runfolder


@pytest.fixture(params=["{", "big", '{"state": "unreadable"}', '{"state": "lost"}'])
def broken_live_run(tmp_path, monkeypatch, request):
    monkeypatch.setenv(queue.MAX_RUNS_ENV, "1")
    runs = tmp_path / "runs"
    run_dir = runs / "20260101-000001-alice"
    process = sandboxed_run_with_a_live_process(run_dir)
    text = request.param if request.param != "big" else '{"state": "training", "x": "' + "a" * 5 * 2**20 + '"}'
    (run_dir / runfolder.STATUS_FILE).write_text(text)  # the run's code
    yield runs, run_dir
    process.kill()
    process.wait()
    for other in runfolder.list_run_dirs(runs):
        if other != run_dir:
            launcher.stop(other.name, runs, timeout=2)


def test_a_live_run_with_an_unreadable_status_still_holds_its_devices(broken_live_run):
    runs, run_dir = broken_live_run
    holding, _ = gpu_queue.queue_state(runs)
    assert run_dir.name in [entry.run_id for entry in holding], "the queue forgot a run whose processes still run"


def test_a_live_run_with_an_unreadable_status_still_counts_against_the_cap(broken_live_run):
    runs, _ = broken_live_run
    with pytest.raises(queue.UserLimitError):
        launcher.start(tiny_config(), runs, owner="alice", import_reward_file=False)
