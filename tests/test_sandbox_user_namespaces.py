"""A sandbox cannot make user namespaces of its own (issue 52, the attack round).

Found by attacking the fixed shared server as a hostile student. Inside a run's sandbox, `unshare -Urm` made a
user and mount namespace, and a tmpfs mounted there held 200 MB past the 64 MiB the sandbox's in-memory folders
may hold together: the sandbox init's watch reads its own namespace's mounts, which do not show it (and a user
namespace opens to the run the parts of the kernel that need CAP_SYS_ADMIN over it). The sandbox init now
installs a seccomp filter, inherited by everything the run starts, that refuses new user namespaces
(jobs/sandbox_init.py `refuse_user_namespaces`); threads and subprocesses still start.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest

from workbench.jobs import sandbox

pytestmark = pytest.mark.skipif(sandbox.bwrap_binary() is None, reason="bubblewrap is not installed")

HOARD = r"""
import subprocess, threading
done = subprocess.run(
    ["unshare", "-Urm", "sh", "-c", "mount -t tmpfs none /tmp && head -c 200000000 /dev/zero > /tmp/h && echo HELD"],
    capture_output=True, text=True,
)
print("unshare", done.returncode, done.stdout.strip(), done.stderr.strip()[-200:])
ran = []
thread = threading.Thread(target=lambda: ran.append(subprocess.run(["true"]).returncode))
thread.start()
thread.join()
print("thread and subprocess", ran)
"""


@pytest.mark.skipif(shutil.which("unshare") is None, reason="util-linux's unshare is not installed")
def test_a_sandbox_cannot_mount_a_tmpfs_of_its_own_in_a_user_namespace(tmp_path):
    own = tmp_path / "runs" / "r"
    own.mkdir(parents=True)
    (own / "status.json").write_text("{}")
    env = {"PATH": os.environ["PATH"]}
    limits = sandbox.Limits(memory=1024 * 2**20, tmp=64 * 2**20)
    exposed = sandbox.exposure(own, own.parent, {}, sandbox.Policy(), env, limits=limits)
    argv, inner = sandbox.wrap([sys.executable, "-c", HOARD], exposed, env, foreground=True)
    done = subprocess.run(argv, env=inner, capture_output=True, text=True, timeout=60)
    assert "thread and subprocess [0]" in done.stdout, done.stdout + done.stderr
    assert "HELD" not in done.stdout, "the sandbox held 200 MB in a tmpfs of its own, past its 64 MiB"
    assert "unshare 0" not in done.stdout, done.stdout
