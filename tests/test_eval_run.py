"""Held-out evaluation in a real (tiny) training run: eval.jsonl at steps 0, 1, 2, from the test split, resumed."""

from __future__ import annotations

import json

import pytest
from helpers import TINY

from workbench.cli import main
from workbench.runstore import runfolder
from workbench.spec.config import RunConfig
from workbench.spec.tasks import GSM8K_INSTRUCTION, GSM8K_SAMPLE, gsm8k_sample


@pytest.mark.slow  # trains the tiny model for 3 steps, evaluating 4 prompts greedily and twice sampled each time
def test_a_gsm8k_run_evaluates_its_test_split_at_steps_0_1_2_and_a_resume_adds_step_3_only(tmp_path, capsys):
    from workbench.trainer.training import run_training

    cfg = RunConfig.for_task("gsm8k", **TINY, dataset_name=str(GSM8K_SAMPLE), max_steps=2, save_steps=1,
                             eval_strategy="steps", eval_steps=1, eval_size=4, eval_pass_k=2)
    run_dir = tmp_path / "run"
    assert run_training(cfg, run_dir) == 0, runfolder.read_status(run_dir).get("error")

    assert main(["eval", str(run_dir), "--json", "--per-prompt"]) == 0
    points = json.loads(capsys.readouterr().out)
    assert [p["step"] for p in points] == [0, 1, 2]
    assert all(p["n"] == 4 and p["k"] == 2 and set(p["rewards"]) == {"accuracy_reward", "boxed_format"}
               and 0 <= p["accuracy"] <= 1 and 0 <= p["pass_at_k"] <= 1 for p in points)
    asked = {p["prompt"] for p in points[0]["prompts"]}
    assert asked == {row["question"] for row in gsm8k_sample("test")}  # the test split, every row of it
    trained = {r["prompt"] for r in runfolder.read_jsonl(run_dir / runfolder.COMPLETIONS_FILE)}
    assert trained and not asked & trained
    record = runfolder.read_jsonl(run_dir / runfolder.EVAL_FILE)[0]
    assert record["eval_seconds"] > 0 and record["correctness_reward"] == "accuracy_reward"
    assert GSM8K_INSTRUCTION not in asked  # the prompt is the question; the system prompt went to the model

    # a resume from checkpoint-2 with one more step: step 2 is not evaluated again, step 3 is
    assert run_training(cfg.with_changes(max_steps=3), run_dir, resume=True) == 0
    assert [r["step"] for r in runfolder.read_jsonl(run_dir / runfolder.EVAL_FILE)] == [0, 1, 2, 3]
