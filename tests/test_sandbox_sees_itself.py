"""A sandbox sees only itself: not the other sandboxes' control groups, nor the host's memory and load (issue 52).

Before, `/sys/fs/cgroup` inside showed every sandbox's group (its name, creation time and memory), and
`/proc/meminfo` and `/proc/loadavg` the whole machine's, so one student's run could watch the others'. Now the
cgroup folder is an empty read-only tmpfs (the sandbox joins its groups before bwrap starts), and bwrap binds a
file of the sandbox's own over each host-wide /proc file (jobs/sandbox_proc.py). Tried with real bwrap
sandboxes, as the server starts them (`sandbox.wrap`: as root, each in its own control groups).
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from workbench.jobs import run_cgroup, sandbox

needs_bwrap = pytest.mark.skipif(sandbox.bwrap_binary() is None, reason="bubblewrap is not installed")

PROBE = """
import os
groups = [os.path.join(top, name) for top, folders, _ in os.walk("/sys/fs/cgroup") for name in folders]
print(len(groups), sum(name.startswith("PREFIX") for group in groups for name in [os.path.basename(group)]))
print(open("/proc/loadavg").read().strip())
print(open("/proc/meminfo").readline().split()[1])
""".replace("PREFIX", run_cgroup.PREFIX)


def started(tmp_path, name: str, command: list[str], **popen) -> subprocess.Popen:
    runs = tmp_path / "runs"
    run_dir = runs / f"20260101-00000{len(list(runs.glob('*'))) if runs.exists() else 0}-{name}"
    run_dir.mkdir(parents=True)
    env = {"HOME": str(tmp_path / "home"), "PATH": os.environ["PATH"], "WORKBENCH_CACHE": str(tmp_path / "cache")}
    limits = sandbox.Limits(memory=3 * 2**30, processes=64)
    exposed = sandbox.exposure(run_dir, runs, {}, sandbox.Policy(), env, limits)
    argv, clean = sandbox.wrap(command, exposed, env, foreground=True)
    return subprocess.Popen(argv, env={**clean, **exposed.env}, text=True, **popen)


@needs_bwrap
def test_a_sandbox_lists_no_other_sandboxs_cgroup_and_reads_neither_the_hosts_load_nor_its_memory(
    tmp_path, monkeypatch
):
    monkeypatch.setenv("WORKBENCH_CACHE", str(tmp_path / "cache"))  # where the sandbox's own /proc files lie
    bob = started(tmp_path, "bob", ["sleep", "60"])
    try:
        alice = started(
            tmp_path, "alice", [sys.executable, "-c", PROBE], stdout=subprocess.PIPE, stderr=subprocess.PIPE
        )
        out, err = alice.communicate(timeout=60)
    finally:
        bob.kill()
        bob.wait()
    assert alice.returncode == 0, err
    listed, loadavg, memory_kib = out.splitlines()[:3]
    assert listed == "0 0", "the control groups of the host and of bob's sandbox are hidden"
    assert loadavg == "0.00 0.00 0.00 1/1 1" != open("/proc/loadavg").read().strip(), "no load, not the host's"
    assert int(memory_kib) == 3 * 2**30 // 1024, "the memory it may use, not the machine's"
