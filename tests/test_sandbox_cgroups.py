"""The sandboxes' control groups add up: a CPU weight per user with helper jobs below training runs, memory
limits whose sum over one user's allowed jobs fits the machine under a cap over all sandboxes, in-memory
folders bounded together, and a sandbox's processes the OOM killer's first choice, never the server.

Each test starts real sandboxes (bwrap, the real sandbox init, the real cgroup files of this machine) around
a small command and reads from outside what the kernel holds for their processes.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from workbench.jobs import sandbox
from workbench.runstore import launch_records

MIB = 2**20
MARK = "sandboxed-cgroup-probe"
needs_bwrap = pytest.mark.skipif(sandbox.bwrap_binary() is None, reason="bubblewrap is not installed")
needs_cgroups = pytest.mark.skipif(
    os.geteuid() != 0 or not os.path.isdir("/sys/fs/cgroup/cpu"), reason="the server makes cgroups (v1) as root"
)
pytestmark = [needs_bwrap, needs_cgroups]
SLEEPER = [sys.executable, "-c", f"import time; time.sleep(60)  # {MARK}"]


def _own(tmp_path: Path, name: str, owner: str | None = None) -> Path:
    own = tmp_path / "runs" / name
    own.mkdir(parents=True)
    (own / "status.json").write_text("{}")
    if owner:
        launch_records.write_record(own, launch_records.LaunchRecord(owner=owner, sandboxed=True))
    return own


def _command_process(outer: subprocess.Popen) -> psutil.Process:
    """The sandboxed command's process, as the host sees it (a descendant of the process that became bwrap)."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        for child in psutil.Process(outer.pid).children(recursive=True):
            with contextlib.suppress(psutil.Error):
                if MARK in " ".join(child.cmdline()) and "sandbox_init" not in " ".join(child.cmdline()):
                    return child
        time.sleep(0.1)
    raise AssertionError(f"the sandboxed command never started: {outer.poll()}")


@contextlib.contextmanager
def started(argv_env):
    argv, env = argv_env
    outer = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        yield _command_process(outer)
    finally:
        outer.kill()
        outer.wait(timeout=30)


def cgroup_folder(pid: int, controller: str) -> Path:
    for line in Path(f"/proc/{pid}/cgroup").read_text().splitlines():
        _, names, path = line.split(":", 2)
        if controller in names.split(","):
            return Path("/sys/fs/cgroup") / controller / path.lstrip("/")
    raise AssertionError(f"no {controller} group for {pid}")


def memory_limit(folder: Path) -> int:
    """The least memory limit along `folder` and every group above it: what holds for its processes."""
    found = []
    while folder != Path("/sys/fs/cgroup/memory").parent:
        with contextlib.suppress(OSError):
            found.append(int((folder / "memory.limit_in_bytes").read_text()))
        folder = folder.parent
    return min(found)


def test_a_helper_jobs_cpu_weight_is_below_another_users_training_run(tmp_path):
    env = {"PATH": os.environ["PATH"]}
    run_dir, helper_dir = _own(tmp_path, "bob-run", owner="bob"), _own(tmp_path, "alice-run", owner="alice")
    run = sandbox.run_command(run_dir, SLEEPER, env, foreground=True)  # bob's training run, as the launcher's
    confine = sandbox.confinement(helper_dir, helper_dir.parent, {}, sandbox.Policy())  # alice's export, say
    with started(run) as trainer, started(confine(SLEEPER, env)) as helper:
        runs, helpers = cgroup_folder(trainer.pid, "cpu"), cgroup_folder(helper.pid, "cpu")
        assert runs != helpers and runs.parent != helpers.parent, "the two users' jobs share one CPU group"

        def weight(folder: Path) -> int:
            """The weight a job's group competes with at the top: its class (runs/helpers) under workbench/."""
            while folder.parent.name != "workbench":
                assert folder != folder.parent, f"{folder}: not under the workbench's CPU groups"
                folder = folder.parent
            return int((folder / "cpu.shares").read_text())

        # bob's trainer keeps at least 1 / (1 + share) of the CPU against alice's helper, whatever it starts
        assert weight(helpers) / weight(runs) <= 0.5, f"helper {weight(helpers)} against run {weight(runs)}"
        assert "alice" in helpers.parent.name and "bob" in runs.parent.name, "a group per user"
        assert int((helpers.parent / "cpu.shares").read_text()) == int((runs.parent / "cpu.shares").read_text())


def test_two_jobs_of_one_user_hold_no_more_memory_together_than_the_machine(tmp_path):
    env = {"PATH": os.environ["PATH"]}  # the admin set nothing: the defaults hold
    total = psutil.virtual_memory().total
    folders = []
    with contextlib.ExitStack() as stack:
        for name in ("one", "two"):  # WORKBENCH_MAX_RUNS_PER_USER's default: two jobs at once
            own = _own(tmp_path, name, owner="alice")
            exposed = sandbox.exposure(own, own.parent, {}, sandbox.Policy(), env)
            job = stack.enter_context(started(sandbox.wrap(SLEEPER, exposed, env, foreground=True)))
            folders.append(cgroup_folder(job.pid, "memory"))
        limits = [memory_limit(folder) for folder in folders]
        assert sum(limits) < total, f"two jobs may hold {sum(limits) / 2**30:.1f} GiB on {total / 2**30:.1f} GiB"
        common = Path(os.path.commonpath(folders))
        assert memory_limit(common) < total, "no limit over all sandboxes below the machine's memory"


def test_a_sandboxs_processes_go_to_the_oom_killer_before_the_servers(tmp_path):
    env = {"PATH": os.environ["PATH"]}
    own = _own(tmp_path, "r", owner="alice")
    exposed = sandbox.exposure(own, own.parent, {}, sandbox.Policy(), env, limits=sandbox.Limits(memory=512 * MIB))
    server = int(Path("/proc/self/oom_score_adj").read_text())
    with started(sandbox.wrap(SLEEPER, exposed, env, foreground=True)) as job:
        adj = int(Path(f"/proc/{job.pid}/oom_score_adj").read_text())
        assert adj >= server + 300, f"the sandbox's oom_score_adj {adj}, the server's {server}"
        assert int(Path(f"/proc/{job.pid}/oom_score").read_text()) > int(Path("/proc/self/oom_score").read_text())
    with started(sandbox.confinement(own, own.parent, {}, sandbox.Policy())(SLEEPER, env)) as helper:
        assert int(Path(f"/proc/{helper.pid}/oom_score_adj").read_text()) > adj, "a helper goes before a run"


def test_the_in_memory_folders_are_bounded_together(tmp_path):
    env = {"PATH": os.environ["PATH"]}
    own = _own(tmp_path, "r")
    limits = sandbox.Limits(memory=1024 * MIB, tmp=64 * MIB)  # each folder 64 MiB, and all of them together
    exposed = sandbox.exposure(own, own.parent, {}, sandbox.Policy(), env, limits=limits)
    code = (
        "import time\nfor folder in ['/tmp', '/dev/shm', '/var/tmp']:\n"
        "    open(folder + '/fill', 'wb').write(b'x' * 40 * 2**20)\n"
        "print('held 120 MiB', flush=True)\ntime.sleep(6)\nprint('still holding', flush=True)\n"
    )
    argv, inner = sandbox.wrap([sys.executable, "-c", code], exposed, env, foreground=True)
    done = subprocess.run(argv, env=inner, capture_output=True, text=True, timeout=60)
    assert "held 120 MiB" in done.stdout, done.stderr
    assert "still holding" not in done.stdout, "120 MiB stayed in in-memory folders bounded at 64 MiB together"
    error = json.loads((own / "status.json").read_text())["error"]
    assert "in-memory folders" in error["message"] and "WORKBENCH_RUN_TMP_GB" in error["hint"]
