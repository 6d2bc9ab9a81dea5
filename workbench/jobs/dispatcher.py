"""The GPU queue's dispatcher: it starts queued runs as their devices free up, one process per runs folder.

    python -m workbench.jobs.dispatcher --runs-dir RUNS

The launcher starts it when it queues a run (`gpu_queue.ensure_dispatcher`), in
a session of its own: it outlives the app that started it, needs no browser,
and notices a run that ends in any way (finished, stopped, failed, killed with
SIGKILL, out of memory) because it looks at the run folders and at the
processes themselves, every POLL_SECONDS. It ends by itself once nothing is
queued (and, when the admin set a run-time cap or a disk total, once no run is live: jobs/warden.py keeps those
caps on every turn).

One at a time: it holds `.queue-dispatcher.lock` for its whole life
(fcntl.flock, which the kernel releases however it ends); the launcher takes
the lock before it starts one and hands it over (`--lock-fd`), so no second one
is started while one runs. It decides to end while it holds the queue lock,
and lets go of its own lock first: a launch that queues a run after its last
look finds no dispatcher and starts a new one, so a queued run is never left
without one.
After a reboot nothing runs; the app's start, each Runs-tab refresh and
`python -m workbench runs` start a dispatcher again when a run is queued
(`run_list.keep_queue_moving`).

`dispatch` is the one step, safe to call from any process at any time: under
the queue lock, each queued run starts once. Its output (what it started, and
when) goes to `.queue-dispatcher.log` in the runs folder.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import traceback
from pathlib import Path

from workbench.jobs import gpu_queue, launcher, queue, warden
from workbench.runstore import launch_records, run_locks, runfolder

POLL_SECONDS = 2.0  # how soon a queued run starts after its devices are free


def dispatch(runs_dir: str | os.PathLike | None = None) -> list[str]:
    """Start every queued run whose devices are free, in queue order; returns the ids of those still waiting."""
    root = runfolder.runs_root(runs_dir)
    with run_locks.queue_lock(root):
        return [entry.run_id for entry in dispatch_held(root)[0]]


def dispatch_held(root: Path) -> tuple[list[queue.Entry], list[str]]:
    """`dispatch` for a caller that holds the queue lock: (runs still queued, runs started)."""
    holding, queued = gpu_queue.queue_state(root)
    due = [place.entry for place in queue.plan(queued, holding) if place.may_start]
    started = [entry.run_id for entry in due if start_queued(root / entry.run_id)]
    return [entry for entry in queued if entry not in due], started


def start_queued(run_dir: Path) -> bool:
    """Start a queued run whose turn has come; one that can no longer start ends `failed`, saying why."""
    record = launch_records.read_record(run_dir)
    # the launcher's record says whether it resumes and with which config (the run folder's files are the run's)
    resume = record.resume if record is not None else bool(runfolder.read_run_status(run_dir).queued_resume)
    try:
        config = launcher.recorded_config(run_dir)
        # checked again (a file may have moved meanwhile), read not run: the reward file runs only in training
        launcher.check_launch(
            config, import_reward_file=False, read_data=not (record is not None and record.sandboxed)
        )  # a sandbox's data: inside it
        now = time.time()
        launcher.start_process(
            config, run_dir, resume, queued_resume=None, **({"resumed_at": now} if resume else {"started_at": now})
        )
    except (OSError, ValueError) as exc:  # ValueError covers ConfigError and the other WorkbenchErrors
        runfolder.update_status(
            run_dir,
            state="failed",
            finished_at=time.time(),
            queued_resume=None,
            error={
                "type": type(exc).__name__,
                "message": f"the run could not start when its turn in the queue came: {exc}",
                "hint": "Something changed while it waited (a file moved, a port taken). Fix what the message says "
                "and launch it again.",
                "traceback_tail": traceback.format_exc()[-2000:],
            },
        )
        return False
    return True


def _say(text: str) -> None:
    print(f"{time.strftime('%Y-%m-%d %H:%M:%S')} [dispatcher {os.getpid()}] {text}", flush=True)


def run(root: Path, poll: float = POLL_SECONDS, lock_fd: int | None = None) -> int:
    """Start queued runs as their turn comes until none is queued; returns at once when another dispatcher runs.

    `lock_fd`: the dispatcher lock, already held (handed over by the launcher).
    """
    held = os.fdopen(lock_fd, "ab") if lock_fd is not None else run_locks.hold_dispatcher_lock(root)
    if held is None:
        return 0
    _say(f"watching the queue of {root}")
    disk_due = 0.0
    with held:
        while True:
            now = time.monotonic()
            if warden.watching():  # the admin's caps on live runs (a run-time cap, disk totals)
                warden.look(root, disk=now >= disk_due)
                disk_due = disk_due if now < disk_due else now + warden.DISK_LOOK_S
            with run_locks.queue_lock(root):
                waiting, started = dispatch_held(root)
                for run_id in started:
                    _say(f"started {run_id}")
                if not waiting and not (warden.watching() and warden.live_runs(root)):
                    held.close()  # before the queue lock: a launch queued after this look starts a new dispatcher
                    _say("nothing queued: done")
                    return 0
            time.sleep(poll)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Start the runs folder's queued runs as their devices free up.")
    parser.add_argument("--runs-dir", required=True, type=Path, help="the runs folder whose queue to keep")
    parser.add_argument("--poll", type=float, default=POLL_SECONDS, help="seconds between looks")
    parser.add_argument("--lock-fd", type=int, help="the dispatcher lock's descriptor, held already (the launcher's)")
    args = parser.parse_args(argv)
    return run(args.runs_dir.resolve(), args.poll, args.lock_fd)


if __name__ == "__main__":
    sys.exit(main())
