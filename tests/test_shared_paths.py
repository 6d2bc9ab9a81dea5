"""What a user of a shared dashboard may name: every path through one rule, and vLLM server addresses.

The rule (workbench/access/paths.py) on its own, then the app built as
`app.py` builds it with accounts, its handlers called as Gradio calls them
for a signed-in user: the Setup tab's live plan (its memory estimate reads a
model folder's config.json), the data preview, the reward code view and the
Train tab's launch. Launches that pass wait in the GPU queue behind a run
that holds the CPU, so nothing trains.
"""

from __future__ import annotations

import json
import socket
import subprocess
import threading

import gradio as gr
import pytest
from helpers import app_handler, setup_form_values

from workbench.access import hosts, paths, users
from workbench.access.owners import Viewer
from workbench.jobs import launcher
from workbench.runstore import runfolder
from workbench.spec.config import RunConfig
from workbench.ui import paths_view
from workbench.ui.app import build_app
from workbench.ui.train_view import RunWatch

ALICE_RUN, BOB_RUN, HOLDER_RUN = "20260101-000001-alice", "20260101-000002-bob", "20260101-000000-holder"
# A model's config.json: the memory estimate reads its sizes (so an estimate on the page means it was read).
MODEL_CONFIG = {
    "model_type": "llama",
    "architectures": ["LlamaForCausalLM"],
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "vocab_size": 1000,
    "max_position_embeddings": 512,
    "tie_word_embeddings": True,
}


def model_folder(folder):
    folder.mkdir(parents=True)
    (folder / "config.json").write_text(json.dumps(MODEL_CONFIG))
    return folder


@pytest.fixture
def places(tmp_path):
    """A runs folder with a finished run of alice and of bob (each with a merged model), the admin's models
    folder, and a model folder elsewhere."""
    runs = tmp_path / "runs"
    for run_id, owner in [(ALICE_RUN, "alice"), (BOB_RUN, "bob")]:
        RunConfig(model="tiny").save(runs / run_id / runfolder.CONFIG_FILE)
        runfolder.update_status(runs / run_id, state="finished", step=1, owner=owner)
        model_folder(runs / run_id / "merged")
        (runs / run_id / "prompts.jsonl").write_text('{"prompt": "What is 2 + 2?"}\n')
    models = tmp_path / "models"
    model_folder(models / "shared-model")
    elsewhere = model_folder(tmp_path / "elsewhere" / "model")
    (runs / "uploads" / "bob").mkdir(parents=True)
    return {
        "runs": runs,
        "models": models,
        "elsewhere": elsewhere,
        "alice": runs / ALICE_RUN / "merged",
        "bob": runs / BOB_RUN / "merged",
    }


# ---------------------------------------------------------------- the rule


def test_the_rule_allows_names_hub_ids_own_runs_and_shared_folders_only(places, monkeypatch):
    runs = places["runs"]
    bob = paths_view.scope_for(runs, Viewer("bob"), shared=(places["models"].resolve(),))
    confine = paths_view.confine_path
    assert confine("model", "tiny", bob) == "tiny"
    assert confine("model", "Qwen/Qwen2-0.5B-Instruct", bob) == "Qwen/Qwen2-0.5B-Instruct"
    assert confine("model", str(places["bob"]), bob) == str(places["bob"].resolve())
    assert confine("model", str(places["models"] / "shared-model"), bob) == str(
        (places["models"] / "shared-model").resolve()
    )
    assert confine("dataset_path", str(runs / BOB_RUN / "prompts.jsonl"), bob).endswith("prompts.jsonl")
    monkeypatch.chdir(runs.parent)  # `runs/ID` has a hub id's shape, but it is a local path: the rule applies
    (runs / "uploads" / "bob" / "link").symlink_to(places["alice"])
    refused = [
        ("model", str(places["alice"])),
        ("model", str(places["elsewhere"])),
        ("model", f"runs/{ALICE_RUN}"),
        ("model", f"../../{ALICE_RUN}/merged"),
        ("model", "link"),
        ("model", "x/../../alice"),
        ("model", str(runs)),
        ("model", str(runs / "uploads")),
        ("dataset_path", str(runs / ALICE_RUN / "prompts.jsonl")),
        ("reward_file", str(places["bob"] / "config.json") + "/.."),
        ("model", "/etc"),
    ]
    for field, value in refused:
        with pytest.raises(
            paths.PathError,
            match=rf"^{field}: .* is not a .* in your uploads folder .*bob, one of "
            r"your runs or a shared folder \(.*models\); on a shared dashboard",
        ):
            confine(field, value, bob)
    admin = paths_view.scope_for(runs, Viewer("root", admin=True))
    assert confine("model", str(places["alice"]), admin) == str(places["alice"].resolve()), "an admin: every run"


def test_the_shared_folders_come_from_the_options_or_the_environment(tmp_path):
    assert paths.shared_folders(environ={}) == ()
    (tmp_path / "m").mkdir()
    environ = {paths.MODELS_DIR_ENV: str(tmp_path / "m"), paths.DATA_DIR_ENV: str(tmp_path / "d")}
    with pytest.raises(paths.PathError, match=r"^--data-dir: .*/d is not a folder; create it"):
        paths.shared_folders(environ=environ)
    (tmp_path / "d").mkdir()
    assert paths.shared_folders(environ=environ) == ((tmp_path / "m").resolve(), (tmp_path / "d").resolve())


def test_only_loopback_and_listed_hosts_pass_as_a_vllm_server():
    for url in ("", "http://127.0.0.1:8000", "http://localhost:8000", "http://[::1]:8000", "http://127.0.0.2:1"):
        hosts.check_server_url(url)
    assert hosts.listed_hosts({hosts.VLLM_HOSTS_ENV: "gpu1, GPU2.lan ,"}) == {"gpu1", "gpu2.lan"}
    hosts.check_server_url("http://GPU1:8000", frozenset({"gpu1"}))
    for url in (
        "http://10.0.0.1:8000",
        "http://127.0.0.1@169.254.169.254/",
        "http://2130706433:80",
        "http://0.0.0.0:8000",
        "http://[::1",
        "file:///etc/passwd",
        "http://gpu3:8000",
    ):
        with pytest.raises(
            Exception,
            match=r"^vllm_server_base_url: .* is not on this machine \(loopback\) nor a "
            r"vLLM host the admin lists.*; leave it empty",
        ):
            hosts.check_server_url(url, frozenset({"gpu1"}))


# ---------------------------------------------------------------- the app's handlers


@pytest.fixture
def app(places):
    accounts = {
        name: users.User(name, role, "") for name, role in [("alice", "user"), ("bob", "user"), ("root", "admin")]
    }
    return build_app(places["runs"], users=accounts, shared_dirs=(places["models"].resolve(),))


@pytest.fixture
def cpu_held(places):
    """A run of nobody's holds the CPU (its trainer is a sleeping process): launches wait in the queue."""
    holder = places["runs"] / HOLDER_RUN
    RunConfig(model="tiny", device="cpu").save(holder / runfolder.CONFIG_FILE)
    live = subprocess.Popen(["sleep", "300"])
    runfolder.update_status(holder, state="training", pid=live.pid, pgid=live.pid, step=1)
    yield
    live.kill()
    live.wait()


def launch(app, user: str, **changes) -> str:
    """The Train tab's launch as `user`: the notice it shows."""
    out = app_handler(app, "train_tab", "on_launch")(
        gr.Request(username=user), RunWatch(), 0.5, *setup_form_values(**changes)
    )
    return next(value.value for value in out.values() if isinstance(value, gr.HTML) and "wb-notice" in value.value)


def queued_runs(runs) -> list:
    return [d for d in runfolder.list_run_dirs(runs) if runfolder.read_status(d).get("state") == runfolder.QUEUED]


def test_another_users_run_and_any_folder_are_refused_in_the_live_plan_and_at_launch(app, places, cpu_held):
    live_plan = app_handler(app, "setup_tab", "live_plan")
    bob = gr.Request(username="bob")
    for model in (places["alice"], places["elsewhere"]):
        *_, problems, memory, ready = live_plan(bob, *setup_form_values(model=str(model)))
        assert ready is False and "<b>model</b>: " in problems and "is not a folder in your uploads folder" in problems
        assert "About" not in memory, "the refused folder's config.json was read for the memory estimate"
        notice = launch(app, "bob", model=str(model))
        assert "Not launched" in notice and "is not a folder in your uploads folder" in notice, notice
    assert queued_runs(places["runs"]) == [], "nothing launched"

    for model in (places["bob"], places["models"] / "shared-model"):
        *_, problems, memory, ready = live_plan(bob, *setup_form_values(model=str(model)))
        assert "About" in memory and "<b>model</b>" not in problems, problems
        notice = launch(app, "bob", model=str(model))
        assert "Queued" in notice, notice
        (queued,) = queued_runs(places["runs"])
        assert RunConfig.load(queued / runfolder.CONFIG_FILE).model == str(model.resolve())
        launcher.stop(queued.name, places["runs"])


def test_a_run_that_rewrote_its_config_is_not_resumed_sampled_or_exported(app, places, cpu_held, make_checkpoint):
    """A run writes its own folder: a config.json it changed to name alice's model is refused like a launch."""
    mine = places["runs"] / BOB_RUN
    make_checkpoint(mine, 1)
    config = json.loads((mine / runfolder.CONFIG_FILE).read_text())
    (mine / runfolder.CONFIG_FILE).write_text(json.dumps({**config, "model": str(places["alice"])}))
    bob = gr.Request(username="bob")
    said = [
        app_handler(app, "train_tab", "on_resume")(bob, RunWatch(run_id=BOB_RUN)),
        app_handler(app, "compare_tab", "on_answer")(bob, BOB_RUN, None, "What is 2 + 2?", 8, None),
        app_handler(app, "merge_panel", "start")(bob, BOB_RUN, None, str(mine / "merged-again"), None),
    ]
    for out in said:
        text = " ".join(str(getattr(value, "value", value)) for value in out.values())
        assert "model: " in text and "is not a folder in your uploads folder" in text, text
    assert runfolder.read_status(mine)["state"] == "finished" and queued_runs(places["runs"]) == []
    assert not (mine / "merged-again").exists()


def test_previews_read_only_what_the_rule_allows(app, places):
    preview = app_handler(app, "setup_tab", "live_preview")
    bob = gr.Request(username="bob")
    theirs = preview(bob, *setup_form_values(dataset_name=str(places["runs"] / ALICE_RUN / "prompts.jsonl")))[0]
    assert "What is 2 + 2?" not in theirs and "is not a file or folder in your uploads folder" in theirs
    mine = preview(bob, *setup_form_values(dataset_name=str(places["runs"] / BOB_RUN / "prompts.jsonl")))[0]
    assert "What is 2 + 2?" in mine, "a file of bob's own run is his to use"
    code = app_handler(app, "files_panel", "show_reward_code")
    alice_reward = places["runs"] / ALICE_RUN / "rewards.py"
    alice_reward.write_text("def alice_secret(prompts, completions, **kw):\n    return [0.0]\n")
    note, box = code(bob, str(alice_reward))
    assert "alice_secret" not in note + str(box.value) and "is not a file in your uploads folder" in note


def non_loopback_address() -> str:
    import psutil

    for addresses in psutil.net_if_addrs().values():
        for address in addresses:
            if address.family == socket.AF_INET and not address.address.startswith("127."):
                return address.address
    pytest.skip("this machine has no address besides loopback")


def test_a_vllm_server_elsewhere_is_refused_before_any_request(app, places):
    address = non_loopback_address()
    listener = socket.create_server(("0.0.0.0", 0))
    port, accepted = listener.getsockname()[1], []

    def accept():
        while True:
            try:
                connection, _ = listener.accept()
            except OSError:
                return
            accepted.append(connection)
            connection.close()  # answers nothing: the health check fails at once

    threading.Thread(target=accept, daemon=True).start()
    try:
        url = f"http://{address}:{port}"
        *_, problems, _memory, ready = app_handler(app, "setup_tab", "live_plan")(
            gr.Request(username="bob"), *setup_form_values(generation="vllm-server", vllm_server_base_url=url)
        )
        assert ready is False and "<b>vllm_server_base_url</b>: " in problems and "is not on this machine" in problems
        notice = launch(app, "bob", generation="vllm-server", vllm_server_base_url=url)
        assert "Not launched" in notice and "is not on this machine (loopback)" in notice, notice
        assert accepted == [], "the server was reached"
    finally:
        listener.close()


def test_a_reward_model_follows_the_path_rule_of_models(places):
    runs = places["runs"]
    bob = paths_view.scope_for(runs, Viewer("bob"), shared=(places["models"].resolve(),))
    shared = places["models"] / "shared-model"
    assert paths_view.confine_path("reward_model", str(shared), bob) == str(shared.resolve())
    assert paths_view.confine_path("reward_model", "org/reward-model", bob) == "org/reward-model"
    for value in (str(places["alice"]), str(places["elsewhere"])):
        with pytest.raises(paths.PathError, match=r"^reward_model: .* is not a .* in your uploads folder"):
            paths_view.confine_path("reward_model", value, bob)
    cfg, problems = paths_view.confine_config(RunConfig(model="tiny", reward_model=str(places["elsewhere"])), bob)
    assert cfg.reward_model == "" and [p.field for p in problems] == ["reward_model"]
    with pytest.raises(paths.PathError) as refused:
        paths_view.confine_path("reward_model", str(places["elsewhere"]), bob)
    assert "a hub id of a sequence-classification model" in refused.value.fix
