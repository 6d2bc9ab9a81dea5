"""Health alarms for a GRPO run, in plain words, from its logged metrics.

`check_health(metrics, config=None)` reads the records of `metrics.jsonl`
(TRL's metric names) and, optionally, the run's config (a dict or a RunConfig:
only `beta`, `num_iterations`, `loss_type`, `max_completion_length`,
`num_generations` and `temperature` are read), and returns the alarms that
apply now, most serious first:

- no learning signal: most groups gave all G completions the same reward,
  so their advantages are 0 and nothing is learned from them;
- loss near zero, explained: with beta = 0 and num_iterations = 1 the `grpo`
  loss is -mean(advantage), ~0 by construction (advantages sum to zero per group), not a sign that
  training stopped;
- a KL spike: the policy jumped away from the base model in one step (a note names each step it skipped
  as a one-step outlier of the estimate, and why);
- completions all hitting max_completion_length;
- completion length collapsing to almost nothing;
- a shaping reward (format, length) saturating while the correctness reward stays flat: the model learned
  the easy reward (the config names which reward means "correct": `spec.reward_choice.correctness_reward_for`);
- with held-out evaluation (`evals`: eval.jsonl's records, `insight.eval_results.read_evals`), the training
  reward rising while held-out accuracy falls: overfitting its training prompts, or reward hacking.

Each alarm says what is happening, why it matters and what to change.

`metrics` may also be their `metric_frames.metrics_frame` (one row per step, as
the Train tab keeps it): the series are then read from its columns, and a
10,000-step run is checked in milliseconds.

Standard library and numpy: importable without torch or gradio.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from workbench.errors import WorkbenchError
from workbench.spec.config import RunConfig
from workbench.spec.numbers import finite_number
from workbench.spec.reward_choice import correctness_reward_for, shaping_rewards_for

LEVELS = ("error", "warning", "info")  # most serious first

# Alarms about "recent" behaviour look at this many last logged steps, so one
# unlucky step (a hard prompt, a short answer) does not raise an alarm.
RECENT_WINDOW = 3
# frac_reward_zero_std averaged over the window. Above 0.75 at most a quarter
# of the prompts teach anything, so the effective batch is a few completions.
NO_SIGNAL_FRACTION = 0.75
# |loss| below this on every recent step reads as "zero" to a person. GRPO's
# policy term is of the order of the advantages times the ratio change (0.01
# to 1 in practice); beta * KL with beta = 0.04 is ~1e-4.
LOSS_NEAR_ZERO = 1e-3
# A KL spike: this many times the median KL of the steps before it ...
KL_SPIKE_FACTOR = 5.0
# ... and above this absolute value (nats a token), because small KLs multiply
# without meaning anything: early ones (1e-4 -> 1e-3), and those of a LoRA run
# learning a new form of answer, which climb from 0 into the tenths as it learns
# (the demo: 0.01 to 0.2 over its first 10 steps, 0.1 to 0.4 after). The
# reward-hacking lesson's collapse reaches 1 to 18.
KL_SPIKE_FLOOR = 0.5
# How many earlier steps make the KL baseline (their median resists one outlier).
KL_BASELINE_WINDOW = 10
# Share of completions cut at max_completion_length, over the window. Above
# 0.9 the rewards judge unfinished answers almost every time.
CLIPPED_FRACTION = 0.9
# Mean completion length (tokens) that counts as "almost nothing": an end of
# sequence and perhaps one more token. A one-word answer ("Paris.") is 2-3.
LENGTH_COLLAPSE_TOKENS = 2.0
# ... and only when it fell to below this share of the run's first steps, so a
# task whose answers are short from the start is not called a collapse.
LENGTH_COLLAPSE_RATIO = 0.2
# A shaping reward "saturates" when its recent mean is at least this (format and length rewards pay up to
# 1.0: it is earned on nine answers in ten) ...
SHAPING_SATURATED = 0.9
# ... after rising by at least this from the run's first steps: learned during the run, not given from the start.
SHAPING_RISE = 0.3
# The correctness reward "stays flat" when its recent mean moved less than this from the first steps: on
# a 0/1 reward, fewer than one answer in twenty more is right.
CORRECTNESS_FLAT = 0.05
# Held-out accuracy "falls" when the latest evaluation is this much below the best earlier one ...
HELD_OUT_DROP = 0.1
# ... and by at least this many prompts' worth, so one prompt flipping on a small eval_size (one of 8 is
# 0.125) is not read as a trend.
HELD_OUT_DROP_PROMPTS = 2
# The training reward "rises" when its mean over RECENT_WINDOW steps ending at the latest evaluation is this
# much above its mean over those ending at the best one (in reward units: a 0/1 reward's share of answers).
TRAIN_REWARD_RISE = 0.05


@dataclass(frozen=True)
class Alarm:
    level: str  # "error", "warning" or "info"
    title: str  # a few words, for a badge or a heading
    message: str  # what happens, why it matters, what to change
    step: int | None  # the step it refers to (the latest one for trends)
    kind: str = ""  # a stable name: no_signal, loss_zero, kl_spike, clipped, length_collapse, reward_failures

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


# ---------------------------------------------------------------- reading inputs


def _setting(config: Any, name: str, default: Any = None) -> Any:
    """A field of the config, whether it is a dict, a RunConfig or missing."""
    if config is None:
        return default
    if isinstance(config, Mapping):
        return config.get(name, default)
    return getattr(config, name, default)


def metric_series(metrics, name: str) -> Sequence[tuple[int, float]]:
    """(step, value) pairs of one metric, by step, skipping missing and NaN values.

    `metrics` are records (a list comes back), or a metrics frame (a DataFrame with a `step` column, one
    row per step, sorted: a sequence of the same pairs, kept as arrays).
    """
    if hasattr(metrics, "columns"):
        return _frame_series(metrics, name)
    points = {}
    for position, record in enumerate(metrics, start=1):
        value = finite_number(record.get(name))
        if value is not None:
            step = finite_number(record.get("step"))
            points[int(step) if step is not None else position] = value
    return sorted(points.items())


def _frame_series(frame, name: str) -> list[tuple[int, float]]:
    """metric_series from a metrics frame's columns: finite values, whole steps, the later row of a whole step."""
    if name not in frame.columns or frame[name].dtype == bool:
        return []
    try:
        steps = np.asarray(frame["step"], dtype="float64")
        values = np.asarray(frame[name], dtype="float64")
    except (TypeError, ValueError):  # a column that is not numbers: read it as records do
        return metric_series(frame.to_dict("records"), name)
    finite = np.isfinite(values) & np.isfinite(steps)
    whole = np.trunc(steps[finite]).astype("int64")
    values = values[finite]
    last_of_step = np.append(whole[1:] != whole[:-1], True) if len(whole) else whole.astype(bool)
    return _Points(whole[last_of_step], values[last_of_step])


class _Points(Sequence):
    """(step, value) pairs kept as two arrays: a 10,000-step series without 10,000 tuples.

    Behaves as the list metric_series gives for records (indexing, slices, iteration).
    """

    def __init__(self, steps: np.ndarray, values: np.ndarray):
        self.steps, self.values = steps, values

    def __len__(self) -> int:
        return len(self.values)

    def __getitem__(self, index):
        if isinstance(index, slice):
            return list(zip(self.steps[index].tolist(), self.values[index].tolist()))
        return int(self.steps[index]), float(self.values[index])

    def __iter__(self):
        return zip(self.steps.tolist(), self.values.tolist())


def _values(series) -> np.ndarray:
    return series.values if isinstance(series, _Points) else np.array([v for _, v in series], dtype="float64")


def _recent(series: list[tuple[int, float]]) -> list[tuple[int, float]] | None:
    """The last RECENT_WINDOW points, or None while there are fewer."""
    return series[-RECENT_WINDOW:] if len(series) >= RECENT_WINDOW else None


def _percent(value: float) -> str:
    return f"{value:.0%}"


# ---------------------------------------------------------------- the checks


def check_no_signal(metrics, config=None) -> list[Alarm]:
    recent = _recent(metric_series(metrics, "frac_reward_zero_std"))
    if recent is None:
        return []
    share = statistics.fmean(v for _, v in recent)
    if share < NO_SIGNAL_FRACTION:
        return []
    g = _setting(config, "num_generations")
    g_words = f"all {int(g)} completions" if g else "all completions"
    level = "error" if all(v >= 0.999 for _, v in recent) else "warning"
    return [
        Alarm(
            level,
            "No learning signal",
            f"Over the last {len(recent)} steps, {_percent(share)} of the prompts gave {g_words} the same reward. "
            f"GRPO learns from differences inside a group: equal rewards make every advantage 0, so those prompts "
            f"move nothing. Make the group disagree: raise temperature (more varied answers), raise "
            f"num_generations, use a reward that gives partial credit instead of pass/fail, or use prompts that "
            f"are neither always solved nor never solved.",
            recent[-1][0],
            "no_signal",
        )
    ]


def check_loss_near_zero(metrics, config=None) -> list[Alarm]:
    recent = _recent(metric_series(metrics, "loss"))
    if recent is None or any(abs(v) >= LOSS_NEAR_ZERO for _, v in recent):
        return []
    beta = _setting(config, "beta")
    if beta is None and not metric_series(metrics, "kl"):
        beta = 0.0  # TRL logs no `kl` when beta = 0
    iterations = _setting(config, "num_iterations")
    loss_type = _setting(config, "loss_type")
    zero_share = _recent(metric_series(metrics, "frac_reward_zero_std"))
    if zero_share and statistics.fmean(v for _, v in zero_share) >= NO_SIGNAL_FRACTION:
        why = "Here it is because the groups gave equal rewards, so every advantage is 0: see 'No learning signal'."
    elif beta == 0 and iterations in (1, None) and loss_type == "grpo":
        why = (
            "That is expected here: with beta = 0 and num_iterations = 1 the policy ratio is exactly 1, so "
            "the `grpo` loss is -mean(advantage), and advantages sum to zero in each group. The gradient is "
            "not zero: each completion's log-probability is still pushed by its own advantage."
        )
    elif loss_type not in (None, "grpo"):
        why = (
            f'With loss_type "{loss_type}" each token is weighted alike, so the loss is ~0 when the '
            f"completions of a group have similar lengths (and beta is small): their advantages, which sum "
            f"to zero, then cancel token for token."
        )
    else:
        why = (
            'With beta = 0 and num_iterations = 1 this is expected for loss_type "grpo" (the loss is '
            "-mean(advantage), which is ~0 by construction); the token-weighted types (dapo, bnpo, "
            "dr_grpo) are ~0 only when the completions have similar lengths."
        )
    return [
        Alarm(
            "info",
            "Loss near zero is not a stall",
            f"The loss has been within ±{LOSS_NEAR_ZERO:g} for the last {len(recent)} steps. In GRPO the loss "
            f"value does not measure progress. {why} Watch the reward curve instead.",
            recent[-1][0],
            "loss_zero",
        )
    ]


def _kl_thresholds(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(baseline, threshold) of points 1 .. count - 1: the median of the (up to) KL_BASELINE_WINDOW points before
    each, and the value above which it counts as high (KL_SPIKE_FACTOR times that, and KL_SPIKE_FLOOR at least)."""
    count = len(values)
    early = [statistics.median(values[:i].tolist()) for i in range(1, min(count, KL_BASELINE_WINDOW))]
    later = (
        np.median(np.lib.stride_tricks.sliding_window_view(values[:-1], KL_BASELINE_WINDOW), axis=1)
        if count > KL_BASELINE_WINDOW
        else np.empty(0)
    )
    baselines = np.concatenate([np.array(early, dtype="float64"), later])  # baselines[i - 1] is point i's
    return baselines, np.maximum(KL_SPIKE_FLOOR, KL_SPIKE_FACTOR * np.maximum(baselines, 1e-12))


def _latest_kl_spike(series: list[tuple[int, float]]) -> tuple[int, float, float, float] | None:
    """The last (step, value, baseline, next value) where KL rose KL_SPIKE_FACTOR times over the median of the
    steps before and was still that high at the next logged step.

    One high step alone is not a move of the policy: TRL's KL is the k3 estimate averaged over the sampled
    tokens, and one sampled token the reference finds far likelier than the policy adds exp(gap) to it (a
    demo run showed one step's KL far above its neighbours', its answers ordinary). A policy that jumped stays
    far at the next step, since one optimizer step later it is still close to where it jumped.
    """
    values = _values(series)
    if len(values) < 3:
        return None
    baselines, thresholds = _kl_thresholds(values)
    # point i (1 .. count - 2) and point i + 1 both above point i's threshold
    spikes = np.flatnonzero((values[1:-1] > thresholds[:-1]) & (values[2:] > thresholds[:-1]))
    if not len(spikes):
        return None
    i = int(spikes[-1]) + 1
    return series[i][0], series[i][1], float(baselines[i - 1]), series[i + 1][1]


def _kl_outliers(series: list[tuple[int, float]]) -> list[tuple[int, float, float, float | None]]:
    """Every (step, value, baseline, next value or None) where KL was high for that one step alone: above its
    threshold while the step before was not, and the next logged step fell back below it (None: the newest step,
    whose next is not logged yet). The steps the spike check skips on purpose (`_latest_kl_spike`)."""
    values = _values(series)
    if len(values) < 2:
        return []
    baselines, thresholds = _kl_thresholds(values)
    points = np.arange(1, len(values))
    alone = (values[1:] > thresholds) & (values[:-1] <= thresholds)
    fell = np.append(values[2:] <= thresholds[:-1], True)  # the newest point: nothing after it yet
    return [
        (series[i][0], series[i][1], float(baselines[i - 1]), series[i + 1][1] if i + 1 < len(series) else None)
        for i in points[alone & fell].tolist()
    ]


def check_kl_spike(metrics, config=None) -> list[Alarm]:
    series = metric_series(metrics, "kl")
    latest = _latest_kl_spike(series)
    if latest is None:
        return check_kl_outliers(series)
    step, value, baseline, after = latest
    later = check_kl_outliers(series, since=after_step(series, step))  # the outliers after the spike
    ratio = value / baseline if baseline > 0 else math.inf
    times = f"{ratio:.0f}x" if math.isfinite(ratio) else "up from zero"
    return [
        Alarm(
            "warning",
            "KL spike",
            f"At step {step} the KL to the base model jumped to {value:.3g} from a median of {baseline:.3g} over "
            f"the steps before ({times}), and it was still {after:.3g} at the next step. The policy moved far from "
            f"the base model at once: often a learning rate too high for LoRA, or the model finding a shortcut the "
            f"reward pays for. Read that step's completions; lower learning_rate or raise beta to hold the policy "
            f"closer.",
            step,
            "kl_spike",
        ),
        *later,
    ]


# The most skipped outlier steps a note lists by number.
OUTLIERS_LISTED = 5


def after_step(series: list[tuple[int, float]], step: int) -> int:
    """The step logged after `step` (`step` itself when none is)."""
    return next((s for s, _ in series if s > step), step)


def check_kl_outliers(series: list[tuple[int, float]], since: int | None = None) -> list[Alarm]:
    """A note naming the KL steps the spike check skipped as one-step outliers (those after step `since`), and
    why: so a page that shows 13.3 on its KL curve never says "nothing unusual in KL" without a word about it."""
    outliers = [point for point in _kl_outliers(series) if since is None or point[0] > since]
    if not outliers:
        return []
    step, value, baseline, after = outliers[-1]
    rule = (
        f"a KL alarm needs 2 steps in a row above {KL_SPIKE_FACTOR:g}x the median of the steps before "
        f"(and above {KL_SPIKE_FLOOR:g})"
    )
    if after is None:
        what = f"KL: step {step} jumped to {value:.3g} (the median before it: {baseline:.3g}); one step alone is "
        what += f"not an alarm yet: the next step says whether it stays. {rule[0].upper()}{rule[1:]}."
    else:
        what = (
            f"KL: one-step spike to {value:.3g} at step {step}, skipped as an outlier (it fell back to {after:.3g} "
            f"the next step; the median before it: {baseline:.3g}); {rule}."
        )
    earlier = [s for s, _, _, later in outliers[:-1] if later is not None]
    if earlier:
        listed = ", ".join(map(str, earlier[-OUTLIERS_LISTED:]))
        what += f" Also skipped: step{'s' if len(earlier) > 1 else ''} {listed}"
        what += f" (of {len(earlier)})." if len(earlier) > OUTLIERS_LISTED else "."
    what += (
        " TRL's KL is an estimate from the sampled tokens: one token the base model finds far likelier lifts one "
        "step alone. Read that step's completions if in doubt."
    )
    title = "KL: one high step, not an alarm yet" if after is None else "KL outlier skipped"
    return [Alarm("info", title, what, step, "kl_outlier")]


def check_clipped(metrics, config=None) -> list[Alarm]:
    recent = _recent(metric_series(metrics, "completions/clipped_ratio"))
    if recent is None:
        return []
    share = statistics.fmean(v for _, v in recent)
    if share < CLIPPED_FRACTION:
        return []
    limit = _setting(config, "max_completion_length")
    limit_words = f"max_completion_length ({int(limit)} tokens)" if limit else "max_completion_length"
    return [
        Alarm(
            "warning",
            "Completions hit the length limit",
            f"Over the last {len(recent)} steps, {_percent(share)} of the completions were cut at {limit_words}. "
            f"The rewards then judge unfinished answers, and a reward that needs the end of the answer (a final "
            f"number, a closing tag) cannot be earned. Raise max_completion_length, or reward shorter answers.",
            recent[-1][0],
            "clipped",
        )
    ]


def check_length_collapse(metrics, config=None) -> list[Alarm]:
    series = metric_series(metrics, "completions/mean_length")
    recent = _recent(series)
    if recent is None or len(series) < 2 * RECENT_WINDOW:
        return []
    start = statistics.fmean(v for _, v in series[:RECENT_WINDOW])
    now = statistics.fmean(v for _, v in recent)
    if now > LENGTH_COLLAPSE_TOKENS or now > LENGTH_COLLAPSE_RATIO * start:
        return []
    return [
        Alarm(
            "warning",
            "Completions collapsed to almost nothing",
            f"Completions average {now:.1f} tokens over the last {len(recent)} steps, down from {start:.1f} at the "
            f"start. The model has learned that (almost) empty answers score well: a brevity or length reward with "
            f"nothing that pays for a correct answer. Add a correctness or format reward, weight brevity less, or "
            f"give empty answers a low score.",
            recent[-1][0],
            "length_collapse",
        )
    ]


# rewards/<function>/failed: the share of a step's completions the function raised on (reward_errors=record).
FAILED_PREFIX, FAILED_SUFFIX = "rewards/", "/failed"


def _failed_metric_names(metrics) -> list[str]:
    names = metrics.columns if hasattr(metrics, "columns") else dict.fromkeys(k for r in metrics for k in r)
    return [n for n in names if isinstance(n, str) and n.startswith(FAILED_PREFIX) and n.endswith(FAILED_SUFFIX)]


def check_reward_failures(metrics, config=None) -> list[Alarm]:
    """Each reward function that could not score some completions (it raised on them, reward_errors=record)."""
    alarms = []
    for name in _failed_metric_names(metrics):
        failing = [(step, value) for step, value in metric_series(metrics, name) if value > 0]
        if not failing:
            continue
        function = name[len(FAILED_PREFIX) : -len(FAILED_SUFFIX)]
        step, share = failing[-1]
        score = _setting(config, "reward_failure_score", 0.0)
        alarms.append(
            Alarm(
                "warning",
                f"{function} could not score some completions",
                f"The reward function {function} raised on {_percent(share)} of the completions at step {step} "
                f"({len(failing)} step(s) with failures so far). Those completions got reward_failure_score "
                f"({score}) instead of a real reward, which teaches the model about the failure, not the task. Each "
                f"error is in completions.jsonl (`reward_errors`) and on the completion's card: fix what the function "
                f"cannot read, or make it return None for it.",
                step,
                "reward_failures",
            )
        )
    return alarms


def reward_roles(config: Any) -> tuple[str, list[str]]:
    """(the correctness reward, the shaping rewards) the config names; ("", []) when it cannot tell."""
    if config is None:
        return "", []
    try:
        cfg = config if isinstance(config, RunConfig) else RunConfig.from_dict(dict(config))
    except (WorkbenchError, TypeError, ValueError):  # an older or hand-edited config.json: no roles to judge by
        return "", []
    return correctness_reward_for(cfg), shaping_rewards_for(cfg)


def _window_mean(series, last: int | None = None, first: bool = False) -> float | None:
    """The mean of the RECENT_WINDOW points at the start (`first`), or ending at step `last` (the end: None)."""
    points = list(series)
    if last is not None:
        points = [(step, value) for step, value in points if step <= last]
    points = points[:RECENT_WINDOW] if first else points[-RECENT_WINDOW:]
    return statistics.fmean(v for _, v in points) if points else None


def check_easy_reward(metrics, config=None) -> list[Alarm]:
    """A shaping reward learned (risen to near full marks) while the correctness reward stayed where it began."""
    correct, shaping = reward_roles(config)
    if not correct:
        return []
    right = metric_series(metrics, f"rewards/{correct}/mean")
    if len(right) < 2 * RECENT_WINDOW:
        return []
    right_move = _window_mean(right) - _window_mean(right, first=True)
    if abs(right_move) >= CORRECTNESS_FLAT:
        return []
    alarms = []
    for name in shaping:
        series = metric_series(metrics, f"rewards/{name}/mean")
        if len(series) < 2 * RECENT_WINDOW:
            continue
        start, now = _window_mean(series, first=True), _window_mean(series)
        if now < SHAPING_SATURATED or now - start < SHAPING_RISE:
            continue
        alarms.append(
            Alarm(
                "warning",
                f"Learned {name}, not the answers",
                f"{name} rose from {start:.2f} to {now:.2f} (near full marks) while {correct}, the reward for a right "
                f"answer, stayed at {_window_mean(right):.2f} (it moved {right_move:+.2f}). The model learned the easy "
                f"reward: it writes the expected form without getting the answer right, and the total reward keeps "
                f"rising without the model getting better. Weight {name} less (reward_weights) or drop it now that it "
                f"is learned, check that {correct} can be earned at all (the signal check), or use an easier task "
                f"or a larger model.",
                series[-1][0],
                "easy_reward",
            )
        )
    return alarms


def check_held_out_falls(metrics, evals: list[Mapping]) -> list[Alarm]:
    """The training reward rose while held-out accuracy fell from its best earlier evaluation to the latest."""
    scored = [e for e in evals if finite_number(e.get("accuracy")) is not None and isinstance(e.get("step"), int)]
    if len(scored) < 2:
        return []
    latest = scored[-1]
    best = max(scored[:-1], key=lambda e: (e["accuracy"], -e["step"]))  # the best earlier one, the earliest of ties
    n = latest.get("n") or 0
    drop = best["accuracy"] - latest["accuracy"]
    if drop < HELD_OUT_DROP or (n and drop * n < HELD_OUT_DROP_PROMPTS - 1e-9):
        return []
    reward = metric_series(metrics, "reward")
    at_best = _window_mean(reward, best["step"]) if best["step"] > 0 else _window_mean(reward, first=True)
    now = _window_mean(reward, latest["step"])
    if at_best is None or now is None or now - at_best < TRAIN_REWARD_RISE:
        return []
    return [
        Alarm(
            "warning",
            "Held-out accuracy falls as the reward rises",
            f"Held-out accuracy fell from {best['accuracy']:.0%} at step {best['step']} to {latest['accuracy']:.0%} "
            f"at step {latest['step']} ({n} prompts), while the training reward rose from {at_best:.3g} to "
            f"{now:.3g}. The model is getting better at its training prompts or at the reward itself, not at the "
            f"task: overfitting (too few training prompts, too many epochs or iterations) or reward hacking (a "
            f"reward that pays for something besides a right answer). Read the changed answers under the held-out "
            f"curve. The saved checkpoint with the best held-out accuracy is kept (the Runs tab marks it). Train on "
            f"more prompts, lower learning_rate, raise beta, or fix the reward.",
            latest["step"],
            "held_out_falls",
        )
    ]


CHECKS = (
    check_no_signal,
    check_loss_near_zero,
    check_kl_spike,
    check_clipped,
    check_length_collapse,
    check_reward_failures,
    check_easy_reward,
)


def check_health(metrics: Iterable[Mapping], config: Any = None, evals: Iterable[Mapping] = ()) -> list[Alarm]:
    """All alarms that apply to the run now, most serious first (then newest first).

    `metrics`: the records, or their metrics frame; `evals`: the run's held-out evaluations, one per step in
    step order (`insight.eval_results.read_evals`), for the alarms that compare training with held-out accuracy.
    """
    if not hasattr(metrics, "columns"):
        metrics = list(metrics)
    alarms = [alarm for check in CHECKS for alarm in check(metrics, config)]
    alarms += check_held_out_falls(metrics, list(evals))
    return sorted(alarms, key=lambda a: (LEVELS.index(a.level), -(a.step or 0)))
