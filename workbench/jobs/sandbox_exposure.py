"""What a sandbox shows of the host, in one list: its mounts in the order bwrap makes them, and the environment set
inside (the table in jobs/sandbox.py's docstring says why each is shown so)."""

from __future__ import annotations

import glob
import os
from dataclasses import dataclass, field

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
from workbench.jobs.sandbox_policy import Limits, Policy
from workbench.jobs.sandbox_uid import all_reachable, run_uid
from workbench.runstore import runfolder

# Set inside every sandbox: pids in status.json are read through runfolder.pids_here.
INSIDE_ENV = runfolder.SANDBOX_ENV
HIDDEN_ROOTS = ("/tmp", "/var/tmp", "/home", "/root", "/run", "/var/run", "/mnt", "/media", "/srv")
GPU_DEVICE_PATTERNS = ("/dev/nvidia*", "/dev/dri")
# Every sandbox's control group, its creation time and memory: an empty read-only folder inside (nothing there
# reads it: the sandbox joins its own groups before bwrap starts, jobs/run_cgroup.py).
HIDDEN_CGROUPS = "/sys/fs/cgroup"
# The system's password hashes: a sandbox runs as uid 0 with no capabilities, which may still read them.
SYSTEM_SECRETS = ("/etc/shadow", "/etc/gshadow", "/etc/shadow-", "/etc/gshadow-")


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
    # (host file, /proc path): a file of the sandbox's own over each host-wide /proc file (jobs/sandbox_proc.py)
    proc_files: tuple[tuple[str, str], ...] = ()

    def paths(self, kind: str) -> list[str]:
        return [path for mount, path in self.mounts if mount == kind]

    @property
    def own_dir(self) -> str:
        return self.paths("read-write")[0]

    def describe(self) -> dict:
        """For status.json and the README: what the sandbox showed the run."""
        placed = [f"{host} (at {inside})" for host, inside in self.placed]
        return {kind: self.paths(kind) + (placed if kind == "read-only" else []) for kind in MOUNT_KINDS} | {
            "hidden": [HIDDEN_CGROUPS],
            "own /proc files": [inside for _, inside in self.proc_files],
            "network": "none",
            "limits": self.limits.describe(),
            "uid": self.uid,
        }


MOUNT_KINDS = ("empty", "read-only", "read-write", "masked", "device")


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
    from workbench.sources.model_files import cache_dir, completions_cache_dir

    mounts = [
        *(("empty", p) for p in hidden),
        *(("read-only", p) for p in code),
        ("empty", runs_root),  # after the code: a runs folder inside the project is hidden too
        *(("read-only", p) for p in dict.fromkeys(readable)),
        ("read-write", own_dir),
        # what the server derives from every run (other students' completions): never shown, wherever it lies
        *(("empty", p) for p in [real_path(completions_cache_dir())] if os.path.isdir(p)),
        *(("masked", p) for p in masked),
        *(("device", p) for p in devices),
    ]
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
        uid=run_uid(own_dir, runs_root) if all_reachable(mounts, shared) else None,
        shared=tuple(shared),
    )
