"""Attack: a queued run's config names a file in another run of the same user; that run turns the file into a
link to another user's upload before the queued run starts, and the sandbox shows the upload.

The path rule checks the config's paths at launch. A queued run is started later by the dispatcher,
without the rule ("read_data=False ... its data is read inside its sandbox, under its policy"), and the
sandbox binds every path the recorded config names read-only, each resolved again *now* (`sandbox_paths.named_paths`:
`os.path.realpath`). alice's live run A can replace `A/prompts.jsonl`, which her queued run B names as its
dataset, by a link to bob's upload: B's sandbox then shows bob's file at its real place (and the server makes
it readable to every uid), and B's reward file, imported before its dataset is read, copies it into B's
folder. Real sandboxed run, tiny model; the dispatcher starts B once A's process ends.
"""

from __future__ import annotations

import subprocess
import time

import pytest
from helpers import poll_until, tiny_settings

from workbench.access import uploads
from workbench.jobs import launcher, run_state, sandbox
from workbench.runstore import launch_records, runfolder
from workbench.spec.config import RunConfig

pytestmark = pytest.mark.slow
needs_bwrap = pytest.mark.skipif(sandbox.bwrap_binary() is None, reason="bubblewrap is not installed")
SECRET = "BOB-SECRET-ROW-91e7"

LEAK = """
try:
    with open(BOB_FILE) as handle:
        found = handle.read()
except OSError as exc:
    found = type(exc).__name__
with open("leak.txt", "w") as handle:  # B's own folder: alice reads it back
    handle.write(found)

def brevity(completions, **kwargs):
    return [0.0 for _ in completions]
"""


@needs_bwrap
def test_a_queued_run_is_shown_only_what_its_config_named_when_it_was_checked(tmp_path):
    runs = tmp_path / "runs"
    alice_uploads, bob_uploads = uploads.uploads_dir(runs, "alice"), uploads.uploads_dir(runs, "bob")
    alice_uploads.mkdir(parents=True)
    bob_uploads.mkdir(parents=True)
    bob_file = bob_uploads / "homework.jsonl"
    bob_file.write_text(f'{{"prompt": "{SECRET}"}}\n' * 8)
    # alice's run A, live (its process a sleeper), holds the CPU; its code wrote prompts into its folder
    run_a = runs / "20260101-000001-alice-a"
    run_a.mkdir()
    RunConfig(model="tiny", device="cpu").save(run_a / runfolder.CONFIG_FILE)
    holder = subprocess.Popen(["sleep", "300"], start_new_session=True)
    launch_records.write_record(run_a, launch_records.LaunchRecord(owner="alice", sandboxed=True, policy={}, config={}))
    launch_records.record_started(run_a, holder.pid)
    runfolder.update_status(run_a, state="training", step=1, owner="alice")
    (run_a / "prompts.jsonl").write_text('{"prompt": "What is 2 + 2?"}\n' * 8)
    reward = alice_uploads / "leak.py"
    reward.write_text(LEAK.replace("BOB_FILE", repr(str(bob_file))))
    config = RunConfig(
        **tiny_settings(task="demo", reward_names=["brevity"], max_steps=1, save_steps=1000),
        dataset_name=str(run_a / "prompts.jsonl"),
        prompt_column="prompt",
        reward_file=str(reward),
    )
    policy = sandbox.Policy(readable=(str(alice_uploads),))  # what the dashboard gives alice's runs
    run_b = None
    try:
        # the launch the dashboard makes after the path rule passed (A's file is alice's): queued behind A
        run_b = runs / launcher.start(config, runs, owner="alice", import_reward_file=False, sandboxed=policy)
        assert runfolder.read_status(run_b)["state"] == runfolder.QUEUED
        # A's code: its prompts become a link to bob's upload; then A ends and the dispatcher starts B
        (run_a / "prompts.jsonl").unlink()
        (run_a / "prompts.jsonl").symlink_to(bob_file)
        holder.kill()
        poll_until(
            lambda: (run_b / "leak.txt").exists() or run_state.status_of_dir(run_b)["state"] in runfolder.FINAL_STATES,
            timeout=240,
        )
        time.sleep(0.5)
        found = (run_b / "leak.txt").read_text() if (run_b / "leak.txt").exists() else ""
        shown = runfolder.read_status(run_b).get("sandbox", {}).get("shows", {}).get("read-only", [])
        assert SECRET not in found, f"alice's queued run read bob's upload; its sandbox showed {shown[-3:]}"
        assert str(bob_file) not in shown
    finally:
        holder.kill()
        holder.wait()
        if run_b is not None:
            launcher.stop(run_b.name, runs, timeout=5)
