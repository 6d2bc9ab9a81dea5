"""Will it learn? The signal check's report, from a few groups the base model sampled before launch.

GRPO learns only from groups whose completions score differently: a group where every completion gets
the same reward has zero advantage everywhere and moves nothing (TRL logs the share of such groups as
`frac_reward_zero_std`). `signal_report(groups, ...)` turns per-group scores - each completion's total
reward, its correctness reward (when the run has one), its length and whether it was cut at
`max_completion_length` - into a `SignalReport` with a plain verdict. Pure: the probe that samples the
groups is `workbench/trainer/signal_probe.py`; the CLI (`check-signal`) and the Setup tab show the report.
"""

from __future__ import annotations

import dataclasses
import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

# A group's rewards "spread" when their standard deviation is above this: TRL divides advantages by
# the group's std plus 1e-4, so anything below it is numerical noise, not a learning signal.
ZERO_SPREAD = 1e-6
# A completion is correct when its correctness reward reaches full marks (1.0 for exact_answer,
# keyword_presence and TRL's accuracy_reward); the slack absorbs float rounding.
FULL_MARKS = 1.0 - 1e-6
# Above this share of zero-spread groups most of each batch teaches nothing: the run will crawl.
WEAK_SIGNAL_SHARE = 0.75
# Above this share of truncated completions the rewards judge unfinished answers.
TRUNCATION_WARN = 0.5


@dataclass(frozen=True)
class GroupScores:
    """One prompt's completions: per completion its total (weighted) reward, its correctness reward (None
    when the run has none, an entry None when that reward skipped it), its length in tokens, and whether
    generation stopped at max_completion_length."""

    totals: Sequence[float | None]
    lengths: Sequence[int]
    truncated: Sequence[bool]
    correctness: Sequence[float | None] | None = None


@dataclass(frozen=True)
class SignalReport:
    """What the sampled groups say about a run's learning signal, and the verdict in one sentence."""

    label: str
    groups: int
    completions: int
    reward_spread: float  # mean over groups of the std of the total reward (TRL's reward_std)
    groups_with_spread: int
    zero_spread_share: float  # TRL's frac_reward_zero_std
    truncation_rate: float
    mean_length: float
    correctness_reward: str  # "" when the run has none
    correctness_rate: float | None  # share of completions with full marks; None without a correctness reward
    groups_with_correct: int | None
    learns: bool
    verdict: str

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


def group_std(values: Sequence[float | None]) -> float:
    """The std of a group's rewards as TRL takes it (unbiased); a None reward counts as 0 (TRL's nansum
    total of no reward), and a group of one has no spread."""
    numbers = [0.0 if v is None or (isinstance(v, float) and math.isnan(v)) else float(v) for v in values]
    return statistics.stdev(numbers) if len(numbers) > 1 else 0.0


def is_correct(value: float | None) -> bool:
    return value is not None and not (isinstance(value, float) and math.isnan(value)) and value >= FULL_MARKS


def signal_report(groups: Sequence[GroupScores], label: str, correctness_reward: str = "") -> SignalReport:
    """The report over `groups` (at least one); `label` names the run in the verdict ("gsm8k on tiny")."""
    if not groups:
        raise ValueError("signal_report needs at least one group")
    stds = [group_std(g.totals) for g in groups]
    with_spread = sum(1 for s in stds if s > ZERO_SPREAD)
    lengths = [n for g in groups for n in g.lengths]
    truncated = [t for g in groups for t in g.truncated]
    completions = sum(len(g.totals) for g in groups)
    correct_rate, correct_groups = None, None
    if correctness_reward:
        flags = [[is_correct(v) for v in (g.correctness or [])] for g in groups]
        correct_rate = sum(map(sum, flags)) / max(1, sum(map(len, flags)))
        correct_groups = sum(1 for f in flags if any(f))
    n = len(groups)
    counts = dict(
        label=label,
        groups=n,
        completions=completions,
        reward_spread=statistics.fmean(stds),
        groups_with_spread=with_spread,
        zero_spread_share=(n - with_spread) / n,
        truncation_rate=sum(truncated) / max(1, len(truncated)),
        mean_length=statistics.fmean(lengths) if lengths else 0.0,
        correctness_reward=correctness_reward,
        correctness_rate=correct_rate,
        groups_with_correct=correct_groups,
    )
    learns, verdict = judge(**counts)
    return SignalReport(**counts, learns=learns, verdict=verdict)


def judge(
    label: str,
    groups: int,
    groups_with_spread: int,
    zero_spread_share: float,
    truncation_rate: float,
    correctness_reward: str,
    correctness_rate: float | None,
    groups_with_correct: int | None,
    **_,
) -> tuple[bool, str]:
    """(whether the run can learn, the verdict sentence): the first of these that holds decides."""
    if correctness_reward and groups_with_correct == 0:
        return False, (
            f"{label}: 0 of {groups} groups have any correct answer; nothing will learn - "
            "pick a larger model or an easier task"
        )
    if groups_with_spread == 0:
        return False, (
            f"{label}: none of {groups} groups has a reward spread (every completion of a prompt "
            "scores the same); nothing will learn - raise temperature or num_generations, or use a "
            "reward that tells completions apart"
        )
    if correctness_rate is not None and correctness_rate >= 1.0:
        return False, (f"{label}: every completion is already correct; there is little to learn - pick a harder task")
    spread = f"{groups_with_spread} of {groups} groups have a spread"
    if truncation_rate > TRUNCATION_WARN:
        return True, (
            f"{label}: {spread}, but {truncation_rate:.0%} of completions are cut at "
            "max_completion_length - raise max_completion_length so the rewards judge finished answers"
        )
    if zero_spread_share > WEAK_SIGNAL_SHARE:
        return True, (
            f"{label}: only {spread}: a weak signal, most steps will teach little - raise "
            "num_generations or temperature"
        )
    return True, f"{label}: {spread}: this run has a signal"


def report_lines(report: SignalReport) -> list[str]:
    """The report as lines of text, the verdict last (the CLI prints them)."""
    lines = [
        f"groups sampled: {report.groups} ({report.completions} completions)",
        f"reward spread (mean of group std): {report.reward_spread:.3f}",
        f"groups with zero spread: {report.groups - report.groups_with_spread} of {report.groups} "
        f"({report.zero_spread_share:.0%})",
    ]
    if report.correctness_reward:
        lines += [
            f"correctness rate ({report.correctness_reward} full marks): {report.correctness_rate:.0%}",
            f"groups with a correct answer: {report.groups_with_correct} of {report.groups}",
        ]
    else:
        lines.append("correctness: the run has no correctness reward")
    lines += [
        f"truncated at max_completion_length: {report.truncation_rate:.0%} "
        f"(mean length {report.mean_length:.1f} tokens)",
        f"verdict: {report.verdict}",
    ]
    return lines
