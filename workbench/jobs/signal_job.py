"""The signal check as a background job: the Setup tab's "Check the signal" button.

`start_signal_check(config, runs_dir, groups)` writes the config into a folder of its own,
`<runs folder>/signal-checks/<id>/` (beside the runs, never taken for one: it has no config.json at
the runs folder's top level), and starts `python -m workbench check-signal --config ... --out
report.json` there, in a session of its own, so the page never waits on a model.
`read_signal_check(job)` says how it stands: running, the report (the dict of
`spec.signal_check.SignalReport`), or the error with the end of its log.

With a sandbox `policy` (a dashboard with accounts) it starts `python -m workbench.jobs.signal_job
--folder F`, which, as a sandboxed run does (jobs/sandbox.py `start_run`), first makes the model and
the data ready outside the sandbox (no hub can be reached inside), then becomes the sandbox around the
check, writing only its own folder.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from workbench.jobs import processes, sandbox
from workbench.runstore import runfolder
from workbench.spec.config import RunConfig

CHECKS_DIR = "signal-checks"
REPORT_FILE = "report.json"
LOG_FILE = "check.log"
POLICY_FILE = "sandbox.json"
DEFAULT_GROUPS = 4  # the dashboard's check: enough groups to tell no signal from some, in about a minute on a CPU


@dataclass
class SignalJob:
    """A started check: its folder and its process."""

    folder: Path
    process: subprocess.Popen


def check_command(folder: Path, groups: int) -> list[str]:
    """The argument list the check runs in `folder` (never through a shell)."""
    return [sys.executable, "-m", "workbench", "check-signal", "--config", str(folder / runfolder.CONFIG_FILE),
            "--groups", str(groups), "--out", str(folder / REPORT_FILE)]


def start_signal_check(config: RunConfig, runs_dir: str | Path, groups: int = DEFAULT_GROUPS,
                       policy: sandbox.Policy | None = None) -> SignalJob:
    """Start the check of `config` in its own folder under `runs_dir` (in the sandbox `policy` describes,
    when given); returns at once."""
    folder = runfolder.runs_root(runs_dir).resolve() / CHECKS_DIR / runfolder.new_run_id(config.run_name or config.task)
    folder.mkdir(parents=True, exist_ok=True)
    config.with_absolute_paths().save(folder / runfolder.CONFIG_FILE)
    command = check_command(folder, groups)
    if policy is not None:
        (folder / POLICY_FILE).write_text(json.dumps(policy.to_status()), encoding="utf-8")
        command = [sys.executable, "-m", "workbench.jobs.signal_job", "--folder", str(folder), "--groups", str(groups)]
    return SignalJob(folder, processes.spawn(command, folder / LOG_FILE, processes.job_env(), cwd=folder))


def read_signal_check(job: SignalJob) -> dict:
    """`{"state": "running"}`, `{"state": "done", "report": {...}}` or `{"state": "failed", "error": text}`."""
    report_path = job.folder / REPORT_FILE
    if report_path.exists():
        data = json.loads(report_path.read_text(encoding="utf-8"))  # written whole, then renamed into place
        return {"state": "failed", "error": data["error"]} if "error" in data else {"state": "done", "report": data}
    if job.process.poll() is None:
        return {"state": "running"}
    log = job.folder / LOG_FILE
    tail = log.read_text(errors="replace")[-1500:] if log.exists() else ""
    return {"state": "failed", "error": f"the check stopped with exit code {job.process.returncode}. {tail}".strip()}


def cancel_signal_check(job: SignalJob | None) -> None:
    """End a check that is still running (its whole process tree)."""
    if job is not None and job.process.poll() is None:
        processes.end_tree(job.process.pid)
        job.process.wait(timeout=5)


def run_sandboxed(folder: Path, groups: int) -> None:
    """Make the check's model and data ready here, then become its sandbox (exec), writing only `folder`."""
    config = runfolder.read_config(folder)
    policy = sandbox.Policy.from_status(json.loads((folder / POLICY_FILE).read_text(encoding="utf-8")))
    sandbox.prepare(config)
    argv, env = sandbox.confinement(folder, folder.parent.parent, config, policy)(check_command(folder, groups),
                                                                                 dict(os.environ))
    sys.stdout.flush()
    os.execve(argv[0], argv, env)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Start a signal check inside its sandbox (the Setup tab runs this).")
    parser.add_argument("--folder", required=True, type=Path)
    parser.add_argument("--groups", type=int, default=DEFAULT_GROUPS)
    args = parser.parse_args(argv)
    run_sandboxed(args.folder.resolve(), args.groups)
    return 1  # not reached: run_sandboxed execs bwrap or raises


if __name__ == "__main__":
    sys.exit(main())
