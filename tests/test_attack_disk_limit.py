"""Attack: a run hides what it writes from its disk limit by making a folder of its own unreadable.

The sandbox's init measures the run folder with os.walk + lstat, as the run's own uid: a folder the run
made and then `chmod 0` cannot be walked, its files are not counted (os.walk skips it without a word), and
the run writes past WORKBENCH_RUN_DISK_GB onto the host's disk. Here: 40 MiB under an 8 MiB limit.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from workbench.jobs import sandbox

needs_bwrap = pytest.mark.skipif(sandbox.bwrap_binary() is None, reason="bubblewrap is not installed")

CODE = """
import os, time
os.mkdir("hidden")
for i in range(40):
    with open(f"hidden/part{i}", "wb") as handle:
        handle.write(b"x" * 2**20)
os.chmod("hidden", 0)
time.sleep(4)  # the init looks every second
print("still running", flush=True)
"""


@pytest.mark.slow  # waits for the init's looks
@needs_bwrap
def test_an_unreadable_folder_still_counts_against_the_disk_limit(tmp_path):
    own = tmp_path / "runs" / "r"
    own.mkdir(parents=True)
    (own / "status.json").write_text("{}")
    env = {"PATH": os.environ["PATH"]}
    exposed = sandbox.exposure(own, own.parent, {}, sandbox.Policy(), env, limits=sandbox.Limits(disk=8 * 2**20))
    if exposed.uid is None:
        pytest.skip("the init runs as the server's uid here, which can walk any folder")
    argv, inner_env = sandbox.wrap([sys.executable, "-c", CODE], exposed, env, foreground=True)
    done = subprocess.run(argv, capture_output=True, text=True, timeout=120, env=inner_env)
    written = sum(
        os.lstat(os.path.join(root, name)).st_blocks * 512 for root, _, files in os.walk(own) for name in files
    )
    assert "still running" not in done.stdout and "more than its limit" in done.stderr, (
        f"the run held {written / 2**20:.0f} MiB under an 8 MiB disk limit and was not ended"
    )
