"""A run's own code as the attacker: a real sandboxed run whose reward file plants links, rewrites status.json
and config.json, leaves a double-forked process behind, and tries to fill memory and disk.

From outside, the server must take nothing from the run's folder on trust: it
shows no file a link points at and writes none, keeps the owner, the sandbox
policy and the config it recorded, signals no process the run names, and
finds nothing of the run still running after it ends. The sandbox's limits
(jobs/sandbox_init.py) are tested on their own with bwrap and a small command.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
from helpers import tiny_settings

from workbench.access import uploads, users
from workbench.jobs import launcher, run_state, sandbox
from workbench.runstore import launch_records, run_locks, runfolder
from workbench.spec.config import RunConfig
from workbench.ui import run_access

REPO = Path(__file__).resolve().parents[1]
SECRET = "the-secret-of-bob-91c2"
TINY = tiny_settings(task="demo", reward_names=["brevity"], logging_steps=1, save_steps=1)
needs_bwrap = pytest.mark.skipif(
    sandbox.bwrap_binary() is None, reason="bubblewrap is not installed (make test installs it)"
)

# The first process stops itself after step 1 (a checkpoint to resume from) and, at its exit, after the trainer's
# last status write, plants its traps. The resumed process tries to read what the planted policy would show.
HOSTILE = """
import atexit, json, os, time

TARGETS = {targets!r}

def heartbeat():
    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:  # double-forked: beyond the trainer's process tree
            while True:
                with open("heartbeat", "a") as handle:
                    handle.write("x")
                time.sleep(0.1)
        os._exit(0)

def try_limits(found):
    try:
        block = bytearray(4 * 2**30)
        found["memory"] = "allocated"
    except MemoryError:
        found["memory"] = "MemoryError"
    try:
        with open("big.bin", "wb") as handle:
            handle.write(b"x" * (150 * 2**20))
        found["file"] = "written"
    except OSError as exc:
        found["file"] = exc.strerror
    if os.path.exists("big.bin"):
        os.unlink("big.bin")

def plant():
    for name, target in (("train.log", TARGETS["users_file"]), ("stop.request", TARGETS["outside"])):
        if os.path.lexists(name):
            os.unlink(name)
        os.symlink(target, name)
    with open("status.json") as handle:
        status = json.load(handle)
    status.update(state="training", pid=TARGETS["victim"], pgid=TARGETS["victim"], owner="bob",
                  host="elsewhere", updated_at=time.time(),
                  sandbox={{"hidden_files": [], "readable": [TARGETS["bob_uploads"]]}})
    with open("status.json.new", "w") as handle:
        json.dump(status, handle)
    os.replace("status.json.new", "status.json")
    with open("config.json") as handle:
        config = json.load(handle)
    config["run_name"] = "hacked"
    with open("config.json", "w") as handle:
        json.dump(config, handle)

def brevity(completions, **kwargs):
    if not os.path.exists("first.json"):
        found = {{}}
        heartbeat()
        try_limits(found)
        with open("first.json", "w") as handle:
            json.dump(found, handle)
        open("stop.request", "w").close()  # stop after this step: a checkpoint to resume from
        atexit.register(plant)
    elif not os.path.exists("second.json"):
        found = {{}}
        for name in ("users_file", "bob_upload", "shadow"):
            try:
                with open(TARGETS[name]) as handle:
                    found[name] = "read " + handle.read()
            except OSError as exc:
                found[name] = type(exc).__name__
        with open("second.json", "w") as handle:
            json.dump(found, handle)
    return [0.0 for _ in completions]
"""


@pytest.fixture
def victim():
    """A process of the host that no run may signal."""
    process = subprocess.Popen(["sleep", "600"], start_new_session=True)
    yield process
    process.kill()
    process.wait()


def wait_final(run_id: str, runs: Path, timeout: float = 300) -> dict:
    final = run_state.wait(run_id, runs, timeout=timeout)
    assert final["state"] in runfolder.FINAL_STATES, (final, runfolder.read_log_tail(runs / run_id))
    return final


@pytest.mark.slow
@needs_bwrap
def test_a_hostile_reward_changes_nothing_the_server_decides_from(tmp_path, monkeypatch, victim):
    runs = tmp_path / "runs"
    alice_uploads, bob_uploads = uploads.uploads_dir(runs, "alice"), uploads.uploads_dir(runs, "bob")
    alice_uploads.mkdir(parents=True)
    bob_uploads.mkdir(parents=True)
    (bob_uploads / "bob_reward.py").write_text(f"# {SECRET}\n")
    # the users file beside the project, where the sandbox sees it unless the policy masks it
    users_file = REPO / ".cache" / f"test-hostile-users-{os.getpid()}-{time.monotonic_ns()}.txt"
    users_file.parent.mkdir(exist_ok=True)
    users_text = f"alice user {users.hash_password('a-long-password', iterations=1000)} {SECRET}\n"
    users_file.write_text(users_text)
    outside = tmp_path / "outside-target.txt"
    reward = alice_uploads / "hostile.py"
    reward.write_text(
        HOSTILE.format(
            targets={
                "users_file": str(users_file),
                "outside": str(outside),
                "victim": victim.pid,
                "bob_uploads": str(bob_uploads),
                "bob_upload": str(bob_uploads / "bob_reward.py"),
                "shadow": "/etc/shadow",
            }
        )
    )
    monkeypatch.setenv("WORKBENCH_RUN_MEMORY_GB", "3")
    monkeypatch.setenv("WORKBENCH_RUN_FILE_GB", "0.1")
    policy = sandbox.Policy(hidden_files=(str(users_file),), readable=(str(alice_uploads),))
    try:
        run_id = launcher.start(
            RunConfig(**TINY, max_steps=2, reward_file=str(reward)),
            runs,
            owner="alice",
            import_reward_file=False,
            sandboxed=policy,
        )
        run_dir = runs / run_id
        recorded = launch_records.read_record(run_dir)
        wait_final(run_id, runs)
        deadline = time.monotonic() + 30  # the trainer's exit runs the planted hook
        while runfolder.read_status(run_dir).get("owner") != "bob" and time.monotonic() < deadline:
            time.sleep(0.2)
        assert runfolder.read_status(run_dir)["owner"] == "bob", "the hook planted its traps"

        # the limits held, each with its reason; nothing the run started outlived it
        first = json.loads((run_dir / "first.json").read_text())
        assert first == {"memory": "MemoryError", "file": "File too large"}, first
        beats = (run_dir / "heartbeat").stat().st_size
        time.sleep(1.0)
        assert (run_dir / "heartbeat").stat().st_size == beats, "a double-forked process outlived the run"

        # read: the planted train.log link shows nothing; write: a stop request lands on no outside file
        assert SECRET not in runfolder.read_log_tail(run_dir) and "alice user" not in runfolder.read_log_tail(run_dir)
        run_locks.request_stop(run_dir)
        assert not outside.exists()

        # owner and processes are the launcher's; status.json's `pid`, `owner` and `host` are only the run's report
        status = run_state.status(run_id, runs)
        assert status["owner"] == "alice" and run_access.run_owner(run_dir) == "alice"
        assert status["state"] == "failed" and status["pid"] != victim.pid  # its recorded process is gone
        final = launcher.stop(run_id, runs, timeout=2)
        assert victim.poll() is None and psutil.pid_exists(victim.pid), "stop signalled a process the run named"
        assert final["state"] in runfolder.FINAL_STATES

        # resumed as the command line does (no policy given): the launcher's record's sandbox, not status.json's
        run_locks.clear_stop_request(run_dir)
        launcher.resume(run_id, runs)
        resumed = wait_final(run_id, runs)
        assert resumed["step"] == 2, (resumed, runfolder.read_log_tail(run_dir))
        second = json.loads((run_dir / "second.json").read_text())
        # the users file stays masked (an empty file inside), bob's uploads unseen
        assert second["bob_upload"] == "FileNotFoundError" and second["users_file"] in ("PermissionError", "read "), (
            second
        )
        assert second["shadow"] in ("PermissionError", "read "), second  # masked, and unreadable to a non-root uid
        if os.geteuid() == 0:  # a root server runs the sandbox as a uid of its own, not root as the host sees it
            assert (run_dir / "second.json").stat().st_uid == sandbox.run_uid(run_dir) != 0
        assert users_file.read_text() == users_text, "the resume wrote into the file a planted link named"
        assert runfolder.read_config(run_dir)["run_name"] != "hacked", "config.json is written from the record"
        assert launch_records.read_record(run_dir).policy == recorded.policy == policy.to_status()
        assert launch_records.read_record(run_dir).owner == "alice"
    finally:
        users_file.unlink(missing_ok=True)


# ---------------------------------------------------------------- the sandbox's init, with a small command


def run_in_sandbox(tmp_path: Path, code: str, limits: sandbox.Limits, timeout: float = 60) -> tuple[int, str, Path]:
    own = tmp_path / "runs" / "r"
    own.mkdir(parents=True)
    (own / "status.json").write_text("{}")
    exposed = sandbox.exposure(own, own.parent, {}, sandbox.Policy(), {"PATH": os.environ["PATH"]}, limits=limits)
    argv, env = sandbox.wrap([sys.executable, "-c", code], exposed, {"PATH": os.environ["PATH"]}, foreground=True)
    done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, env=env)
    return done.returncode, done.stderr, own


@needs_bwrap
def test_a_run_past_its_process_limit_is_ended_saying_why(tmp_path):
    code = "import subprocess, time\nkids = [subprocess.Popen(['sleep', '60']) for _ in range(12)]\ntime.sleep(60)\n"
    started = time.monotonic()
    code_, stderr, own = run_in_sandbox(tmp_path, code, sandbox.Limits(processes=8))
    assert time.monotonic() - started < 30 and code_ != 0
    if sandbox.run_uid(own) is not None:  # a uid of its own: the kernel refuses the ninth process and thread
        assert "BlockingIOError: [Errno 11] Resource temporarily unavailable" in stderr
    else:  # the server's own uid: the init counts them and ends the run
        assert "more than its limit of 8 processes" in stderr
        error = json.loads((own / "status.json").read_text())["error"]
        assert error["type"] == "SandboxLimit" and "WORKBENCH_RUN_PROCESSES" in error["hint"]


@needs_bwrap
def test_a_run_past_its_disk_limit_is_ended_saying_why(tmp_path):
    code = (
        "import time\nfor i in range(40):\n    open(f'part{i}', 'wb').write(b'x' * 2**20)\n"
        "    time.sleep(0.1)\ntime.sleep(60)\n"
    )
    code_, stderr, own = run_in_sandbox(tmp_path, code, sandbox.Limits(disk=8 * 2**20))
    assert code_ != 0 and "more than its limit of" in stderr
    assert json.loads((own / "status.json").read_text())["state"] == "failed"


@needs_bwrap
def test_the_sandbox_ends_with_its_command_and_forwards_a_stop(tmp_path):
    # a double-forked sleeper outlives nothing: the init exits with the command and the kernel ends the rest
    code = (
        "import os, time\nif os.fork() == 0:\n    os.setsid()\n    if os.fork() == 0:\n        time.sleep(600)\n"
        "    os._exit(0)\nprint('parent done')\n"
    )
    before = {p.pid for p in psutil.process_iter()}
    code_, stderr, _ = run_in_sandbox(tmp_path, code, sandbox.Limits())
    assert code_ == 0, stderr
    time.sleep(0.3)
    left = [
        p
        for p in psutil.process_iter(["cmdline"])
        if p.pid not in before and "time.sleep(600)" in " ".join(p.info["cmdline"] or [])
    ]
    assert left == []
    # SIGTERM to the sandbox reaches the command through the init (the trainer takes it as a stop request)
    own = tmp_path / "runs2" / "r"
    own.mkdir(parents=True)
    exposed = sandbox.exposure(
        own, own.parent, {}, sandbox.Policy(), {"PATH": os.environ["PATH"]}, limits=sandbox.Limits()
    )
    code = (
        "import signal, sys, time\nsignal.signal(signal.SIGTERM, lambda *a: (print('asked to stop', flush=True),"
        " sys.exit(3)))\ntime.sleep(60)\n"
    )
    argv, env = sandbox.wrap([sys.executable, "-c", code], exposed, {"PATH": os.environ["PATH"]})
    process = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True, start_new_session=True, env=env)
    time.sleep(1.5)
    inner = [p for p in psutil.Process(process.pid).children(recursive=True) if "sandbox_init" in " ".join(p.cmdline())]
    inner[0].send_signal(signal.SIGTERM)
    assert process.wait(timeout=20) == 3
    assert "asked to stop" in process.stdout.read()


SPY = """
import os

def spy(completions, **kwargs):
    with open("spy.txt", "a") as handle:  # where the reward code ran: its uid, and what it could see
        handle.write(f"{os.getuid()} {os.path.exists(TARGET)} {os.environ.get('WORKBENCH_SANDBOX')}\\n")
    return [0.0 for _ in completions]

TARGET = TARGET_PATH
"""


@pytest.mark.slow
@needs_bwrap
def test_evaluating_a_sandboxed_run_from_the_command_line_runs_its_reward_code_in_its_sandbox(tmp_path):
    from workbench.cli import main
    from workbench.spec.tasks import GSM8K_SAMPLE

    runs = tmp_path / "runs"
    secret = tmp_path / "admins-own-file.txt"
    secret.write_text("x")
    reward = tmp_path / "spy.py"
    reward.write_text(SPY.replace("TARGET_PATH", repr(str(secret))))
    config = RunConfig.for_task(
        "gsm8k",
        **tiny_settings(
            dataset_name=str(GSM8K_SAMPLE),
            max_steps=1,
            save_steps=1,
            reward_file=str(reward),
            reward_names=["accuracy_reward", "spy"],
            eval_size=2,
            eval_pass_k=1,
        ),
    )
    run_id = launcher.start(config, runs, sandboxed=sandbox.Policy())
    wait_final(run_id, runs)
    (runs / run_id / "spy.txt").unlink()
    # an admin evaluates a student's run from a terminal: the student's reward runs in the run's sandbox, not here
    assert main(["eval", str(runs / run_id), "--checkpoint", "base", "--json"]) == 0
    seen = set((runs / run_id / "spy.txt").read_text().splitlines())
    uid = sandbox.run_uid(runs / run_id) if os.geteuid() == 0 else os.geteuid()
    assert seen == {f"{uid} False 1"}, seen  # inside the sandbox, as its own uid: the admin's file out of sight
    assert not (runs / run_id / ".eval-now.json").exists()


def test_train_in_a_terminal_on_a_run_the_launcher_sandboxed_trains_sandboxed(tmp_path, monkeypatch):
    from workbench.cli import train

    run_dir = tmp_path / "runs" / "r"
    run_dir.mkdir(parents=True)
    assert not train._recorded_sandboxed(str(run_dir))
    launch_records.write_record(run_dir, launch_records.LaunchRecord(sandboxed=True, policy={}))
    assert train._recorded_sandboxed(str(run_dir))
    monkeypatch.setenv(runfolder.SANDBOX_ENV, "1")  # inside the sandbox itself the trainer simply trains
    assert not train._recorded_sandboxed(str(run_dir))


@pytest.mark.skipif(os.geteuid() != 0, reason="a sandbox gets a uid of its own only from a server running as root")
def test_a_sandbox_keeps_the_servers_uid_where_its_own_could_not_reach_the_run(tmp_path):
    import shutil

    base = host_folder() / f"grpo-workbench-test-uid-{os.getpid()}-{time.monotonic_ns()}"
    try:
        for mode in (0o755, 0o700):  # a checkout or runs folder in a private folder: the run uid could not get there
            own = base / oct(mode) / "runs" / "r"
            own.mkdir(parents=True)
            (base / oct(mode)).chmod(mode)
            uid = sandbox.exposure(own, own.parent, {}, sandbox.Policy(), {"PATH": "/usr/bin"}).uid
            assert (uid is None) == (mode == 0o700), (mode, uid)
    finally:
        shutil.rmtree(base, ignore_errors=True)


def host_folder() -> Path:
    """A folder the sandbox shows as the host's, not rebuilt in a hidden folder's tmpfs: the checkout's .cache, or
    /var/cache where the checkout lies under /tmp, a home or another folder every sandbox hides (there a private
    folder above the run is rebuilt open inside, and the run's own uid reaches it: the code is right to use it)."""
    from workbench.jobs.sandbox_exposure import HIDDEN_ROOTS

    hidden = [Path(root).resolve() for root in (*HIDDEN_ROOTS, Path.home())]
    checkout = REPO.resolve()
    inside_hidden = any(checkout == root or root in checkout.parents for root in hidden)
    return Path("/var/cache") if inside_hidden else REPO / ".cache"


def test_signal_checks_and_other_helper_jobs_count_against_the_per_user_cap(tmp_path, monkeypatch):
    from workbench.jobs import queue, signal_job

    runs = tmp_path / "runs"
    monkeypatch.setenv(queue.MAX_RUNS_ENV, "2")
    config = RunConfig.for_task("arithmetic").with_changes(
        model="tiny", device="cpu", max_completion_length=8, num_generations=4, per_device_train_batch_size=4
    )
    checks = [signal_job.start_signal_check(config, runs, groups=1, owner="alice") for _ in range(2)]
    try:
        assert checks[0].folder != checks[1].folder  # each check in a folder of its own, even within a second
        with pytest.raises(queue.UserLimitError, match="alice already has 2"):
            signal_job.start_signal_check(config, runs, groups=1, owner="alice")
        with pytest.raises(queue.UserLimitError):  # an export or the Compare tab's sampling: the same cap
            with launcher.helper_job(runs, "alice", "export"):
                pass
        with launcher.helper_job(runs, "bob", "export") as record:  # another user has room of their own
            sleeper = subprocess.Popen(["sleep", "30"])
            record(sleeper.pid)
        sleeper.kill()
        sleeper.wait()
    finally:
        for job in checks:
            signal_job.cancel_signal_check(job)
    with launcher.helper_job(runs, "alice", "export"):  # ended jobs count no more
        pass
