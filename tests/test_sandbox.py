"""Every run of a shared dashboard in a bubblewrap sandbox: what it shows, and a hostile reward file that finds nothing.

The pure part checks the mounts the one builder makes (their order is what
hides the runs folder even when it lies inside the project). The real part
trains the tiny model for one step with a reward file that tries to read
another user's upload, another run's files and the users file, to write
outside its run folder and to connect to a listener on the host; it copies
whatever it reads into its own run folder. From outside, the test checks
that none of it was read, written or reached, and that the step trained:
once through `python -m workbench train --sandbox`, once launched by the
dashboard's own Smoke test handler as a signed-in user. A long sandboxed
run is then watched and stopped through its host pid. A run with its own vLLM
server in the same sandbox is tested in tests/test_vllm_rollout.py, which
shares that server start.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from helpers import gsm8k_like_rows, tiny_settings, write_hub_dataset

from workbench.access import uploads, users
from workbench.jobs import launcher, run_state, sandbox
from workbench.runstore import runfolder
from workbench.spec.config import RunConfig

REPO = Path(__file__).resolve().parents[1]
SECRET = "the-secret-of-bob-7f3a"
# brevity alone: the reward files below define their own `brevity`, which replaces the built-in one
TINY = tiny_settings(task="demo", reward_names=["brevity"], logging_steps=1, save_steps=1000)

needs_bwrap = pytest.mark.skipif(
    sandbox.bwrap_binary() is None, reason="bubblewrap is not installed (make test installs it)"
)

HOSTILE_REWARD = """
import json, os, socket

def brevity(completions, **kwargs):
    found = {{}}
    loot = []
    for name, path in {reads!r}.items():
        try:
            with open(path, errors="replace") as handle:
                text = handle.read()
            loot.append(text)
            found[name] = "read " + str(len(text))
        except Exception as exc:
            found[name] = type(exc).__name__
    for name, path in {writes!r}.items():
        try:
            with open(path, "w") as handle:
                handle.write("escaped")
            found[name] = "written"
        except Exception as exc:
            found[name] = type(exc).__name__
    try:
        socket.create_connection(("127.0.0.1", {port}), timeout=2).close()
        found["connect"] = "connected"
    except Exception as exc:
        found["connect"] = type(exc).__name__
    found["env"] = sorted(key for key in os.environ if "USERS" in key or "TOKEN" in key)
    with open("loot.txt", "w") as handle:  # the run folder: what the user could read back
        handle.write("\\n".join(loot))
    with open("found.json", "w") as handle:
        json.dump(found, handle)
    return [0.0 for _ in completions]
"""


class Listener:
    """A TCP listener on the host's loopback that counts the connections it accepts."""

    def __init__(self):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.sock.settimeout(0.2)
        self.port = self.sock.getsockname()[1]
        self.accepted = 0
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self._accept, daemon=True)
        self.thread.start()

    def _accept(self):
        while not self.stopped.is_set():
            try:
                connection, _ = self.sock.accept()
                self.accepted += 1
                connection.close()
            except OSError:
                pass

    def close(self):
        self.stopped.set()
        self.thread.join(timeout=2)
        self.sock.close()


@pytest.fixture
def listener():
    server = Listener()
    yield server
    server.close()


@pytest.fixture
def shared(tmp_path):
    """A runs folder of a class: bob's upload and finished run hold the secret; a users file in the project."""
    runs = tmp_path / "runs"
    bob_uploads = uploads.uploads_dir(runs, "bob")
    bob_uploads.mkdir(parents=True)
    (bob_uploads / "bob_reward.py").write_text(f"# {SECRET}\n")
    bob_run = runs / "20260101-000001-bob"
    bob_run.mkdir()
    (bob_run / runfolder.CONFIG_FILE).write_text(json.dumps({"model": "tiny", "note": SECRET}))
    runfolder.update_status(bob_run, state="finished", owner="bob")
    alice_uploads = uploads.uploads_dir(runs, "alice")
    alice_uploads.mkdir(parents=True)
    (alice_uploads / "alice_data.jsonl").write_text('{"prompt": "own data"}\n')
    # The users file where admins keep it, beside the project: visible to the sandbox unless masked.
    users_file = REPO / ".cache" / f"test-users-{os.getpid()}-{time.monotonic_ns()}.txt"
    users_file.parent.mkdir(exist_ok=True)
    users_file.write_text(f"bob user {users.hash_password('a-long-password', iterations=1000)} {SECRET}\n")
    yield {
        "runs": runs,
        "bob_uploads": bob_uploads,
        "bob_run": bob_run,
        "alice_uploads": alice_uploads,
        "users_file": users_file,
    }
    users_file.unlink(missing_ok=True)


def hostile_reward(where: Path, shared: dict, port: int, users_file: bool = True) -> Path:
    """The reward file; `users_file`: it also reads the users file (which only a dashboard knows to mask)."""
    reads = {
        "bob_upload": str(shared["bob_uploads"] / "bob_reward.py"),
        "bob_run": str(shared["bob_run"] / runfolder.CONFIG_FILE),
        "own_upload": str(shared["alice_uploads"] / "alice_data.jsonl"),
        **({"users_file": str(shared["users_file"])} if users_file else {}),
    }
    writes = {
        "into_runs": str(shared["runs"] / "escaped.txt"),
        "into_bob_uploads": str(shared["bob_uploads"] / "escaped.py"),
        "into_project": str(REPO / ".cache" / f"escaped-{port}.txt"),
    }
    path = where / "hostile.py"
    path.write_text(HOSTILE_REWARD.format(reads=reads, writes=writes, port=port))
    return path


def assert_nothing_escaped(run_dir: Path, shared: dict, listener: Listener) -> dict:
    """From outside: the step trained, nothing secret reached the run folder, nothing landed outside it."""
    status = runfolder.read_status(run_dir)
    assert status["state"] == "finished", (status, runfolder.read_log_tail(run_dir))
    assert [record["step"] for record in runfolder.read_jsonl(run_dir / runfolder.METRICS_FILE)] == [1]
    found = json.loads((run_dir / "found.json").read_text())
    for path in run_dir.rglob("*"):
        if path.is_file():
            assert SECRET not in path.read_text(errors="replace"), path
    assert not (shared["runs"] / "escaped.txt").exists()
    assert not (shared["bob_uploads"] / "escaped.py").exists()
    assert not list((REPO / ".cache").glob("escaped-*"))
    assert listener.accepted == 0
    assert found["connect"] in ("ConnectionRefusedError", "OSError", "TimeoutError"), found
    assert found["env"] == [], found
    assert found["bob_upload"] == found["bob_run"] == "FileNotFoundError", found
    return found


# ---------------------------------------------------------------- what the builder makes (pure)


def test_the_runs_folder_is_hidden_after_the_code_is_shown_even_inside_the_project(tmp_path):
    runs = tmp_path / "project" / "runs"
    run_dir = runs / "20260101-000001-alice"
    run_dir.mkdir(parents=True)
    readable = uploads.uploads_dir(runs, "alice")
    readable.mkdir(parents=True)
    users_file = tmp_path / "project" / "users.txt"
    users_file.write_text("x")
    env = {"HOME": str(tmp_path / "home"), "WORKBENCH_USERS": "alice user hash", "HF_TOKEN": "hf_x", "PATH": "/usr/bin"}
    exposed = sandbox.exposure(
        run_dir,
        runs,
        {"model": "tiny", "reward_file": str(readable / "r.py")},
        sandbox.Policy(hidden_files=(str(users_file),), readable=(str(readable),)),
        env,
    )
    mounts = list(exposed.mounts)
    assert ("empty", "/tmp") in mounts and ("empty", str(runs)) in mounts
    # every code path shown again comes before the runs folder is emptied; the user's things after it
    runs_at = mounts.index(("empty", str(runs)))
    assert all(
        i < runs_at
        for i, (kind, _) in enumerate(mounts)
        if kind == "read-only" and not mounts[i][1].startswith(str(runs))
    )
    assert mounts.index(("read-only", str(readable))) > runs_at
    assert mounts.index(("read-write", str(run_dir))) > runs_at
    assert ("masked", str(users_file)) in mounts
    assert exposed.paths("read-write") == [str(run_dir)]
    argv = sandbox.bwrap_command(exposed, ["python", "-m", "workbench", "train"])
    for flag in ("--unshare-net", "--unshare-pid", "--new-session"):
        assert flag in argv
    assert argv[argv.index("--cap-drop") + 1] == "ALL"
    assert "--share-net" not in argv and "--die-with-parent" not in argv
    # the namespace's init is the supervisor, which holds the limits and starts the command
    assert "--as-pid-1" in argv
    inner = argv[argv.index("--") + 1 :]
    assert inner[:3] == [sys.executable, "-I", str(sandbox.SUPERVISOR)]
    assert inner[inner.index("--") + 1 :] == ["python", "-m", "workbench", "train"]
    assert "--die-with-parent" in sandbox.bwrap_command(exposed, ["true"], foreground=True)
    assert sandbox.clean_env(env) == {"HOME": env["HOME"], "PATH": "/usr/bin"}


def test_vllms_model_class_record_is_shown_read_only_in_the_sandboxs_own_vllm_cache(tmp_path):
    home, runs = tmp_path / "home", tmp_path / "runs"
    record = home / ".cache" / "vllm" / "modelinfos"
    (runs / "r").mkdir(parents=True)
    env, vllm_run = {"HOME": str(home)}, {"generation": "vllm-server"}
    inside = f"{sandbox.SCRATCH_VLLM}/modelinfos"
    assert sandbox.exposure(runs / "r", runs, vllm_run, None, env).placed == ()  # no record yet: nothing shown
    record.mkdir(parents=True)
    exposed = sandbox.exposure(runs / "r", runs, vllm_run, None, env)
    assert exposed.placed == ((str(record), inside),)
    # inside, vLLM's cache root is the private scratch one, whatever the caller's was
    assert exposed.env["VLLM_CACHE_ROOT"] == sandbox.SCRATCH_VLLM
    argv = sandbox.bwrap_command(exposed, ["true"])
    bound = argv.index(str(record))
    assert argv[bound - 1 : bound + 2] == ["--ro-bind", str(record), inside]
    assert bound > argv.index("/tmp")  # after the private /tmp it lies in
    assert f"{record} (at {inside})" in exposed.describe()["read-only"]
    # a record found through the caller's own VLLM_CACHE_ROOT is placed the same way
    elsewhere = tmp_path / "shared" / "vllm"
    (elsewhere / "modelinfos").mkdir(parents=True)
    exposed = sandbox.exposure(runs / "r", runs, vllm_run, None, {**env, "VLLM_CACHE_ROOT": str(elsewhere)})
    assert exposed.placed == ((str(elsewhere / "modelinfos"), inside),)
    assert exposed.env["VLLM_CACHE_ROOT"] == sandbox.SCRATCH_VLLM
    # a run whose generation runs no vLLM is shown nothing of it
    assert sandbox.exposure(runs / "r", runs, {"generation": "transformers"}, None, env).placed == ()
    assert sandbox.exposure(runs / "r", runs, {}, None, env).placed == ()


@needs_bwrap
def test_inside_a_sandbox_vllms_record_reads_but_cannot_be_written(tmp_path):
    home, runs = tmp_path / "home", tmp_path / "runs"
    record = home / ".cache" / "vllm" / "modelinfos"
    record.mkdir(parents=True)
    (record / "llama.json").write_text('{"supports_lora": true}')
    (runs / "r").mkdir(parents=True)
    exposed = sandbox.exposure(
        runs / "r", runs, {"generation": "vllm-server"}, None, {"HOME": str(home), "PATH": os.environ["PATH"]}
    )
    probe = """
import os, pathlib
root = pathlib.Path(os.environ["VLLM_CACHE_ROOT"])
print((root / "modelinfos" / "llama.json").read_text())
for target in (root / "modelinfos" / "new.json", root / "torch_compile_cache" / "x"):
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text("x")
        print(target.parent.name, "written")
    except OSError as error:
        print(target.parent.name, type(error).__name__)
"""
    argv = sandbox.bwrap_command(exposed, [sys.executable, "-c", probe], foreground=True)
    done = subprocess.run(argv, capture_output=True, text=True, timeout=60, env={**os.environ, **exposed.env})
    assert done.returncode == 0, done.stderr
    assert done.stdout.split("\n")[:3] == [
        '{"supports_lora": true}',
        "modelinfos OSError",
        "torch_compile_cache written",
    ]
    assert sorted(p.name for p in record.iterdir()) == ["llama.json"]
    assert not (record.parent / "torch_compile_cache").exists()


def test_a_missing_bwrap_is_refused_with_what_to_install():
    with pytest.raises(sandbox.SandboxError) as refused:
        sandbox.check_available({sandbox.BWRAP_ENV: "/nonexistent/bwrap"})
    assert "sandbox: bubblewrap (`bwrap`) is not installed" in str(refused.value)
    assert "apt-get install bubblewrap" in str(refused.value)


def test_pids_are_read_in_the_namespace_that_wrote_them(monkeypatch):
    status = {"pid": 4321, "pgid": 4321, "sandbox_pid": 2, "vllm": {"pid": 3, "in_sandbox": True}}
    monkeypatch.delenv(runfolder.SANDBOX_ENV, raising=False)
    assert runfolder.pids_here(status) == [4321, 4321] and runfolder.server_pid_here(status) is None
    assert runfolder.own_pid_fields() == {"pid": os.getpid()}
    monkeypatch.setenv(runfolder.SANDBOX_ENV, "1")
    assert runfolder.pids_here(status) == [2] and runfolder.server_pid_here(status) == 3
    assert runfolder.own_pid_fields() == {"sandbox_pid": os.getpid()}


# ---------------------------------------------------------------- real runs


@pytest.mark.slow
@needs_bwrap
def test_train_sandbox_keeps_a_hostile_reward_from_everything_but_its_run(tmp_path, shared, listener):
    reward = hostile_reward(shared["alice_uploads"], shared, listener.port, users_file=False)
    settings = [
        item
        for key, value in TINY.items()
        if key not in ("model", "reward_names")
        for item in ("--set", f"{key}={value}")
    ]
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "workbench",
            "train",
            "--sandbox",
            "--model",
            "tiny",
            "--max-steps",
            "1",
            "--runs-dir",
            str(shared["runs"]),
            *settings,
            "--set",
            "reward_names=brevity",
            "--set",
            "eval_strategy=no",
            "--set",
            f"reward_file={reward}",
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "WORKBENCH_USERS": f"bob user x {SECRET}", "HF_TOKEN": SECRET},
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert SECRET not in done.stdout + done.stderr
    run_dir = next(p for p in shared["runs"].iterdir() if p.name.endswith("-demo"))
    found = assert_nothing_escaped(run_dir, shared, listener)
    assert found["own_upload"].startswith("FileNotFoundError"), found  # uploads are a dashboard's policy
    assert runfolder.read_status(run_dir)["sandbox"]["shows"]["read-write"] == [str(run_dir)]


@pytest.mark.slow
@needs_bwrap
def test_a_run_launched_from_the_shared_dashboard_runs_sandboxed(shared, listener):
    import gradio as gr
    from helpers import default_values

    from workbench.ui import setup_tab
    from workbench.ui.app import build_app

    reward = hostile_reward(shared["alice_uploads"], shared, listener.port)
    accounts = users.parse_users(
        shared["users_file"].read_text().replace(f" {SECRET}", "")
        + f"alice user {users.hash_password('a-long-password', iterations=1000)}\n"
    )
    app = build_app(shared["runs"], users=accounts, sandbox=sandbox.Policy(hidden_files=(str(shared["users_file"]),)))
    smoke = next(
        f.fn for f in app.fns.values() if f.fn.__module__ == "workbench.ui.setup_tab" and f.fn.__name__ == "start_smoke"
    )
    form = {
        **default_values(),
        **{k: v for k, v in TINY.items() if k in setup_tab.FORM_KEYS},
        "use_mentions_answer": False,
        "use_brief_if_correct": False,
        "use_brevity": True,
        "eval_strategy": "no",
        "reward_file": reward.name,
    }
    run_id, shown, _ = smoke(
        gr.Request(username="alice"), *[form[key] for key in setup_tab.FORM_KEYS], {"gpus": [], "busy": []}
    )
    assert run_id, shown
    final = run_state.wait(run_id, shared["runs"], timeout=300)
    run_dir = shared["runs"] / run_id
    found = assert_nothing_escaped(run_dir, shared, listener)
    assert found["users_file"] == "PermissionError", found  # masked: /dev/null in its place, unreadable
    assert found["own_upload"] == "read 23", found  # the owner's uploads are readable
    assert final["owner"] == "alice" and final["sandbox"]["readable"] == [str(shared["alice_uploads"])]


@pytest.mark.slow
@needs_bwrap
def test_a_sandboxed_run_is_watched_and_stopped_through_its_host_pid(tmp_path):
    import psutil

    runs = tmp_path / "runs"
    run_id = launcher.start(RunConfig(**TINY, max_steps=500), runs, sandboxed=sandbox.Policy())
    deadline = time.monotonic() + 120
    while run_state.status(run_id, runs)["state"] != "training" and time.monotonic() < deadline:
        time.sleep(0.3)
    status = run_state.status(run_id, runs)
    assert status["state"] == "training", runfolder.read_log_tail(runs / run_id)
    sandboxed = psutil.Process(status["pid"])
    assert sandboxed.name() == "bwrap" and status["pgid"] == status["pid"]
    assert status["sandbox_pid"] != status["pid"]  # the trainer's own pid, in the sandbox's namespace
    tree = [sandboxed, *sandboxed.children(recursive=True)]
    assert any("workbench" in " ".join(p.cmdline()) for p in tree[1:])
    final = launcher.stop(run_id, runs, timeout=30)
    assert final["state"] == "stopped" and 0 < final["step"] < 500
    assert (runs / run_id / runfolder.ADAPTER_DIR).is_dir()
    gone, alive = psutil.wait_procs(tree, timeout=20)
    assert alive == []
    assert run_state.status(run_id, runs)["state"] == "stopped"


@pytest.mark.slow
@needs_bwrap
def test_a_reward_that_crashes_inside_still_fails_the_run_with_its_name(tmp_path):
    reward = tmp_path / "crashing.py"
    reward.write_text("def brevity(completions, **kwargs):\n    raise RuntimeError('no score today')\n")
    runs = tmp_path / "runs"
    run_id = launcher.start(RunConfig(**TINY, max_steps=2, reward_file=str(reward)), runs, sandboxed=sandbox.Policy())
    final = run_state.wait(run_id, runs, timeout=300)
    assert final["state"] == "failed", final
    assert "brevity" in json.dumps(final["error"]) and "no score today" in json.dumps(final["error"])


@pytest.mark.slow
def test_a_dashboard_with_accounts_refuses_to_start_without_its_sandbox(tmp_path):
    from browser_fixtures import start_app

    users_file = tmp_path / "users.txt"
    users_file.write_text(f"alice user {users.hash_password('a-long-password', iterations=1000)}\n")
    env = {**os.environ, users.USERS_FILE_ENV: str(users_file), sandbox.BWRAP_ENV: "/nonexistent/bwrap"}
    done = subprocess.run(
        [sys.executable, str(REPO / "app.py"), "--port", "0", "--runs-dir", str(tmp_path / "runs")],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode != 0
    assert "sandbox: bubblewrap (`bwrap`) is not installed" in done.stderr and "--no-sandbox" in done.stderr
    assert "Traceback" not in done.stderr

    # --no-sandbox serves it anyway, and every page says so
    app = start_app(
        tmp_path / "runs",
        extra_env={users.USERS_FILE_ENV: str(users_file), sandbox.BWRAP_ENV: "/nonexistent/bwrap"},
        extra_args=("--no-sandbox",),
    )
    try:
        import httpx

        with httpx.Client(base_url=app.url) as client:
            assert client.post("/login", data={"username": "alice", "password": "a-long-password"}).status_code < 400
            config = client.get("/config").text
        assert "are not sandboxed" in config
    finally:
        app.stop()


@pytest.mark.slow
@needs_bwrap
def test_sampling_and_export_of_a_run_start_in_its_sandbox(tmp_path):
    from workbench.modeltools import export_model, sampling

    runs = tmp_path / "runs"
    run_id = launcher.start(RunConfig(**TINY, max_steps=1), runs, sandboxed=sandbox.Policy())
    assert run_state.wait(run_id, runs, timeout=300)["state"] == "finished"
    run_dir = runs / run_id
    confine = sandbox.confinement(run_dir, runs, runfolder.read_config(run_dir), sandbox.Policy())

    out = run_dir / "probes" / "answers.jsonl"
    process = sampling.start_sampling(
        "tiny", ["What is 2 + 2?"], out, adapter_dir=run_dir / runfolder.ADAPTER_DIR, max_new_tokens=4, confine=confine
    )
    assert sandbox.bwrap_binary() in process.args  # through bwrap (after joining the run's cgroups, where offered)
    process.wait(timeout=300)
    progress = sampling.read_sampling(out, process)
    assert progress["done"] and not progress["error"] and len(progress["answers"]) == 1, progress

    plan = export_model.plan_export(run_dir, None, run_dir / "merged")
    process = export_model.start_export(plan, confine=confine)
    assert sandbox.bwrap_binary() in process.args  # through bwrap (after joining the run's cgroups, where offered)
    process.wait(timeout=300)
    assert export_model.read_export(plan.progress_path, process)["error"] is None
    assert (run_dir / "merged" / "config.json").is_file()


@needs_bwrap
def test_a_hub_model_is_fetched_before_the_sandbox_or_the_run_fails_saying_why(tmp_path):
    runs = tmp_path / "runs"
    env_before = os.environ.get("HF_HUB_OFFLINE")
    os.environ["HF_HUB_OFFLINE"] = "1"  # no hub here either way: the launcher's fetch must fail cleanly
    try:
        run_id = launcher.start(
            RunConfig(**{**TINY, "model": "no-such-org/no-such-model"}, max_steps=1), runs, sandboxed=sandbox.Policy()
        )
    finally:
        os.environ.pop("HF_HUB_OFFLINE") if env_before is None else os.environ.update(HF_HUB_OFFLINE=env_before)
    final = run_state.wait(run_id, runs, timeout=120)
    assert final["state"] == "failed"
    assert (
        "the sandbox could not start: model: no-such-org/no-such-model is not in the local hub cache"
        in final["error"]["message"]
    )
    assert "Traceback" not in runfolder.read_log_tail(runs / run_id)


@pytest.mark.slow
@needs_bwrap
def test_a_sandboxed_run_reads_its_hub_layout_dataset_folder(tmp_path):
    folder = write_hub_dataset(tmp_path / "data" / "gsm8k", {"main": {"train": gsm8k_like_rows(8)}})
    runs = tmp_path / "runs"
    cfg = RunConfig(
        **TINY,
        max_steps=1,
        dataset_name=str(folder),
        dataset_config="main",
        prompt_column="question",
        solution_column="answer",
        solution_transform="after_hashes",
    )
    run_id = launcher.start(cfg, runs, sandboxed=sandbox.Policy())
    final = run_state.wait(run_id, runs, timeout=300)
    assert final["state"] == "finished", runfolder.read_log_tail(runs / run_id)
    assert str(folder) in json.dumps(final["sandbox"]["shows"]), "the dataset folder is shown, read-only"


def test_an_uncached_hub_dataset_that_cannot_be_fetched_fails_before_the_sandbox(tmp_path, monkeypatch):
    import huggingface_hub.constants

    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(tmp_path))
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
    with pytest.raises(
        sandbox.SandboxError,
        match=r"^dataset_name: someone/some-data could not be downloaded .*"
        r"hf download --repo-type dataset someone/some-data",
    ):
        sandbox.prepare_dataset({"dataset_name": "someone/some-data"})
    sandbox.prepare_dataset({"dataset_name": ""})  # nothing named: nothing to fetch
