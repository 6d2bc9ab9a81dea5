"""Runs in a bubblewrap sandbox: what a sandboxed process sees, in one table, and starting a command in it.

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
    its user                              a server running as root runs each sandbox as a uid of its own,
                                          chosen by the server and kept in the run's launch record
                                          (`run_uid`, jobs/run_uids.py), which owns the run's folder: the
                                          init keeps only the capability to change uid, drops to it and
                                          so drops that too
    the system's password hashes          masked (/etc/shadow, /etc/gshadow and their backups)
    GPUs                                  /dev/nvidia* and /dev/dri bound in
    resources                             `Limits`: memory a process may allocate, the size of a file,
                                          what the run's folder holds, its processes, and a size on
                                          every in-memory folder (set by the admin, WORKBENCH_RUN_*)

The list itself is built in `sandbox_exposure`, the paths it shows besides the run's folder (the code,
the caches, the files a config names) are found in `sandbox_paths`, the server's policy and the admin's
limits are `sandbox_policy`'s, the run's own uid `sandbox_uid`'s, and the bwrap command line
`sandbox_bwrap`'s; this module starts a command in the sandbox they describe.

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
import os
import stat
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from workbench.jobs import run_cgroup, sandbox_proc, tune_job
from workbench.jobs.sandbox_bwrap import (
    BWRAP_ENV,  # noqa: F401  (named through this module by the tests)
    SUPERVISOR,
    SandboxError,
    bwrap_binary,
    bwrap_command,
    check_available,
)
from workbench.jobs.sandbox_exposure import Exposure, exposure
from workbench.jobs.sandbox_paths import SCRATCH_VLLM  # noqa: F401  (named through this module by the tests)
from workbench.jobs.sandbox_policy import Limits, Policy, clean_env
from workbench.jobs.sandbox_uid import hand_over, run_uid, share_read_only  # noqa: F401  (run_uid: the tests)
from workbench.runstore import launch_records, runfolder

# ---------------------------------------------------------------- starting a command in its sandbox


def wrap(
    command: list[str],
    exposed: Exposure,
    env: dict | None = None,
    foreground: bool = False,
    placement: run_cgroup.Placement = run_cgroup.A_RUN,
) -> tuple[list[str], dict]:
    """(argv, env) that run `command` in the sandbox `exposed` describes, with `env` cleaned of credentials;
    `placement`: whose job it is and whether a helper's (its CPU weight, its OOM killer priority)."""
    env = dict(os.environ if env is None else env)
    exposed = replace(exposed, limits=exposed.limits.for_job(placement.helper))
    bwrap = bwrap_binary(env)
    if bwrap is None:
        check_available(env)  # raises with the reason
    if exposed.uid is not None:
        hand_over(exposed.own_dir, exposed.uid)
        share_read_only(exposed.shared)
        # bwrap enters the run's folder before its init drops to the run's uid, as root without the capability
        # to pass permissions: the folder must let others through (not list it: umask 077 leaves it 0700)
        os.chmod(exposed.own_dir, stat.S_IMODE(os.lstat(exposed.own_dir).st_mode) | 0o111)
    exposed = replace(exposed, proc_files=sandbox_proc.proc_files(max(exposed.limits.memory, 0)))
    argv = bwrap_command(exposed, command, bwrap, foreground)
    limits = exposed.limits
    joins = run_cgroup.prepare(
        max(limits.memory, 0), max(limits.processes, 0), placement, limits.helper_cpu_share, limits.shared_memory
    )
    if joins:  # the whole sandbox in the job's control groups: its memory, processes and CPU counted together
        adj = ["--oom-score-adj", str(limits.oom_score_adj)]
        argv = [sys.executable, "-I", str(SUPERVISOR), *adj, "--join", *joins, "--", *argv]
    return argv, clean_env(env)


Confine = Callable[[list, dict], tuple[list, dict]]


def confinement(own_dir, runs_root, config: dict | None, policy: Policy, owner: str | None = None) -> Confine:
    """What a helper process (sampling, merged-model export, a signal check) of the run in `own_dir` is started
    through: `confine(command, env) -> (argv, env)`, the same sandbox as the run's (it writes only `own_dir`),
    at a helper's CPU weight in the group of `owner` (else the run's owner, as the launcher recorded it)."""
    if owner is None:
        record = launch_records.read_record(Path(own_dir))
        owner = record.owner if record is not None else None
    placement = run_cgroup.Placement(owner, helper=True)

    def confine(command: list, env: dict) -> tuple[list, dict]:
        return wrap(command, exposure(own_dir, runs_root, config, policy, env), env, placement=placement)

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
    record = _sandboxed_record(run_dir)
    return Policy.from_status(record.policy) or Policy(), dict(record.config or {})


def _sandboxed_record(run_dir: Path) -> launch_records.LaunchRecord:
    """The launcher's record of the sandboxed run in `run_dir`; SandboxError when there is none."""
    record = launch_records.read_record(run_dir)
    if record is None or not record.sandboxed:
        raise SandboxError(
            field="sandbox",
            rule=f"the launcher has no record of a sandboxed run in {run_dir}",
            fix="start the run again from the dashboard or with `train --sandbox`",
        )
    return record


def run_command(run_dir: Path, command: list[str], env: dict, foreground: bool) -> tuple[list[str], dict]:
    """(argv, env) for the run in `run_dir`, from the launcher's record of it (its policy and config)."""
    record = _sandboxed_record(run_dir)
    policy, config = Policy.from_status(record.policy) or Policy(), dict(record.config or {})
    exposed = exposure(run_dir, run_dir.parent, config, policy, env)
    exposed = replace(exposed, limits=exposed.limits.for_job(helper=False))  # as status.json's `shows` says
    placement = run_cgroup.Placement(record.owner, helper=False)
    argv, inner_env = wrap(command, exposed, env, foreground, placement)
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
