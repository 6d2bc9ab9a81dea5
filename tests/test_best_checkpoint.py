"""The checkpoint with the best held-out accuracy: chosen, kept whatever save_total_limit prunes, and the default
for the Runs tab's mark, the merged-model export and the Compare tab."""

from __future__ import annotations

import shutil

import pytest

from workbench import cli
from workbench.cli.export_model_command import chosen_checkpoint
from workbench.insight import eval_results
from workbench.runstore import checkpoint_integrity, runfolder
from workbench.spec.config import RunConfig
from workbench.spec.heldout import best_evaluation, eval_record
from workbench.ui import merge_view, runs_view
from workbench.ui.merge_panel import adapter_choices


def _record(step: int, right: int, of: int = 4, passed: float | None = None) -> dict:
    """An eval.jsonl record at `step` with `right` of `of` greedy answers right and pass@k `passed`."""
    rewards = {"exact_answer": [1.0 if i < right else 0.0 for i in range(of)]}
    record = eval_record(step, [f"q{i}" for i in range(of)], ["a"] * of, rewards, [1] * of, "exact_answer")
    return {**record, "pass_at_k": passed}


def test_the_best_is_the_highest_accuracy_then_pass_at_k_then_the_earliest_step():
    records = [
        _record(0, 4),
        _record(1, 1, passed=0.5),
        _record(2, 3, passed=0.5),
        _record(3, 3, passed=0.75),
        _record(4, 3, passed=0.75),
        _record(5, 2, passed=1.0),
    ]
    assert best_evaluation(records)["step"] == 0  # the base model answers best: only a candidate when asked
    assert best_evaluation(records, {1, 2, 3, 4, 5})["step"] == 3  # 3 and 4 tie on both: the earlier wins
    assert best_evaluation(records, {2, 5})["step"] == 2  # accuracy first, pass@k only breaks its ties
    assert best_evaluation([_record(1, 2), _record(2, 2, passed=0.1)])["step"] == 2  # no pass@k ranks lowest
    assert best_evaluation(records, {7}) is None and best_evaluation([]) is None


def test_the_best_checkpoint_is_one_still_on_disk(tmp_path, make_checkpoint):
    run_dir = tmp_path / "run"
    RunConfig.for_task("arithmetic", model="tiny").save(run_dir / runfolder.CONFIG_FILE)
    assert eval_results.best_checkpoint_of(run_dir) is None  # no evaluation: today's defaults stay
    runfolder.append_jsonl(run_dir / runfolder.EVAL_FILE, [_record(0, 4), _record(1, 3), _record(2, 1), _record(3, 2)])
    for step in (2, 3):
        make_checkpoint(run_dir, step)
    assert eval_results.best_checkpoint_of(run_dir)["step"] == 3  # step 1 was best but its checkpoint is gone
    make_checkpoint(run_dir, 1)
    assert eval_results.best_checkpoint_of(run_dir)["step"] == 1


@pytest.fixture
def evaluated_run(tmp_path, make_checkpoint):
    """A run with the final adapter and checkpoints 1, 2, 3, checkpoint 2 the best evaluated one."""
    run_dir = tmp_path / "20261127-100000-evaluated"
    RunConfig.for_task("arithmetic", model="tiny").save(run_dir / runfolder.CONFIG_FILE)
    make_checkpoint(run_dir, 0).rename(run_dir / runfolder.ADAPTER_DIR)
    for step in (1, 2, 3):
        make_checkpoint(run_dir, step)
    runfolder.append_jsonl(run_dir / runfolder.EVAL_FILE, [_record(0, 0), _record(1, 1), _record(2, 3), _record(3, 2)])
    return run_dir


def test_the_best_checkpoint_is_the_exports_default_and_marked_where_runs_are_listed(evaluated_run):
    assert chosen_checkpoint(None, evaluated_run) == (2, " (the best held-out accuracy, 75%)")
    assert chosen_checkpoint("best", evaluated_run)[0] == 2
    assert chosen_checkpoint("final", evaluated_run) == (None, "")
    assert chosen_checkpoint("3", evaluated_run) == (3, "")
    assert adapter_choices(evaluated_run) == [
        ("checkpoint-2 (step 2) · best held-out accuracy (75%)", "2"),
        ("final adapter", merge_view.FINAL),
        ("checkpoint-3 (step 3)", "3"),
        ("checkpoint-1 (step 1)", "1"),
    ]
    row = runs_view.summarise_run(
        {"run_id": "r", "step": 3, "total_steps": 3, "best_checkpoint": eval_results.best_checkpoint_of(evaluated_run)}
    )
    assert row["steps"] == "3 / 3 · best 2 (75%)"


def test_a_run_without_evaluation_keeps_the_final_adapter_as_the_default(evaluated_run, capsys):
    (evaluated_run / runfolder.EVAL_FILE).unlink()
    assert chosen_checkpoint(None, evaluated_run) == (None, "")
    assert adapter_choices(evaluated_run)[0] == ("final adapter", merge_view.FINAL)
    assert runs_view.summarise_run({"run_id": "r", "step": 3, "total_steps": 3})["steps"] == "3 / 3"
    code = cli.main(["export-model", str(evaluated_run), "--checkpoint", "best", "--out", str(evaluated_run / "m")])
    assert code == 2 and "has no evaluated checkpoint" in capsys.readouterr().err
    assert (
        cli.main(["export-model", str(evaluated_run), "--checkpoint", "last", "--out", str(evaluated_run / "m")]) == 2
    )
    assert "'last' is not a step, best or final" in capsys.readouterr().err


@pytest.mark.slow  # resumes the shared tiny evaluated run for one more step with save_total_limit=1
def test_training_keeps_the_best_checkpoint_whatever_save_total_limit_prunes(tiny_eval_run, tmp_path):
    from workbench.trainer.training import run_training

    run_dir = tmp_path / tiny_eval_run.name
    shutil.copytree(tiny_eval_run, run_dir)
    cfg = RunConfig.load(run_dir / runfolder.CONFIG_FILE).with_changes(max_steps=3, save_total_limit=1)
    assert run_training(cfg, run_dir, resume=True) == 0, runfolder.read_status(run_dir).get("error")
    records = runfolder.read_jsonl(run_dir / runfolder.EVAL_FILE)
    best = best_evaluation(records, {1, 2, 3})
    # the tiny random model answers no GSM8K question: every step ties, the earliest checkpoint is the best
    assert best["step"] < 3, [(r["step"], r["accuracy"], r["pass_at_k"]) for r in records]
    # save_total_limit=1 alone would keep only checkpoint-3, the newest
    assert checkpoint_integrity.checkpoint_steps(run_dir) == [best["step"]]
    assert eval_results.best_checkpoint_of(run_dir)["step"] == best["step"]
