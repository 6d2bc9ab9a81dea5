"""The reward functions a run calls, each guarded: a reward that raises, returns the wrong count, returns nothing
usable call after call, or outlasts its time limit fails with the function's name (or, with reward_errors
"record", scores the completions it failed on with failure_score and logs why).

`resolve_rewards` builds them by name for the trainer, the signal check and "try the rewards".
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from workbench.spec.rewards.reward_errors import RewardError, RewardFunctionError, RewardTimeoutError
from workbench.spec.rewards.reward_file import load_reward_file
from workbench.spec.rewards.reward_library import REWARDS, RewardFunc, get_reward
from workbench.spec.rewards.reward_time_limit import time_limit
from workbench.spec.rewards.trl_reward_library import TrlReward


def resolve_rewards(
    names: Iterable[str],
    reward_file: str | Path | None = None,
    timeout_s: float | None = None,
    training: bool = False,
    build_trl: Callable[[str, TrlReward], RewardFunc] | None = None,
    errors: str = "fail",
    failure_score: float = 0.0,
) -> list[RewardFunc]:
    """Reward functions for `names`, each guarded so a failure names the function.

    `training`: also fail a function that gave no usable reward for a whole
    batch, USELESS_CALLS calls in a row, and one call that outlasts `timeout_s`.
    `build_trl(name, reward)` makes a TRL reward's function (the training
    process has it; without it a TRL reward is refused: TRL loads torch).
    `errors`, `failure_score`: see guard_reward.
    """
    extra = load_reward_file(reward_file) if reward_file else {}
    names = list(names)
    if not names:
        raise RewardError(f"reward_names: choose at least one reward; built-in ones: {', '.join(REWARDS)}")
    functions = []
    for name in names:
        found = get_reward(name, extra)
        if isinstance(found, TrlReward):
            if build_trl is None:
                raise RewardError(
                    f"reward_names: {name} is TRL's own reward (trl.rewards), which loads TRL and torch, "
                    "so it runs only in the training process; try it with a Smoke test (1 step)"
                )
            found = build_trl(name, found)
        functions.append(
            guard_reward(
                found,
                name,
                timeout_s=timeout_s,
                useless_calls=USELESS_CALLS if training else None,
                errors=errors,
                failure_score=failure_score,
            )
        )
    return functions


# ---------------------------------------------------------------- checking outputs


def check_reward_output(name: str, values: Any, n: int) -> list[float | None]:
    """The output of reward `name` as floats (None kept), or a RewardFunctionError saying what is wrong."""
    if isinstance(values, (str, bytes, dict)) or not hasattr(values, "__len__"):
        raise RewardFunctionError(
            name, f"returned {type(values).__name__}; it must return a list with one float (or None) per completion"
        )
    if len(values) != n:
        raise RewardFunctionError(
            name, f"returned {len(values)} rewards for {n} completions; it must return exactly one per completion"
        )
    result: list[float | None] = []
    for i, value in enumerate(values):
        if value is None:
            result.append(None)
            continue
        try:
            number = float(value)
        except (TypeError, ValueError):
            raise RewardFunctionError(
                name, f"returned {value!r} at position {i}; each reward must be a number or None"
            ) from None
        if math.isnan(number):
            result.append(None)  # TRL turns None into NaN anyway
        elif math.isinf(number):
            raise RewardFunctionError(name, f"returned {number} at position {i}; rewards must be finite")
        else:
            result.append(number)
    return result


# A reward may answer None ("not applicable") for some rows; one that answers nothing usable for every
# completion of this many batches in a row is broken, and the run would train on no signal from it.
USELESS_CALLS = 3


# What a reward that raises does to a run (RunConfig.reward_errors).
REWARD_ERROR_MODES = ("fail", "record")


def error_column(name: str) -> str:
    """The column (TRL's log_extra) where function `name` says, per completion, why it could not score it."""
    return f"reward_error/{name}"


def failed_metric(name: str) -> str:
    """The metric (TRL's log_metric): the share of a batch's completions function `name` could not score."""
    return f"rewards/{name}/failed"


def guard_reward(
    func: RewardFunc,
    name: str | None = None,
    timeout_s: float | None = None,
    useless_calls: int | None = None,
    errors: str = "fail",
    failure_score: float = 0.0,
) -> RewardFunc:
    """Wrap `func` so an exception or a bad output raises RewardFunctionError naming it; keeps __name__.

    `timeout_s`: a call that takes longer fails. `useless_calls`: that many
    calls in a row with no usable reward (None or NaN for every completion)
    fail. `errors` "record": a call that raises is tried again completion by
    completion; each completion it raises on gets `failure_score`, and the
    error goes to TRL's `log_extra` column `error_column(name)` (None where it
    scored) and the share of failures to `log_metric` `failed_metric(name)`.
    A function that raises on every completion of the batch, or outlasts its
    time, still fails.
    """
    name = name or getattr(func, "__name__", type(func).__name__)
    useless_in_a_row = 0

    @functools.wraps(func)
    def guarded(prompts=None, completions=None, completion_ids=None, **kwargs):
        nonlocal useless_in_a_row
        count = len(completions or [])
        failures: list[str | None] = [None] * count
        try:
            with time_limit(timeout_s, name):
                values = func(prompts=prompts, completions=completions, completion_ids=completion_ids, **kwargs)
        except RewardFunctionError:
            raise
        except Exception as exc:
            if errors != "record":
                raise RewardFunctionError(name, f"raised {type(exc).__name__}: {exc}") from exc
            values, failures = _one_by_one(
                func,
                name,
                timeout_s,
                failure_score,
                dict(kwargs, prompts=prompts, completions=completions, completion_ids=completion_ids),
                count,
            )
        checked = check_reward_output(name, values, count)
        if errors == "record":
            _log_failures(name, failures, kwargs)
        useless_in_a_row = useless_in_a_row + 1 if checked and all(v is None for v in checked) else 0
        if useless_calls and useless_in_a_row >= useless_calls:
            raise RewardFunctionError(
                name,
                f"returned no usable reward (None or NaN for every completion) in {useless_in_a_row} batches "
                "in a row, so the run learns nothing from it; return a number for each completion it can judge",
            )
        return checked

    guarded.__name__ = name
    return guarded


def _one_by_one(
    func: RewardFunc, name: str, timeout_s: float | None, failure_score: float, arguments: dict, count: int
) -> tuple[list, list[str | None]]:
    """Score each completion alone: (rewards, the error per completion or None); RewardFunctionError when all fail.

    Every per-completion argument (a list with one value per completion) is cut
    to that completion's value; `log_extra` calls are gathered and handed on
    once, with None for the completions that failed, so TRL's columns stay aligned.
    """
    log_extra = arguments.get("log_extra")
    gathered: dict[str, list] = {}
    values: list = [failure_score] * count
    failures: list[str | None] = [None] * count
    for i in range(count):
        one = {
            key: [value[i]] if isinstance(value, (list, tuple)) and len(value) == count else value
            for key, value in arguments.items()
        }
        if callable(log_extra):
            one["log_extra"] = lambda column, logged, i=i: gathered.setdefault(column, [None] * count).__setitem__(
                i, logged[0] if logged else None
            )
        try:
            with time_limit(timeout_s, name):
                result = check_reward_output(name, func(**one), 1)
            values[i] = result[0]
        except RewardTimeoutError:
            raise
        except RewardFunctionError as exc:
            failures[i] = str(exc).removeprefix(f"reward function '{name}' ")
        except Exception as exc:
            failures[i] = f"{type(exc).__name__}: {exc}"
    if count and all(failures):
        raise RewardFunctionError(
            name,
            f"raised on every one of the {count} completions of this batch (the first: "
            f"{failures[0]}), so no completion was scored; fix it, or choose another reward",
        )
    for column, logged in gathered.items():
        log_extra(column, logged)
    return values, failures


def _log_failures(name: str, failures: list[str | None], kwargs: dict) -> None:
    """Hand the errors and the share of failures to TRL (`log_extra`, `log_metric`), when TRL is the caller."""
    if callable(kwargs.get("log_extra")):
        kwargs["log_extra"](error_column(name), list(failures))
    if callable(kwargs.get("log_metric")) and failures:
        kwargs["log_metric"](failed_metric(name), sum(1 for f in failures if f) / len(failures))
