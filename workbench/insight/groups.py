"""Completions grouped by prompt: how a group's rewards become advantages.

Input is what the training process appends to `completions.jsonl`, one record
per completion: `step`, `group` (which prompt of the generation round),
`prompt`, `completion`, `rewards` ({function: score}), `reward` (the weighted
total), `advantage` (what the trainer used), `length` (tokens), `truncated`.

For one step, `groups_for_step` returns each prompt with its G completions,
the group's mean and standard deviation of the total reward, and for every
completion its advantage and the arithmetic behind it, e.g.
`(0.82 - 0.61) / 0.19 = +1.10`. The statistics follow TRL 1.16
(`_generate_and_score_completions`): the std is Bessel-corrected (n - 1),
rewards of None (unscorable) are left out of mean and std, and the division
is by `std + 1e-4`.

The trainer's recorded advantage is always the one shown. When it disagrees
with the group-scaled recomputation, the scaling that does reproduce it
(`scale_rewards="none"` or `"batch"`) is named; when none does, the group
says so plainly.

Pure standard library: importable without torch or gradio.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from workbench.errors import WorkbenchError
from workbench.insight.resumed import latest_round
from workbench.spec.chat import transcript_text
from workbench.spec.numbers import finite_number
from workbench.spec.run_records import completion_problem, well_formed

# TRL adds this to the std before dividing, so equal rewards give 0, not 0/0.
STD_EPSILON = 1e-4
# Advantages within this of zero move nothing: TRL's own float32 arithmetic
# leaves ~1e-4 where the exact value is 0 (a reward minus an equal mean).
ZERO_ADVANTAGE_TOLERANCE = 1e-3
# How close a recomputed advantage must be to the recorded one to count as
# the same scaling: float32 rewards and a 1e-4 epsilon differ at ~1e-4.
MATCH_TOLERANCE = 2e-3

SCALINGS = ("group", "batch", "none")
SCALING_WORDS = {
    "group": 'scale_rewards="group": (reward - group mean) / group std',
    "batch": 'scale_rewards="batch": (reward - group mean) / std of the whole step\'s rewards',
    "none": 'scale_rewards="none": reward - group mean, not divided by any std',
}


@dataclass
class CompletionView:
    """One completion of a group, with the numbers behind its advantage."""

    index: int  # position in the group, 0-based
    completion: str
    rewards: dict[str, float | None]  # each reward function's score
    reward: float | None  # the weighted total (None: no function could score it)
    advantage: float  # the trainer's (recorded) advantage, or the recomputed one
    recomputed_advantage: float | None
    arithmetic: str  # e.g. "(0.82 - 0.61) / 0.19 = +1.10"
    length: int | None
    truncated: bool
    zero_advantage: bool
    # reward_errors=record: function -> why it could not score this completion (it got reward_failure_score)
    reward_errors: dict[str, str] = field(default_factory=dict)


@dataclass
class GroupView:
    """One prompt of a step and its G completions."""

    step: int
    group: int
    prompt: str
    completions: list[CompletionView]
    mean: float | None  # mean of the total rewards (None when none could be scored)
    std: float | None  # Bessel-corrected std (None with fewer than 2 scored)
    scaling: str  # "group", "batch", "none" or "unknown"
    expected_size: int  # G: the largest group of the step
    notes: list[str] = field(default_factory=list)

    @property
    def complete(self) -> bool:
        return len(self.completions) >= self.expected_size

    @property
    def reward_names(self) -> list[str]:
        names: dict[str, None] = {}
        for item in self.completions:
            names.update(dict.fromkeys(item.rewards))
        return list(names)

    @property
    def unscored(self) -> dict[str, int]:
        """Function -> how many of the group's completions it could not score (reward_errors=record)."""
        counts: dict[str, int] = {}
        for item in self.completions:
            for name in item.reward_errors:
                counts[name] = counts.get(name, 0) + 1
        return counts

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "complete": self.complete, "reward_names": self.reward_names, "unscored": self.unscored}


# ---------------------------------------------------------------- small helpers


def format_number(value: float | None) -> str:
    """Two decimals, or three significant digits for small non-zero values."""
    if value is None:
        return "—"
    if value != 0 and abs(value) < 0.01:
        return f"{value:.2g}"
    return f"{value:.2f}"


def format_signed(value: float) -> str:
    text = format_number(abs(value))
    return f"-{text}" if value < 0 and text.strip("0.") else f"+{text}"


def mean_and_std(values: Iterable[float | None]) -> tuple[float | None, float | None]:
    """Mean and Bessel-corrected std of the values that are numbers, as TRL's nanstd."""
    numbers = [v for v in values if v is not None]
    if not numbers:
        return None, None
    mean = sum(numbers) / len(numbers)
    if len(numbers) < 2:
        return mean, None
    variance = sum((v - mean) ** 2 for v in numbers) / (len(numbers) - 1)
    return mean, math.sqrt(variance)


def _total(record: Mapping) -> float | None:
    total = finite_number(record.get("reward"))
    if total is not None or "reward" in record:
        return total
    scores = [finite_number(v) for v in (record.get("rewards") or {}).values()]
    scores = [s for s in scores if s is not None]
    return sum(scores) if scores else None


def _advantage(reward: float, mean: float, std: float | None, scaling: str) -> float | None:
    if scaling == "none":
        return reward - mean
    if std is None:
        return None
    return (reward - mean) / (std + STD_EPSILON)


def _digits_that_add_up(reward: float, mean: float, std: float, shown: float, epsilon: float = 0.0) -> int:
    """The fewest decimals (2 at least, 4 at most) at which (reward - mean) / (std + epsilon), worked out from the
    numbers as shown, gives the advantage as shown within its rounding ("(0.10 - 0.08) / 0.05 = +0.50" did not);
    0 where no such count is found (TRL's epsilon must then be shown too)."""
    for digits in range(2, 5):
        r, m, s = (round(value, digits) for value in (reward, mean, std))
        if s + epsilon and abs((r - m) / (s + epsilon) - round(shown, 2)) <= 0.005 + 1e-9:
            return digits
    return 0


def _arithmetic(reward: float | None, mean: float | None, std: float | None, scaling: str, shown: float) -> str:
    """The teaching line: how this completion's advantage comes out of its group."""
    if reward is None or mean is None:
        return f"no reward function scored it, so its advantage is {format_signed(shown)}"
    if std is None and scaling != "none":
        return f"{format_number(reward)} - {format_number(mean)}, std unknown: advantage {format_signed(shown)}"
    if scaling == "none":
        digits = _digits_that_add_up(reward, mean, 1.0, shown) or 4
        return f"{reward:.{digits}f} - {mean:.{digits}f} = {format_signed(shown)}"
    if std < 0.005:
        # A std this small shows as 0.00: the epsilon is what keeps the division finite.
        diff = f"{format_number(reward)} - {format_number(mean)}"
        return f"({diff}) / ({'0' if std == 0 else format_number(std)} + 1e-4) = {format_signed(shown)}"
    digits = _digits_that_add_up(reward, mean, std, shown)
    denominator = f"{std:.{digits}f}" if digits else ""
    if not digits:  # TRL divides by std + 1e-4: with a small std that shows in the second decimal
        digits = _digits_that_add_up(reward, mean, std, shown, STD_EPSILON) or 4
        denominator = f"({std:.{digits}f} + 1e-4)"
    diff = f"{reward:.{digits}f} - {mean:.{digits}f}"
    label = " (step std)" if scaling == "batch" else ""
    return f"({diff}) / {denominator}{label} = {format_signed(shown)}"


# ---------------------------------------------------------------- public API


def available_steps(records: Iterable[Mapping]) -> list[int]:
    """The steps that have completions, ascending."""
    steps = {int(r["step"]) for r in records if isinstance(r, Mapping) and finite_number(r.get("step")) is not None}
    return sorted(steps)


def _infer_scaling(rows, group_stats, step_std) -> str:
    """The scaling whose recomputation reproduces every recorded advantage."""
    recorded = [(r, finite_number(r.get("advantage"))) for r in rows]
    recorded = [(r, a) for r, a in recorded if a is not None and _total(r) is not None]
    if not recorded:
        return "group"
    for scaling in SCALINGS:
        ok = True
        for record, advantage in recorded:
            mean, std = group_stats[record.get("group", 0)]
            expected = _advantage(_total(record), mean, step_std if scaling == "batch" else std, scaling)
            if expected is None or abs(expected - advantage) > MATCH_TOLERANCE * max(1.0, abs(advantage)):
                ok = False
                break
        if ok:
            return scaling
    return "unknown"


def groups_for_step(
    records: Iterable[Mapping], step: int, scale_rewards: str | None = None, num_generations: int | None = None
) -> list[GroupView]:
    """Each prompt of `step` with its completions, rewards, group stats and advantages.

    `scale_rewards` (TRL's field) says how the run scaled advantages; when not
    given it is inferred from the recorded advantages. Groups come in the
    order of their `group` index; completions in the order they were written.
    `records` are in the order they were written: a step recorded twice
    (before a crash and after the resume) shows its newest round only
    (`resumed.latest_round`; `num_generations`, the run's G, helps tell rounds apart).
    A record of the wrong shape (`spec.run_records.completion_problem`) is left out: the
    readers of the run folder have already skipped and reported those lines.
    """
    if scale_rewards is not None and scale_rewards not in SCALINGS:
        raise WorkbenchError(f"scale_rewards: got {scale_rewards!r}; TRL accepts one of {list(SCALINGS)}")
    rows = latest_round(well_formed(records, completion_problem), int(step), num_generations)
    if not rows:
        return []
    by_group: dict[Any, list[Mapping]] = {}
    for record in rows:
        by_group.setdefault(record.get("group", 0), []).append(record)
    expected_size = max(len(members) for members in by_group.values())
    group_stats = {key: mean_and_std(_total(r) for r in members) for key, members in by_group.items()}
    step_std = mean_and_std(_total(r) for r in rows)[1]
    # Only whole groups can tell the scaling: a half-written group's mean is not the trainer's.
    whole = [r for members in by_group.values() if len(members) == expected_size for r in members]
    scaling = scale_rewards or _infer_scaling(whole, group_stats, step_std)
    step_scaling = _StepScaling(scaling, step_std, expected_size)
    return [
        _group_view(int(step), key, by_group[key], group_stats[key], step_scaling)
        for key in sorted(by_group, key=lambda k: (finite_number(k) is None, finite_number(k) or 0, str(k)))
    ]


@dataclass(frozen=True)
class _StepScaling:
    """What every group of a step shares: the scaling of its advantages, the std of the whole step's rewards
    (the divisor under scale_rewards="batch") and G, the size of its largest group."""

    scaling: str
    step_std: float | None
    expected_size: int


def _group_view(
    step: int, key: Any, members: list[Mapping], stats: tuple[float | None, float | None], shared: _StepScaling
) -> GroupView:
    """One group of the step: its completions with their advantages, and the notes that explain them."""
    mean, std = stats
    divisor_std = shared.step_std if shared.scaling == "batch" else std
    notes = _group_notes(len(members), shared.expected_size, shared.scaling, std)
    views = []
    mismatch = False
    for index, record in enumerate(members):
        view, differs = _completion_view(index, record, mean, divisor_std, shared.scaling)
        views.append(view)
        mismatch = mismatch or differs
    if mismatch and len(members) >= shared.expected_size:
        notes.append("Some recorded advantages differ from this recomputation; the recorded ones are shown.")
    return GroupView(
        step=step,
        group=int(finite_number(key) or 0),
        prompt=transcript_text(members[0].get("prompt")),
        completions=views,
        mean=mean,
        std=std,
        scaling=shared.scaling,
        expected_size=shared.expected_size,
        notes=notes,
    )


def _group_notes(size: int, expected_size: int, scaling: str, std: float | None) -> list[str]:
    """What to say above a group before its completions: a half-written group, a scaling other than TRL's
    default (or none found), a group whose rewards were all equal."""
    notes = []
    if size < expected_size:
        notes.append(
            f"{size} of {expected_size} completions recorded so far: the mean and std "
            f"are over these only, so they may differ from the trainer's."
        )
    if scaling == "unknown":
        notes.append(
            "The recorded advantages match none of TRL's scalings of (reward - group mean) "
            "(group std, step std, none); they are shown as the trainer recorded them "
            '(e.g. multi_objective_aggregation="normalize_then_sum" scales each function first).'
        )
    elif scaling != "group":
        notes.append(f"Advantages were scaled with {SCALING_WORDS[scaling]}.")
    if std is not None and std < ZERO_ADVANTAGE_TOLERANCE and size > 1:
        notes.append(
            "Every completion got the same reward: all advantages are 0 and this prompt "
            "teaches the model nothing this step."
        )
    return notes


def _completion_view(
    index: int, record: Mapping, mean: float | None, divisor_std: float | None, scaling: str
) -> tuple[CompletionView, bool]:
    """One completion with the advantage shown (the recorded one when there is one) and the arithmetic behind
    it; and whether the recorded advantage differs from the recomputed one."""
    total = _total(record)
    recomputed = None
    if total is not None and mean is not None and scaling != "unknown":
        recomputed = _advantage(total, mean, divisor_std, scaling)
    recorded = finite_number(record.get("advantage"))
    # An unscorable completion gets advantage 0 in TRL (nan_to_num).
    shown = recorded if recorded is not None else (recomputed if recomputed is not None else 0.0)
    differs = (
        recorded is not None
        and recomputed is not None
        and abs(recorded - recomputed) > MATCH_TOLERANCE * max(1.0, abs(recorded))
    )
    length = finite_number(record.get("length"))
    view = CompletionView(
        index=index,
        completion=transcript_text(record.get("completion")),
        rewards={name: finite_number(score) for name, score in (record.get("rewards") or {}).items()},
        reward=total,
        advantage=shown,
        recomputed_advantage=recomputed,
        arithmetic=(
            _arithmetic(total, mean, divisor_std, scaling, shown)
            if scaling != "unknown"
            else f"recorded advantage {format_signed(shown)}"
        ),
        length=int(length) if length is not None else None,
        truncated=bool(record.get("truncated", False)),
        zero_advantage=abs(shown) < ZERO_ADVANTAGE_TOLERANCE,
        reward_errors=_reward_errors(record),
    )
    return view, differs


def _reward_errors(record: Mapping) -> dict[str, str]:
    errors = record.get("reward_errors")
    return {str(name): str(error) for name, error in errors.items()} if isinstance(errors, Mapping) else {}


def latest_step(records: Iterable[Mapping]) -> int | None:
    """The newest step with completions, or None when there are none yet."""
    steps = available_steps(records)
    return steps[-1] if steps else None
