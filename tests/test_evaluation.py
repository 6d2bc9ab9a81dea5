"""Held-out evaluation, the pure parts: pass@k, one evaluation's record, held-out rows, the checks, the readers, the CLI."""

from __future__ import annotations

import itertools
import json

import pytest

from workbench.cli import main
from workbench.insight import eval_results
from workbench.runstore import runfolder
from workbench.spec.chat import prompt_text
from workbench.spec.config import RunConfig
from workbench.spec.config_checks import validate_config
from workbench.spec.heldout import eval_record, held_out_task_rows, pass_at_k
from workbench.spec.tasks import GSM8K_SAMPLE, get_task


@pytest.mark.parametrize("n,c,k", [(n, c, k) for n in range(1, 7) for c in range(n + 1) for k in range(1, n + 1)])
def test_pass_at_k_is_the_share_of_k_subsets_holding_a_right_answer(n, c, k):
    samples = [True] * c + [False] * (n - c)
    subsets = list(itertools.combinations(samples, k))
    assert pass_at_k(n, c, k) == pytest.approx(sum(any(s) for s in subsets) / len(subsets))


def test_pass_at_k_refuses_impossible_counts():
    with pytest.raises(ValueError, match="k <= n"):
        pass_at_k(2, 1, 3)


def _record(step, correct, completions=None, k=0, right=None):
    prompts = [f"q{i}" for i in range(len(correct))]
    completions = completions or [f"answer {step}.{i}" for i in range(len(correct))]
    rewards = {"exact_answer": [1.0 if ok else 0.0 for ok in correct], "format_answer_tag": [1.0] * len(correct)}
    return eval_record(step, prompts, completions, rewards, [3] * len(correct), "exact_answer", right, k, 0.5)


def test_accuracy_counts_full_marks_of_the_correctness_reward_and_pass_at_k_averages_prompts():
    record = _record(4, [True, False, False, True], k=2, right=[2, 1, 0, 0])
    assert record["accuracy"] == 0.5
    assert record["pass_at_k"] == pytest.approx((1 + 1 + 0 + 0) / 4)
    assert record["rewards"] == {"exact_answer": 0.5, "format_answer_tag": 1.0}
    assert record["n"] == 4 and record["k"] == 2 and record["step"] == 4
    assert record["prompts"][1] == {
        "prompt": "q1",
        "completion": "answer 4.1",
        "correct": False,
        "length": 3,
        "rewards": {"exact_answer": 0.0, "format_answer_tag": 1.0},
    }


def test_a_failed_or_partial_correctness_score_is_not_right():
    rewards = {"keyword_presence": [0.5, None, float("nan"), 1.0]}
    record = eval_record(0, ["a", "b", "c", "d"], ["", "", "", ""], rewards, [0] * 4, "keyword_presence")
    assert [row["correct"] for row in record["prompts"]] == [False, False, False, True]
    assert record["pass_at_k"] is None and record["rewards"]["keyword_presence"] == 0.75


def test_the_arithmetic_tasks_held_out_questions_are_never_training_questions():
    from workbench.spec.tasks import load_task_dataset

    task = get_task("arithmetic")
    trained = {prompt_text(row["prompt"]) for row in load_task_dataset("arithmetic", seed=42)}
    held_out = held_out_task_rows("arithmetic", 64, seed=42)
    assert len(trained) == task.default_size and len(held_out) == 64
    assert not trained & {prompt_text(row["prompt"]) for row in held_out}
    assert held_out == held_out_task_rows("arithmetic", 64, seed=42)  # the same prompts at every evaluation


def _problems(cfg):
    return {p.field: p for p in validate_config(cfg)}


def test_eval_is_refused_without_a_correctness_reward_naming_the_field():
    brevity_only = RunConfig.for_task("demo", model="tiny", reward_names=["brevity"], eval_strategy="steps")
    problem = _problems(brevity_only)["eval_strategy"]
    assert "correctness reward" in problem.rule and "eval_strategy=no" in problem.fix


@pytest.mark.parametrize(
    "changes,field,words",
    [
        ({"eval_steps": 0}, "eval_steps", "must be >= 1"),
        ({"eval_size": 0}, "eval_size", "must be >= 1"),
        ({"eval_pass_k": -1}, "eval_pass_k", "must be >= 0"),
        ({"eval_strategy": "epoch"}, "eval_strategy", "not one of no, steps"),
        ({"eval_size": 20000}, "eval_size", "cannot hold out 20000"),
    ],
    ids=["steps", "size", "pass-k", "strategy", "too-many"],
)
def test_bad_eval_settings_are_named(changes, field, words):
    cfg = RunConfig.for_task("arithmetic", model="tiny", **{"eval_strategy": "steps", **changes})
    assert words in _problems(cfg)[field].rule


def test_a_dataset_evaluates_its_test_split_and_a_missing_split_is_named():
    good = RunConfig.for_task("gsm8k", model="tiny", dataset_name=str(GSM8K_SAMPLE), eval_strategy="steps")
    assert validate_config(good) == []
    problem = _problems(good.with_changes(dataset_test_split="validation"))["dataset_test_split"]
    assert "'validation' is not a split" in problem.rule


def test_eval_off_is_the_default_and_the_demo_tasks_turn_it_on_soundly():
    assert RunConfig().eval_strategy == "no" and RunConfig.for_task("arithmetic").eval_strategy == "no"
    for task in ("demo", "reward_hacking"):
        cfg = RunConfig.for_task(task, model="tiny")
        assert cfg.eval_strategy == "steps" and validate_config(cfg) == []


# ---------------------------------------------------------------- readers


def _write(run_dir, records):
    run_dir.mkdir(exist_ok=True)
    RunConfig.for_task("arithmetic", model="tiny").save(run_dir / runfolder.CONFIG_FILE)
    runfolder.append_jsonl(run_dir / runfolder.EVAL_FILE, records)


def test_a_resumed_runs_repeated_steps_count_once_the_newest_winning(tmp_path):
    _write(
        tmp_path / "run",
        [_record(0, [False]), _record(2, [False]), _record(4, [True]), _record(2, [True]), _record(4, [False])],
    )  # resumed from checkpoint-2
    records = eval_results.read_evals(tmp_path / "run")
    assert [(r["step"], r["accuracy"]) for r in records] == [(0, 0.0), (2, 1.0), (4, 0.0)]


def test_changed_answers_pair_the_first_and_latest_completions(tmp_path):
    first = _record(0, [False, True, True, False], completions=["12", "7", "9", "x"])
    last = _record(6, [True, False, True, False], completions=["13", "8", "9", "y"])
    changed = eval_results.changed_answers([first, _record(3, [True] * 4), last])
    assert changed == [
        {
            "prompt": "q0",
            "change": eval_results.WRONG_TO_RIGHT,
            "first_step": 0,
            "last_step": 6,
            "before": "12",
            "after": "13",
        },
        {
            "prompt": "q1",
            "change": eval_results.RIGHT_TO_WRONG,
            "first_step": 0,
            "last_step": 6,
            "before": "7",
            "after": "8",
        },
    ]
    assert eval_results.changed_answers([first]) == []


def test_eval_json_prints_the_curve_and_per_prompt_adds_the_answers(tmp_path, capsys):
    _write(
        tmp_path / "run", [_record(0, [False, True], k=2, right=[1, 1]), _record(1, [True, True], k=2, right=[2, 1])]
    )
    assert main(["eval", str(tmp_path / "run"), "--json"]) == 0
    points = json.loads(capsys.readouterr().out)
    assert points == [
        {
            "step": 0,
            "accuracy": 0.5,
            "pass_at_k": 1.0,
            "k": 2,
            **dict.fromkeys(eval_results.AT_K_KEYS),  # records of greedy answers and pass@k alone: no @k figures
            "rewards": {"exact_answer": 0.5, "format_answer_tag": 1.0},
            "n": 2,
        },
        {
            "step": 1,
            "accuracy": 1.0,
            "pass_at_k": 1.0,
            "k": 2,
            **dict.fromkeys(eval_results.AT_K_KEYS),  # records of greedy answers and pass@k alone: no @k figures
            "rewards": {"exact_answer": 1.0, "format_answer_tag": 1.0},
            "n": 2,
        },
    ]
    assert main(["eval", str(tmp_path / "run"), "--json", "--per-prompt"]) == 0
    prompts = json.loads(capsys.readouterr().out)[1]["prompts"]
    assert prompts[0] == {
        "prompt": "q0",
        "completion": "answer 1.0",
        "rewards": {"exact_answer": 1.0, "format_answer_tag": 1.0},
    }
    assert main(["eval", str(tmp_path / "run")]) == 0
    text = capsys.readouterr().out
    assert "step     1  accuracy 1.000  pass@2 1.000  n 2" in text and "wrong → right" in text


def test_eval_of_a_run_that_never_evaluated_says_how_to_turn_it_on(tmp_path, capsys):
    _write(tmp_path / "run", [])
    assert main(["eval", str(tmp_path / "run")]) == 1
    assert "eval_strategy=steps" in capsys.readouterr().err
    assert main(["eval", str(tmp_path / "nowhere")]) == 2
