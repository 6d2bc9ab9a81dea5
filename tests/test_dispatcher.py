"""The GPU queue for real: launches that wait, start by themselves, survive a restart, and never double-book.

Runs train the tiny model on this machine's CPU, which counts as one device: a
second run launched while one trains waits in the queue. A "holder" is a
plain sleeping process recorded as a run that trains on the CPU: it keeps a
queued run waiting for as long as a test needs, at no cost.
"""

import subprocess
import sys
import threading
import time

import psutil
import pytest
from helpers import poll_until as wait_for
from helpers import tiny_settings

from workbench.jobs import dispatcher, gpu_queue, launcher, queue, run_list, run_state
from workbench.runstore import checkpoint_integrity, run_locks, runfolder
from workbench.spec.config import RunConfig

TINY = tiny_settings(max_steps=1)


def stop_queued(runs):
    for entry in run_list.list_runs(runs):
        if entry["state"] == runfolder.QUEUED:
            launcher.stop(entry["run_id"], runs)


@pytest.fixture
def runs_dir(tmp_path):
    """A runs folder whose live runs are stopped and whose dispatcher has ended when the test is over."""
    runs = tmp_path / "runs"
    yield runs
    stop_queued(runs)  # the queued first, so stopping the others starts nothing
    for entry in run_list.list_runs(runs):
        if entry["state"] not in runfolder.FINAL_STATES:
            launcher.stop(entry["run_id"], runs, timeout=1)
    wait_for(lambda: not run_locks.dispatcher_running(runs), timeout=30)


@pytest.fixture
def holder(runs_dir):
    """`holder(name, owner=None)`: a run folder of a live process that trains on the CPU (a sleeping process)."""
    started = []

    def make(name="20260101-000000-holder", owner=None):
        process = subprocess.Popen(["sleep", "600"], start_new_session=True)
        started.append(process)
        run_dir = runs_dir / name
        RunConfig(**TINY).save(run_dir / runfolder.CONFIG_FILE)
        runfolder.update_status(
            run_dir, state="training", pid=process.pid, pgid=process.pid, step=1, started_at=time.time(), owner=owner
        )
        return process

    yield make
    stop_queued(runs_dir)
    for process in started:
        process.kill()
        process.wait()


def state_of(run_id, runs_dir):
    return run_state.status(run_id, runs_dir)["state"]


def dispatcher_processes(runs_dir):
    return [
        p
        for p in psutil.process_iter(["cmdline"])
        if gpu_queue.DISPATCHER_MODULE in (p.info["cmdline"] or []) and str(runs_dir) in p.info["cmdline"]
    ]


# ---------------------------------------------------------------- waiting, cancelling, the limit


@pytest.mark.slow
def test_a_launch_on_a_held_device_waits_and_stop_takes_it_out_of_the_queue(runs_dir, holder):
    holder()
    run_id = launcher.start(RunConfig(**TINY), runs_dir)
    assert gpu_queue.queue_place(run_id, runs_dir) == {
        "queue_position": 1,
        "waits_for": "the CPU (run 20260101-000000-holder)",
    }
    entry = next(e for e in run_list.list_runs(runs_dir) if e["run_id"] == run_id)
    assert entry["state"] == "queued" and entry["queue_position"] == 1 and "pid" not in entry
    wait_for(lambda: run_locks.dispatcher_running(runs_dir), timeout=30)  # it keeps looking while the run waits
    time.sleep(dispatcher.POLL_SECONDS + 0.5)
    assert state_of(run_id, runs_dir) == "queued"  # the holder still trains

    stopped = launcher.stop(run_id, runs_dir)
    assert stopped["state"] == "stopped" and stopped["note"] == "taken out of the queue before it started"
    assert RunConfig.load(runs_dir / run_id / runfolder.CONFIG_FILE).max_steps == 1  # nothing else lost
    wait_for(lambda: not run_locks.dispatcher_running(runs_dir), timeout=15)  # nothing queued: it ended


@pytest.mark.slow
def test_the_per_user_limit_counts_running_and_queued_runs(runs_dir, holder, monkeypatch):
    monkeypatch.setenv(queue.MAX_RUNS_ENV, "2")
    holder(owner="alice")
    queued = launcher.start(RunConfig(**TINY), runs_dir, owner="alice")
    assert state_of(queued, runs_dir) == "queued"
    with pytest.raises(
        queue.UserLimitError,
        match=rf"alice already has 2 runs running or queued "
        rf"\(20260101-000000-holder, {queued}\); each user may have 2",
    ):
        launcher.start(RunConfig(**TINY), runs_dir, owner="alice")
    assert len(run_list.list_runs(runs_dir)) == 2  # nothing was made for the refused launch
    bob = launcher.start(RunConfig(**TINY), runs_dir, owner="bob")
    assert gpu_queue.queue_place(bob, runs_dir)["queue_position"] == 2
    assert runfolder.read_status(runs_dir / bob)["owner"] == "bob"


@pytest.mark.slow
def test_the_backstop_starts_a_dispatcher_for_a_queue_left_without_one(runs_dir, holder):
    holder()
    run_id = launcher.start(RunConfig(**TINY), runs_dir)
    # as after a reboot: the queue is only files now (a dispatcher just spawned shows its command line only once
    # it has exec'd, which takes a moment on a busy machine)
    for process in wait_for(lambda: dispatcher_processes(runs_dir), timeout=30):
        process.kill()
    wait_for(lambda: not run_locks.dispatcher_running(runs_dir), timeout=30)
    assert run_list.keep_queue_moving(runs_dir) is True
    wait_for(lambda: run_locks.dispatcher_running(runs_dir), timeout=30)
    assert state_of(run_id, runs_dir) == "queued"
    assert run_list.keep_queue_moving(runs_dir) is False  # one is alive: no second one


@pytest.mark.slow
def test_a_resume_waits_in_the_queue_too_and_keeps_its_checkpoint(runs_dir, holder, make_checkpoint):
    run_dir = runs_dir / "20260102-000000-stopped"
    RunConfig(**TINY).save(run_dir / runfolder.CONFIG_FILE)
    make_checkpoint(run_dir, 1)
    runfolder.update_status(run_dir, state="stopped", step=1, note="stopped on request")
    holder()
    assert launcher.resume(run_dir.name, runs_dir) == run_dir.name
    status = gpu_queue.status_with_queue_place(run_dir)
    assert (status["state"], status["queued_resume"], status["queue_position"]) == ("queued", True, 1)
    assert status["note"] is None and status["step"] == 1
    assert launcher.stop(run_dir.name, runs_dir)["state"] == "stopped"
    assert checkpoint_integrity.last_checkpoint(run_dir).name == "checkpoint-1"


@pytest.mark.slow
def test_a_run_that_can_no_longer_start_when_its_turn_comes_fails_saying_why(runs_dir, holder, tmp_path):
    prompts = tmp_path / "prompts.jsonl"
    prompts.write_text('{"prompt": "Say hi."}\n' * 8)
    sleeping = holder()
    run_id = launcher.start(RunConfig(**TINY, reward_names=["brevity"], dataset_path=str(prompts)), runs_dir)
    prompts.unlink()  # gone while the run waited
    sleeping.kill()
    sleeping.wait()
    dispatcher.dispatch(runs_dir)  # the dispatcher process may have been first: either way, once
    status = run_state.status(run_id, runs_dir)
    assert status["state"] == "failed" and "pid" not in status
    assert status["error"]["message"].startswith("the run could not start when its turn in the queue came: ")
    assert "prompts.jsonl" in status["error"]["message"]


# ---------------------------------------------------------------- real runs through the queue


@pytest.mark.slow
def test_a_queued_run_starts_by_itself_when_the_run_before_it_ends(runs_dir):
    first = launcher.start(RunConfig(**TINY, run_name="first"), runs_dir)
    second = launcher.start(RunConfig(**TINY, run_name="second"), runs_dir)
    third = launcher.start(RunConfig(**TINY, run_name="third"), runs_dir)
    assert state_of(first, runs_dir) != "queued"
    assert gpu_queue.queue_place(second, runs_dir) == {"queue_position": 1, "waits_for": f"the CPU (run {first})"}
    assert gpu_queue.queue_place(third, runs_dir)["queue_position"] == 2
    launcher.stop(third, runs_dir)

    done = run_state.wait(first, runs_dir, timeout=240)
    assert done["state"] == "finished", (done.get("error"), runfolder.read_log_tail(runs_dir / first))
    final = run_state.wait(second, runs_dir, timeout=240)
    assert final["state"] == "finished", (final.get("error"), runfolder.read_log_tail(runs_dir / second))
    assert final["started_at"] >= done["updated_at"]  # it started once the first run had ended, not before
    assert final["step"] == 1 and final.get("queued_resume") is None
    log = (runs_dir / runfolder.DISPATCHER_LOG_FILE).read_text()
    assert f"started {second}" in log and f"started {third}" not in log
    wait_for(lambda: not run_locks.dispatcher_running(runs_dir), timeout=15)


@pytest.mark.slow
def test_the_queue_outlives_the_processes_that_kept_it(runs_dir, holder):
    sleeping = holder()
    run_id = launcher.start(RunConfig(**TINY), runs_dir)
    deadline = time.monotonic() + 30
    while not (dispatchers := dispatcher_processes(runs_dir)) and time.monotonic() < deadline:
        time.sleep(0.1)  # spawned, but between fork and exec it still shows this test's command line
    assert dispatchers, "the launcher started no dispatcher for the queued run"
    for process in dispatchers:
        process.kill()
    psutil.wait_procs(dispatchers, timeout=10)
    sleeping.kill()  # the run it waited for ends while nothing watches the queue
    sleeping.wait()
    time.sleep(1)
    assert state_of(run_id, runs_dir) == "queued"

    # a process that knows nothing but the runs folder (an app started again) moves the queue on
    look = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys; from workbench.jobs import dispatcher; print(dispatcher.dispatch(sys.argv[1]))",
            str(runs_dir),
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert look.returncode == 0 and look.stdout.strip() == "[]", look.stderr
    status = run_state.status(run_id, runs_dir)
    assert status["state"] in ("starting", "loading_model", "training"), status  # a live trainer took its turn
    assert psutil.pid_exists(status["pid"]) and status["started_at"] > status["queued_at"]
    # (that a run started by the queue trains to the end is the test above; this one stops it at teardown)


@pytest.mark.slow
def test_two_launches_at_once_for_one_device_start_one_and_queue_the_other(runs_dir):
    barrier = threading.Barrier(2)
    run_ids, errors = [], []

    def launch(name):
        barrier.wait()
        try:
            run_ids.append(launcher.start(RunConfig(**TINY, run_name=name), runs_dir))
        except Exception as exc:  # re-raised below, in the test's own thread
            errors.append(exc)

    threads = [threading.Thread(target=launch, args=(name,)) for name in ("left", "right")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert not errors, errors
    states = sorted(state_of(run_id, runs_dir) == "queued" for run_id in run_ids)
    assert states == [False, True]  # exactly one runs, the other waits for it
    assert len(set(run_ids)) == 2
