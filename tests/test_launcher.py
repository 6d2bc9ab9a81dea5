"""Background runs: the command, start / stop / resume, dead processes, two CPU processes.

Every run here is a real `python -m workbench train` process training the tiny
model (4 completions of at most 8 tokens a step) so a step takes seconds.
"""

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers import TINY, launched_threads
from helpers import poll_until as wait_for

from workbench.jobs import allocator, commands, launcher, processes, run_list, run_state
from workbench.runstore import checkpoint_integrity, run_locks, runfolder
from workbench.spec.config import ConfigError, RunConfig


@pytest.fixture
def runs_dir(tmp_path):
    return tmp_path / "runs"


def steps_of(run_dir, name):
    return [record["step"] for record in runfolder.read_jsonl(run_dir / name)]


# ---------------------------------------------------------------- commands


def test_one_process_runs_python_m_workbench(tmp_path):
    command = commands.build_command(RunConfig(**TINY), tmp_path)
    assert command == [
        sys.executable,
        "-m",
        "workbench",
        "train",
        "--run-dir",
        str(tmp_path),
        "--config",
        str(tmp_path / "config.json"),
    ]


def test_several_processes_go_through_accelerate_launch(tmp_path):
    command = commands.build_command(RunConfig(**TINY, num_processes=2), tmp_path, resume=True)
    assert "launch" in command[:3] and command[command.index("--num_processes") + 1] == "2"
    assert command[-8:] == [
        "-m",
        "workbench",
        "train",
        "--run-dir",
        str(tmp_path),
        "--config",
        str(tmp_path / "config.json"),
        "--resume",
    ]


def test_start_refuses_a_bad_config_before_anything_runs(runs_dir):
    with pytest.raises(ConfigError, match="num_generations"):
        launcher.start(RunConfig(**{**TINY, "num_generations": 3}), runs_dir)
    assert run_list.list_runs(runs_dir) == []


@pytest.fixture
def no_spawn(monkeypatch):
    """Runs that start no training: `_spawn` records whether it resumed and names a process that has ended."""
    resumed = []

    def spawn(config, run_dir, resume, sandboxed=False):
        resumed.append(resume)
        ended = subprocess.Popen(["true"])
        ended.wait()
        return ended.pid

    monkeypatch.setattr(launcher, "_spawn", spawn)
    return resumed


def test_the_launching_user_owns_the_run_and_keeps_it_on_resume(runs_dir, no_spawn, make_checkpoint):
    def stopped(run_id):
        runfolder.update_status(runs_dir / run_id, state="stopped")
        return runs_dir / run_id

    owned = stopped(launcher.start(RunConfig(**TINY), runs_dir, owner="alice"))
    unowned = stopped(launcher.start(RunConfig(**TINY, run_name="cli"), runs_dir))
    assert runfolder.read_status(owned)["owner"] == "alice" and runfolder.read_status(unowned)["owner"] is None
    for run_dir in (owned, unowned):
        make_checkpoint(run_dir, 1)
        stopped(launcher.resume(run_dir.name, runs_dir, owner="root"))
    assert runfolder.read_status(owned)["owner"] == "alice", "an admin's resume leaves the owner alone"
    assert runfolder.read_status(unowned)["owner"] == "root", "a run without an owner takes its resumer's"
    assert no_spawn == [False, False, True, True]


def test_a_shared_dashboard_launches_without_running_the_reward_file(runs_dir, no_spawn, tmp_path):
    path = tmp_path / "rewards.py"
    path.write_text("import no_such_package_here\n\ndef short(prompts, completions, **kwargs):\n    return []\n")
    config = RunConfig(**TINY, reward_file=str(path), reward_names=["short"])
    with pytest.raises(ConfigError, match="no_such_package_here"):
        launcher.start(config, runs_dir)
    # read, not imported: the missing package is the training process's to report
    assert launcher.start(config, runs_dir, owner="bob", import_reward_file=False)
    assert no_spawn == [False]


def test_unknown_run_is_named(runs_dir):
    with pytest.raises(launcher.LauncherError, match="no run called 'nope'"):
        run_state.status("nope", runs_dir)


# ---------------------------------------------------------------- dead processes


def fake_run(runs_dir, pid, state="training"):
    run_dir = runs_dir / "20260101-000000-fake"
    RunConfig(**TINY).save(run_dir / runfolder.CONFIG_FILE)
    runfolder.update_status(run_dir, state=state, pid=pid, pgid=pid, step=3, started_at=time.time())
    (run_dir / runfolder.LOG_FILE).write_text("last words of the process\n")
    return run_dir


def test_a_gone_process_is_reported_failed(runs_dir):
    process = subprocess.Popen([sys.executable, "-c", "pass"])
    process.wait()
    status = run_state.status(fake_run(runs_dir, process.pid).name, runs_dir)
    assert status["state"] == "failed" and status["error"]["type"] == "ProcessDied"
    assert "last words" in status["error"]["traceback_tail"]


def test_a_zombie_is_reported_failed(runs_dir):
    process = subprocess.Popen([sys.executable, "-c", "pass"])
    try:
        wait_for(lambda: __import__("psutil").Process(process.pid).status() == "zombie", timeout=30)
        assert run_state.status(fake_run(runs_dir, process.pid).name, runs_dir)["state"] == "failed"
    finally:
        process.wait()


def test_a_run_being_spawned_is_starting_until_its_pid_is_overdue(runs_dir):
    run_dir = fake_run(runs_dir, pid=None, state="starting")  # the launcher spawns its process next
    assert run_state.status(run_dir.name, runs_dir)["state"] == "starting"
    status = runfolder.read_status(run_dir)
    status["updated_at"] -= run_state.RECORD_PID_SECONDS + 1  # the launcher died before it recorded one
    runfolder.write_json_atomic(run_dir / runfolder.STATUS_FILE, status)
    assert run_state.status(run_dir.name, runs_dir)["state"] == "failed"


def test_a_final_state_is_left_alone(runs_dir):
    status = run_state.status(fake_run(runs_dir, 999999, state="finished").name, runs_dir)
    assert status["state"] == "finished" and "error" not in status


# ---------------------------------------------------------------- real background runs


@pytest.mark.slow
def test_stop_then_resume_continues_the_step_numbers(runs_dir):
    # enough steps that a tiny run (a fraction of a second a step) cannot finish before the stop lands
    STEPS = 8  # noqa: N806
    run_id = launcher.start(RunConfig(**TINY, max_steps=STEPS, save_steps=100), runs_dir)
    run_dir = run_state.run_dir_of(run_id, runs_dir)
    wait_for(lambda: run_state.status(run_id, runs_dir).get("step", 0) >= 1)
    stopped = launcher.stop(run_id, runs_dir, timeout=120)
    assert stopped["state"] == "stopped", stopped.get("error")
    stop_step = stopped["step"]
    assert 1 <= stop_step < STEPS
    assert (run_dir / runfolder.ADAPTER_DIR / "adapter_model.safetensors").is_file()
    assert checkpoint_integrity.last_checkpoint(run_dir).name == f"checkpoint-{stop_step}"
    assert not run_locks.stop_requested(run_dir)

    assert launcher.resume(run_id, runs_dir) == run_id
    final = run_state.wait(run_id, runs_dir, timeout=240)
    assert final["state"] == "finished", final.get("error")
    assert final["step"] == STEPS and final["resumed_from"] == stop_step
    assert steps_of(run_dir, runfolder.METRICS_FILE) == list(range(1, STEPS + 1))
    assert sorted(set(steps_of(run_dir, runfolder.COMPLETIONS_FILE))) == list(range(1, STEPS + 1))


@pytest.mark.slow
def test_stop_before_training_ends_the_process_group(runs_dir):
    run_id = launcher.start(RunConfig(**TINY, max_steps=4), runs_dir)
    pid = run_state.status(run_id, runs_dir)["pid"]
    stopped = launcher.stop(run_id, runs_dir, timeout=5)
    assert stopped["state"] == "stopped"
    wait_for(lambda: not processes.alive(pid), timeout=10)


@pytest.mark.slow
def test_a_run_killed_with_sigkill_is_reported_failed_within_10_s(runs_dir):
    run_id = launcher.start(RunConfig(**TINY, max_steps=50), runs_dir)
    wait_for(lambda: run_state.status(run_id, runs_dir)["state"] == "training")
    os.killpg(run_state.status(run_id, runs_dir)["pgid"], signal.SIGKILL)
    killed_at = time.monotonic()
    status = wait_for(lambda: (s := run_state.status(run_id, runs_dir))["state"] == "failed" and s, timeout=10)
    assert time.monotonic() - killed_at < 10
    assert status["error"]["type"] == "ProcessDied"
    assert run_list.list_runs(runs_dir)[0]["state"] == "failed"


@pytest.mark.slow
def test_smoke_test_runs_one_real_step_in_its_own_folder(runs_dir):
    run_id = launcher.smoke_test(RunConfig(**TINY, max_steps=30, run_name="check"), runs_dir)
    assert run_id.endswith("smoke-check")
    status = run_state.wait(run_id, runs_dir, timeout=180)
    assert status["state"] == "finished", status.get("error")
    assert status["step"] == 1 and status["smoke_test"] is True
    assert RunConfig.load(run_state.run_dir_of(run_id, runs_dir) / runfolder.CONFIG_FILE).max_steps == 1


@pytest.mark.slow
def test_two_cpu_processes_through_accelerate(runs_dir):
    cfg = RunConfig(**TINY, max_steps=2, save_steps=100, num_processes=2)
    run_id = launcher.start(cfg, runs_dir)
    status = run_state.wait(run_id, runs_dir, timeout=300)
    run_dir = run_state.run_dir_of(run_id, runs_dir)
    assert status["state"] == "finished", (status.get("error"), runfolder.read_log_tail(run_dir))
    assert status["num_processes"] == 2 and status["cpu_threads"] == launched_threads(2)
    assert status["allocator"]["value"] == allocator.choose()
    assert "accelerate" in " ".join(status["command"])
    assert steps_of(run_dir, runfolder.METRICS_FILE) == [1, 2]
    completions = runfolder.read_jsonl(run_dir / runfolder.COMPLETIONS_FILE)
    # two processes x batch 4 = 8 completions a step, two groups of 4, each one prompt
    assert len(completions) == 2 * 8
    for step in (1, 2):
        for group in (0, 1):
            members = [c for c in completions if c["step"] == step and c["group"] == group]
            assert len(members) == 4 and len({m["prompt"] for m in members}) == 1
    # each process's token records reach the main process's tokens.jsonl, each matched to its own completion
    token_records = runfolder.read_jsonl(run_dir / runfolder.TOKENS_FILE)
    metrics = {m["step"]: m for m in runfolder.read_jsonl(run_dir / runfolder.METRICS_FILE)}
    for step in (1, 2):
        records = [r for r in token_records if r["step"] == step]
        assert sorted(r["index"] for r in records) == list(range(8))
        mine = [c for c in completions if c["step"] == step]
        assert all(abs(r["advantage"] - mine[r["index"]]["advantage"]) < 1e-4 for r in records)
        kept = [k for r in records for k, m in zip(r["kl"], r["masked"]) if not m]
        assert abs(sum(kept) / len(kept) - metrics[step]["kl"]) <= 1e-3 * abs(metrics[step]["kl"]) + 1e-9
    assert (run_dir / runfolder.ADAPTER_DIR / "adapter_model.safetensors").is_file()


# ---------------------------------------------------------------- relative paths


def test_local_paths_are_saved_absolute_and_hub_ids_stay(tmp_path, monkeypatch, tiny_model):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "prompts.jsonl").write_text('{"prompt": "Say hi."}\n')
    (tmp_path / "org").mkdir()  # `org/name` is a hub id while no such folder exists
    cfg = RunConfig(**{**TINY, "model": "org/name"}, dataset_path="prompts.jsonl", reward_file="missing.py")
    absolute = cfg.with_absolute_paths()
    assert absolute.dataset_path == str(tmp_path / "prompts.jsonl")
    assert absolute.model == "org/name" and absolute.reward_file == "missing.py"  # nothing local to point to
    local_model = os.path.relpath(tiny_model, tmp_path)
    assert cfg.with_changes(model=local_model).with_absolute_paths().model == str(tiny_model)
    assert cfg.with_changes(model="tiny").with_absolute_paths().model == "tiny"


@pytest.mark.slow
def test_relative_model_dataset_and_reward_file_train_in_the_background(tmp_path, monkeypatch, tiny_model):
    # typed in the Setup tab relative to the app's folder; the trainer runs in the run folder
    monkeypatch.chdir(tmp_path)
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "prompts.jsonl").write_text(
        "".join(f'{{"prompt": "Name a colour, {i}."}}\n' for i in range(8))
    )
    (tmp_path / "my_rewards.py").write_text(
        "def short(completions, **kwargs):\n    return [-len(str(c)) / 100 for c in completions]\n"
    )
    cfg = RunConfig(
        **{**TINY, "model": os.path.relpath(tiny_model, tmp_path)},
        max_steps=1,
        dataset_path="data/prompts.jsonl",
        reward_file="my_rewards.py",
        reward_names=["short"],
    )
    run_id = launcher.start(cfg, "runs")
    status = run_state.wait(run_id, "runs", timeout=240)
    run_dir = run_state.run_dir_of(run_id, "runs")
    assert status["state"] == "finished", (status.get("error"), runfolder.read_log_tail(run_dir))
    saved = RunConfig.load(run_dir / runfolder.CONFIG_FILE)
    assert saved.model == str(tiny_model)
    assert saved.dataset_path == str(tmp_path / "data" / "prompts.jsonl")
    assert saved.reward_file == str(tmp_path / "my_rewards.py")


# ---------------------------------------------------------------- stopping never cuts a save short

# A stand-in trainer: a real process that notices stop.request only after `notice` seconds (a slow
# step), then saves for `save` seconds under state "saving" and ends "stopped" with its adapter.
TRAINER = """
import sys, time
from pathlib import Path
from workbench.runstore import run_locks, runfolder
run_dir, notice, save = Path(sys.argv[1]), float(sys.argv[2]), float(sys.argv[3])
runfolder.update_status(run_dir, state="training")
while not run_locks.stop_requested(run_dir):
    time.sleep(0.05)
time.sleep(notice)
runfolder.update_status(run_dir, state="saving")
time.sleep(save)
(run_dir / "adapter").mkdir()
(run_dir / "adapter" / "adapter_model.safetensors").write_text("weights")
runfolder.update_status(run_dir, state="stopped")
"""


def slow_trainer(runs_dir, notice, save, step_time=None):
    run_dir = fake_run(runs_dir, pid=None)
    if step_time:
        runfolder.append_jsonl(run_dir / runfolder.METRICS_FILE, [{"step": 1, "step_time": step_time}])
    process = subprocess.Popen(
        [sys.executable, "-c", TRAINER, str(run_dir), str(notice), str(save)],
        start_new_session=True,
        env={**os.environ, "PYTHONPATH": os.getcwd()},
    )
    runfolder.update_status(run_dir, pid=process.pid, pgid=process.pid)
    return run_dir, process


# A save 4x the stop's timeout, a step noticed 3x later than it: either way the stop must wait, not kill.
@pytest.mark.parametrize(
    "notice, save, step_time",
    [(0.0, 2.0, None), (1.5, 0.5, 4.0)],
    ids=["stop-while-saving", "step-slower-than-the-timeout"],
)
def test_stop_waits_for_the_step_and_the_save(runs_dir, notice, save, step_time):
    run_dir, process = slow_trainer(runs_dir, notice, save, step_time)
    try:
        if not step_time:  # already saving when the stop comes
            run_locks.request_stop(run_dir)
            wait_for(lambda: runfolder.read_status(run_dir)["state"] == "saving", timeout=30)
        stopped = launcher.stop(run_dir.name, runs_dir, timeout=0.5)
        assert stopped["state"] == "stopped" and "note" not in stopped, stopped
        assert process.wait(timeout=10) == 0  # it ended by itself, not by a signal
        assert (run_dir / "adapter" / "adapter_model.safetensors").read_text() == "weights"
    finally:
        process.kill()
        process.wait()


def test_graceful_wait_covers_a_slow_step():
    assert launcher.graceful_wait_seconds(30, None) == 30
    assert launcher.graceful_wait_seconds(30, 2.0) == 30
    assert launcher.graceful_wait_seconds(30, 50.0) == 110.0


@pytest.mark.slow
def test_save_total_limit_caps_checkpoints_and_resume_skips_a_cut_short_one(runs_dir):
    run_id = launcher.start(RunConfig(**TINY, max_steps=3, save_steps=1, save_total_limit=2), runs_dir)
    first = run_state.wait(run_id, runs_dir, timeout=240)
    run_dir = run_state.run_dir_of(run_id, runs_dir)
    assert first["state"] == "finished", (first.get("error"), runfolder.read_log_tail(run_dir))
    assert sorted(p.name for p in run_dir.glob("checkpoint-*")) == ["checkpoint-2", "checkpoint-3"]
    weights = run_dir / "checkpoint-3" / "adapter_model.safetensors"
    weights.write_bytes(weights.read_bytes()[:200])  # a kill while checkpoint-3 was being written

    launcher.resume(run_id, runs_dir)
    final = run_state.wait(run_id, runs_dir, timeout=240)
    assert final["state"] == "finished", (final.get("error"), runfolder.read_log_tail(run_dir))
    assert final["resumed_from"] == 2 and final["step"] == 3
    assert checkpoint_integrity.last_checkpoint(run_dir).name == "checkpoint-3"  # written again, whole
    # step 3 was trained twice; the resume cut the files back to step 2 first, so it is recorded once
    assert steps_of(run_dir, runfolder.METRICS_FILE) == [1, 2, 3]
    assert steps_of(run_dir, runfolder.COMPLETIONS_FILE) == [1] * 4 + [2] * 4 + [3] * 4


# ---------------------------------------------------------------- unreadable run folders


def broken_run(runs_dir, name, status_bytes=None, config_bytes=None):
    run_dir = runs_dir / name
    RunConfig(**TINY).save(run_dir / runfolder.CONFIG_FILE)
    if status_bytes is not None:
        (run_dir / runfolder.STATUS_FILE).write_bytes(status_bytes)
    if config_bytes is not None:
        (run_dir / runfolder.CONFIG_FILE).write_bytes(config_bytes)
    return run_dir


def test_an_unreadable_run_folder_is_flagged_and_hides_no_other_run(runs_dir):
    good = fake_run(runs_dir, 999999, state="finished")
    broken_run(runs_dir, "20260102-000000-latin1", status_bytes='{"state": "finished", "note": "é"}'.encode("latin-1"))
    broken_run(runs_dir, "20260103-000000-list", status_bytes=b"[1, 2]")
    broken_run(runs_dir, "20260104-000000-config", status_bytes=b'{"state": "finished"}', config_bytes=b"\xff\xfe{")
    (broken_run(runs_dir, "20260105-000000-folder") / runfolder.STATUS_FILE).mkdir()  # unreadable even for root
    entries = {entry["run_id"]: entry for entry in run_list.list_runs(runs_dir)}
    assert entries.pop(good.name)["state"] == "finished"
    reasons = {name: entry["error"]["message"] for name, entry in entries.items() if entry["state"] == "unreadable"}
    assert set(reasons) == set(entries)
    assert "status.json is not UTF-8 text" in reasons["20260102-000000-latin1"]
    assert "status.json holds a JSON list, not an object" in reasons["20260103-000000-list"]
    assert "config.json is not UTF-8 text" in reasons["20260104-000000-config"]
    assert "Is a directory" in reasons["20260105-000000-folder"]
    assert run_state.status("20260103-000000-list", runs_dir)["state"] == "unreadable"
    with pytest.raises(launcher.LauncherError, match="cannot be read"):
        launcher.resume("20260103-000000-list", runs_dir)


LIST_AS_NOBODY = """
import os, sys
from workbench.jobs import commands, launcher, run_list, run_state
import psutil  # everything imported before giving up root: the interpreter lives under /root
os.setgid(65534); os.setuid(65534)
for entry in run_list.list_runs(sys.argv[1]):
    print(entry["run_id"], entry["state"], (entry.get("error") or {}).get("message", ""))
"""


def test_a_run_folder_without_permission_is_flagged(tmp_path):
    import tempfile

    runs = Path(tempfile.mkdtemp(prefix="wb-perm-"))  # outside tmp_path, which only root may enter
    try:
        runs.chmod(0o755)
        for path in fake_run(runs, 999999, state="finished").iterdir():
            path.chmod(0o644)  # status.json is written 0600: readable by its owner only
        locked = broken_run(runs, "20260102-000000-locked")
        locked.chmod(0o000)
        if os.geteuid() == 0:  # root reads anything: list the runs as nobody
            out = subprocess.run(
                [sys.executable, "-c", LIST_AS_NOBODY, str(runs)],
                capture_output=True,
                text=True,
                env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])},
            )
            assert out.returncode == 0, out.stderr
            lines = out.stdout.splitlines()
        else:
            lines = [
                f"{e['run_id']} {e['state']} {(e.get('error') or {}).get('message', '')}"
                for e in run_list.list_runs(runs)
            ]
        assert lines[0].startswith("20260102-000000-locked unreadable") and "Permission denied" in lines[0]
        assert lines[1] == "20260101-000000-fake finished "
    finally:
        locked.chmod(0o755)
        shutil.rmtree(runs)


# ---------------------------------------------------------------- deleting only run folders


def test_delete_refuses_folders_outside_the_runs_folder(runs_dir, tmp_path):
    model = tmp_path / "my-model"  # a model folder also holds a config.json
    model.mkdir()
    (model / "config.json").write_text('{"model_type": "llama"}')
    runs_dir.mkdir()
    (runs_dir / "20260109-000000-link").symlink_to(model, target_is_directory=True)
    for target in (str(model), "20260109-000000-link"):
        with pytest.raises(launcher.LauncherError, match="is not a run folder inside the runs folder"):
            launcher.delete_run(target, runs_dir)
    assert (model / "config.json").is_file()
    run_dir = fake_run(runs_dir, 999999, state="finished")
    launcher.delete_run(run_dir.name, runs_dir)
    assert not run_dir.exists()


# ---------------------------------------------------------------- a full disk


@pytest.mark.slow
def test_a_run_whose_disk_fills_up_ends_failed_saying_so(small_disk, fill):
    runs = small_disk("8m")  # the run folder only: the model is read from the cache
    run_id = launcher.start(RunConfig(**TINY, max_steps=200, save_steps=1000), runs)
    run_dir = run_state.run_dir_of(run_id, runs)
    wait_for(lambda: run_state.status(run_id, runs).get("step", 0) >= 1)
    fill(runs)
    final = run_state.wait(run_id, runs, timeout=120)
    assert final["state"] == "failed", final
    assert final["error"]["type"] != "ProcessDied", final["error"]  # the trainer said why, itself
    assert final["error"]["hint"].startswith(f"The disk is full: free space in {run_dir}")
    wait_for(lambda: not processes.alive(final["pid"]), timeout=30)  # nothing holds the disk at unmount
