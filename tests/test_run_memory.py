"""A shared dashboard refuses a run whose memory estimate is past its device's memory or the admin's share (#42, 8).

The rule on its own (access/run_memory.py: the limit, the refusal, the
admin's WORKBENCH_MAX_RUN_MEMORY_GB), the setting that drives an estimate
(spec/memory.py's `driving_field`, and the held-out evaluation it now
counts), then the app built with accounts, its Setup tab's live plan and the
Train tab's launch called as Gradio calls them for a signed-in user:
`max_completion_length=1e6` and `eval_size=1e6` never reach "Ready to launch"
and are not launched, each refusal naming the setting, the rule and a fix.
"""

from __future__ import annotations

import json

import gradio as gr
import pytest
from helpers import app_handler, setup_form_values

from workbench.access import run_memory, users
from workbench.access.run_memory import GIB, MAX_RUN_MEMORY_ENV
from workbench.runstore import runfolder
from workbench.spec import memory
from workbench.spec.config import RunConfig
from workbench.ui.app import build_app
from workbench.ui.train_view import RunWatch

# A small model's config.json: the estimate reads its sizes.
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
HUGE = 10**6


# ---------------------------------------------------------------- the rule, pure


def test_the_limit_is_the_smaller_of_the_device_and_the_admins_share():
    assert run_memory.memory_limit(None, None, "cpu") is None
    assert run_memory.memory_limit(32 * GIB, None, "cpu") == (32 * GIB, "this machine has in all")
    assert run_memory.memory_limit(80 * GIB, 16 * GIB, "cuda") == (
        16 * GIB,
        f"each run may use here ({MAX_RUN_MEMORY_ENV})",
    )
    assert run_memory.memory_limit(8 * GIB, 16 * GIB, "cuda") == (8 * GIB, "the GPU has in all")


def test_a_run_past_the_limit_is_refused_naming_the_setting_the_rule_and_a_fix():
    limit = run_memory.memory_limit(19 * GIB, None, "cpu")
    assert run_memory.memory_refusal(19 * GIB, limit, "max_completion_length") is None
    assert run_memory.memory_refusal(10 * GIB, None, "max_completion_length") is None, "no limit known: no refusal"
    refusal = run_memory.memory_refusal(29_821 * GIB, limit, "max_completion_length")
    assert str(refusal) == (
        "max_completion_length: the run's memory estimate is about 29,821.0 GiB at its peak, over "
        "the 19.0 GiB this machine has in all; lower max_completion_length (it drives the "
        "estimate; the memory panel shows each part), or turn on gradient_checkpointing, or ask "
        "whoever runs the server for a larger share"
    )


def test_the_admins_share_comes_from_the_environment():
    assert run_memory.run_share({}) is None
    assert run_memory.run_share({MAX_RUN_MEMORY_ENV: "16"}) == 16 * GIB
    assert run_memory.run_share({MAX_RUN_MEMORY_ENV: " 1.5 "}) == int(1.5 * GIB)
    for text in ("lots", "0", "-2", "inf", "nan"):
        with pytest.raises(
            run_memory.MemoryLimitError,
            match=rf"^{MAX_RUN_MEMORY_ENV}: .* is not a positive number "
            r"of GiB; set it to the GiB one run may use",
        ):
            run_memory.run_share({MAX_RUN_MEMORY_ENV: text})


@pytest.mark.parametrize(
    "changes, field",
    [
        ({}, "model"),
        ({"max_completion_length": HUGE}, "max_completion_length"),
        ({"per_device_train_batch_size": 4096}, "per_device_train_batch_size"),
        ({"eval_strategy": "steps", "eval_size": HUGE}, "eval_size"),
        ({"eval_strategy": "steps", "eval_size": HUGE, "max_completion_length": HUGE}, "max_completion_length"),
    ],
    ids=["defaults", "completion", "batch", "eval-size", "both"],
)
def test_the_setting_that_drives_the_estimate_is_the_one_whose_default_shrinks_it_most(changes, field):
    defaults = RunConfig().to_dict()
    shape = memory.model_shape(MODEL_CONFIG)

    def total(config):
        return memory.estimate_for_config(config, shape, 64, "cpu").total_bytes

    assert memory.driving_field({**defaults, **changes}, total, defaults) == field


def test_held_out_evaluation_is_counted_only_when_the_run_evaluates():
    shape = memory.model_shape(MODEL_CONFIG)
    quiet = memory.estimate_for_config(RunConfig(eval_size=HUGE), shape, 64, "cpu")
    assert quiet.phase_bytes("evaluation") == 0, "eval_strategy=no: eval_size is not used"
    evaluating = memory.estimate_for_config(
        RunConfig(eval_strategy="steps", eval_size=HUGE, eval_pass_k=1), shape, 64, "cpu"
    )
    answers = next(t for t in evaluating.terms if t.name == "held-out answers")
    assert answers.bytes == 2 * HUGE * 48 * memory.ANSWER_BYTES_PER_TOKEN and evaluating.peak_phase == "evaluation"
    on_gpu = memory.estimate_for_config(RunConfig(eval_strategy="steps", eval_size=HUGE), shape, 64, "cuda")
    assert "held-out answers" not in {t.name for t in on_gpu.terms}
    assert any("Held-out evaluation keeps about" in note for note in on_gpu.notes)


def test_the_evaluation_batch_is_the_one_the_trainer_answers_in():
    from workbench.trainer import answering

    assert memory.EVAL_BATCH == answering.GENERATE_BATCH


# ---------------------------------------------------------------- the app's handlers


@pytest.fixture(scope="module")
def places(tmp_path_factory):
    """A runs folder, the admin's models folder with a small model, and the app served with accounts."""
    root = tmp_path_factory.mktemp("run-memory")
    model = root / "models" / "small"
    model.mkdir(parents=True)
    (model / "config.json").write_text(json.dumps(MODEL_CONFIG))
    accounts = {"bob": users.User("bob", "user", "")}
    app = build_app(root / "runs", users=accounts, shared_dirs=((root / "models").resolve(),))
    return {"runs": root / "runs", "model": str(model), "app": app}


def live_plan(places, **changes):
    """(problems HTML, ready) of the Setup tab's live plan as bob sees it."""
    *_, problems, _memory, ready = app_handler(places["app"], "setup_tab", "live_plan")(
        gr.Request(username="bob"), *setup_form_values(model=places["model"], **changes)
    )
    return problems, ready


def launch(places, **changes) -> str:
    """The Train tab's launch as bob: the notice it shows."""
    out = app_handler(places["app"], "train_tab", "on_launch")(
        gr.Request(username="bob"), RunWatch(), 0.5, *setup_form_values(model=places["model"], **changes)
    )
    return next(value.value for value in out.values() if isinstance(value, gr.HTML) and "wb-notice" in value.value)


def test_a_huge_completion_never_reaches_ready_and_is_not_launched(places, monkeypatch):
    monkeypatch.delenv(MAX_RUN_MEMORY_ENV, raising=False)
    problems, ready = live_plan(places)
    assert ready is True and "GiB at its peak" not in problems, problems
    for changes in (
        {"max_completion_length": HUGE},
        {"max_completion_length": HUGE, "eval_strategy": "steps", "eval_size": HUGE},
    ):
        problems, ready = live_plan(places, **changes)
        assert ready is False and "<b>max_completion_length</b>" in problems, problems
        assert "GiB at its peak, over the" in problems and "has in all" in problems, problems
        notice = launch(places, **changes).replace("&#x27;", "'")
        assert "Not launched" in notice and "max_completion_length: the run's memory estimate" in notice, notice
    assert runfolder.list_run_dirs(places["runs"]) == [], "nothing launched"


def test_the_admins_share_refuses_a_huge_evaluation(places, monkeypatch):
    monkeypatch.setenv(MAX_RUN_MEMORY_ENV, "1")
    problems, ready = live_plan(places, eval_strategy="steps", eval_size=HUGE)
    assert (
        ready is False
        and "<b>eval_size</b>" in problems
        and f"each run may use here ({MAX_RUN_MEMORY_ENV})" in problems
    ), problems
    notice = launch(places, eval_strategy="steps", eval_size=HUGE).replace("&#x27;", "'")
    assert "Not launched" in notice and "eval_size: the run's memory estimate" in notice, notice
    problems, ready = live_plan(places)
    assert ready is True and "GiB at its peak" not in problems, "the defaults fit the share"
    assert runfolder.list_run_dirs(places["runs"]) == []
