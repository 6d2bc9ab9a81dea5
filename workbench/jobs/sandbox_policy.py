"""What a sandbox is allowed besides what it shows: the server's policy, the admin's limits, the environment it gets.

`Policy` is what a server with accounts adds (the users file masked, the owner's uploads shown), recorded in the
launcher's record of the run; `Limits` are the resources one sandboxed run may use, read from the admin's
WORKBENCH_RUN_* variables; `clean_env` drops the variables a sandboxed process never gets.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, replace

from workbench.jobs.queue import DEFAULT_MAX_RUNS_PER_USER, MAX_RUNS_ENV

# Environment variables a sandboxed process never gets: accounts, and credentials it could copy into its run folder.
SECRET_ENV = re.compile(
    r"TOKEN|SECRET|PASSW|CREDENTIAL|API_KEY|ACCESS_KEY|^WORKBENCH_USERS|^SSH_|^AWS_|^GOOGLE_", re.IGNORECASE
)


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
SERVER_SHARE = 0.25  # of the machine's memory, kept out of every sandbox's reach: the server's and the system's
DEFAULT_HELPER_CPU_SHARE = 0.1  # a training run keeps at least 1 / 1.1 of its CPU time against any helper job
OOM_SCORE_ADJ = {"run": 500, "helper": 1000}  # the server keeps 0: the kernel kills a sandbox's processes first


def _env_number(env: dict, name: str, default: float) -> float:
    """A positive number the admin set in the environment, else `default` (0 or below: no limit)."""
    try:
        return float(env.get(name, default))
    except ValueError:
        return default


@dataclass(frozen=True)
class Limits:
    """What one sandboxed run (or helper job) may use; 0 means no limit of that kind.

    `memory`: bytes each process may allocate (RLIMIT_DATA) and, where cgroups are offered, all of the job's
    processes together, `file_size`: bytes one file may reach (RLIMIT_FSIZE), `disk`: bytes its own folder
    may hold, `processes`: processes in its sandbox, `tmp`: bytes its in-memory folders (/tmp, /dev/shm,
    the hidden homes) may hold together (each one's size too), never more than `memory`.
    `shared_memory`: bytes all sandboxes together may hold (a control group over them all),
    `helper_cpu_share`: a helper job's CPU weight as a fraction of a training run's, `oom_score_adj`: how
    readily the kernel's OOM killer picks the job's processes (set by `for_job`: helpers first, then runs,
    the server last).
    """

    memory: int = 0
    file_size: int = 0
    disk: int = 0
    processes: int = 0
    tmp: int = 0
    shared_memory: int = 0
    helper_cpu_share: float = DEFAULT_HELPER_CPU_SHARE
    oom_score_adj: int = 0

    @classmethod
    def from_env(cls, env: dict | None = None) -> Limits:
        """The admin's limits (WORKBENCH_SANDBOX_MEMORY_GB, WORKBENCH_RUN_MEMORY_GB, _FILE_GB, _DISK_GB,
        _PROCESSES, _TMP_GB, WORKBENCH_HELPER_CPU_SHARE), else defaults: all sandboxes together three quarters
        of the machine's memory, each job that over the jobs a user may run at once (WORKBENCH_MAX_RUNS_PER_USER),
        so one user's jobs add up to it at most; 20 GiB a file, 50 GiB a folder, 2048 processes and threads,
        2 GiB in memory, a helper a tenth of a run's CPU weight."""
        import psutil

        env = os.environ if env is None else env
        shared = int(
            _env_number(env, "WORKBENCH_SANDBOX_MEMORY_GB", (1 - SERVER_SHARE) * psutil.virtual_memory().total / GIB)
            * GIB
        )
        per_user = int(_env_number(env, MAX_RUNS_ENV, DEFAULT_MAX_RUNS_PER_USER))
        memory = int(_env_number(env, "WORKBENCH_RUN_MEMORY_GB", shared / max(per_user, 1) / GIB) * GIB)
        if shared > 0 and memory > 0:
            memory = min(memory, shared)
        return cls(
            memory=memory,
            file_size=int(_env_number(env, "WORKBENCH_RUN_FILE_GB", 20) * GIB),
            disk=int(_env_number(env, "WORKBENCH_RUN_DISK_GB", 50) * GIB),
            # threads count too where the limit is the kernel's (a run as its own uid)
            processes=int(_env_number(env, "WORKBENCH_RUN_PROCESSES", 2048)),
            tmp=int(_env_number(env, "WORKBENCH_RUN_TMP_GB", 2) * GIB),
            shared_memory=max(shared, 0),
            helper_cpu_share=min(
                max(_env_number(env, "WORKBENCH_HELPER_CPU_SHARE", DEFAULT_HELPER_CPU_SHARE), 0.01), 1.0
            ),
        )

    def for_job(self, helper: bool) -> Limits:
        """These limits for a helper job or a training run: its OOM killer priority, its in-memory folders
        within its memory (they are charged to it)."""
        tmp = min(self.tmp, self.memory) if self.memory > 0 and self.tmp > 0 else self.tmp
        return replace(self, tmp=tmp, oom_score_adj=OOM_SCORE_ADJ["helper" if helper else "run"])

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
            "--in-memory",
            str(max(self.tmp, 0)),
            "--shared-memory",
            str(max(self.shared_memory, 0)),
            "--oom-score-adj",
            str(self.oom_score_adj),
        ]

    def describe(self) -> dict:
        return {
            "memory_gib": round(self.memory / GIB, 2),
            "file_gib": round(self.file_size / GIB, 2),
            "disk_gib": round(self.disk / GIB, 2),
            "processes": self.processes,
            "in_memory_folders_gib": round(self.tmp / GIB, 2),
            "all_sandboxes_memory_gib": round(self.shared_memory / GIB, 2),
            "helper_cpu_share": self.helper_cpu_share,
            "oom_score_adj": self.oom_score_adj,
        }


def clean_env(env: dict) -> dict:
    """The caller's environment without accounts or credentials (a reward could copy them into its run folder)."""
    return {key: value for key, value in env.items() if not SECRET_ENV.search(key)}
