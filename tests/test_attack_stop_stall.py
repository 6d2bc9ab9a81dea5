"""Attack: a run makes Stop wait for it forever (or for 30 minutes), holding every user's Stop button.

`launcher.stop` waits for a graceful stop `graceful_wait_seconds(timeout, step_time)`, where step_time is
the last one the run wrote into its own metrics.jsonl: a run that writes `step_time: 1e9` and keeps its
process going makes Stop wait 2e9 s. A run whose status.json says `saving` is waited for 900 s before any
kill, and the kill then waits 900 s more while it still says so. The Train tab's Stop event runs at
Gradio's default concurrency of 1 for all users, so while one such Stop waits no other user's Stop runs.
Stop must end a run that does not stop on request within its own timeout (plus the kill's grace).
"""

from __future__ import annotations

import threading

import pytest
from helpers import sandboxed_run_with_a_live_process

from workbench.jobs import launcher
from workbench.runstore import runfolder

BOUND_S = 25.0  # Stop's timeout here is 2 s, its kill's grace 5 s


@pytest.fixture
def live_run(tmp_path, monkeypatch):
    monkeypatch.setenv("WORKBENCH_SANDBOX_STOP_WAIT_S", "5")  # the admin's cap on waiting for what a run says
    runs = tmp_path / "runs"
    run_dir = runs / "20260101-000001-alice"
    process = sandboxed_run_with_a_live_process(run_dir)
    yield runs, run_dir, process
    process.kill()
    process.wait()


def stop_within(runs, run_dir, process) -> bool:
    done = []
    thread = threading.Thread(target=lambda: done.append(launcher.stop(run_dir.name, runs, timeout=2)), daemon=True)
    thread.start()
    thread.join(BOUND_S)
    ended = process.poll() is not None
    process.kill()  # lets a stop still waiting return (the process is gone: `failed`)
    thread.join(30)
    return bool(done) and ended


@pytest.mark.slow
def test_a_step_time_the_run_wrote_does_not_make_stop_wait_forever(live_run):
    runs, run_dir, process = live_run
    runfolder.update_status(run_dir, state="training", step=1)
    runfolder.append_jsonl(
        run_dir / runfolder.METRICS_FILE, [{"step": 1, "loss": 0.0, "reward": 0.0, "step_time": 1e9}]
    )
    assert stop_within(runs, run_dir, process), f"Stop did not end the run within {BOUND_S} s (step_time 1e9)"


@pytest.mark.slow
def test_a_run_that_says_it_is_saving_forever_is_still_stopped(live_run):
    runs, run_dir, process = live_run
    runfolder.update_status(run_dir, state="saving", step=1)
    assert stop_within(runs, run_dir, process), f"Stop did not end the run within {BOUND_S} s (state `saving`)"


@pytest.mark.slow  # builds the whole app
def test_one_users_stop_does_not_hold_every_other_users_stop(tmp_path):
    from workbench.access import users
    from workbench.ui.app import build_app

    app = build_app(tmp_path / "runs", users={"alice": users.User("alice", "user", "")})
    (stop,) = [fn for fn in app.fns.values() if fn.fn is not None and fn.fn.__name__ == "on_stop"]
    limit = stop.concurrency_limit if stop.concurrency_limit != "default" else app._queue.default_concurrency_limit
    assert limit is None or limit > 1, "the Stop event runs one at a time for all users (Gradio's default of 1)"
