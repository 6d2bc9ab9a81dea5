"""A helper job may not write past its owner's disk total (issue 52, the attack round).

Found by attacking the fixed shared server as a hostile student. The total (WORKBENCH_USER_DISK_GB) was checked
when a signal check started, and only live runs were stopped past it (jobs/warden.py): the check's own sandbox
kept the per-folder limit, WORKBENCH_RUN_DISK_GB (50 GiB by default). A reward file that preallocates a hoard
at import in the check's folder, started while its owner was under the total, kept it there for the whole check
(and, with as many checks as the per-user cap allows at once, that many times over), past the total by far.
Now a helper job's sandbox gets at most the room its owner has left as its folder's disk limit
(`user_disk.job_env`), so the sandbox's own watch ends it, naming the limit.
"""

from __future__ import annotations

import time

import pytest
from helpers import tiny_config

from workbench.access import uploads
from workbench.jobs import sandbox, signal_job
from workbench.jobs.sandbox_init import folder_bytes

MIB = 2**20

HOARD_REWARD = """
import os, time
with open("hoard.bin", "wb") as handle:  # the check's folder: its working directory
    os.posix_fallocate(handle.fileno(), 0, 64 * 2**20)
time.sleep(60)  # holds the hoard for as long as the check may run


def hoard(prompts, completions, **kwargs):
    return [0.0] * len(completions)
"""


@pytest.mark.slow
@pytest.mark.skipif(sandbox.bwrap_binary() is None, reason="bubblewrap is not installed")
def test_a_signal_checks_hoard_past_its_owners_disk_total_ends_the_check(tmp_path, monkeypatch):
    runs = tmp_path / "runs"
    folder = uploads.uploads_dir(runs, "alice")
    folder.mkdir(parents=True)
    (folder / "hoard.py").write_text(HOARD_REWARD)
    monkeypatch.setenv("WORKBENCH_USER_DISK_GB", str(16 / 1024))  # 16 MiB; alice holds a few KiB
    config = tiny_config(reward_file=str(folder / "hoard.py"), reward_timeout_s=5.0)
    job = signal_job.start_signal_check(config, runs, groups=1, policy=sandbox.Policy(), owner="alice")
    held, deadline = 0, time.monotonic() + 45  # the hoard sleeps 60 s
    try:
        while job.process.poll() is None and time.monotonic() < deadline:
            held = max(held, folder_bytes(str(job.folder)))
            time.sleep(0.5)
        ended = job.process.poll() is not None
        outcome = signal_job.read_signal_check(job) if ended else {}
    finally:
        signal_job.cancel_signal_check(job)
    assert ended, f"the check held {held / MIB:.0f} MiB past alice's 16 MiB total for 45 s, and went on"
    assert outcome["state"] == "failed" and "WORKBENCH_USER_DISK_GB" in outcome["error"], outcome
