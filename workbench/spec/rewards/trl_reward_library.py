"""TRL's own reward library (`trl.rewards`) as the workbench names it: what each reward does and its parameters.

Pure metadata: nothing here imports TRL (which imports torch), so the
config's checks, the Setup tab's picker and the data preview read it in the
dashboard's process. The training process builds the functions
(`workbench/trainer/trl_reward_builders.py`).

A run names a TRL reward in `reward_names` by the name its metrics carry
(`rewards/<name>/mean`), or by TRL's factory name (`get_cosine_scaled_reward`);
its parameters go in `reward_params`, keyed by the same name:

    reward_names  = ["accuracy_reward", "repetition_penalty_reward"]
    reward_params = {"repetition_penalty_reward": {"ngram_size": 4, "max_penalty": -0.5}}

`repetition_penalty`, the workbench's own function before TRL's replaced it,
still names TRL's (on token n-grams, where the old one counted words).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

# A parameter whose default is the run's own max_completion_length.
RUN_MAX_COMPLETION_LENGTH = "max_completion_length"


@dataclass(frozen=True)
class RewardParam:
    """One parameter of a reward: its type, default, meaning and the rule its value keeps."""

    name: str
    kind: type  # int, float, or list (of text)
    default: Any  # RUN_MAX_COMPLETION_LENGTH: the run's max_completion_length
    help: str
    ok: Callable[[Any], bool] = lambda value: True
    rule: str = ""

    def default_for(self, max_completion_length: int) -> Any:
        if self.default == RUN_MAX_COMPLETION_LENGTH:
            return max_completion_length
        return list(self.default) if isinstance(self.default, list) else self.default


@dataclass(frozen=True)
class TrlReward:
    """A reward of `trl.rewards`: `factory` rewards are built by `trl.rewards.<trl_name>(**params)`; the others are
    TRL's function itself, called with the parameters as keywords. `needs_columns` is what `reward_columns` reads."""

    name: str
    trl_name: str
    summary: str
    factory: bool = False
    params: tuple[RewardParam, ...] = ()
    needs_columns: tuple[str, ...] = ()
    optional_columns: tuple[str, ...] = ()
    text_completions: bool = True  # reads completion[0]["content"]: plain-text completions are wrapped as messages

    def param(self, name: str) -> RewardParam | None:
        return next((p for p in self.params if p.name == name), None)


def _finite(value) -> bool:
    return math.isfinite(value)


def _length_param(name: str, help: str) -> RewardParam:
    """A length in tokens that defaults to the run's own max_completion_length."""
    return RewardParam(name, int, RUN_MAX_COMPLETION_LENGTH, help, lambda v: v >= 1, ">= 1")


_COSINE_VALUES = (
    RewardParam("min_value_wrong", float, -1.0, "Reward of a wrong completion at length 0.", _finite, "a number"),
    RewardParam(
        "max_value_wrong", float, -0.5, "Reward of a wrong completion at max_len or longer.", _finite, "a number"
    ),
    RewardParam(
        "min_value_correct", float, 0.5, "Reward of a right completion at max_len or longer.", _finite, "a number"
    ),
    RewardParam("max_value_correct", float, 1.0, "Reward of a right completion at length 0.", _finite, "a number"),
)

TRL_REWARDS: dict[str, TrlReward] = {
    reward.name: reward
    for reward in (
        TrlReward(
            "accuracy_reward",
            "accuracy_reward",
            "1.0 when the answer math_verify reads from the completion (LaTeX: \\boxed{...} first, or $...$; a bare "
            "number is not read) equals the `solution` column, else 0.0; None (left out) when the solution does not "
            "parse.",
            needs_columns=("solution",),
        ),
        TrlReward(
            "reasoning_accuracy_reward",
            "reasoning_accuracy_reward",
            "accuracy_reward on the text after the reasoning's end (`</think>`); 0.0 when the reasoning never ends.",
            params=(
                RewardParam(
                    "reasoning_delimiters",
                    list,
                    ["</think>"],
                    "Texts that end the reasoning; the answer is read after the last one found.",
                    lambda v: bool(v) and all(isinstance(d, str) and d for d in v),
                    "a non-empty list of non-empty texts",
                ),
            ),
            needs_columns=("solution",),
        ),
        TrlReward(
            "think_format_reward",
            "think_format_reward",
            "1.0 when the completion starts with one <think>...</think> block, else 0.0.",
        ),
        TrlReward(
            "cosine_scaled_reward",
            "get_cosine_scaled_reward",
            "accuracy_reward scaled by length on a cosine: a right answer earns more the shorter it is, a wrong one "
            'loses more the shorter it is ("Demystifying Long Chain-of-Thought Reasoning").',
            factory=True,
            params=(
                _length_param("max_len", "Length in tokens at which the cosine reaches its long end"),
                *_COSINE_VALUES,
            ),
            needs_columns=("solution",),
        ),
        TrlReward(
            "repetition_penalty_reward",
            "get_repetition_penalty_reward",
            "The share of repeated token n-grams times max_penalty: 0.0 with no repetition, down to max_penalty.",
            factory=True,
            params=(
                RewardParam("ngram_size", int, 3, "Tokens per n-gram.", lambda v: v >= 1, ">= 1"),
                RewardParam(
                    "max_penalty",
                    float,
                    -1.0,
                    "Reward of a completion that only repeats itself.",
                    lambda v: math.isfinite(v) and v <= 0,
                    "<= 0",
                ),
            ),
            text_completions=False,
        ),
        TrlReward(
            "soft_overlong_punishment_reward",
            "get_soft_overlong_punishment",
            "DAPO's overlong penalty: 0.0 up to max_completion_len - soft_punish_cache tokens, then falling linearly "
            "to -1.0 at max_completion_len, -1.0 beyond.",
            factory=True,
            params=(
                _length_param("max_completion_len", "Length in tokens where the penalty reaches -1"),
                RewardParam(
                    "soft_punish_cache",
                    int,
                    0,
                    "Tokens before max_completion_len over which the penalty grows (DAPO: 4096 of 20480); "
                    "0 penalises only completions longer than max_completion_len.",
                    lambda v: v >= 0,
                    ">= 0",
                ),
            ),
            text_completions=False,
        ),
    )
}

# Other names a config may use: TRL's factory names, and the workbench's own function TRL's replaced.
ALIASES = {
    "get_cosine_scaled_reward": "cosine_scaled_reward",
    "get_repetition_penalty_reward": "repetition_penalty_reward",
    "get_soft_overlong_punishment": "soft_overlong_punishment_reward",
    "repetition_penalty": "repetition_penalty_reward",
}


def trl_reward(name: str) -> TrlReward | None:
    """The TRL reward `name` (or an alias) stands for, or None."""
    return TRL_REWARDS.get(ALIASES.get(name, name))


def _typed(param: RewardParam, value: Any) -> Any:
    """`value` as the parameter's type; ValueError when it is not one."""
    if param.kind is list:
        if isinstance(value, str):
            value = [value]
        if not isinstance(value, (list, tuple)):
            raise ValueError(value)
        return [str(v) for v in value]
    if isinstance(value, bool):
        raise ValueError(value)
    if param.kind is int:
        number = float(value)
        if not number.is_integer():
            raise ValueError(value)
        return int(number)
    return float(value)


def resolved_params(reward: TrlReward, given: dict | None, max_completion_length: int) -> dict:
    """Every parameter of `reward`: the given ones typed, the others their defaults (ValueError on a bad one)."""
    given = given or {}
    values = {}
    for param in reward.params:
        value = _typed(param, given[param.name]) if param.name in given else param.default_for(max_completion_length)
        if not param.ok(value):
            raise ValueError(f"{reward.name}.{param.name} must be {param.rule}, got {value!r}")
        values[param.name] = value
    return values


def param_problems(
    reward_params: dict, reward_names: list[str], max_completion_length: int
) -> list[tuple[str, str, str]]:
    """(field, rule, fix) for every entry of `reward_params` that names no chosen reward, no parameter of it, or a
    value its rule refuses."""
    problems = []
    if not isinstance(reward_params, dict):
        return [
            (
                "reward_params",
                f"must map reward names to their parameters, got {reward_params!r:.60}",
                'write e.g. {"repetition_penalty_reward": {"ngram_size": 4}}',
            )
        ]
    for name, given in reward_params.items():
        reward = trl_reward(name)
        if name not in reward_names:
            problems.append(
                (
                    "reward_params",
                    f"sets parameters of {name!r}, which reward_names does not choose",
                    f"add {name} to reward_names, or remove its entry",
                )
            )
            continue
        if reward is None or not reward.params:
            with_params = ", ".join(r.name for r in TRL_REWARDS.values() if r.params)
            problems.append(
                (
                    "reward_params",
                    f"{name!r} takes no parameters",
                    f"remove its entry; rewards with parameters: {with_params}",
                )
            )
            continue
        if not isinstance(given, dict):
            problems.append(
                (
                    "reward_params",
                    f"{name}: must be an object of parameters, got {given!r:.60}",
                    f'write e.g. {{"{name}": {{"{reward.params[0].name}": ...}}}}',
                )
            )
            continue
        known = [p.name for p in reward.params]
        for key in given:
            if key not in known:
                problems.append(("reward_params", f"{name} has no parameter {key!r}", f"use one of {', '.join(known)}"))
        for param in reward.params:
            if param.name not in given:
                continue
            try:
                value = _typed(param, given[param.name])
            except (TypeError, ValueError):
                value = None
            if value is None or not param.ok(value):
                problems.append(
                    (
                        "reward_params",
                        f"{name}.{param.name} must be {param.rule}, got {given[param.name]!r:.40}",
                        f"use e.g. {param.default_for(max_completion_length)!r}",
                    )
                )
    return problems


def _default_text(param: RewardParam) -> str:
    return "the run's max_completion_length" if param.default == RUN_MAX_COMPLETION_LENGTH else repr(param.default)


def describe(reward: TrlReward) -> str:
    """One Markdown line: what the reward does, and each parameter with its default."""
    params = "; ".join(f"`{p.name}` (default {_default_text(p)}): {p.help.rstrip('.')}" for p in reward.params)
    return reward.summary + (f" Parameters: {params}" if params else "")
