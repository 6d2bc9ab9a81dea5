"""Attack: a run goes past WORKBENCH_RUN_MEMORY_GB, the memory the README says it cannot go past.

The sandbox's init (jobs/sandbox_init.py) sets RLIMIT_DATA, which counts one process's private writable
memory only. A shared anonymous mapping (Python's `mmap.mmap(-1, n)`, MAP_SHARED) is not counted at all;
several processes each get the whole limit; and every in-memory folder (/tmp, /dev/shm, the hidden homes,
/run, /mnt, ... nine of them) holds its own WORKBENCH_RUN_TMP_GB of the host's memory besides. With the
defaults (three quarters of the machine, 2048 processes, 2 GiB a folder) one run can take all of the host's
memory. Each test runs a small command in a real sandbox with a 256 MiB limit.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from workbench.jobs import sandbox

needs_bwrap = pytest.mark.skipif(sandbox.bwrap_binary() is None, reason="bubblewrap is not installed")
MIB = 2**20
LIMITS = sandbox.Limits(memory=256 * MIB, tmp=64 * MIB)


def run_in_sandbox(tmp_path, code: str) -> subprocess.CompletedProcess:
    own = tmp_path / "runs" / "r"
    own.mkdir(parents=True)
    (own / "status.json").write_text("{}")
    env = {"PATH": os.environ["PATH"]}
    exposed = sandbox.exposure(own, own.parent, {}, sandbox.Policy(), env, limits=LIMITS)
    argv, inner_env = sandbox.wrap([sys.executable, "-c", code], exposed, env, foreground=True)
    return subprocess.run(argv, capture_output=True, text=True, timeout=120, env=inner_env)


@needs_bwrap
def test_a_shared_mapping_does_not_go_past_the_memory_limit(tmp_path):
    code = (
        "import mmap\nm = mmap.mmap(-1, 600 * 2**20)\nfor i in range(0, len(m), 4096):\n    m[i] = 1\n"
        "print('held 600 MiB', flush=True)\n"
    )
    done = run_in_sandbox(tmp_path, code)
    assert "held 600 MiB" not in done.stdout, "one process held 600 MiB (a shared mapping) under a 256 MiB limit"


@needs_bwrap
def test_several_processes_do_not_go_past_the_runs_memory_limit(tmp_path):
    code = (
        "import os, time\nkids = []\nfor _ in range(3):\n    pid = os.fork()\n    if pid == 0:\n"
        "        block = bytearray(200 * 2**20)\n        time.sleep(3)\n        os._exit(0)\n    kids.append(pid)\n"
        "time.sleep(1.5)\ntotal = sum(int(line.split()[1]) for pid in kids for line in open(f'/proc/{pid}/status')"
        " if line.startswith('VmRSS'))\nprint('held MiB', total // 1024, flush=True)\n"
        "for pid in kids:\n    os.waitpid(pid, 0)\n"
    )
    done = run_in_sandbox(tmp_path, code)
    held = int(done.stdout.split("held MiB")[1].split()[0]) if "held MiB" in done.stdout else 0
    assert held <= 256, f"the run's processes held {held} MiB together under a 256 MiB limit"


@needs_bwrap
def test_the_in_memory_folders_together_do_not_go_past_the_memory_limit(tmp_path):
    code = (
        "total = 0\nfor folder in ['/tmp', '/var/tmp', '/home', '/root', '/run', '/mnt', '/media', '/srv', "
        "'/dev/shm']:\n    try:\n        open(folder + '/fill', 'wb').write(b'x' * 60 * 2**20)\n"
        "        total += 60\n    except OSError:\n        pass\nprint('in memory MiB', total, flush=True)\n"
    )
    done = run_in_sandbox(tmp_path, code)
    held = int(done.stdout.split("in memory MiB")[1].split()[0]) if "in memory MiB" in done.stdout else 0
    assert held <= 256, f"the run kept {held} MiB in its in-memory folders under a 256 MiB memory limit"
