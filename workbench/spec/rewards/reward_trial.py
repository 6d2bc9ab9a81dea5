"""Trying rewards on completions, as TRL calls them: `score` (hand-written completions before training),
`call_as_trl` (sampled completions of dataset rows) and `weighted_total` (TRL's total reward of one completion).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from workbench.spec.rewards.reward_errors import RewardError
from workbench.spec.rewards.reward_guard import resolve_rewards
from workbench.spec.rewards.reward_library import RewardFunc, _column

# Row keys TRL keeps from the reward functions' keyword columns (GRPOTrainer._calculate_rewards).
NOT_REWARD_COLUMNS = ("prompt", "completion", "completion_ids")


def call_as_trl(
    named: Iterable[tuple[str, RewardFunc]],
    rows: list[dict],
    texts: list[str],
    completion_ids: list[list[int]] | None,
    **extra: Any,
) -> dict[str, list]:
    """Each reward function's values for completions of `rows`' prompts, called as TRL calls one: the completions
    as assistant messages when the prompts are conversations, every other column of the rows beside, and
    `extra` (trainer_state, TRL's logging hooks)."""
    prompts = [row["prompt"] for row in rows]
    conversational = bool(prompts) and isinstance(prompts[0], list)
    completions = [[{"role": "assistant", "content": t}] for t in texts] if conversational else texts
    columns = {key: [row[key] for row in rows] for key in rows[0] if key not in NOT_REWARD_COLUMNS} if rows else {}
    return {
        name: list(func(prompts=prompts, completions=completions, completion_ids=completion_ids, **columns, **extra))
        for name, func in named
    }


def weighted_total(scores: Iterable[float | None], weights: Iterable[float]) -> float | None:
    """TRL's total reward of one completion: the weighted sum of the scores it got, a None or NaN score (a
    function that could not score it) skipped as TRL's nansum skips it; None when no function scored it."""
    scored = [
        (value, weight)
        for value, weight in zip(scores, weights)
        if value is not None and not (isinstance(value, float) and math.isnan(value))
    ]
    return sum(value * weight for value, weight in scored) if scored else None


def score(
    reward_names: Iterable[str],
    prompts: Any,
    completions: list,
    weights: Iterable[float] | None = None,
    reward_file: str | Path | None = None,
    **columns: Any,
) -> list[dict]:
    """Score completions with named rewards, as the trainer would, before training.

    `prompts` is one prompt (text or messages) for all completions or a list with
    one per completion; each column is a list with one value per completion or a
    single value for all. Returns per completion `{"prompt", "completion",
    "rewards": {name: float | None}, "reward": weighted total}` - the total is
    TRL's (`weighted_total`): a weighted sum that skips None and NaN, and None when no reward scored it.
    """
    names = list(reward_names)
    functions = resolve_rewards(names, reward_file)
    weights = [1.0] * len(names) if weights is None else [float(w) for w in weights]
    if len(weights) != len(names):
        raise RewardError(
            f"reward_weights: {len(weights)} weights for {len(names)} rewards ({', '.join(names)}); give one weight per reward"
        )
    completions = list(completions)
    n = len(completions)
    if _is_single_prompt(prompts):
        prompts = [prompts] * n
    prompts = list(prompts)
    if len(prompts) != n:
        raise RewardError(
            f"prompts: {len(prompts)} prompts for {n} completions; give one prompt, or one per completion"
        )
    kwargs = {key: _column(key, "score", value, n) for key, value in columns.items()}
    per_function = {
        name: func(prompts=prompts, completions=completions, completion_ids=None, **kwargs)
        for name, func in zip(names, functions)
    }
    results = []
    for i in range(n):
        rewards = {name: per_function[name][i] for name in names}
        results.append(
            {
                "prompt": prompts[i],
                "completion": completions[i],
                "rewards": rewards,
                "reward": weighted_total(rewards.values(), weights),
            }
        )
    return results


def _is_single_prompt(prompts: Any) -> bool:
    # a string, or one conversation (a list of message dicts)
    return isinstance(prompts, str) or (
        isinstance(prompts, (list, tuple)) and bool(prompts) and all(isinstance(p, dict) for p in prompts)
    )
