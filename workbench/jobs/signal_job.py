"""The signal check as a background job: the Setup tab's "Check the signal" button.

`start_signal_check(config, runs_dir, groups)` writes the config into a folder of its own,
`<runs folder>/signal-checks/<id>/` (beside the runs, never taken for one: it has no config.json at
the runs folder's top level), and starts `python -m workbench check-signal --config ... --out
report.json` there, in a session of its own, so the page never waits on a model.
`read_signal_check(job)` says how it stands: running, the report (the dict of
`spec.signal_check.SignalReport`), or the error with the end of its log.

With a sandbox `policy` (a dashboard with accounts) it starts `python -m workbench.jobs.signal_job
--folder F --policy JSON`, which, as a sandboxed run does (jobs/sandbox.py `start_run`), first makes the
model and the data ready outside the sandbox (no hub can be reached inside), then becomes the sandbox
around the check, writing only its own folder. The policy travels on its command line, from the server,
never through a file in the folder the check writes; each check gets a new folder, never one a check
wrote before. A check counts against its user's runs (`queue.check_user_limit`) while it runs: its
owner and process are in the launcher's records (runstore/launch_records.py), outside its folder.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from workbench.jobs import helper_folders, job_clock, launcher, processes, sandbox, sandbox_policy, user_disk
from workbench.runstore import runfolder
from workbench.spec.config import RunConfig

CHECKS_DIR = "signal-checks"
REPORT_FILE = "report.json"
LOG_FILE = "check.log"
KIND = "signal-check"  # its kind for the clock (jobs/job_clock.py: WORKBENCH_SIGNAL_CHECK_TIME_LIMIT_S)
DEFAULT_GROUPS = 4  # the dashboard's check: enough groups to tell no signal from some, in about a minute on a CPU


@dataclass
class SignalJob:
    """A started check: its folder and its process (its clock, jobs/job_clock.py), and once it ended, what the
    user sees of it (`outcome`), kept here because its folder is removed then."""

    folder: Path
    process: subprocess.Popen
    outcome: dict | None = None


def check_command(folder: Path, groups: int) -> list[str]:
    """The argument list the check runs in `folder` (never through a shell)."""
    return [
        sys.executable,
        "-m",
        "workbench",
        "check-signal",
        "--config",
        str(folder / runfolder.CONFIG_FILE),
        "--groups",
        str(groups),
        "--out",
        str(folder / REPORT_FILE),
    ]


def new_job_folder(parent: Path, label: str) -> Path:
    """A folder made now for one job, never one an earlier job wrote (two checks in a second get two)."""
    parent.mkdir(parents=True, exist_ok=True)
    base = runfolder.new_run_id(label)
    for n in range(1, 1000):
        folder = parent / (base if n == 1 else f"{base}-{n}")
        try:
            folder.mkdir()
            return folder
        except FileExistsError:
            continue
    raise OSError(f"no new folder for a job in {parent}")


def start_signal_check(
    config: RunConfig,
    runs_dir: str | Path,
    groups: int = DEFAULT_GROUPS,
    policy: sandbox_policy.Policy | None = None,
    owner: str | None = None,
) -> SignalJob:
    """Start the check of `config` in its own folder under `runs_dir` (in the sandbox `policy` describes,
    when given); returns at once. UserLimitError when `owner` already has as many runs and jobs as allowed."""
    root = runfolder.runs_root(runs_dir).resolve()
    if policy is not None:
        launcher.refuse_in_sandbox(config)  # a reward call with no time limit: ConfigError, before anything starts
    with launcher.helper_job(root, owner, CHECKS_DIR) as record:
        folder = new_job_folder(root / CHECKS_DIR, config.run_name or config.task)
        config.with_absolute_paths().save(folder / runfolder.CONFIG_FILE)
        command = check_command(folder, groups)
        if policy is not None:
            command = [
                sys.executable,
                "-m",
                "workbench.jobs.signal_job",
                "--folder",
                str(folder),
                "--groups",
                str(groups),
                "--policy",
                json.dumps(policy.to_status()),
                *(["--owner", owner] if owner else []),  # its CPU group: the owner's helpers
            ]
        # under its wall-time limit: the clock, the server's own process, ends the whole sandbox past it
        command = job_clock.clocked(command, KIND)
        env = user_disk.job_env(processes.job_env(), root, owner)  # its folder within its owner's disk total
        process = processes.spawn(command, folder / LOG_FILE, env, cwd=folder)
        record(process.pid)
        helper_folders.register(root, folder, owner, CHECKS_DIR, process.pid)
    return SignalJob(folder, process)


def read_signal_check(job: SignalJob) -> dict:
    """`{"state": "running"}`, `{"state": "done", "report": {...}}` or `{"state": "failed", "error": text}`.

    Once the check has ended, what it says is taken from its folder into `job.outcome` and the folder is removed
    (jobs/helper_folders.py): a check leaves nothing on disk."""
    if job.outcome is not None:
        return job.outcome
    if job.process.poll() is None:
        return {"state": "running"}
    job.outcome = _outcome(job)
    helper_folders.remove(job.folder.parent.parent, job.folder)
    return job.outcome


def _outcome(job: SignalJob) -> dict:
    """What an ended check says: the clock's message when it ran past its limit, else its report or error."""
    ended = job_clock.ended_message(KIND, job.process.returncode)
    if ended:
        return {"state": "failed", "error": ended}
    # the check's folder is written by the check (inside its sandbox): read as data, links never followed
    data = runfolder.read_json(job.folder / REPORT_FILE)  # written whole, then renamed into place
    if isinstance(data, dict) and data:
        return (
            {"state": "failed", "error": str(data["error"])[:2000]}
            if "error" in data
            else {"state": "done", "report": data}
        )
    tail = runfolder.read_log_tail(job.folder, 1500, name=LOG_FILE)
    return {"state": "failed", "error": f"the check stopped with exit code {job.process.returncode}. {tail}".strip()}


def cancel_signal_check(job: SignalJob | None) -> None:
    """End a check that is still running (its whole process tree) and remove its folder."""
    if job is None:
        return
    if job.process.poll() is None:
        processes.end_tree(job.process.pid)
        job.process.wait(timeout=5)
    job.outcome = job.outcome or {"state": "failed", "error": "the check was cancelled"}
    helper_folders.remove(job.folder.parent.parent, job.folder)


def run_sandboxed(folder: Path, groups: int, policy: sandbox_policy.Policy, owner: str | None = None) -> None:
    """Make the check's model and data ready here, then become its sandbox (exec), writing only `folder`.

    Nothing has run in `folder` yet (it is new), so its config.json is still the server's."""
    config = runfolder.read_config(folder)
    sandbox.prepare(config)
    argv, env = sandbox.confinement(folder, folder.parent.parent, config, policy, owner or "")(
        check_command(folder, groups), dict(os.environ)
    )
    sys.stdout.flush()
    os.execve(argv[0], argv, env)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Start a signal check inside its sandbox (the Setup tab runs this).")
    parser.add_argument("--folder", required=True, type=Path)
    parser.add_argument("--groups", type=int, default=DEFAULT_GROUPS)
    parser.add_argument("--policy", required=True, help="the server's sandbox policy, as JSON")
    parser.add_argument("--owner", default="", help="whose check it is (the server says)")
    args = parser.parse_args(argv)
    policy = sandbox_policy.Policy.from_status(json.loads(args.policy))
    run_sandboxed(args.folder.resolve(), args.groups, policy, args.owner)
    return 1  # not reached: run_sandboxed execs bwrap or raises


if __name__ == "__main__":
    sys.exit(main())
