"""Break: on a dashboard served as root with accounts, no sandboxed run starts at all.

app.py sets the umask to 077 when it has accounts ("run folders ... are this account's alone"), so each new
run folder is 0700. A root server then runs the sandbox as a uid of its own: `sandbox.hand_over` gives the
folder to that uid, and bwrap, still uid 0 but with every capability dropped except CAP_SETUID/CAP_SETGID,
cannot enter it: train.log says `bwrap: Can't chdir to <run folder>: Permission denied` and the run is
`failed` before its first line. Seen on app.py served with a users file: every launch, smoke test and
resume fails. The suite's sandboxed runs start from processes with the usual umask 022, so they pass.
Here: the same launch with app.py's umask, a real sandboxed one-step run of the tiny model.
"""

from __future__ import annotations

import os

import pytest
from helpers import tiny_settings

from workbench.access import uploads
from workbench.jobs import launcher, run_state, sandbox
from workbench.runstore import runfolder
from workbench.spec.config import RunConfig

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(sandbox.bwrap_binary() is None, reason="bubblewrap is not installed"),
    pytest.mark.skipif(os.geteuid() != 0, reason="a sandbox gets a uid of its own only on a root server"),
]


def test_a_run_launched_with_the_served_apps_umask_starts_in_its_sandbox(tmp_path):
    runs = tmp_path / "runs"
    alice_uploads = uploads.uploads_dir(runs, "alice")
    alice_uploads.mkdir(parents=True)
    config = RunConfig(**tiny_settings(task="demo", reward_names=["brevity"], max_steps=1, save_steps=1000))
    before = os.umask(0o077)  # what app.py does when it serves accounts
    try:
        run_id = launcher.start(
            config,
            runs,
            owner="alice",
            import_reward_file=False,
            sandboxed=sandbox.Policy(readable=(str(alice_uploads),)),
        )
    finally:
        os.umask(before)
    final = run_state.wait(run_id, runs, timeout=300)
    log = runfolder.read_log_tail(runs / run_id)
    assert "Can't chdir" not in log, log[-400:]
    assert final["state"] == "finished", (final["state"], log[-400:])
