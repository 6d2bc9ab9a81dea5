"""Runs in a bubblewrap sandbox: what a sandboxed process sees, in one list, and the one builder of its command.

A reward file is Python code. On a dashboard with accounts every training
process, and every helper process that loads a user's model or adapter
(sampling for the Compare tab, merged-model export), runs inside `bwrap`:

    what it sees                          how
    the system, Python, the project,      read-only (`--ro-bind / /`, then the homes, /tmp, /run
    the model caches                      and the runs folder hidden; the project, Python and the
                                          caches bound back read-only where they lay under those)
    vLLM's record of model classes        read-only, in the sandbox's own vLLM cache root (a run
    (`modelinfos`)                        whose generation runs vLLM)
    its own folder (the run's)            read-write
    its owner's uploads, and the files    read-only
    its config names (model folder,
    dataset, reward file)
    the runs folder                       nothing else of it: no other run, no other user's uploads
    the users file                        masked (the host's /dev/null in its place, unreadable there)
    /tmp, /dev/shm, the homes, /run,      private and empty (in memory)
    /mnt, /media, /srv
    the network                           none: a loopback of its own (a run's own vLLM server
                                          starts inside the same sandbox, so they still talk)
    other processes                       none: a PID namespace of its own, whose init is
                                          jobs/sandbox_init.py: when the run's command ends, every
                                          process left in the sandbox ends with it
    capabilities                          none (`--cap-drop ALL`), even when the server runs as root
    its user                              a server running as root runs each sandbox as a uid of its own
                                          (`run_uid`), which owns the run's folder: the init keeps only
                                          the capability to change uid, drops to it and so drops that too
    the system's password hashes          masked (/etc/shadow, /etc/gshadow and their backups)
    GPUs                                  /dev/nvidia* and /dev/dri bound in
    resources                             `Limits`: memory a process may allocate, the size of a file,
                                          what the run's folder holds, its processes, and a size on
                                          every in-memory folder (set by the admin, WORKBENCH_RUN_*)

The paths it shows besides the run's folder (the code, the caches, the files a config names) are
found in `sandbox_paths`.

What the server decides a sandbox from (the policy, the config whose paths are
shown) is the launcher's record of the run (runstore/launch_records.py),
never the run's own folder, which the run's code can rewrite.

What a run needs from outside is made ready before the sandbox starts
(`prepare`: the bundled model's one-time conversion, hub models into the
shared cache), since inside nothing can be downloaded and the caches are
read-only; inside, `datasets` gets a scratch cache of its own.

PIDs: the sandbox has its own PID namespace, so the pid a process sees for
itself means nothing outside. status.json's `pid`/`pgid` are written from
outside (the host's pid of the process that becomes `bwrap`, see `main`), a
sandboxed trainer writes its own as `sandbox_pid`, and `runfolder.pids_here`
gives each reader the ones that mean something where it runs. Ending the
outer process's tree ends the sandbox; when its first process ends, the
kernel ends every process left inside (a vLLM server included).
"""

from __future__ import annotations

import argparse
import glob
import os
import re
import shutil
import stat
import subprocess
import sys
import time
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from workbench.errors import WorkbenchError
from workbench.jobs import run_cgroup, tune_job
from workbench.jobs.sandbox_paths import (
    SCRATCH,
    SCRATCH_VLLM,
    cache_paths,
    code_paths,
    hub_cache,
    is_under,
    named_paths,
    real_path,
    vllm_record_placement,
)
from workbench.runstore import launch_records, runfolder

BWRAP_ENV = "WORKBENCH_BWRAP"  # the bwrap binary to use (default: `bwrap` on PATH)
# Set inside every sandbox: pids in status.json are read through runfolder.pids_here.
INSIDE_ENV = runfolder.SANDBOX_ENV
HIDDEN_ROOTS = ("/tmp", "/var/tmp", "/home", "/root", "/run", "/var/run", "/mnt", "/media", "/srv")
GPU_DEVICE_PATTERNS = ("/dev/nvidia*", "/dev/dri")
# Environment variables a sandboxed process never gets: accounts, and credentials it could copy into its run folder.
# The system's password hashes: a sandbox runs as uid 0 with no capabilities, which may still read them.
SYSTEM_SECRETS = ("/etc/shadow", "/etc/gshadow", "/etc/shadow-", "/etc/gshadow-")
# A server running as root runs each sandbox as a uid of its own, in this range (no account uses it).
RUN_UIDS = range(2_000_000, 2_100_000)
SUPERVISOR = Path(__file__).with_name("sandbox_init.py")  # the sandbox's init, run by path (standard library only)
SECRET_ENV = re.compile(
    r"TOKEN|SECRET|PASSW|CREDENTIAL|API_KEY|ACCESS_KEY|^WORKBENCH_USERS|^SSH_|^AWS_|^GOOGLE_", re.IGNORECASE
)
INSTALL_HINT = (
    "install bubblewrap (Debian/Ubuntu: `apt-get install bubblewrap`; `make run` does it), and allow "
    "unprivileged user namespaces or run the dashboard as root"
)


class SandboxError(WorkbenchError):
    """A sandbox that cannot be built or started here; the message says what to install or change."""


@dataclass(frozen=True)
class Policy:
    """What a server adds to a sandbox it starts: files to mask (the users file) and folders to show read-only
    (its owner's uploads).

    Recorded in a run's status.json (`sandbox`), so the queue's dispatcher
    and a later resume start the run in the same sandbox.
    """

    hidden_files: tuple[str, ...] = ()
    readable: tuple[str, ...] = ()

    def to_status(self) -> dict:
        return {"hidden_files": list(self.hidden_files), "readable": list(self.readable)}

    @classmethod
    def from_status(cls, section) -> Policy | None:
        if not isinstance(section, dict):
            return None

        def paths(key: str) -> tuple[str, ...]:
            value = section.get(key)
            return tuple(str(p) for p in value if isinstance(p, str)) if isinstance(value, list) else ()

        return cls(paths("hidden_files"), paths("readable"))


GIB = 2**30


def _env_number(env: dict, name: str, default: float) -> float:
    """A positive number the admin set in the environment, else `default` (0 or below: no limit)."""
    try:
        return float(env.get(name, default))
    except ValueError:
        return default


@dataclass(frozen=True)
class Limits:
    """What one sandboxed run (or helper job) may use; 0 means no limit of that kind.

    `memory`: bytes each process may allocate (RLIMIT_DATA), `file_size`: bytes one file may reach
    (RLIMIT_FSIZE), `disk`: bytes its own folder may hold, `processes`: processes in its sandbox,
    `tmp`: bytes each in-memory folder (/tmp, /dev/shm, the hidden homes) may hold.
    """

    memory: int = 0
    file_size: int = 0
    disk: int = 0
    processes: int = 0
    tmp: int = 0

    @classmethod
    def from_env(cls, env: dict | None = None) -> Limits:
        """The admin's limits (WORKBENCH_RUN_MEMORY_GB, _FILE_GB, _DISK_GB, _PROCESSES, _TMP_GB), else defaults:
        three quarters of the machine's memory, 20 GiB a file, 50 GiB a folder, 2048 processes and threads,
        2 GiB in memory."""
        import psutil

        env = os.environ if env is None else env
        total = psutil.virtual_memory().total
        return cls(
            memory=int(_env_number(env, "WORKBENCH_RUN_MEMORY_GB", 0.75 * total / GIB) * GIB),
            file_size=int(_env_number(env, "WORKBENCH_RUN_FILE_GB", 20) * GIB),
            disk=int(_env_number(env, "WORKBENCH_RUN_DISK_GB", 50) * GIB),
            # threads count too where the limit is the kernel's (a run as its own uid)
            processes=int(_env_number(env, "WORKBENCH_RUN_PROCESSES", 2048)),
            tmp=int(_env_number(env, "WORKBENCH_RUN_TMP_GB", 2) * GIB),
        )

    def supervisor_args(self, own_dir: str) -> list[str]:
        """The arguments of jobs/sandbox_init.py that hold these limits for the run writing `own_dir`."""
        return [
            "--watch",
            own_dir,
            "--memory",
            str(max(self.memory, 0)),
            "--file-size",
            str(max(self.file_size, 0)),
            "--disk",
            str(max(self.disk, 0)),
            "--processes",
            str(max(self.processes, 0)),
        ]

    def describe(self) -> dict:
        return {
            "memory_gib": round(self.memory / GIB, 2),
            "file_gib": round(self.file_size / GIB, 2),
            "disk_gib": round(self.disk / GIB, 2),
            "processes": self.processes,
            "in_memory_folders_gib": round(self.tmp / GIB, 2),
        }


@dataclass(frozen=True)
class Exposure:
    """Everything a sandbox shows of the host: its mounts in the order bwrap makes them (later ones lie on top).

    Each mount is (kind, path): `empty` (a private tmpfs), `read-only` and
    `read-write` (the host's path at the same place), `masked` (the host's
    /dev/null in the file's place: nothing to read), `device` (a device node bound in).
    """

    mounts: tuple[tuple[str, str], ...]
    env: dict = field(default_factory=dict)  # set inside, on top of the caller's cleaned environment
    # (host path, path inside): read-only, shown somewhere else than where it lies, after every mount above
    placed: tuple[tuple[str, str], ...] = ()
    limits: Limits = field(default_factory=Limits)
    uid: int | None = None  # the uid the sandbox's processes run as on the host (None: the server's own)
    # read-only folders of the workbench's own (its model cache, the owner's uploads) the run's uid must read
    shared: tuple[str, ...] = ()

    def paths(self, kind: str) -> list[str]:
        return [path for mount, path in self.mounts if mount == kind]

    @property
    def own_dir(self) -> str:
        return self.paths("read-write")[0]

    def describe(self) -> dict:
        """For status.json and the README: what the sandbox showed the run."""
        placed = [f"{host} (at {inside})" for host, inside in self.placed]
        return {kind: self.paths(kind) + (placed if kind == "read-only" else []) for kind in MOUNT_KINDS} | {
            "network": "none",
            "limits": self.limits.describe(),
            "uid": self.uid,
        }


MOUNT_KINDS = ("empty", "read-only", "read-write", "masked", "device")
BWRAP_MOUNT = {"empty": "--tmpfs", "read-only": "--ro-bind", "read-write": "--bind", "device": "--dev-bind"}


# ---------------------------------------------------------------- what a sandbox shows


def exposure(
    own_dir: str | os.PathLike,
    runs_root: str | os.PathLike,
    config: dict | None = None,
    policy: Policy | None = None,
    env: dict | None = None,
    limits: Limits | None = None,
) -> Exposure:
    """What a sandbox for a process writing `own_dir` (a run folder) shows, given the runs folder it lies in.

    `config`: the run's config (its named files are shown read-only);
    `policy`: the server's additions (the users file masked, the owner's uploads shown).
    """
    policy = policy or Policy()
    env = dict(os.environ if env is None else env)
    runs_root, own_dir = real_path(runs_root), real_path(own_dir)
    homes = [real_path(env["HOME"])] if env.get("HOME") else []
    hidden = [p for p in dict.fromkeys([*HIDDEN_ROOTS, *homes]) if os.path.isdir(p) and not os.path.islink(p)]
    # the code and caches are shown again only where a hidden folder covers them; whatever lies
    # inside the runs folder (a venv there, a cache there) stays hidden with it
    code = [p for p in [*code_paths(), *cache_paths(env)] if is_under(p, hidden) and not is_under(p, [runs_root])]
    readable = [p for p in (real_path(f) for f in policy.readable) if os.path.isdir(p)]
    readable += [p for p in named_paths(config or {}, runs_root) if not is_under(p, [own_dir])]
    masked = [p for p in (real_path(f) for f in (*policy.hidden_files, *SYSTEM_SECRETS)) if os.path.isfile(p)]
    devices = sorted(p for pattern in GPU_DEVICE_PATTERNS for p in glob.glob(pattern))
    mounts = [
        *(("empty", p) for p in hidden),
        *(("read-only", p) for p in code),
        ("empty", runs_root),  # after the code: a runs folder inside the project is hidden too
        *(("read-only", p) for p in dict.fromkeys(readable)),
        ("read-write", own_dir),
        *(("masked", p) for p in masked),
        *(("device", p) for p in devices),
    ]
    from workbench.sources.model_files import cache_dir

    # what the workbench itself wrote (converted models, uploads, the user's other runs) may be private to the
    # server's user (a server with accounts makes its files with umask 077): made readable for the run's uid
    shared = [
        p
        for p in dict.fromkeys(p for kind, p in mounts if kind == "read-only")
        if is_under(p, [real_path(cache_dir()), runs_root])
    ]
    scratch = {
        "HF_DATASETS_CACHE": f"{SCRATCH}/datasets",
        "XDG_CACHE_HOME": f"{SCRATCH}/cache",
        "TMPDIR": "/tmp",
        "VLLM_CACHE_ROOT": SCRATCH_VLLM,
    }
    hub = hub_cache(env)
    return Exposure(
        tuple(mounts),
        {
            INSIDE_ENV: "1",
            "HF_HUB_OFFLINE": "1",
            "HF_DATASETS_OFFLINE": "1",
            **scratch,
            **({"HF_HUB_CACHE": hub} if hub else {}),
        },
        placed=vllm_record_placement(config or {}, env),
        limits=limits if limits is not None else Limits.from_env(env),
        uid=run_uid(own_dir) if _all_reachable(mounts, shared) else None,
        shared=tuple(shared),
    )


def run_uid(own_dir: str | os.PathLike) -> int | None:
    """The uid the sandbox writing `own_dir` runs as: one of RUN_UIDS, the same for the same folder, when the
    server runs as root; None otherwise (an unprivileged bwrap's user namespace already maps it to the
    server's own uid). Two folders may meet on one uid; each still sees only its own folder."""
    if os.geteuid() != 0:
        return None
    return RUN_UIDS.start + zlib.crc32(real_path(own_dir).encode()) % len(RUN_UIDS)


def _all_reachable(mounts, shared) -> bool:
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


def clean_env(env: dict) -> dict:
    """The caller's environment without accounts or credentials (a reward could copy them into its run folder)."""
    return {key: value for key, value in env.items() if not SECRET_ENV.search(key)}


# ---------------------------------------------------------------- the command line


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


def wrap(
    command: list[str], exposed: Exposure, env: dict | None = None, foreground: bool = False
) -> tuple[list[str], dict]:
    """(argv, env) that run `command` in the sandbox `exposed` describes, with `env` cleaned of credentials."""
    env = dict(os.environ if env is None else env)
    bwrap = bwrap_binary(env)
    if bwrap is None:
        check_available(env)  # raises with the reason
    if exposed.uid is not None:
        hand_over(exposed.own_dir, exposed.uid)
        share_read_only(exposed.shared)
        # bwrap enters the run's folder before its init drops to the run's uid, as root without the capability
        # to pass permissions: the folder must let others through (not list it: umask 077 leaves it 0700)
        os.chmod(exposed.own_dir, stat.S_IMODE(os.lstat(exposed.own_dir).st_mode) | 0o111)
    argv = bwrap_command(exposed, command, bwrap, foreground)
    joins = run_cgroup.prepare(max(exposed.limits.memory, 0), max(exposed.limits.processes, 0))
    if joins:  # the whole sandbox in the run's control groups: its memory and processes counted together
        argv = [sys.executable, "-I", str(SUPERVISOR), "--join", *joins, "--", *argv]
    return argv, clean_env(env)


Confine = Callable[[list, dict], tuple[list, dict]]


def confinement(own_dir, runs_root, config: dict | None, policy: Policy) -> Confine:
    """What a helper process (sampling, merged-model export) of the run in `own_dir` is started through:
    `confine(command, env) -> (argv, env)`, the same sandbox as the run's (it writes only `own_dir`)."""

    def confine(command: list, env: dict) -> tuple[list, dict]:
        return wrap(command, exposure(own_dir, runs_root, config, policy, env), env)

    return confine


# ---------------------------------------------------------------- a sandboxed run


def prepare(config: dict) -> None:
    """Make ready, outside the sandbox, what the run reads read-only inside it (no hub can be reached from there).

    The bundled model's one-time conversion lands in the workbench's cache;
    a hub model is downloaded into the shared hub cache, its progress in the
    run's train.log. SandboxError when it cannot be.
    """
    from workbench.sources.model_files import hub_unreachable_message, resolve_model

    prepare_dataset(config)
    model = config.get("model")
    if not isinstance(model, str) or not model.strip():
        return
    located = resolve_model(model.strip())
    if os.path.isdir(located):
        return
    try:
        from huggingface_hub import snapshot_download

        print(f"Downloading {located} into the shared hub cache before the sandbox starts...", flush=True)
        snapshot_download(located)
    except Exception as exc:  # offline, unknown repository, gated: the run fails with the reason
        raise SandboxError(
            field="model",
            rule=hub_unreachable_message(located).removeprefix("model: ") + f" ({type(exc).__name__})",
            fix="use a model in the hub cache or a local model folder",
        ) from None


def prepare_dataset(config: dict) -> None:
    """Download a hub dataset the run names (`dataset_name`) into the shared hub cache, where the sandbox reads it;
    its progress lands in the run's train.log. SandboxError when it cannot be fetched."""
    from workbench.sources import hub_datasets

    name = config.get("dataset_name")
    if not isinstance(name, str) or not name.strip():
        return
    try:
        source = hub_datasets.locate(name.strip())
    except hub_datasets.DatasetError:  # not a hub id: check_config refuses what is nothing at all
        return
    if source.cached:
        return
    try:
        from huggingface_hub import snapshot_download

        print(f"Downloading dataset {source.hub_id} into the shared hub cache before the sandbox starts...", flush=True)
        snapshot_download(source.hub_id, repo_type="dataset")
    except Exception as exc:  # offline, unknown repository, gated: the run fails with the reason
        raise SandboxError(
            field="dataset_name",
            rule=f"{source.hub_id} could not be downloaded ({type(exc).__name__})",
            fix=hub_datasets.download_hint(source.hub_id),
        ) from None


def recorded_policy(run_dir: Path) -> tuple[Policy, dict]:
    """The run's sandbox policy and config as the launcher recorded them (runstore/launch_records.py), never
    as its folder says: the run's code may have rewritten status.json and config.json since."""
    record = launch_records.read_record(run_dir)
    if record is None or not record.sandboxed:
        raise SandboxError(
            field="sandbox",
            rule=f"the launcher has no record of a sandboxed run in {run_dir}",
            fix="start the run again from the dashboard or with `train --sandbox`",
        )
    return Policy.from_status(record.policy) or Policy(), dict(record.config or {})


def run_command(run_dir: Path, command: list[str], env: dict, foreground: bool) -> tuple[list[str], dict]:
    """(argv, env) for the run in `run_dir`, from the launcher's record of it (its policy and config)."""
    policy, config = recorded_policy(run_dir)
    exposed = exposure(run_dir, run_dir.parent, config, policy, env)
    argv, inner_env = wrap(command, exposed, env, foreground)
    # this process becomes bwrap (background) or waits for it (foreground): its pid is the run's, seen from outside;
    # status.json's copy of the policy is for the run's readers (its report), never read back to build a sandbox
    runfolder.update_status(
        run_dir, pid=os.getpid(), pgid=os.getpid(), sandbox={**policy.to_status(), "shows": exposed.describe()}
    )
    return argv, inner_env


def start_run(run_dir: Path, command: list[str]) -> None:
    """Become the sandbox of the run in `run_dir` (exec: the pid the launcher recorded stays the run's)."""
    try:
        config = recorded_policy(run_dir)[1]
        prepare(config)
        env = dict(os.environ)
        env.update(tune_job.choice_env(run_dir, config, env, Limits.from_env(env).memory or None))
        argv, env = run_command(run_dir, command, env, foreground=False)
    except Exception as exc:  # a model that cannot be made ready, no bwrap: the run fails with the reason
        runfolder.update_status(
            run_dir,
            state="failed",
            finished_at=time.time(),
            error={
                "type": type(exc).__name__,
                "message": f"the sandbox could not start: {exc}",
                "hint": "Read train.log; the run never started, so nothing of it was lost.",
                "traceback_tail": "",
            },
        )
        raise SystemExit(1) from None
    sys.stdout.flush()
    os.execve(argv[0], argv, env)


def run_foreground(run_dir: Path, command: list[str], env: dict) -> int:
    """Run the run in `run_dir` sandboxed, in this terminal; returns its exit code (`train --sandbox`)."""
    prepare(recorded_policy(run_dir)[1])
    argv, inner_env = run_command(run_dir, command, env, foreground=True)
    return subprocess.call(argv, env=inner_env)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Start a training run inside its sandbox (the launcher runs this).")
    parser.add_argument("--run-dir", required=True, type=Path)
    parser.add_argument("command", nargs=argparse.REMAINDER, help="-- then the training command")
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    start_run(args.run_dir.resolve(), command)
    return 1  # not reached: start_run execs bwrap or raises


if __name__ == "__main__":
    sys.exit(main())
