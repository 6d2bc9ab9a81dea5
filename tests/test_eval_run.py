"""Held-out evaluation in a real (tiny) training run: eval.jsonl at steps 0, 1, 2, from the test split, resumed."""

from __future__ import annotations

import json
import shutil

import pytest

from workbench.cli import main
from workbench.runstore import runfolder
from workbench.spec.config import RunConfig
from workbench.spec.tasks import gsm8k_sample


@pytest.mark.slow  # the shared tiny gsm8k run: 2 steps, 4 test prompts answered greedily and twice sampled each time
def test_a_gsm8k_run_evaluates_its_test_split_at_steps_0_1_2_never_on_training_prompts(tiny_eval_run, capsys):
    assert main(["eval", str(tiny_eval_run), "--json", "--per-prompt"]) == 0
    points = json.loads(capsys.readouterr().out)
    assert [p["step"] for p in points] == [0, 1, 2]
    assert all(
        p["n"] == 4
        and p["k"] == 2
        and set(p["rewards"]) == {"accuracy_reward", "boxed_format"}
        and 0 <= p["accuracy"] <= 1
        and 0 <= p["pass_at_k"] <= 1
        for p in points
    )
    # k = 2 samples: mean@k, maj@k (math_verify's parse, accuracy_reward's extractor) and best@k, with spreads
    assert all(
        0 <= p["mean_at_k"] <= 1 and p["maj_at_k"] in (0, 0.25, 0.5, 0.75, 1) and p["best_at_k"] is not None
        for p in points
    )
    assert all(p[f"{name}_std"] >= 0 for p in points for name in ("mean_at_k", "maj_at_k", "best_at_k"))
    asked = {p["prompt"] for p in points[0]["prompts"]}
    assert asked == {row["question"] for row in gsm8k_sample("test")}  # the test split, every row of it
    trained = {r["prompt"] for r in runfolder.read_jsonl(tiny_eval_run / runfolder.COMPLETIONS_FILE)}
    assert trained and not asked & trained
    record = runfolder.read_jsonl(tiny_eval_run / runfolder.EVAL_FILE)[0]
    assert record["eval_seconds"] > 0 and record["correctness_reward"] == "accuracy_reward"
    steps_logged = [m["step"] for m in runfolder.read_jsonl(tiny_eval_run / runfolder.METRICS_FILE) if "reward" in m]
    assert steps_logged == [1, 2]  # evaluation adds no training step and no metric line of its own


@pytest.mark.slow  # resumes the shared run from checkpoint-2 for one more step
def test_a_resumed_run_continues_the_curve_without_evaluating_a_step_twice(tiny_eval_run, tmp_path):
    from workbench.trainer.training import run_training

    run_dir = tmp_path / tiny_eval_run.name
    shutil.copytree(tiny_eval_run, run_dir)
    cfg = RunConfig.load(run_dir / runfolder.CONFIG_FILE).with_changes(max_steps=3)
    assert run_training(cfg, run_dir, resume=True) == 0, runfolder.read_status(run_dir).get("error")
    assert [r["step"] for r in runfolder.read_jsonl(run_dir / runfolder.EVAL_FILE)] == [0, 1, 2, 3]


@pytest.mark.slow  # loads the tiny model twice (checkpoint-2, then the base model) and answers 4 prompts each
def test_eval_checkpoint_answers_now_as_the_run_answered_at_that_step(tiny_eval_run, capsys):
    recorded = {r["step"]: r for r in runfolder.read_jsonl(tiny_eval_run / runfolder.EVAL_FILE)}
    for which, step in (("2", 2), ("base", 0)):
        assert main(["eval", str(tiny_eval_run), "--checkpoint", which, "--json", "--per-prompt"]) == 0
        point = json.loads(capsys.readouterr().out)[0]
        assert point["step"] == step and point["accuracy"] == recorded[step]["accuracy"]
        assert [p["completion"] for p in point["prompts"]] == [p["completion"] for p in recorded[step]["prompts"]]
    assert main(["eval", str(tiny_eval_run), "--checkpoint", "7"]) == 2
    assert "'7' is not latest, base or a saved checkpoint's step (this run has: 1, 2)" in capsys.readouterr().err


@pytest.mark.slow  # trains the same 2-step tiny run again with evaluation off
def test_evaluation_does_not_change_what_the_run_trains_on(tiny_eval_run, tmp_path):
    from workbench.trainer.training import run_training

    # evaluation samples from a random generator of its own: with it off, the run draws the same completions
    cfg = RunConfig.load(tiny_eval_run / runfolder.CONFIG_FILE).with_changes(eval_strategy="no", max_steps=1)
    assert run_training(cfg, tmp_path / "run") == 0, runfolder.read_status(tmp_path / "run").get("error")
    assert not (tmp_path / "run" / runfolder.EVAL_FILE).exists()

    def first_round(run_dir):
        return [r["completion"] for r in runfolder.read_jsonl(run_dir / runfolder.COMPLETIONS_FILE) if r["step"] == 1]

    assert first_round(tmp_path / "run") == first_round(tiny_eval_run)
