"""The runs folder's locks and a run's stop request: who may check and claim the GPU queue, whether its
dispatcher is alive, who chooses a sandbox's uid, and asking a run to stop.

The file names are the run folder's (`runfolder.QUEUE_LOCK_FILE`, `DISPATCHER_LOCK_FILE`, `UID_LOCK_FILE`, `STOP_FILE`);
what is kept apart here is taking and testing them. The locks are fcntl.flock locks, which the kernel releases
when their holder dies, so a killed process never leaves the queue locked. `stop.request` is written, looked
for and removed through `safe_files`, never following a link a run's code planted in its place.

Standard library only (and the run folder's names): importable without torch or gradio.
"""

from __future__ import annotations

import fcntl
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO

from workbench.runstore import runfolder, safe_files


@contextmanager
def held(path: str | os.PathLike, mode: int = 0o600) -> Iterator[None]:
    """Hold the lock file `path` (fcntl.flock, made if missing): the kernel releases it when its holder dies.

    Not reentrant: a second hold of the same file, even from the same process, waits for the first to end."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, mode), "ab") as handle:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)


@contextmanager
def queue_lock(root: str | os.PathLike) -> Iterator[None]:
    """Hold the runs folder's queue lock: two launches (or a launch and the dispatcher) check and claim in turn.

    fcntl.flock on `.queue.lock`: the kernel releases it when its holder dies,
    so a killed process never leaves the queue locked.
    """
    Path(root).mkdir(parents=True, exist_ok=True)
    with held(Path(root) / runfolder.QUEUE_LOCK_FILE, 0o666):
        yield


@contextmanager
def uid_lock(root: str | os.PathLike) -> Iterator[None]:
    """Hold the runs folder's uid lock: two sandboxes starting at once (runs, checks, helpers) choose their uids in
    turn (jobs/run_uids.py). A lock of its own, apart from the queue lock: a helper chooses its uid while its
    caller already holds that one (and a hold is not reentrant)."""
    Path(root).mkdir(parents=True, exist_ok=True)
    with held(Path(root) / runfolder.UID_LOCK_FILE):
        yield


def hold_dispatcher_lock(root: str | os.PathLike) -> IO | None:
    """The open, locked `.queue-dispatcher.lock` (closing it lets go), or None while another process holds it.

    The launcher takes it and hands it to the dispatcher it starts, so there is
    no moment at which a dispatcher runs without holding it.
    """
    root = Path(root)
    root.mkdir(parents=True, exist_ok=True)
    handle = open(root / runfolder.DISPATCHER_LOCK_FILE, "ab")
    try:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        handle.close()
        return None
    return handle


def dispatcher_running(root: str | os.PathLike) -> bool:
    """Whether a process holds the folder's dispatcher lock (a dispatcher is alive).

    Read from the kernel's table of locks (/proc/locks), without taking the
    lock: a look must never make a launcher think a dispatcher runs.
    """
    try:
        info = os.stat(Path(root) / runfolder.DISPATCHER_LOCK_FILE)
    except FileNotFoundError:
        return False
    device = f"{os.major(info.st_dev):02x}:{os.minor(info.st_dev):02x}:{info.st_ino}"
    with open("/proc/locks", encoding="ascii") as table:  # "1: FLOCK  ADVISORY  WRITE 1234 08:01:5678 0 EOF"
        return any(fields[1] == "FLOCK" and fields[5] == device for fields in map(str.split, table))


def request_stop(run_dir: str | os.PathLike) -> None:
    """Ask the run's trainer to stop after its current step (and save its adapter).

    A link or FIFO planted as stop.request is removed and a fresh file made: Stop never writes through it.
    """
    safe_files.write_file(Path(run_dir) / runfolder.STOP_FILE, f"{time.time()}\n".encode())


def stop_requested(run_dir: str | os.PathLike) -> bool:
    """Whether stop.request is there (anything by that name: the trainer stops; nothing is read or followed)."""
    return safe_files.lstat(Path(run_dir) / runfolder.STOP_FILE) is not None


def clear_stop_request(run_dir: str | os.PathLike) -> None:
    """Remove stop.request (a link itself, never what it points to)."""
    safe_files.unlink(Path(run_dir) / runfolder.STOP_FILE)
