"""Attack: a student makes their own sandbox run as root (uid 0 on the host) by naming a private folder.

A root server runs each sandbox as a uid of its own, unless that uid "could not reach what it shows"
(`sandbox_uid.all_reachable`): then the sandbox keeps the server's uid, 0. What it shows includes every path
the run's config names, and a student chooses those: the model may be a folder of one of their own runs
(README: "a merged model of one of your runs"), which app.py's umask 077 makes 0700. The run then runs as
root with no capabilities, which still reads every root-owned file its owner may read that the sandbox
does not hide (root-only keys and caches: /var/cache/debconf/passwords.dat, a TLS key kept `chmod 600`
beside the checkout), and gets no RLIMIT_NPROC. README: a signed-in user cannot "be root as the host sees it".
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from workbench.jobs import sandbox

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="a sandbox gets a uid of its own only on a root server")


def test_a_private_folder_the_config_names_does_not_make_the_sandbox_root(tmp_path):
    runs = tmp_path / "runs"
    own = runs / "20260101-000002-alice-b"
    own.mkdir(parents=True)
    merged = runs / "20260101-000001-alice-a" / "merged"  # alice's earlier run's merged model
    merged.mkdir(parents=True)
    merged.chmod(0o700)  # as app.py's umask 077 leaves it
    env = {"PATH": os.environ["PATH"]}
    exposed = sandbox.exposure(own, runs, {"model": str(merged)}, sandbox.Policy(), env)
    if sandbox.bwrap_binary() is not None:
        argv, inner_env = sandbox.wrap(
            [sys.executable, "-c", "import os; print(os.getuid())"], exposed, env, foreground=True
        )
        done = subprocess.run(argv, capture_output=True, text=True, timeout=60, env=inner_env)
        assert done.stdout.strip() != "0", "the student's reward code ran as uid 0 on the host"
    assert exposed.uid is not None, "the sandbox kept the server's uid (root) for a folder the student named"
