"""Process helpers shared by every background job: training runs, sampling jobs, probes.

Each job is started from an argument list (never a shell) in a session of its
own, so it outlives the caller and can be ended as a whole: `end_tree` signals
the process group and every descendant (torchrun puts its workers in sessions
of their own, so the group alone does not reach them).
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path
from typing import IO

from workbench.runstore import safe_files
from workbench.sources.gpus import visible_devices

# The folder holding the `workbench` package: children get it on PYTHONPATH so
# `python -m workbench ...` finds this copy whatever their working directory.
PROJECT_ROOT = Path(__file__).resolve().parents[2]


def job_env(base: dict | None = None) -> dict:
    """Environment for a `python -m workbench ...` child: this package importable, output unbuffered."""
    env = dict(os.environ if base is None else base)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(PROJECT_ROOT), env.get("PYTHONPATH", "")) if p)
    env["PYTHONUNBUFFERED"] = "1"  # logs should show output as it happens
    return env


def training_env(gpu_ids: list[int], device: str, base: dict | None = None) -> dict:
    """Environment for a training process: `job_env` plus CUDA_VISIBLE_DEVICES from the choice.

    device "cpu" hides all GPUs so nothing lands on one by accident; no gpu_ids
    on a GPU machine leaves the caller's visibility as it is.
    """
    env = job_env(base)
    if device == "cpu":
        env["CUDA_VISIBLE_DEVICES"] = ""
    elif gpu_ids:
        env["CUDA_VISIBLE_DEVICES"] = visible_devices(gpu_ids)
    return env


def _log_file(log: str | os.PathLike | IO[bytes], append: bool) -> AbstractContextManager[IO[bytes]]:
    """The log to write to: a path opened without following a link (a run's own code can write in its
    folder: a link or FIFO planted as its log is replaced by a fresh file), or a file the caller opened."""
    if hasattr(log, "fileno"):
        return nullcontext(log)  # the caller's to close
    return safe_files.open_for_writing(log, append=append)


def spawn(
    command: list[str],
    log_path: str | os.PathLike | IO[bytes],
    env: dict,
    cwd: str | os.PathLike | None = None,
    append: bool = False,
    reap: bool = False,
    pass_fds: tuple[int, ...] = (),
) -> subprocess.Popen:
    """Start `command` in its own session with stdout and stderr in `log_path`; returns at once.

    `log_path`: the log's path (appended to, or emptied first unless `append`;
    opened through `runstore.safe_files`), or a binary file already open for
    writing, which is left open. `reap=True` waits for the child on a daemon
    thread, so a long-lived caller that never waits itself leaves no zombie
    behind. `pass_fds` stay open in the child under the same numbers (every
    other descriptor is closed there).
    """
    with _log_file(log_path, append) as log:
        if append:
            log.write(f"$ {' '.join(command)}\n".encode())
            log.flush()
        process = subprocess.Popen(
            command,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            env=env,
            cwd=None if cwd is None else str(cwd),
            start_new_session=True,
            pass_fds=pass_fds,
        )
    if reap:
        threading.Thread(target=process.wait, name=f"reap-{process.pid}", daemon=True).start()
    return process


def process_tree(pid: int | None) -> list:
    """The process and all its descendants, as psutil handles ([] when it is gone)."""
    if not pid:
        return []
    import psutil

    try:
        parent = psutil.Process(int(pid))
        return [parent, *parent.children(recursive=True)]
    except psutil.NoSuchProcess:
        return []


def signal_tree(processes: list, pgid: int | None, sig: int) -> None:
    """Send `sig` to the process group `pgid` and to each of `processes`, ignoring those already gone."""
    import psutil

    if pgid:
        try:
            os.killpg(int(pgid), sig)
        except (ProcessLookupError, PermissionError):
            pass  # the group is already gone
    for process in processes:
        try:
            process.send_signal(sig)
        except psutil.NoSuchProcess:
            pass


def end_tree(
    pid: int | None, grace: float = 5.0, hold: Callable[[], bool] | None = None, hold_limit: float = 600.0
) -> None:
    """SIGTERM the job `pid` (its group and descendants), SIGKILL whatever is left after `grace` seconds.

    While `hold()` is true (a run writing its adapter) the SIGKILL waits, up to
    `hold_limit` seconds more: a kill halfway through a save would lose it.
    """
    import psutil

    processes = process_tree(pid)
    signal_tree(processes, pid, signal.SIGTERM)
    alive = psutil.wait_procs(processes, timeout=grace)[1]
    deadline = time.monotonic() + hold_limit
    while alive and hold is not None and hold() and time.monotonic() < deadline:
        alive = psutil.wait_procs(alive, timeout=0.5)[1]
    signal_tree([p for p in processes if p.is_running()], pid, signal.SIGKILL)


def alive(pid: int | None, not_after: float | None = None) -> bool:
    """True while `pid` runs and is not a zombie (and, when given, started before `not_after`)."""
    if not pid:
        return False
    import psutil

    try:
        process = psutil.Process(int(pid))
        if process.status() == psutil.STATUS_ZOMBIE:
            return False
        # a pid reused by a process born after the run's last heartbeat is not the run
        return not_after is None or process.create_time() <= not_after + 1.0
    except (psutil.NoSuchProcess, psutil.AccessDenied, ValueError):
        return False


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port nothing listens on right now (for a rendezvous or a server)."""
    with socket.socket() as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]
