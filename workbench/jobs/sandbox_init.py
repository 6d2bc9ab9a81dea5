"""The first process inside a run's sandbox: it starts the run, reaps, forwards stops, and holds the run's limits.

bwrap runs it as the PID namespace's init (`--as-pid-1`), by path, with the
standard library only (`python -I`), so it starts in milliseconds and trusts
nothing of the run's folder. Its jobs:

- become the run's own uid (`--uid`, given when the server runs as root):
  bwrap leaves this process only the capabilities to change uid and gid,
  and changing to a uid other than 0 drops those too, so the run holds none
  and is no longer root as the host sees it; the kernel then also counts
  its processes and threads against RLIMIT_NPROC;
- start the command (the trainer) with the run's resource limits set: memory
  (RLIMIT_DATA: what a process may allocate; GPU drivers' reserved address
  space is not counted, unlike RLIMIT_AS) and the size of any one file
  (RLIMIT_FSIZE);
- reap every process that ends in the namespace (orphans, double-forked ones
  included, are re-parented to it);
- forward SIGTERM, SIGINT and SIGHUP to the command, which takes them as a
  stop request;
- make the run's processes the kernel's first choice when memory runs out
  (`--oom-score-adj`, raised before anything of the run starts; without
  CAP_SYS_RESOURCE no process of the run can lower it again);
- watch, every WATCH_SECONDS, what the run's folder holds on disk, what its
  in-memory folders hold together (each has a size, their total is bounded
  here) and how many processes run in the namespace; past a limit it says so
  in the log and in status.json and ends the run;
- exit as soon as the command exits, with its exit code: when a PID
  namespace's init exits, the kernel kills every process left in it, so nothing
  a run started outlives it.

Usage (jobs/sandbox.py builds it): python -I sandbox_init.py --watch DIR
[--memory BYTES] [--file-size BYTES] [--disk BYTES] [--processes N] [--in-memory BYTES]
[--shared-memory BYTES] [--oom-score-adj N] [--uid UID] -- COMMAND...

Its other use, outside the sandbox, before bwrap: `python -I sandbox_init.py [--oom-score-adj N] --join
PROCS... -- bwrap ...`
puts this process into the run's control groups (jobs/run_cgroup.py) and becomes the command, so the whole
sandbox and everything in it is counted there.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import platform
import resource
import signal
import struct
import subprocess
import sys
import tempfile
import time

WATCH_SECONDS = 1.0  # how often the folder's size and the process count are looked at
STOP_GRACE_SECONDS = 10.0  # after a limit's SIGTERM, how long the command has before everything is killed
FORWARDED = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
STATUS_FILE = "status.json"


def say(text: str) -> None:
    """One line in the run's log (this process's stderr is the run's train.log)."""
    print(f"[sandbox] {text}", file=sys.stderr, flush=True)


PR_SET_NO_NEW_PRIVS = 38  # prctl: no execve may grant privileges again (set-uid files, file capabilities)


def become(uid: int) -> None:
    """Drop to `uid` (and the group of the same number), with no supplementary groups and no capabilities,
    for good: no program the run executes can gain any back."""
    import ctypes

    os.setgroups([])
    os.setresgid(uid, uid, uid)
    os.setresuid(uid, uid, uid)
    if ctypes.CDLL(None, use_errno=True).prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_NO_NEW_PRIVS) failed")


def set_limits(memory: int | None, file_size: int | None) -> None:
    """The limits every process of the run inherits (None: none set here)."""
    if memory:
        resource.setrlimit(resource.RLIMIT_DATA, (memory, memory))
    if file_size:
        resource.setrlimit(resource.RLIMIT_FSIZE, (file_size, file_size))


def folder_bytes(folder: str) -> int:
    """What `folder` holds: each file's allocated blocks or its length, whichever is more (a sparse file counts
    at its length, which is what its readers would face), links never followed. A folder the run made
    unreadable is made readable to its owner again (the run's uid, which this process runs as): nothing it
    writes hides from the count."""
    total = 0
    pending = [folder]
    while pending:
        current = pending.pop()
        try:
            entries = list(os.scandir(current))
        except PermissionError:
            try:
                os.chmod(current, 0o700)
                entries = list(os.scandir(current))
            except OSError:  # not the run's own: it could not have written there either
                continue
        except OSError:  # removed meanwhile
            continue
        for entry in entries:
            try:
                info = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            total += max(info.st_blocks * 512, info.st_size)
            if entry.is_dir(follow_symlinks=False):
                pending.append(entry.path)
    return total


def in_memory_bytes() -> int:
    """What the namespace's in-memory folders (every writable tmpfs mounted in it: /tmp, /dev/shm, the hidden
    homes; the host's, shown read-only, are not the run's) hold together, each file system counted once."""
    seen, total = set(), 0
    try:
        with open("/proc/self/mounts", encoding="utf-8") as handle:
            fields = [line.split() for line in handle]
        mounts = [f[1] for f in fields if len(f) > 3 and f[2] == "tmpfs" and "ro" not in f[3].split(",")]
    except OSError:
        return 0
    for point in mounts:
        point = point.replace("\\040", " ")
        try:
            device = os.stat(point).st_dev
            info = os.statvfs(point)
        except OSError:
            continue
        if device in seen:
            continue
        seen.add(device)
        total += (info.f_blocks - info.f_bfree) * info.f_frsize
    return total


def set_oom_score_adj(value: int) -> None:
    """This process's (and so everything it starts) OOM killer priority; raising it needs no privilege."""
    if value:
        try:
            with open("/proc/self/oom_score_adj", "w") as handle:
                handle.write(str(value))
        except OSError as exc:  # an older kernel: the memory limits still hold
            say(f"could not raise the OOM killer's priority ({exc})")


def process_count() -> int:
    """The processes of this PID namespace (its own /proc lists only them)."""
    return sum(1 for name in os.listdir("/proc") if name.isdigit())


def mark_failed(folder: str, message: str, hint: str) -> None:
    """Write the run's status as failed with `message` (a plain, atomic rewrite: nothing here is trusted)."""
    path = os.path.join(folder, STATUS_FILE)
    try:
        with open(path, encoding="utf-8") as handle:
            status = json.load(handle)
        status = status if isinstance(status, dict) else {}
    except (OSError, ValueError, RecursionError):  # RecursionError: the run's code nested it past Python's stack
        status = {}
    status.update(
        state="failed",
        finished_at=time.time(),
        updated_at=time.time(),
        error={"type": "SandboxLimit", "message": message, "hint": hint, "traceback_tail": ""},
    )
    try:
        fd, tmp = tempfile.mkstemp(prefix=".status.json.", dir=folder)
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            json.dump(status, handle, indent=2)
        os.replace(tmp, path)
    except OSError as exc:  # a full disk: the log line above still says it
        say(f"could not write status.json ({exc})")


def _size(size: int) -> str:
    return f"{size / 2**30:.1f} GiB" if size >= 2**30 else f"{size / 2**20:.1f} MiB"


def limit_broken(args) -> tuple[str, str] | None:
    """(message, hint) when the run is past its disk or process limit, else None."""
    if args.disk and folder_bytes(args.watch) > args.disk:
        return (
            f"the run's folder holds more than its limit of {_size(args.disk)} on disk (WORKBENCH_RUN_DISK_GB, or "
            "for a helper job, what its owner has left of WORKBENCH_USER_DISK_GB)",
            "Save less often (save_steps, save_total_limit), delete runs you no longer need, or ask the admin for "
            "more (WORKBENCH_RUN_DISK_GB, WORKBENCH_USER_DISK_GB).",
        )
    if args.in_memory and in_memory_bytes() > args.in_memory:
        return (
            f"the run's in-memory folders (/tmp, /dev/shm, /var/tmp, the homes) hold more than their limit of "
            f"{args.in_memory / 2**30:.1f} GiB together",
            "Write large files to the run's own folder, or ask the admin for more (WORKBENCH_RUN_TMP_GB).",
        )
    if args.processes and process_count() > args.processes:
        return (
            f"the run started more than its limit of {args.processes} processes",
            "A reward that starts processes must end them; ask the admin for more (WORKBENCH_RUN_PROCESSES).",
        )
    return None


def exit_code(status: int) -> int:
    """The shell's exit code for a wait status: the code, or 128 + the signal that ended it."""
    return os.waitstatus_to_exitcode(status) if os.WIFEXITED(status) else 128 + os.WTERMSIG(status)


def explain_signal(status: int, args) -> None:
    """Say in the log when the command was ended by its file-size limit (the kernel's SIGXFSZ), or killed, which
    in a sandbox is most often its memory limit's doing (the kernel's OOM killer in the run's control group)."""
    if os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL and args.memory:
        shared = f" or all sandboxes' {args.shared_memory / 2**30:.1f} GiB together" if args.shared_memory else ""
        message = (
            f"the run was killed (SIGKILL), most likely at its memory limit of {args.memory / 2**30:.1f} GiB "
            f"for all its processes{shared}"
        )
        say(message)
        mark_failed(
            args.watch,
            message,
            "Lower per_device_train_batch_size, num_generations or max_completion_length, or ask the admin "
            "for more (WORKBENCH_RUN_MEMORY_GB" + (", WORKBENCH_SANDBOX_MEMORY_GB)." if shared else ")."),
        )
    if os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGXFSZ:
        message = f"a file of the run reached the limit of {args.file_size / 2**30:.1f} GiB a file"
        say(message)
        mark_failed(args.watch, message, "Write smaller files, or ask the admin for more (WORKBENCH_RUN_FILE_GB).")


# A sandbox may not make user namespaces of its own: in one, its processes hold every capability over namespaces
# they make next, so a mount namespace with a tmpfs of their own (which no watch here sees: the in-memory total
# reads this namespace's mounts) and all of the kernel a user namespace opens. A seccomp filter, inherited by
# everything the command starts, refuses unshare and clone with CLONE_NEWUSER (EPERM) and clone3 (ENOSYS, whose
# flags it cannot read: libc then falls back to clone), and the x32 calls of an x86-64 kernel.
CLONE_NEWUSER = 0x10000000
SECCOMP_ARCHES = {  # platform.machine(): (AUDIT_ARCH_*, unshare, clone, clone3)
    "x86_64": (0xC000003E, 272, 56, 435),
    "aarch64": (0xC00000B7, 97, 220, 435),
}


def _seccomp_program(arch: int, unshare: int, clone: int, clone3: int) -> bytes:
    """The classic BPF program of the filter (struct sock_filter entries: code, jt, jf, k)."""
    load, jeq, jge, jset, ret = 0x20, 0x15, 0x35, 0x45, 0x06
    allow, eperm, enosys = 0x7FFF0000, 0x00050000 | 1, 0x00050000 | 38
    program = [
        (load, 0, 0, 4),  # 0: the call's architecture
        (jeq, 0, 7, arch),  # 1: another one (a 32-bit call on a 64-bit kernel has its own numbers): allowed
        (load, 0, 0, 0),  # 2: the call's number
        (jge, 7, 0, 0x40000000),  # 3: an x32 call: refused
        (jeq, 2, 0, unshare),  # 4
        (jeq, 1, 0, clone),  # 5
        (jeq, 3, 2, clone3),  # 6: refused as unknown, else allowed
        (load, 0, 0, 16),  # 7: the flags (the first argument's low half)
        (jset, 2, 0, CLONE_NEWUSER),  # 8: a new user namespace: refused, else allowed
        (ret, 0, 0, allow),  # 9
        (ret, 0, 0, enosys),  # 10
        (ret, 0, 0, eperm),  # 11
    ]
    return b"".join(struct.pack("HBBI", *entry) for entry in program)


def refuse_user_namespaces() -> None:
    """Install the filter on this process (bwrap set no_new_privs, which a filter needs without privilege)."""
    numbers = SECCOMP_ARCHES.get(platform.machine())
    if numbers is None:  # an architecture whose numbers this does not know: the other limits still hold
        say(f"user namespaces stay open to the run on {platform.machine()}")
        return
    code = _seccomp_program(*numbers)
    buffer = ctypes.create_string_buffer(code, len(code))
    fprog = struct.pack("HxxxxxxQ", len(code) // 8, ctypes.addressof(buffer))
    fprog_buffer = ctypes.create_string_buffer(fprog, len(fprog))
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl.argtypes = [ctypes.c_int, *[ctypes.c_ulong] * 4]
    libc.prctl(38, 1, 0, 0, 0)  # PR_SET_NO_NEW_PRIVS, in case bwrap did not
    if libc.prctl(22, 2, ctypes.addressof(fprog_buffer), 0, 0) != 0:  # PR_SET_SECCOMP, SECCOMP_MODE_FILTER
        say(f"could not refuse user namespaces to the run (errno {ctypes.get_errno()})")


def supervise(args, command: list[str]) -> int:
    set_oom_score_adj(args.oom_score_adj)
    refuse_user_namespaces()
    if args.uid:
        become(args.uid)
        if args.processes:  # per uid: the run's processes and threads, whatever namespace they are in
            resource.setrlimit(resource.RLIMIT_NPROC, (args.processes, args.processes))
    child = subprocess.Popen(command, preexec_fn=lambda: set_limits(args.memory, args.file_size))

    def forward(signum, frame):
        try:
            child.send_signal(signum)
        except ProcessLookupError:
            pass

    for signum in FORWARDED:
        signal.signal(signum, forward)
    ending_since = None
    next_look = time.monotonic() + WATCH_SECONDS
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            pid, status = 0, 0
        if pid == child.pid:
            explain_signal(status, args)
            return exit_code(status)
        if pid:
            continue  # an orphan reaped; look for more at once
        now = time.monotonic()
        if ending_since is None and now >= next_look:
            next_look = now + WATCH_SECONDS
            broken = limit_broken(args)
            if broken:
                say(broken[0] + "; ending it")
                mark_failed(args.watch, *broken)
                ending_since = now
                forward(signal.SIGTERM, None)
        if ending_since is not None and now - ending_since > STOP_GRACE_SECONDS:
            say("the run did not end on request; killing every process of its sandbox")
            return 137  # this init exits: the kernel kills the rest of the namespace
        time.sleep(0.05)


def join(procs_files: list[str], command: list[str]) -> int:
    """Enter the run's control groups, then become `command` (not reached)."""
    for procs in procs_files:
        with open(procs, "w") as handle:
            handle.write(str(os.getpid()))
    os.execv(command[0], command)
    return 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--join", nargs="+", default=[], help="cgroup.procs files to enter before the command")
    parser.add_argument("--watch", help="the run's own folder")
    parser.add_argument("--memory", type=int, default=0, help="bytes each process may allocate (RLIMIT_DATA)")
    parser.add_argument("--file-size", type=int, default=0, help="bytes a file may reach (RLIMIT_FSIZE)")
    parser.add_argument("--disk", type=int, default=0, help="bytes the run's folder may hold")
    parser.add_argument("--processes", type=int, default=0, help="processes the namespace may hold")
    parser.add_argument("--in-memory", type=int, default=0, help="bytes the in-memory folders may hold together")
    parser.add_argument("--shared-memory", type=int, default=0, help="bytes all sandboxes may hold (its message)")
    parser.add_argument("--oom-score-adj", type=int, default=0, help="the OOM killer's priority for the run")
    parser.add_argument("--uid", type=int, default=0, help="the uid to run as (0: stay as started)")
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("no command after --")
    if args.join:
        set_oom_score_adj(args.oom_score_adj)  # bwrap's own processes, outside the sandbox, go first too
        return join(args.join, command)
    if not args.watch:
        parser.error("--watch: the run's own folder is needed")
    return supervise(args, command)


if __name__ == "__main__":
    sys.exit(main())
