"""Attack: a model folder in the user's own (finished) run makes the Setup tab's live plan and preview take
the server's memory and CPU.

The path rule lets a user name a folder of one of their runs as `model` (its merged model), and that run's
code wrote the folder. The live plan reads its config.json whole (spec/memory.py `from_model_dir`,
`Path.read_text`), and the data preview reads chat_template.jinja whole and renders it in the server
(spec/data_mapping.py `read_chat_template`, `model_input_text`) with no bound on the size of the file,
of what the template makes, or on its time: `{{ 'x' * 1500000000 }}` took 5.9 GB of the server's memory
and a nested `range(100000)` loop 4.4 GB and still ran 30 s later (it would for hours); a 1.5 GB sparse
config.json or template (no disk used) took 3.2 GB; a 200 MiB template
is compiled into 8 GiB. Both events run on every change of the Setup form,
so the dashboard is killed for every user. Here: sizes 8x smaller, and a look may hold at most 64 MiB.

Fixed (issue 52): each file is read only when it holds at most WORKBENCH_MAX_MODEL_FILE_MB
(sources/model_files.read_model_file), and a template the server did not write renders in a child process under a
time, memory and output limit (sources/chat_templates.render_in_child).
"""

from __future__ import annotations

import json
import tracemalloc

import gradio as gr
import pytest
from helpers import app_handler, setup_form_values

from workbench.access import users
from workbench.runstore import launch_records, runfolder
from workbench.spec.config import RunConfig
from workbench.ui.app import build_app

pytestmark = pytest.mark.slow  # builds the whole app
LIMIT = 64 * 2**20
SIZE = 200 * 2**20
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


def sparse(path, head: bytes, size: int = SIZE) -> None:
    with open(path, "wb") as handle:
        handle.write(head)
        handle.truncate(size)


CASES = {  # what the run's code left in its merged/ folder, and the event that reads it
    "a template that multiplies a string": (
        "live_preview",
        lambda m: (m / "chat_template.jinja").write_text("{{ 'x' * " + str(SIZE) + " }}"),
    ),
    "a template with nested loops": (
        "live_preview",
        lambda m: (m / "chat_template.jinja").write_text(
            "{% for a in range(100000) %}{% for b in range(100) %}x{% endfor %}{% endfor %}"
        ),
    ),
    # the template is compiled whole: 16 MiB of it took 40x that (200 MiB: 8 GiB)
    "a sparse 16 MiB template": ("live_preview", lambda m: sparse(m / "chat_template.jinja", b"x", 16 * 2**20)),
    "a sparse 200 MiB config.json": ("live_plan", lambda m: sparse(m / "config.json", b'{"x": "')),
}


@pytest.mark.parametrize("case", list(CASES))
def test_a_model_folder_of_the_users_run_costs_the_server_a_bounded_amount(tmp_path, case):
    event, plant = CASES[case]
    runs = tmp_path / "runs"
    run_dir = runs / "20260101-000001-alice"
    RunConfig(model="tiny").save(run_dir / runfolder.CONFIG_FILE)
    launch_records.write_record(
        run_dir, launch_records.LaunchRecord(owner="alice", sandboxed=True, policy={}, config={})
    )
    runfolder.update_status(run_dir, state="finished", owner="alice")
    merged = run_dir / "merged"
    merged.mkdir()
    (merged / "config.json").write_text(json.dumps(MODEL_CONFIG))
    (merged / "tokenizer_config.json").write_text("{}")
    plant(merged)
    uploads = runs / "uploads" / "alice"
    uploads.mkdir(parents=True)
    (uploads / "prompts.jsonl").write_text('{"prompt": "hello"}\n')
    app = build_app(runs, users={name: users.User(name, "user", "") for name in ("alice", "bob")})
    handler = app_handler(app, "setup_tab", event)
    tracemalloc.start()
    try:
        handler(
            gr.Request(username="alice"),
            *setup_form_values(model=str(merged), dataset_name=str(uploads / "prompts.jsonl")),
        )
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < LIMIT, f"{event} held {peak / 2**20:.0f} MiB of the server's memory for {case}"
