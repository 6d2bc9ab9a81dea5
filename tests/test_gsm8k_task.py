"""The gsm8k task: its data named as the hub names it, its columns mapped, TRL's accuracy reward on its answers,
its bundled sample of the real dataset, and a run of it through the CLI as the README gives it."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from workbench.calc import plan
from workbench.modeltools.probes import default_prompts
from workbench.sources import hub_datasets
from workbench.spec import data_mapping, rewards, tasks
from workbench.spec.config import RunConfig, column_mapping
from workbench.spec.config_checks import validate_config
from workbench.spec.tasks import GSM8K_SAMPLE, TASKS

ROOT = Path(__file__).resolve().parent.parent
TASK = TASKS["gsm8k"]


def test_the_task_names_gsm8k_as_the_hub_does_and_maps_its_columns():
    cfg = RunConfig.for_task("gsm8k")
    assert (cfg.dataset_name, cfg.dataset_config, cfg.prompt_column, cfg.solution_column) == (
        "openai/gsm8k",
        "main",
        "question",
        "answer",
    )
    assert (cfg.solution_transform, cfg.dataset_test_split) == ("after_hashes", "test")
    assert cfg.system_prompt == tasks.GSM8K_INSTRUCTION and "\\boxed{" in cfg.system_prompt
    assert list(TASK.reward_names) == ["accuracy_reward", "boxed_format"]


def test_its_bundled_sample_is_laid_out_as_the_hub_lays_out_openai_gsm8k():
    source = hub_datasets.locate(str(GSM8K_SAMPLE), "dataset_name")
    train = hub_datasets.load_split(source, "main", hub_datasets.parse_split("train"))
    test = hub_datasets.load_split(source, "main", hub_datasets.parse_split("test"))
    assert (len(train), len(test)) == (8, 4) and train.column_names == ["question", "answer"]
    finals = [data_mapping.after_hashes(row["answer"]) for row in train]
    assert finals[0] == "72" and all(final.lstrip("-").isdigit() for final in finals)
    # the test split is held out: no problem of it is trained on
    assert not set(test["question"]) & set(train["question"])


def test_a_sample_row_reaches_rewards_as_a_system_and_user_message_with_its_solution():
    cfg = RunConfig.for_task("gsm8k", dataset_name=str(GSM8K_SAMPLE))
    row = data_mapping.map_row(tasks.gsm8k_sample("train")[0], column_mapping(cfg, True))
    assert row["prompt"] == [
        {"role": "system", "content": tasks.GSM8K_INSTRUCTION},
        {"role": "user", "content": tasks.gsm8k_sample("train")[0]["question"]},
    ]
    assert row["solution"] == "72" and row["answer"].endswith("#### 72")


def test_the_sample_passes_the_checks_and_an_empty_or_offline_dataset_says_how_to_get_the_data(monkeypatch):
    assert validate_config(RunConfig.for_task("gsm8k", dataset_name=str(GSM8K_SAMPLE))) == []
    empty = [str(p) for p in validate_config(RunConfig.for_task("gsm8k", dataset_name=""))]
    assert any(
        p.startswith("dataset_name: is empty, and the gsm8k task trains on a dataset")
        and f"dataset_name={GSM8K_SAMPLE}" in p
        for p in empty
    ), empty
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_CACHE", "/nonexistent-hub-cache")
    offline = [str(p) for p in validate_config(RunConfig.for_task("gsm8k"))]
    assert any(
        "hf download --repo-type dataset openai/gsm8k" in p and f"dataset_name={GSM8K_SAMPLE}" in p for p in offline
    ), offline


def test_boxed_format_pays_for_the_form_accuracy_reward_parses():
    reward = rewards.get_reward("boxed_format")
    completions = ["48 + 24 = 72, so \\boxed{72}.", "The answer is 72.", "\\boxed{}", "boxed{72}"]
    assert reward(completions=completions) == [1.0, 0.0, 0.0, 0.0]


def test_probes_are_the_held_out_test_problems_whichever_copy_the_run_names():
    probes = default_prompts({"task": "gsm8k", "dataset_name": "/data/my-gsm8k-copy"})
    assert [p.removesuffix(f" {tasks.GSM8K_INSTRUCTION}") for p in probes] == [
        row["question"] for row in tasks.gsm8k_sample("test")
    ]
    assert default_prompts({"task": "demo", "dataset_name": "/data/mine.jsonl"}) == []


@pytest.mark.parametrize("settings", [TASK.settings, {**TASK.settings, **TASK.gpu_settings}], ids=["cpu", "gpu"])
def test_its_cpu_and_gpu_settings_are_valid_batches(settings):
    cfg = RunConfig.for_task("gsm8k", **settings)
    verdict = plan(
        per_device_train_batch_size=cfg.per_device_train_batch_size,
        num_generations=cfg.num_generations,
        gradient_accumulation_steps=cfg.gradient_accumulation_steps,
        num_processes=1,
        max_steps=cfg.max_steps,
        max_completion_length=cfg.max_completion_length,
        dataset_size=7473,
    )  # GSM8K's train split
    assert verdict.valid, verdict.errors


@pytest.mark.slow  # a real model reads, generates and learns one step
def test_the_readmes_command_trains_the_tiny_model_on_the_sample_with_trls_accuracy_reward(tmp_path):
    run_dir = tmp_path / "run"
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "workbench",
            "train",
            "--task",
            "gsm8k",
            "--set",
            f"dataset_name={GSM8K_SAMPLE}",
            "--set",
            "dataset_config=main",
            "--model",
            "tiny",
            "--max-steps",
            "1",
            "--set",
            "max_completion_length=8",
            "--run-dir",
            str(run_dir),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert result.returncode == 0, result.stderr[-3000:]
    metrics = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    step = next(record for record in metrics if record.get("step") == 1)
    assert "rewards/accuracy_reward/mean" in step and "rewards/boxed_format/mean" in step
    completions = [json.loads(line) for line in (run_dir / "completions.jsonl").read_text().splitlines()]
    questions = {row["question"] for row in tasks.gsm8k_sample("train")}
    assert completions and all(c["prompt"] in questions for c in completions)
