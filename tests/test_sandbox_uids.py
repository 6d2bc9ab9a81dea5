"""The uid a sandbox runs as is the server's choice (jobs/run_uids.py), never a hash of a name a user picks.

Before, a root server ran each sandbox as `2_000_000 + crc32(its folder's path) % 100_000`, and the folder's
name holds the user's run name: a brute-forced name put a student's signal check on another user's uid, and
since RLIMIT_NPROC counts a uid's processes and threads across the host, the check's threads made the other
user's run fail. Here such names are brute-forced again (a pair among a few hundred names; one to match a given
folder among about 100,000), and the sandboxes they name must get uids of their own.
"""

from __future__ import annotations

import itertools
import os
import shutil
import subprocess
import sys
import zlib
from pathlib import Path

import pytest
from helpers import poll_until, tiny_settings

from workbench.jobs import launcher, run_state, sandbox
from workbench.runstore import launch_records, runfolder
from workbench.spec.config import RunConfig

as_root = pytest.mark.skipif(os.geteuid() != 0, reason="a sandbox gets a uid of its own only from a root server")
needs_bwrap = pytest.mark.skipif(sandbox.bwrap_binary() is None, reason="bubblewrap is not installed")
# the range the old rule hashed folders into, and the one the server chooses from now
RUN_UIDS = range(2_000_000, 2_100_000)
POOL = len(RUN_UIDS)


def old_rule_uid(folder: Path) -> int:
    """The uid the folder's sandbox got before: a hash of its path, which its name is part of."""
    return RUN_UIDS.start + zlib.crc32(os.path.realpath(folder).encode()) % POOL


def colliding_pair(parent: Path, prefix: str) -> tuple[str, str]:
    """Two folder names under `parent` whose paths the old rule gave one uid (a birthday search)."""
    seen: dict[int, str] = {}
    for i in itertools.count():
        name = f"{prefix}-{i}"
        uid = old_rule_uid(parent / name)
        if uid in seen:
            return seen[uid], name
        seen[uid] = name


def name_colliding_with(target: Path, parent: Path, prefix: str) -> str:
    """A folder name under `parent` the old rule gave the same uid as the folder `target`."""
    wanted = old_rule_uid(target)
    return next(f"{prefix}-{i}" for i in itertools.count() if old_rule_uid(parent / f"{prefix}-{i}") == wanted)


# ---------------------------------------------------------------- the allocator itself


@pytest.fixture
def run_uids():
    from workbench.jobs import run_uids

    assert run_uids.RUN_UIDS == RUN_UIDS
    return run_uids


def test_a_free_uid_is_one_no_one_holds_and_none_left_says_which_limit(run_uids):
    pool = range(10, 20)
    assert run_uids.pick_free(set(), pool, start=3) == 13
    assert run_uids.pick_free({13, 14}, pool, start=3) == 15
    assert run_uids.pick_free({18, 19}, pool, start=8) == 10  # wraps around
    assert run_uids.pick_free(set(range(10, 19)), pool) == 19  # from anywhere: the one left
    with pytest.raises(run_uids.UidsExhausted, match=r"all 10 uids .* \(10-19\) are held.*delet"):
        run_uids.pick_free(set(pool), pool)


def holding_child(runs: Path, folder: Path) -> subprocess.Popen:
    """A process that asks for `folder`'s uid (as a signal check's starter does) and then lives on."""
    code = (
        "import sys, time\nfrom workbench.jobs import run_uids\n"
        "print(run_uids.sandbox_uid(sys.argv[1], sys.argv[2]), flush=True)\ntime.sleep(60)\n"
    )
    return subprocess.Popen([sys.executable, "-c", code, str(folder), str(runs)], stdout=subprocess.PIPE, text=True)


def test_many_allocations_never_give_one_uid_twice_and_free_it_when_its_holder_is_gone(tmp_path, run_uids):
    runs = tmp_path / "runs"
    names = [f"run-{i}" for i in range(120)]
    for name in names:
        (runs / name).mkdir(parents=True)
        launch_records.write_record(runs / name, launch_records.LaunchRecord(sandboxed=True))
    checks = [runs / "signal-checks" / f"check-{i}" for i in range(40)]
    for folder in checks:
        folder.mkdir(parents=True)
    uids = [run_uids.sandbox_uid(runs / name, runs) for name in names] + [
        run_uids.sandbox_uid(folder, runs) for folder in checks
    ]
    assert len(set(uids)) == len(uids) == 160 and all(uid in RUN_UIDS for uid in uids)
    # a run keeps its uid (its resumes, its helpers), recorded where the run cannot write
    assert [run_uids.sandbox_uid(runs / name, runs) for name in names] == uids[:120]
    assert launch_records.read_record(runs / names[0]).uid == uids[0]
    assert run_uids.sandbox_uid(checks[0], runs) == uids[120]  # a folder asked for again: the uid held for it
    # a deleted run's record frees its uid
    launch_records.remove_record(runs / names[0])
    assert uids[0] not in run_uids.taken(runs) and uids[1] in run_uids.taken(runs)
    # a folder without a record holds its uid while the process that asked runs, and no longer
    folder = runs / "signal-checks" / "held-by-a-child"
    folder.mkdir()
    child = holding_child(runs, folder)
    try:
        held = int(child.stdout.readline())
        assert held in run_uids.taken(runs) and held not in uids
    finally:
        child.kill()
        child.wait()
    assert held not in run_uids.taken(runs)


@as_root
def test_a_uid_some_process_still_runs_as_is_not_given(tmp_path, run_uids):
    uid = RUN_UIDS.start + 17
    leftover = subprocess.Popen(["sleep", "30"], user=uid, group=uid)
    try:
        poll_until(lambda: uid in run_uids.process_uids(), timeout=10)
        assert uid in run_uids.taken(tmp_path / "runs")
    finally:
        leftover.kill()
        leftover.wait()
    assert uid not in run_uids.taken(tmp_path / "runs")


# ---------------------------------------------------------------- real sandboxes

REPORT_UID = "import os, sys, time\nopen('uid', 'w').write(str(os.getuid()))\ntime.sleep(float(sys.argv[1]))\n"


def start_bare_sandbox(own: Path, runs: Path, code: str, *args: str) -> subprocess.Popen:
    """A sandbox of the folder `own` (no run record: a helper job's) running `code`, as the tests of limits do."""
    own.mkdir(parents=True, exist_ok=True)
    env = {"PATH": os.environ["PATH"]}
    exposed = sandbox.exposure(own, runs, {}, sandbox.Policy(), env, limits=sandbox.Limits.from_env(os.environ))
    # foreground: bwrap dies with its parent, so killing what the test started ends the whole sandbox
    argv, env = sandbox.wrap([sys.executable, "-c", code, *args], exposed, env, foreground=True)
    return subprocess.Popen(argv, env=env, start_new_session=True, stderr=subprocess.PIPE, text=True)


def ended(process: subprocess.Popen) -> None:
    if process.poll() is None:
        os.killpg(process.pid, 9)
    process.wait(timeout=30)


@as_root
@needs_bwrap
def test_two_live_sandboxes_whose_names_collide_under_the_old_rule_run_as_two_uids(tmp_path):
    runs = tmp_path / "runs"
    checks = runs / "signal-checks"
    first, second = colliding_pair(checks, "check")
    started = [start_bare_sandbox(checks / name, runs, REPORT_UID, "30") for name in (first, second)]
    try:
        poll_until(lambda: all((checks / name / "uid").exists() for name in (first, second)), timeout=60)
        seen = {int((checks / name / "uid").read_text()) for name in (first, second)}
        assert len(seen) == 2 and 0 not in seen, f"two live sandboxes ran as one uid: {seen}"
    finally:
        for process in started:
            ended(process)


def one_step(run_name: str = "uids") -> RunConfig:
    return RunConfig(
        **tiny_settings(task="demo", reward_names=["brevity"], logging_steps=1, save_steps=1),
        max_steps=1,
        run_name=run_name,
    )


def wait_finished(run_id: str, runs: Path, timeout: float = 400) -> dict:
    final = run_state.wait(run_id, runs, timeout=timeout)
    assert final["state"] == "finished", (final.get("error"), runfolder.read_log_tail(runs / run_id))
    return final


def written_by(run_dir: Path) -> int:
    """The uid the run's trainer wrote its files as (its adapter, made inside the sandbox)."""
    return (run_dir / runfolder.ADAPTER_DIR).stat().st_uid


@pytest.mark.slow
@as_root
@needs_bwrap
def test_two_runs_named_to_collide_train_as_two_uids(tmp_path):
    runs = tmp_path / "runs"
    names = colliding_pair(runs, "alice-run")
    ids = [
        launcher.start(one_step(), runs, owner=owner, sandboxed=sandbox.Policy(), into=runs / name)
        for owner, name in zip(("alice", "bob"), names, strict=True)
    ]
    for run_id in ids:
        wait_finished(run_id, runs)
    uids = [written_by(runs / run_id) for run_id in ids]
    assert len(set(uids)) == 2 and 0 not in uids, f"two users' runs trained as one uid: {uids}"
    assert uids == [launch_records.read_record(runs / run_id).uid for run_id in ids]


@pytest.mark.slow
@as_root
@needs_bwrap
def test_a_run_folder_from_the_old_rule_resumes_in_its_sandbox_as_a_uid_the_server_chose(tiny_trained_run, tmp_path):
    runs = tmp_path / "runs"
    run_dir = runs / "old-rule-run"
    shutil.copytree(tiny_trained_run, run_dir)
    config = RunConfig.load(run_dir / runfolder.CONFIG_FILE).with_changes(max_steps=3)
    # a record as the launcher wrote them before uids were recorded, and a folder its old uid owns
    launch_records.write_record(
        run_dir,
        launch_records.LaunchRecord(owner="alice", sandboxed=True, policy={}, config=config.to_dict()),
    )
    old = old_rule_uid(run_dir)
    for path in [run_dir, *run_dir.rglob("*")]:
        os.chown(path, old, old, follow_symlinks=False)
    launcher.resume(run_dir.name, runs)
    final = wait_finished(run_dir.name, runs)
    assert final["step"] == 3
    uid = launch_records.read_record(run_dir).uid
    assert uid in RUN_UIDS and (run_dir / "checkpoint-3").stat().st_uid == written_by(run_dir) == uid
    assert {path.lstat().st_uid for path in run_dir.rglob("*")} == {uid}, "the folder was handed over whole"


THREAD_HOARD = """
import os, sys, threading, time
threading.stack_size(64 * 1024)
held = 0
try:
    while True:  # as many threads as the uid may have: RLIMIT_NPROC counts them all, host-wide, per uid
        threading.Thread(target=time.sleep, args=(600,), daemon=True).start()
        held += 1
except RuntimeError:
    pass
open('held', 'w').write(str(held))
time.sleep(600)
"""


@pytest.mark.slow
@as_root
@needs_bwrap
def test_a_check_named_onto_another_users_run_uid_cannot_starve_that_run_of_threads(tmp_path):
    runs = tmp_path / "runs"
    hostile = runs / "signal-checks" / "20260101-000000-mallory"
    victim_name = name_colliding_with(hostile, runs, "alice-run")
    hoard = start_bare_sandbox(hostile, runs, THREAD_HOARD)
    try:
        poll_until(lambda: (hostile / "held").exists() or hoard.poll() is not None, timeout=120)
        assert (hostile / "held").exists(), hoard.stderr.read() if hoard.poll() is not None else ""
        assert int((hostile / "held").read_text()) > 1000, "the hoard held the uid's threads"
        run_id = launcher.start(one_step(), runs, owner="alice", sandboxed=sandbox.Policy(), into=runs / victim_name)
        wait_finished(run_id, runs)
        assert written_by(runs / run_id) != (hostile / "held").stat().st_uid
    finally:
        ended(hoard)
