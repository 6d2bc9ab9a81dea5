"""The uid of its own a server running as root runs each sandbox as: which uid, whether it can reach what the
sandbox shows, and handing it the run's folder (and read access to the workbench's shared folders).

A uid of its own keeps one run's processes from another's (signals, /proc) and from the server's files; every
change here goes through descriptors, never a link, since a run's code may swap its files for links meanwhile.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from workbench.jobs.run_uids import sandbox_uid
from workbench.jobs.sandbox_paths import is_under


def run_uid(own_dir: str | os.PathLike, runs_root: str | os.PathLike | None = None) -> int | None:
    """The uid the sandbox writing `own_dir` (in the runs folder `runs_root`, its parent when not given) runs as:
    one of RUN_UIDS the server chose (jobs/run_uids.py), never one derived from the folder's name, when the
    server runs as root; None otherwise (an unprivileged bwrap's user namespace already maps it to the server's
    own uid)."""
    if os.geteuid() != 0:
        return None
    return sandbox_uid(own_dir, Path(own_dir).parent if runs_root is None else runs_root)


def all_reachable(mounts, shared) -> bool:
    """Whether a uid of the run's own can reach everything the sandbox shows: each folder on the way that is the
    host's (not rebuilt in a hidden folder's tmpfs) lets others through, and what is shown read-only lets others
    read it (the workbench's own folders, `shared`, are made so). Where not (a checkout in a private folder),
    the sandbox keeps the server's uid rather than break the run."""
    hidden = [path for kind, path in mounts if kind == "empty"]
    shown = [(kind, path) for kind, path in mounts if kind in ("read-only", "read-write")]
    for kind, path in shown:
        parents = [str(parent) for parent in Path(path).parents if str(parent) != "/"]
        if any(not is_under(parent, hidden) and not os.stat(parent).st_mode & stat.S_IXOTH for parent in parents):
            return False
        needed = stat.S_IROTH | (stat.S_IXOTH if os.path.isdir(path) else 0)
        if kind == "read-only" and not is_under(path, shared) and os.stat(path).st_mode & needed != needed:
            return False
    return True


def hand_over(own_dir: str, uid: int) -> None:
    """Make the run's folder, and everything in it, the run uid's. The run's code may still swap a folder for a
    link while this walks (a live run's helper starting), so the walk holds each folder open and changes its
    entries relative to it, never following a link (os.fwalk checks each folder it enters is the one it
    listed)."""
    os.chown(own_dir, uid, uid, follow_symlinks=False)
    for _, dirs, files, folder_fd in os.fwalk(own_dir, follow_symlinks=False):
        for name in (*dirs, *files):
            try:
                os.chown(name, uid, uid, dir_fd=folder_fd, follow_symlinks=False)
            except FileNotFoundError:  # removed since the listing
                pass


_NO_LINK = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


def _open_no_link(path: str) -> int:
    """`path` (a real path) opened one part at a time, none of them a link (OSError if one is: made since)."""
    fd = os.open("/", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        for part in Path(path).parts[1:]:
            next_fd = os.open(part, _NO_LINK, dir_fd=fd)
            os.close(fd)
            fd = next_fd
    except OSError:
        os.close(fd)
        raise
    return fd


def _let_read(fd: int) -> None:
    """Files gain read, folders read and search permission, for every uid; anything else is left alone."""
    mode = os.fstat(fd).st_mode
    added = 0o555 if stat.S_ISDIR(mode) else 0o444 if stat.S_ISREG(mode) else 0
    if added and stat.S_IMODE(mode) | added != stat.S_IMODE(mode):
        os.fchmod(fd, stat.S_IMODE(mode) | added)


def share_read_only(folders) -> None:
    """Let every uid read `folders` (files and folders in them): they are shown to a sandbox read-only, and its
    processes run as a uid of their own. Each is opened and changed through descriptors, never through a link
    (a user's other run may still be swapping its files for links)."""
    for top in folders:
        try:
            top_fd = _open_no_link(top)
        except OSError:  # gone, or a link now: not shown readable
            continue
        try:
            _let_read(top_fd)
            if not stat.S_ISDIR(os.fstat(top_fd).st_mode):
                continue
            for _, dirs, files, folder_fd in os.fwalk(".", dir_fd=top_fd, follow_symlinks=False):
                for name in (*dirs, *files):
                    try:
                        fd = os.open(name, _NO_LINK, dir_fd=folder_fd)
                    except OSError:  # a link, or gone
                        continue
                    try:
                        _let_read(fd)
                    finally:
                        os.close(fd)
        finally:
            os.close(top_fd)
