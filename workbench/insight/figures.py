"""The dashboard's figures of one run's metrics, shared by the Train tab, the report and the notebooks.

Input is what the training process appends to `metrics.jsonl`: a list of
dicts, one per logging step, under TRL's own metric names (`reward`,
`reward_std`, `rewards/<func>/mean`, `kl`, `loss`, `completions/mean_length`,
...). Every builder is a pure function `records -> go.Figure`:

- a metric the run did not log (no `kl` when beta = 0, no records yet) gives
  a figure with a plain note instead of an error;
- `smoothing` is an exponential moving average weight in [0, 0.99]; when it
  is above 0 the raw points stay visible, faint, under the smoothed line.

A builder takes the records or their `metric_frames.metrics_frame`; `build_figures`
makes the frame once for all figures. The figures are drawn with `figure_drawing`'s
template and blocks (`Drawing`, `add_line`, `note_figure`, ...); those that lay one
series over another (several runs, held-out accuracy over the reward) are `overlay_figures`.

No torch or gradio here: importable by the UI process and by notebooks.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from workbench.insight.figure_drawing import (
    FIGURE_HEIGHT,
    MAX_POINTS,
    PALETTE,
    RAW_OPACITY,
    Drawing,
    add_band,
    add_fraction_axis,
    add_line,
    check_smoothing,
    figure_json,
    new_figure,
    note_figure,
    rgba,
    smooth,
    wrap_note,
)
from workbench.insight.metric_frames import (
    ROWS_ARE_RECORDS,
    STEP,
    frame_of,
    has_metric,
    metric_steps,
    metrics_frame,
    reward_function_names,
)

# The names taken from here: the builders, and (for the notebooks and tests that read a run through this
# module) the frame, smoothing, the template's sizes and the page's JSON, which live in figure_drawing and
# metric_frames.
__all__ = [
    "FIGURE_BUILDERS",
    "FIGURE_HEIGHT",
    "MAX_POINTS",
    "MISSING_NOTES",
    "PALETTE",
    "RAW_OPACITY",
    "ROWS_ARE_RECORDS",
    "WAITING_NOTE",
    "build_figures",
    "clip_ratio_figure",
    "completion_length_figure",
    "engine_mismatch_figure",
    "entropy_figure",
    "figure_json",
    "grad_norm_figure",
    "kl_figure",
    "learning_rate_figure",
    "loss_figure",
    "metric_figure",
    "metrics_frame",
    "new_figure",
    "reward_figure",
    "reward_std_figure",
    "smooth",
    "step_time_figure",
]

# Notes shown instead of a plot when a metric is absent, in plain words.
WAITING_NOTE = "No metrics yet: the first point appears after the first logging step."
MISSING_NOTES = {
    "kl": "KL is not computed when beta = 0: TRL skips the reference model and logs no `kl`. "
    "Set beta > 0 (e.g. 0.04) to watch how far the policy drifts from the base model.",
    "entropy": "This run logged no `entropy`.",
    "step_time": "This run logged no `step_time`.",
    "held_out/accuracy": "None of these runs evaluates held-out prompts: train with eval_strategy=steps (and "
    "eval_steps, eval_size) to compare their held-out accuracy.",
    "held_out/pass_at_k": "None of these runs sampled held-out answers: train with eval_strategy=steps and "
    "eval_pass_k (e.g. 4) to compare their pass@k.",
    **{
        f"held_out/{name}": f"None of these runs sampled two or more held-out answers per prompt: train with "
        f"eval_strategy=steps and eval_pass_k (e.g. 4) to compare their {name.replace('_at_', '@')}."
        for name in ("mean_at_k", "maj_at_k", "best_at_k")
    },
}


# ---------------------------------------------------------------- blocks of the figures below


def _aligned(frame: pd.DataFrame, metric: str, other: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Steps where both metrics are present, with both value lists."""
    present = (frame[metric].notna() & frame[other].notna()).to_numpy()
    return frame[STEP].to_numpy()[present], frame[metric].to_numpy()[present], frame[other].to_numpy()[present]


def _mean_with_std_band(drawing, frame, mean_col, std_col, name, colour, smoothing) -> None:
    present = frame[mean_col].notna().to_numpy()
    steps = frame[STEP].to_numpy()[present]
    drawn = add_line(drawing, steps, frame[mean_col].to_numpy()[present], name, colour, smoothing)
    if std_col in frame.columns:
        stds = frame[std_col].to_numpy(dtype="float64")[present]  # the std of each point of the line
        has = ~np.isnan(stds)
        add_band(drawing, steps[has], drawn[has] - stds[has], drawn[has] + stds[has], colour, f"{name} ± std")


# ---------------------------------------------------------------- the figures


def reward_figure(records, smoothing: float = 0.0) -> go.Figure:
    """Total reward and each reward function's mean, each with a ± std band."""
    frame = frame_of(records)
    title = "Reward (mean ± std over the completions of a step)"
    if not has_metric(frame, "reward"):
        return note_figure(title, WAITING_NOTE if frame.empty else "This run logged no `reward`.")
    drawing = Drawing(title, "reward")
    _mean_with_std_band(drawing, frame, "reward", "reward_std", "total", PALETTE[0], smoothing)
    for i, func in enumerate(reward_function_names(frame), start=1):
        _mean_with_std_band(
            drawing, frame, f"rewards/{func}/mean", f"rewards/{func}/std", func, PALETTE[i % len(PALETTE)], smoothing
        )
    return drawing.figure()


def reward_std_figure(records, smoothing: float = 0.0) -> go.Figure:
    """Spread of rewards, and the share of groups whose rewards were all equal."""
    frame = frame_of(records)
    title = "Reward spread and groups with no signal"
    if not (has_metric(frame, "reward_std") or has_metric(frame, "frac_reward_zero_std")):
        return note_figure(title, WAITING_NOTE if frame.empty else "This run logged no `reward_std`.")
    drawing = Drawing(title, "reward std")
    drawing.layout["yaxis"]["rangemode"] = "tozero"
    add_line(drawing, *metric_steps(frame, "reward_std"), "reward_std", PALETTE[0], smoothing)
    if has_metric(frame, "frac_reward_zero_std"):
        add_line(
            drawing,
            *metric_steps(frame, "frac_reward_zero_std"),
            "frac_reward_zero_std (right)",
            PALETTE[4],
            smoothing,
            dash="dot",
            yaxis="y2",
        )
        add_fraction_axis(drawing, "fraction of groups")
    return drawing.figure()


def completion_length_figure(records, smoothing: float = 0.0) -> go.Figure:
    """Mean completion length with its min-max band, and the clipped ratio on the right."""
    frame = frame_of(records)
    title = "Completion length (tokens)"
    mean_col = "completions/mean_length"
    if not has_metric(frame, mean_col):
        return note_figure(title, WAITING_NOTE if frame.empty else "This run logged no completion lengths.")
    drawing = Drawing(title, "tokens")
    drawing.layout["yaxis"]["rangemode"] = "tozero"
    colour = PALETTE[0]
    if {"completions/min_length", "completions/max_length"} <= set(frame.columns):
        add_band(drawing, *_aligned(frame, "completions/min_length", "completions/max_length"), colour, "min-max")
        # An invisible trace so the legend explains the shaded band.
        drawing.add_trace(x=[None], y=[None], mode="lines", name="min-max", line=dict(color=rgba(colour, 0.4), width=8))
    add_line(drawing, *metric_steps(frame, mean_col), "mean", colour, smoothing)
    if has_metric(frame, "completions/clipped_ratio"):
        add_line(
            drawing,
            *metric_steps(frame, "completions/clipped_ratio"),
            "clipped ratio (right)",
            PALETTE[4],
            smoothing,
            dash="dot",
            yaxis="y2",
        )
        add_fraction_axis(drawing, "hit max length")
    return drawing.figure()


def clip_ratio_figure(records, smoothing: float = 0.0) -> go.Figure:
    """Share of tokens whose probability ratio was clipped (PPO-style trust region)."""
    frame = frame_of(records)
    title = "Clip ratio (share of tokens clipped)"
    columns = [("clip_ratio/region_mean", "region"), ("clip_ratio/low_mean", "low"), ("clip_ratio/high_mean", "high")]
    present = [(col, label) for col, label in columns if has_metric(frame, col)]
    if not present:
        return note_figure(title, WAITING_NOTE if frame.empty else "This run logged no clip ratio.")
    drawing = Drawing(title, "fraction")
    drawing.layout["yaxis"]["rangemode"] = "tozero"
    for i, (col, label) in enumerate(present):
        add_line(drawing, *metric_steps(frame, col), label, PALETTE[i], smoothing, dash=None if i == 0 else "dot")
    if all((frame[col].dropna() == 0).all() for col, _ in present):
        drawing.layout["yaxis"]["range"] = (0, 0.1)
        drawing.annotations.append(
            dict(
                text=wrap_note(
                    "0 throughout: with num_iterations = 1 each batch is used once, so the probability ratio "
                    "is exactly 1 and nothing is clipped.",
                    80,
                ),
                x=0.5,
                y=0.6,
                xref="paper",
                yref="paper",
                showarrow=False,
                font=dict(size=11, color="#4b5563"),
            )
        )
    return drawing.figure()


def metric_figure(
    records,
    metric: str,
    title: str,
    y_title: str = "",
    smoothing: float = 0.0,
    colour: str = PALETTE[0],
    log_y: bool = False,
    from_zero: bool = False,
    zero_line: bool = False,
    y_axis: Mapping | None = None,
) -> go.Figure:
    """One metric as a line (with faint raw points when smoothed), or a note if absent.

    `zero_line` draws a dotted line at 0; `y_axis` adds settings to the y axis.
    """
    frame = frame_of(records)
    if not has_metric(frame, metric):
        note = WAITING_NOTE if frame.empty else MISSING_NOTES.get(metric, f"This run logged no `{metric}`.")
        return note_figure(title, note)
    drawing = Drawing(title, y_title)
    add_line(drawing, *metric_steps(frame, metric), metric, colour, smoothing, show_legend=False)
    if log_y:
        drawing.layout["yaxis"]["type"] = "log"
    elif from_zero:
        drawing.layout["yaxis"]["rangemode"] = "tozero"
    drawing.layout["yaxis"].update(y_axis or {})
    if zero_line:  # what fig.add_hline(y=0) adds
        drawing.shapes.append(
            dict(
                type="line",
                xref="x domain",
                x0=0,
                x1=1,
                yref="y",
                y0=0,
                y1=0,
                line=dict(color="#9ca3af", width=1, dash="dot"),
            )
        )
    return drawing.figure()


def kl_figure(records, smoothing: float = 0.0) -> go.Figure:
    return metric_figure(records, "kl", "KL to the base model", "kl", smoothing, PALETTE[3], from_zero=True)


def loss_figure(records, smoothing: float = 0.0) -> go.Figure:
    # A zero line helps read the grpo loss: with one iteration it hovers around 0 by construction.
    return metric_figure(records, "loss", "Loss", "loss", smoothing, PALETTE[1], zero_line=True)


def entropy_figure(records, smoothing: float = 0.0) -> go.Figure:
    return metric_figure(records, "entropy", "Entropy of the policy (nats per token)", "entropy", smoothing, PALETTE[2])


def grad_norm_figure(records, smoothing: float = 0.0) -> go.Figure:
    return metric_figure(records, "grad_norm", "Gradient norm", "grad norm", smoothing, PALETTE[5], from_zero=True)


def learning_rate_figure(records, smoothing: float = 0.0) -> go.Figure:
    # Smoothing a schedule would only blur it: always raw.
    return metric_figure(
        records, "learning_rate", "Learning rate", "lr", 0.0, PALETTE[6], from_zero=True, y_axis={"exponentformat": "e"}
    )


def step_time_figure(records, smoothing: float = 0.0) -> go.Figure:
    return metric_figure(records, "step_time", "Step time (seconds)", "s", smoothing, PALETTE[7], from_zero=True)


ENGINE_NOTE = (
    "Drawn for runs that generate with vLLM (generation = vllm-server, trl-colocate or trl-server) and record "
    "tokens: how far the engine's log-probabilities are from the trainer's, and the weights TRL corrects by."
)


def engine_mismatch_figure(records, smoothing: float = 0.0) -> go.Figure:
    """The generation engine against the trainer, per step (from the token records): the mean and largest
    |log-probability difference| per token on the left, TRL's importance-sampling weights (mean, min-max band)
    on the right, and a cross at 0 where a mask mode zeroed completions."""
    frame = frame_of(records)
    title = "Generation engine vs trainer (log-probability mismatch)"
    if not has_metric(frame, "engine/logprob_mismatch_mean"):
        return note_figure(title, WAITING_NOTE if frame.empty else ENGINE_NOTE)
    drawing = Drawing(title, "|trainer − engine| (nats)")
    drawing.layout["yaxis"]["rangemode"] = "tozero"
    add_line(drawing, *metric_steps(frame, "engine/logprob_mismatch_mean"), "mean mismatch", PALETTE[0], smoothing)
    if has_metric(frame, "engine/logprob_mismatch_max"):
        steps, largest = metric_steps(frame, "engine/logprob_mismatch_max")
        add_line(drawing, steps, largest, "largest mismatch", PALETTE[0], smoothing, dash="dot")
    if has_metric(frame, "engine/is_weight_mean"):
        colour = PALETTE[4]
        add_band(
            drawing, *_aligned(frame, "engine/is_weight_min", "engine/is_weight_max"), colour, "weight min-max", "y2"
        )
        add_line(drawing, *metric_steps(frame, "engine/is_weight_mean"), "mean weight (right)", colour, 0.0, yaxis="y2")
        drawing.layout["yaxis2"] = dict(
            overlaying="y", side="right", rangemode="tozero", showgrid=False, title=dict(text="IS weight", standoff=4)
        )
        drawing.layout["margin"] = dict(r=60)
        if has_metric(frame, "engine/masked_completions"):
            steps, masked = metric_steps(frame, "engine/masked_completions")
            hit = np.asarray(masked) > 0
            drawing.add_trace(
                x=np.asarray(steps)[hit].tolist(),
                y=[0.0] * int(hit.sum()),
                text=[f"{int(m)} completion(s) masked" for m in np.asarray(masked)[hit]],
                mode="markers",
                marker=dict(symbol="x", size=9, color=PALETTE[3]),
                name="masked completions",
                yaxis="y2",
            )
    return drawing.figure()


# Figure name -> builder, in the order the dashboard shows them.
FIGURE_BUILDERS: dict[str, Callable[..., go.Figure]] = {
    "reward": reward_figure,
    "reward_std": reward_std_figure,
    "kl": kl_figure,
    "loss": loss_figure,
    "completion_length": completion_length_figure,
    "clip_ratio": clip_ratio_figure,
    "entropy": entropy_figure,
    "grad_norm": grad_norm_figure,
    "learning_rate": learning_rate_figure,
    "step_time": step_time_figure,
    "engine_mismatch": engine_mismatch_figure,
}


def build_figures(records, smoothing: float = 0.0, names: Iterable[str] | None = None) -> dict[str, go.Figure]:
    """The dashboard figures for one run (its records or their metrics_frame), keyed as in FIGURE_BUILDERS
    (all of them, or those `names`)."""
    frame = frame_of(records if isinstance(records, pd.DataFrame) else list(records))
    check_smoothing(smoothing)
    wanted = FIGURE_BUILDERS if names is None else list(names)
    return {name: FIGURE_BUILDERS[name](frame, smoothing) for name in wanted}
