"""Attack: a model folder in the user's own run whose chat template is a link, read by the server for the preview.

A sandboxed run's code may write anything into its own folder, e.g. a `merged/` folder with a model's
config.json, a tokenizer_config.json and a `chat_template.jinja` that is a link to the users file,
/etc/shadow or /proc/self/environ. The path rule lets its owner name that folder as `model` (a folder in
one of their runs), and the Setup tab's data preview (spec/columns.py `_with_model_text`, through
spec/data_mapping.py `read_chat_template`) reads `chat_template.jinja` with `Path.read_text`, which follows
the link, renders it as the template and shows "The exact text the model receives" in the page: the
linked file's text, read as root by the server.
"""

from __future__ import annotations

import json

import gradio as gr
import pytest
from helpers import app_handler, setup_form_values

from workbench.access import users
from workbench.runstore import launch_records, runfolder
from workbench.spec.config import RunConfig
from workbench.ui.app import build_app

pytestmark = pytest.mark.slow  # builds the whole app

RUN = "20260101-000001-alice"
SECRET = "THE-HASH-OF-BOB-5d1e"
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


@pytest.fixture
def places(tmp_path):
    runs = tmp_path / "runs"
    users_file = tmp_path / "users.txt"  # the server's users file, outside the runs folder
    users_file.write_text(f"bob user pbkdf2_sha256$1000$salt${SECRET}\n")
    run_dir = runs / RUN
    RunConfig(model="tiny").save(run_dir / runfolder.CONFIG_FILE)
    launch_records.write_record(
        run_dir, launch_records.LaunchRecord(owner="alice", sandboxed=True, policy={}, config={})
    )
    runfolder.update_status(run_dir, state="finished", owner="alice")
    # what alice's run wrote into its own folder: a model folder whose chat template is a link
    merged = run_dir / "merged"
    merged.mkdir()
    (merged / "config.json").write_text(json.dumps(MODEL_CONFIG))
    (merged / "tokenizer_config.json").write_text("{}")
    uploads = runs / "uploads" / "alice"
    uploads.mkdir(parents=True)
    (uploads / "prompts.jsonl").write_text('{"prompt": "hello"}\n')
    return {"runs": runs, "merged": merged, "users_file": users_file, "data": uploads / "prompts.jsonl"}


def preview_text(places) -> str:
    app = build_app(places["runs"], users={name: users.User(name, "user", "") for name in ("alice", "bob")})
    preview = app_handler(app, "setup_tab", "live_preview")
    out = preview(
        gr.Request(username="alice"), *setup_form_values(model=str(places["merged"]), dataset_name=str(places["data"]))
    )
    values = out if isinstance(out, (list, tuple)) else list(out.values())
    return " ".join(str(getattr(value, "value", value)) for value in values)


def test_the_preview_does_not_show_the_users_file_through_a_linked_chat_template(places):
    (places["merged"] / "chat_template.jinja").symlink_to(places["users_file"])
    text = preview_text(places)
    assert SECRET not in text, "the Setup preview showed the users file through the run's chat_template.jinja link"


def test_the_preview_does_not_show_the_servers_environment_through_a_linked_chat_template(places):
    (places["merged"] / "chat_template.jinja").symlink_to("/proc/self/environ")
    text = preview_text(places)
    assert "PATH=" not in text, "the Setup preview showed the server's environment (/proc/self/environ)"
