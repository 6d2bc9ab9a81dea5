"""Held-out evaluation, the pure part: which prompts, the pass@k estimator, one evaluation's record.

With `eval_strategy="steps"` the training process (workbench/trainer/evaluator.py) answers `eval_size`
held-out prompts greedily at step 0 (before any update), every `eval_steps` steps and at the end, and writes
one record per evaluation to the run folder's `eval.jsonl`:

    {"step": 4, "accuracy": 0.25, "pass_at_k": 0.5, "k": 4, "rewards": {"exact_answer": 0.25, ...},
     "completion_length": 17.5, "n": 16, "eval_seconds": 3.2, "correctness_reward": "exact_answer",
     "prompts": [{"prompt": ..., "completion": ..., "rewards": {...}, "correct": true, "length": 12}, ...]}

`accuracy` is the share of prompts whose greedy answer gets full marks (>= 1.0) from the correctness
reward; `pass_at_k` the unbiased estimate of the share with at least one right answer among k samples at
the run's temperature (None when `eval_pass_k` is 0). With k >= 2 the record adds `mean_at_k`, `maj_at_k`
and `best_at_k`, each with `<name>_std` (workbench/spec/eval_at_k.py: the figures, and their bootstrap over
sample subsets); `maj_at_k` is None, and `maj_at_k_note` says why, when the correctness reward has no answer
extractor (workbench/spec/rewards/answer_keys.py). With `eval_group_column` the record adds `groups`: per
value of that column, the same figures over its prompts (`n` each). `best_checkpoint_metric` names the figure
that chooses the best checkpoint (`best_evaluation`). Held-out prompts: the first `eval_size` rows of
`dataset_test_split` for a dataset; for a built-in task, the questions its generator makes right after the
training ones (it never repeats a question, so none was trained on). Pure: no torch, no file written.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from workbench.spec.chat import prompt_text
from workbench.spec.config import BEST_CHECKPOINT_METRICS
from workbench.spec.eval_at_k import Sample, figures_at_k

# Full marks from the correctness reward: 1.0 (exact_answer, accuracy_reward, every keyword used), up to float error.
FULL_MARKS = 1.0 - 1e-6


def pass_at_k(n: int, c: int, k: int) -> float:
    """The unbiased pass@k estimate from n samples of which c are right: 1 - C(n-c, k) / C(n, k) (Chen et al. 2021)."""
    if not 0 <= c <= n or not 1 <= k <= n:
        raise ValueError(f"pass@k needs 0 <= c <= n and 1 <= k <= n, got n={n}, c={c}, k={k}")
    if n - c < k:  # every k-subset holds a right answer
        return 1.0
    return 1.0 - math.comb(n - c, k) / math.comb(n, k)


def is_correct(score: float | None) -> bool:
    """Whether a correctness reward's score is full marks (a failed or missing score is not)."""
    return score is not None and math.isfinite(score) and score >= FULL_MARKS


def _mean(values: list[float | None]) -> float | None:
    kept = [v for v in values if v is not None and math.isfinite(v)]
    return sum(kept) / len(kept) if kept else None


def eval_record(
    step: int,
    prompts: list[Any],
    completions: list[str],
    rewards: dict[str, list[float | None]],
    lengths: list[int],
    correctness_reward: str,
    samples_right: list[int] | None = None,
    k: int = 0,
    seconds: float = 0.0,
    samples: Sequence[Sequence[Sample]] | None = None,
    majority_note: str = "",
    groups: Sequence[Any] | None = None,
    best_metric: str = "accuracy",
) -> dict:
    """One evaluation as eval.jsonl holds it.

    `rewards`: per reward name, one score per greedy completion; `samples_right`: per prompt, how many of its
    k sampled completions got full marks (None when pass@k is off; counted from `samples` when those are
    given); `samples`: per prompt, its k scored samples (`eval_at_k.Sample`); `majority_note`: why maj@k
    cannot be had ("" when the correctness reward has an extractor); `groups`: per prompt, its value of
    `eval_group_column` (None: no such column); `best_metric`: the run's `best_checkpoint_metric`.
    """
    correct = [is_correct(score) for score in rewards[correctness_reward]]
    if samples is not None and samples_right is None:
        samples_right = [sum(s.correct for s in prompt_samples) for prompt_samples in samples]
    per_prompt = [
        {
            "prompt": prompt_text(prompt),
            "completion": completion,
            "rewards": {name: values[i] for name, values in rewards.items()},
            "correct": correct[i],
            "length": lengths[i],
            **({} if groups is None else {"group": _group_name(groups[i])}),
        }
        for i, (prompt, completion) in enumerate(zip(prompts, completions))
    ]
    record = {
        "step": int(step),
        **_figures(correct, samples_right, k, samples, majority_note),
        "k": k,
        "rewards": {name: _mean(values) for name, values in rewards.items()},
        "completion_length": _mean(lengths),
        "n": len(prompts),
        "eval_seconds": round(seconds, 3),
        "correctness_reward": correctness_reward,
        "best_checkpoint_metric": best_metric,
    }
    if majority_note and samples is not None and k >= 2:
        record["maj_at_k_note"] = majority_note
    if groups is not None:
        record["groups"] = _group_figures(
            [_group_name(g) for g in groups], correct, samples_right, k, samples, majority_note
        )
    record["prompts"] = per_prompt
    return record


def _group_name(value: Any) -> str:
    """A group's name as JSON keys it ("" for a missing value)."""
    return "" if value is None else str(value)


def _figures(correct, samples_right, k, samples, majority_note) -> dict:
    """accuracy, pass@k and, with k >= 2 samples each, mean@k, maj@k and best@k with their spreads."""
    n = len(correct)
    figures: dict[str, Any] = {
        "accuracy": sum(correct) / n if n else None,
        "pass_at_k": (sum(pass_at_k(k, c, k) for c in samples_right) / n) if samples_right and k else None,
    }
    if samples is not None and k >= 2:
        figures.update(figures_at_k(samples, with_majority=not majority_note))
    return figures


def _group_figures(names, correct, samples_right, k, samples, majority_note) -> dict[str, dict]:
    """Per group name, the figures over its prompts and their count `n`, in the order groups first appear."""
    grouped: dict[str, list[int]] = {}
    for i, name in enumerate(names):
        grouped.setdefault(name, []).append(i)
    return {
        name: {
            **_figures(
                [correct[i] for i in rows],
                None if samples_right is None else [samples_right[i] for i in rows],
                k,
                None if samples is None else [samples[i] for i in rows],
                majority_note,
            ),
            "n": len(rows),
        }
        for name, rows in grouped.items()
    }


def best_evaluation(records: list[dict], steps: Any = None, metric: str | None = None) -> dict | None:
    """The evaluation with the best `metric` among those at `steps` (every one when None), or None.

    `metric`: one of BEST_CHECKPOINT_METRICS; None reads the run's choice from the records (`best_checkpoint_metric`, the
    newest record's), else held-out accuracy. Ties go to the higher accuracy, then the higher pass@k, then to
    the earlier step: of two checkpoints that answer as well, the one fewer updates away from the base model
    (transformers' `_determine_best_metric` also keeps the first best). Step 0 (the base model, no checkpoint)
    is only a candidate when `steps` names it. A missing figure ranks below any number.
    """
    if metric is None:
        chosen = [r.get("best_checkpoint_metric") for r in records if isinstance(r, dict)]
        metric = next((m for m in reversed(chosen) if m in BEST_CHECKPOINT_METRICS), "accuracy")

    def figure(record: dict, key: str) -> float:
        value = record.get(key)
        return -math.inf if value is None else value  # below any number, a negative best@k reward too

    def rank(record: dict) -> tuple:
        return (figure(record, metric), figure(record, "accuracy"), figure(record, "pass_at_k"), -record["step"])

    kept = [r for r in records if isinstance(r.get("step"), int) and (steps is None or r["step"] in steps)]
    return max(kept, key=rank, default=None)


def eval_problem(record: Any) -> str | None:
    """Why a line of eval.jsonl is not an evaluation record (None when it is one)."""
    if not isinstance(record, dict):
        return "not a JSON object"
    if not isinstance(record.get("step"), int) or isinstance(record.get("step"), bool):
        return "no whole-number step"
    if not isinstance(record.get("rewards"), dict) or not isinstance(record.get("n"), int):
        return "no rewards or n"
    return None


# ---------------------------------------------------------------- held-out prompts


def held_out_task_rows(task_name: str, eval_size: int, seed: int) -> list[dict]:
    """A built-in task's held-out rows: the `eval_size` questions its generator makes after the training ones.

    The training rows are the generator's first `default_size` (trainer/run_pieces.py `load_dataset_for`); the
    generators never repeat a question, and any that matches a training prompt is left out all the same.
    TaskError (naming eval_size) when the task cannot make that many more.
    """
    from workbench.spec.tasks import TaskError, get_task

    task = get_task(task_name)
    if task.default_size is None:
        raise TaskError(
            f"eval_size: the {task_name} task trains on every prompt it has, so none is held out; "
            "train on a dataset with a test split (dataset_name, dataset_test_split) instead"
        )
    try:
        rows = task.build_rows(task.default_size + eval_size, seed)
    except TaskError as exc:
        raise TaskError(
            f"eval_size: the {task_name} task cannot hold out {eval_size} prompts beside its "
            f"{task.default_size} training ones ({exc}); use a smaller eval_size"
        ) from None
    trained = {prompt_text(row["prompt"]) for row in rows[: task.default_size]}
    return [row for row in rows[task.default_size :] if prompt_text(row["prompt"]) not in trained]


def eval_problems(cfg, correctness_reward: str, data: tuple[str, str]) -> list[tuple[str, str, str]]:
    """Why `cfg` (a RunConfig with eval_strategy=steps) cannot evaluate: (field, rule, fix) each, read cheaply.

    `correctness_reward`: the run's (`config.correctness_reward_for`); `data`: (field, value) of the data it
    trains on (`config.data_field`), ("", "") for a built-in task's own rows.
    """
    if not correctness_reward:
        return [
            (
                "eval_strategy",
                "steps needs a correctness reward (the reward whose full marks mean a right "
                "answer): this run has none, so held-out accuracy would mean nothing",
                "set correctness_reward to one of the run's rewards, or eval_strategy=no",
            )
        ]
    if cfg.num_processes > 1:
        return [
            (
                "eval_strategy",
                f"steps evaluates in one training process, and this run has {cfg.num_processes}",
                "train with num_processes=1, or set eval_strategy=no",
            )
        ]
    majority = _majority_problems(cfg, correctness_reward)
    if majority:
        return majority
    field_name, value = data
    if value:
        return _test_split_problems(cfg, field_name, value)
    from workbench.spec.tasks import TaskError

    try:
        rows = held_out_task_rows(cfg.task, cfg.eval_size, cfg.seed)
    except TaskError as exc:
        return [("eval_size", str(exc).removeprefix("eval_size: "), "")]
    return _group_column_problems(cfg, rows, f"the {cfg.task} task's held-out questions")


def _majority_problems(cfg, correctness_reward: str) -> list[tuple[str, str, str]]:
    """maj@k chosen to pick the best checkpoint with a built-in correctness reward that reads no answer (a
    reward file's function may carry its own `answer_key`, seen only when the training process imports it)."""
    from workbench.spec.rewards.answer_keys import BUILT_IN_KEYS

    if cfg.best_checkpoint_metric != "maj_at_k" or correctness_reward in BUILT_IN_KEYS or cfg.reward_file.strip():
        return []
    return [
        (
            "best_checkpoint_metric",
            f"maj_at_k needs answers to compare, and the correctness reward {correctness_reward} reads none "
            f"(those that do: {', '.join(BUILT_IN_KEYS)})",
            "choose mean_at_k, best_at_k, pass_at_k or accuracy",
        )
    ]


def _group_column_problems(cfg, rows: list[dict], where: str) -> list[tuple[str, str, str]]:
    column = cfg.eval_group_column.strip()
    if not column or not rows or column in rows[0]:
        return []
    return [
        (
            "eval_group_column",
            f"{where}: no column {column!r} (its columns: {', '.join(map(str, rows[0]))})",
            "name one of those columns, or leave eval_group_column empty",
        )
    ]


def _test_split_problems(cfg, field_name: str, value: str) -> list[tuple[str, str, str]]:
    from workbench.sources import hub_datasets
    from workbench.sources.dataset_reading import DatasetError

    try:
        split = hub_datasets.parse_split(cfg.dataset_test_split, "dataset_test_split")
        source = hub_datasets.locate(value, field_name)
        rows = hub_datasets.first_rows(source, cfg.dataset_config, split, 1) if source.cached else None
        if source.cached and not rows:
            return [
                (
                    "dataset_test_split",
                    f"{cfg.dataset_test_split!r} holds no rows to evaluate",
                    "name a split (or slice) with rows, or set eval_strategy=no",
                )
            ]
        return _group_column_problems(cfg, rows or [], f"the test split {cfg.dataset_test_split!r}")
    except DatasetError as exc:
        # the split readers name the train split's field; here the split read is the test split
        rule = str(exc).replace("dataset_train_split: ", "").removeprefix("dataset_test_split: ")
        return [("dataset_test_split", rule, "name the data's held-out split (e.g. test), or set eval_strategy=no")]
    return []
