"""The Setup tab's pure parts: busy GPUs stay choosable and a queued smoke test says why (the GPU queue);
the data preview's first rows escaped and cut, which reward reads which column, the warning."""

from __future__ import annotations

import json

from helpers import gsm8k_like_rows, write_hub_dataset

from workbench.sources.gpus import GpuInfo
from workbench.ui import setup_view
from workbench.ui.data_preview_view import CELL_CHARS, data_choices, data_preview_html
from workbench.ui.setup_form import preview_from_form

GPUS = [GpuInfo(0, "H100", 81_000, 1_000, 97), GpuInfo(1, "H100", 81_000, 80_000, 0)]


def test_a_gpu_a_run_holds_can_be_chosen_and_says_the_launch_waits():
    choices = setup_view.gpu_choices(GPUS, busy={0})
    assert [index for _, index in choices] == [0, 1]
    assert choices[0][0].endswith("(held by a run: a launch on it waits in the queue)")
    assert "queue" not in choices[1][0]
    table = setup_view.hardware_html(GPUS, busy={0})
    assert table.count(setup_view.BUSY_NOTE) == 1 and "free</td>" in table


def test_a_queued_smoke_test_says_what_it_waits_for():
    text = setup_view.smoke_result_html(
        {"state": "queued", "run_id": "s1", "queue_position": 1, "waits_for": "GPU 0 (run <x>)"}
    )
    assert "Smoke test queued at position 1: it waits for GPU 0 (run &lt;x&gt;)" in text and "(run s1)" in text
    assert "Smoke test loading model" in setup_view.smoke_result_html({"state": "loading_model", "run_id": "s1"})


def test_a_task_preview_shows_its_rows_and_the_column_its_reward_needs():
    html = data_preview_html(preview_from_form({"task": "arithmetic", "seed": 42}))
    assert "First 5 rows of the arithmetic task" in html
    assert html.count("<tr>") == 6 and "&lt;answer&gt;" in html  # the rows' text, escaped
    assert "<code>exact_answer</code> needs <code>answer</code> <span class='wb-ok'>✓</span>" in html
    assert "<code>format_answer_tag</code> reads no column" in html
    assert "wb-warn-line" not in html


def test_a_ticked_reward_whose_column_is_missing_is_warned_about():
    form = {"task": "demo", "use_brevity": True, "use_exact_answer": True, "use_length_target": True}
    html = data_preview_html(preview_from_form(form))
    assert (
        "<b>exact_answer</b> needs the column <code>answer</code> and the demo task has none: add it (one value "
        "per prompt), or untick exact_answer."
    ) in html
    assert "reads <code>target_chars</code> when present (absent here: it uses its default)" in html


def test_a_file_preview_escapes_and_cuts_text(tmp_path):
    path = tmp_path / "data.jsonl"
    markup = "<script>alert(1)</script>"
    rows = [
        {"prompt": markup + "x" * 500, "answer": "4"},
        {"prompt": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}], "answer": "5"},
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    html = data_preview_html(preview_from_form({"task": "demo", "dataset_name": str(path), "use_exact_answer": True}))
    assert "<script>" not in html and "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "x" * (CELL_CHARS - 1 - len(markup)) + "…</td>" in html  # cut to CELL_CHARS characters, then escaped
    assert "system: Be brief. user: Hi" in html  # a conversation reads as its messages
    assert "answer <span class='wb-ok'>(read by a reward)</span>" in html


def test_an_unreadable_file_shows_the_reason_instead_of_rows(tmp_path):
    html = data_preview_html(preview_from_form({"task": "demo", "dataset_name": str(tmp_path / "gone.csv")}))
    assert "wb-warn-line" in html and "no file or folder at" in html and "<table" not in html


def test_a_hub_layout_split_fills_the_dropdowns_and_shows_its_solution(tmp_path):
    folder = write_hub_dataset(
        tmp_path / "gsm8k", {"main": {"train": gsm8k_like_rows(3)}, "socratic": {"train": gsm8k_like_rows(1)}}
    )
    form = {
        "task": "demo",
        "dataset_name": str(folder),
        "dataset_config": "main",
        "prompt_column": "question",
        "solution_column": "answer",
        "solution_transform": "after_hashes",
        "chat_template": "auto",
        "model": str(tmp_path / "no-model-yet"),
    }
    data = preview_from_form(form)
    assert data_choices(data) == (
        ["main", "socratic"],
        ["question", "answer"],
        [("(none)", ""), ("question", "question"), ("answer", "answer")],
    )
    html = data_preview_html(data)
    assert "<code id='wb-first-solution'>1002</code>" in html
    assert "The model&#x27;s tokenizer is not on disk yet" in html and "wb-model-text" not in html
    raw = data_preview_html(preview_from_form({**form, "chat_template": "none", "system_prompt": "Be brief."}))
    assert (
        f"<pre class='wb-model-text' id='wb-model-text'>Be brief.\n\n{gsm8k_like_rows(1)[0]['question']}</pre>" in raw
        and "the text goes to the model as it is" in raw
    )


def test_a_mapping_that_does_not_fit_says_so_instead_of_a_text(tmp_path):
    folder = write_hub_dataset(tmp_path / "q", {"default": {"train": [{"question": "1 + 1?"}]}})
    html = data_preview_html(preview_from_form({"task": "demo", "dataset_name": str(folder)}))
    assert "1 + 1?" in html and "The column mapping or chat_template does not fit this data" in html


def test_the_reward_picker_offers_trls_rewards_with_their_parameters_and_failure_settings():
    from helpers import setup_form_values

    from workbench.spec.config_checks import validate_config
    from workbench.ui import setup_tab

    assert {"accuracy_reward", "cosine_scaled_reward", "repetition_penalty_reward"} <= set(setup_view.PICKER_REWARDS)
    changes = {
        "use_mentions_answer": False,
        "use_brief_if_correct": False,  # the demo's own, ticked at first
        "use_brevity": True,
        "use_repetition_penalty_reward": True,
        "weight_repetition_penalty_reward": 0.5,
        "reward_params": '{"repetition_penalty_reward": {"ngram_size": 4}}',
        "reward_errors": "record",
        "reward_failure_score": -1.0,
    }
    form = dict(zip(setup_tab.FORM_KEYS, setup_form_values(**changes)))
    cfg = setup_view.config_from_form(form, gpus_present=False)
    assert (cfg.reward_names, cfg.reward_weights) == (["brevity", "repetition_penalty_reward"], [1.0, 0.5])
    assert cfg.reward_params == {"repetition_penalty_reward": {"ngram_size": 4}}
    assert (cfg.reward_errors, cfg.reward_failure_score) == ("record", -1.0)
    # a parameter the reward does not have is named with the field, before anything runs
    bad = setup_view.config_from_form({**form, "reward_params": '{"repetition_penalty_reward": {"n": 4}}'}, False)
    assert any(p.field == "reward_params" and "has no parameter 'n'" in p.rule for p in validate_config(bad))
    help_text = setup_view.rewards_help_markdown()
    assert "`ngram_size` (default 3)" in help_text and "`accuracy_reward`" in help_text and "`brevity`" in help_text


def test_the_launch_line_says_when_the_machine_is_busy_and_counts_what_no_round_does():
    from workbench.calc import plan
    from workbench.sources.cpu_busy import CpuBusy
    from workbench.spec.config import RunConfig
    from workbench.ui.first_run_view import launch_line

    cfg = RunConfig.for_task("demo")
    shape = plan(
        per_device_train_batch_size=cfg.per_device_train_batch_size,
        num_generations=cfg.num_generations,
        max_steps=cfg.max_steps,
    )
    busy = CpuBusy(others_share=0.6, tree_share=0.1, idle_share=0.3, cores=2, seconds=0.5).to_dict()
    quiet = {**busy, "others_share": 0.05, "idle_share": 0.85}
    line = launch_line(cfg, shape, None, busy)
    assert "This machine is busy: other processes took 60% of its 2 cores over the last 0.5 s" in line
    assert "times here grow with it" in line
    assert "busy" not in launch_line(cfg, shape, None, quiet) and "busy" not in launch_line(cfg, shape, None)
    assert "minute" not in launch_line(cfg, shape, None)  # not measured here: no figure from elsewhere
    from workbench.tuning.choice import Candidate, SpeedChoice

    chosen = Candidate(shared_prompt_pass=True)
    measured = SpeedChoice("k", chosen, "this CPU", 1.0, {chosen.label(): 3.0})
    timed = launch_line(cfg, shape, measured, busy)
    assert (
        f"about {cfg.max_steps * 3 // 60} min" in timed
        and "plus loading the model and the held-out evaluations" in timed
    )
    assert "the held-out" not in launch_line(cfg.with_changes(eval_strategy="no"), shape, measured)
