"""The bwrap command line that runs a command in a sandbox an `Exposure` describes, and whether bwrap can make one
here (SandboxError with what to install or change)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from workbench.errors import WorkbenchError
from workbench.jobs.sandbox_exposure import HIDDEN_CGROUPS, Exposure

BWRAP_ENV = "WORKBENCH_BWRAP"  # the bwrap binary to use (default: `bwrap` on PATH)
SUPERVISOR = Path(__file__).with_name("sandbox_init.py")  # the sandbox's init, run by path (standard library only)
INSTALL_HINT = (
    "install bubblewrap (Debian/Ubuntu: `apt-get install bubblewrap`; `make run` does it), and allow "
    "unprivileged user namespaces or run the dashboard as root"
)


class SandboxError(WorkbenchError):
    """A sandbox that cannot be built or started here; the message says what to install or change."""


BWRAP_MOUNT = {"empty": "--tmpfs", "read-only": "--ro-bind", "read-write": "--bind", "device": "--dev-bind"}


def bwrap_binary(env: dict | None = None) -> str | None:
    env = os.environ if env is None else env
    name = env.get(BWRAP_ENV) or "bwrap"
    return shutil.which(name) if os.sep not in name else (name if os.access(name, os.X_OK) else None)


def bwrap_command(exposed: Exposure, command: list[str], bwrap: str = "bwrap", foreground: bool = False) -> list[str]:
    """The argument list that runs `command` inside the sandbox `exposed` describes (pure).

    `foreground`: the sandbox dies with its caller (a terminal's run) and
    keeps its terminal; a background run outlives the app that started it,
    in a session of its own.
    """
    # in-memory folders: sized, and writable by every uid (the sandbox's own uid uses /tmp and /dev/shm)
    sized = ["--perms", "1777", *(["--size", str(exposed.limits.tmp)] if exposed.limits.tmp > 0 else [])]
    argv = [bwrap, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", *sized, "--tmpfs", "/dev/shm"]
    argv += _only_itself(exposed)
    for kind, path in exposed.mounts:
        if kind == "masked":
            argv += ["--ro-bind", "/dev/null", path]
        elif kind == "empty":
            argv += [*sized, "--tmpfs", path]
        else:
            argv += [*_reachable(path), BWRAP_MOUNT[kind], path, path]
    for host, inside in exposed.placed:
        argv += [*_reachable(inside), "--ro-bind", host, inside]
    # the supervisor is the namespace's init (--as-pid-1): when the command ends, so does every process left
    # with a uid of its own the init keeps only what it needs to become it (setuid then drops every capability)
    keep = [] if exposed.uid is None else ["--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID"]
    argv += [
        "--unshare-net",
        "--unshare-pid",
        "--as-pid-1",
        "--unshare-ipc",
        "--unshare-cgroup-try",
        "--cap-drop",
        "ALL",
        *keep,
        "--chdir",
        exposed.own_dir,
    ]
    argv += ["--die-with-parent"] if foreground else ["--new-session"]
    for key, value in exposed.env.items():
        argv += ["--setenv", key, value]
    supervisor = [
        sys.executable,
        "-I",
        str(SUPERVISOR),
        *exposed.limits.supervisor_args(exposed.own_dir),
        *([] if exposed.uid is None else ["--uid", str(exposed.uid)]),
        "--",
    ]
    return [*argv, "--", *supervisor, *command]


def _only_itself(exposed: Exposure) -> list[str]:
    """What hides the other sandboxes and the host's load: no control groups at all, and the sandbox's own
    /proc files over the host-wide ones (jobs/sandbox_proc.py)."""
    argv = ["--tmpfs", HIDDEN_CGROUPS, "--remount-ro", HIDDEN_CGROUPS]
    for host, inside in exposed.proc_files:
        argv += ["--ro-bind", host, inside]
    return argv


def _reachable(path: str) -> list[str]:
    """The folders above `path`, made usable by every uid where a hidden folder's tmpfs covers them (bwrap makes a
    mount point's missing parents private to root), writable as /tmp is: they lie in the sandbox's private
    memory, e.g. the scratch cache's folders. Folders that exist already are left as they are."""
    above = [str(parent) for parent in reversed(Path(path).parents) if str(parent) != "/"]
    return [arg for folder in above for arg in ("--perms", "1777", "--dir", folder)]


def check_available(env: dict | None = None) -> None:
    """SandboxError unless bwrap is installed and can make the namespaces a sandbox needs, here and now."""
    bwrap = bwrap_binary(env)
    if bwrap is None:
        raise SandboxError(
            field="sandbox",
            rule="bubblewrap (`bwrap`) is not installed, and a dashboard with accounts runs every run in its sandbox",
            fix=INSTALL_HINT,
        )
    probe = [
        bwrap,
        "--ro-bind",
        "/",
        "/",
        "--dev",
        "/dev",
        "--proc",
        "/proc",
        "--unshare-net",
        "--unshare-pid",
        "--cap-drop",
        "ALL",
        "--",
        "true",
    ]
    try:
        done = subprocess.run(probe, capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise SandboxError(field="sandbox", rule=f"bubblewrap could not start here ({exc})", fix=INSTALL_HINT) from None
    if done.returncode != 0:
        reason = (done.stderr or done.stdout).strip().splitlines()[-1:] or ["no reason given"]
        raise SandboxError(
            field="sandbox",
            rule=f"bubblewrap cannot create the sandbox's namespaces here ({reason[0][:200]})",
            fix=INSTALL_HINT,
        )
