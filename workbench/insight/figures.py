"""Plotly figures of a run's metrics, shared by the dashboard and the notebooks.

Input is what the training process appends to `metrics.jsonl`: a list of
dicts, one per logging step, under TRL's own metric names (`reward`,
`reward_std`, `rewards/<func>/mean`, `kl`, `loss`, `completions/mean_length`,
...). Every builder is a pure function `records -> go.Figure`:

- a metric the run did not log (no `kl` when beta = 0, no records yet) gives
  a figure with a plain note instead of an error;
- `smoothing` is an exponential moving average weight in [0, 0.99]; when it
  is above 0 the raw points stay visible, faint, under the smoothed line.

All figures share one light template sized for about 600 x 300 px, with the
legend above the plot area so it never covers data.

No torch or gradio here: importable by the UI process and by notebooks.
"""

from __future__ import annotations

import math
from typing import Callable, Iterable, Mapping, Sequence

import pandas as pd
import plotly.graph_objects as go

from workbench.errors import WorkbenchError

STEP = "step"
MAX_SMOOTHING = 0.99

# One palette for every figure, so "reward" has the same colour everywhere.
PALETTE = ("#2563eb", "#ea580c", "#16a34a", "#9333ea", "#dc2626", "#0891b2", "#ca8a04", "#db2777")
INK = "#1f2937"
GRID = "#e5e7eb"
FIGURE_HEIGHT = 300
# Opacity of the raw points under a smoothed line, and of std / min-max bands.
RAW_OPACITY = 0.3
BAND_OPACITY = 0.15
# Up to this many steps along the x axis, put a tick on every step.
SHORT_STEP_SPAN = 10

TEMPLATE = go.layout.Template(
    layout=dict(
        font=dict(family="Inter, system-ui, -apple-system, Segoe UI, sans-serif", size=12, color=INK),
        paper_bgcolor="white",
        plot_bgcolor="white",
        colorway=list(PALETTE),
        # Room at the top for the title and a one-row legend above the plot.
        margin=dict(l=52, r=16, t=64, b=40),
        height=FIGURE_HEIGHT,
        title=dict(x=0.01, xanchor="left", y=0.97, yanchor="top", font=dict(size=14)),
        legend=dict(orientation="h", x=0, xanchor="left", y=1.0, yanchor="bottom",
                    bgcolor="rgba(255,255,255,0)", font=dict(size=11)),
        xaxis=dict(title=dict(text="step", standoff=4), gridcolor=GRID, zeroline=False,
                   linecolor="#9ca3af", ticks="outside", tickcolor="#9ca3af"),
        # automargin: long tick labels (entropy 10.82, learning rate 5e-06) widen the margin, not get cut.
        yaxis=dict(gridcolor=GRID, zerolinecolor="#d1d5db", linecolor="#9ca3af", automargin=True),
        hovermode="x unified",
    )
)

# Notes shown instead of a plot when a metric is absent, in plain words.
WAITING_NOTE = "No metrics yet: the first point appears after the first logging step."
MISSING_NOTES = {
    "kl": "KL is not computed when beta = 0: TRL skips the reference model and logs no `kl`. "
          "Set beta > 0 (e.g. 0.04) to watch how far the policy drifts from the base model.",
    "entropy": "This run logged no `entropy`.",
    "step_time": "This run logged no `step_time`.",
}


# ---------------------------------------------------------------- data shaping

def metrics_frame(records: Iterable[Mapping]) -> pd.DataFrame:
    """Metric records as a DataFrame: one row per step, sorted, numbers only.

    A record without `step` takes its position (1-based). When a step appears
    twice the later record wins; records read from a resumed run's file go
    through `resumed.merge_metrics` first, which also drops the later steps
    logged before the resume. Values that are not numbers (None, text) become
    NaN, so a figure shows a gap, not an error.
    """
    rows = []
    for position, record in enumerate(records, start=1):
        row = dict(record)
        row.setdefault(STEP, position)
        rows.append(row)
    if not rows:
        return pd.DataFrame({STEP: pd.Series(dtype="float64")})
    frame = pd.DataFrame(rows)
    frame = frame.apply(pd.to_numeric, errors="coerce")
    frame = frame[frame[STEP].notna()]
    frame = frame.drop_duplicates(subset=STEP, keep="last").sort_values(STEP, kind="stable")
    return frame.reset_index(drop=True)


def check_smoothing(smoothing: float) -> float:
    """`smoothing` as a float in [0, 0.99], or a ValueError saying how to fix it."""
    try:
        value = float(smoothing)
    except (TypeError, ValueError):
        raise WorkbenchError(f"smoothing: got {smoothing!r}; it must be a number from 0 to {MAX_SMOOTHING} "
                         f"(0 = raw values, 0.9 = strong smoothing)") from None
    if not 0.0 <= value <= MAX_SMOOTHING:
        raise WorkbenchError(f"smoothing: got {value}; it must be from 0 to {MAX_SMOOTHING} "
                         f"(1 would freeze the line at its first value); use e.g. 0.6")
    return value


def smooth(values: Sequence[float], smoothing: float) -> list[float]:
    """Exponential moving average: s[0] = x[0], s[t] = w * s[t-1] + (1 - w) * x[t].

    NaN inputs stay NaN in the output and do not disturb the average, so a
    missing point is a gap rather than a dip.
    """
    weight = check_smoothing(smoothing)
    out: list[float] = []
    state = math.nan
    for value in values:
        value = float(value)
        if math.isnan(value):
            out.append(math.nan)
            continue
        state = value if math.isnan(state) else weight * state + (1.0 - weight) * value
        out.append(state)
    return out


def _series(frame: pd.DataFrame, metric: str) -> tuple[list[float], list[float]]:
    """(steps, values) of one metric with its missing points dropped."""
    if metric not in frame.columns:
        return [], []
    part = frame[[STEP, metric]].dropna()
    return part[STEP].tolist(), part[metric].tolist()


def has_metric(frame: pd.DataFrame, metric: str) -> bool:
    return metric in frame.columns and bool(frame[metric].notna().any())


def reward_function_names(frame: pd.DataFrame) -> list[str]:
    """Names of the reward functions logged as `rewards/<func>/mean`, in log order."""
    return [col[len("rewards/"):-len("/mean")] for col in frame.columns
            if col.startswith("rewards/") and col.endswith("/mean")]


# ---------------------------------------------------------------- building blocks

def _rgba(hex_colour: str, alpha: float) -> str:
    r, g, b = (int(hex_colour[i:i + 2], 16) for i in (1, 3, 5))
    return f"rgba({r},{g},{b},{alpha})"


def new_figure(title: str, y_title: str = "") -> go.Figure:
    """An empty figure in the workbench's template."""
    fig = go.Figure(layout=dict(template=TEMPLATE, title=dict(text=title), height=FIGURE_HEIGHT))
    fig.update_yaxes(title=dict(text=y_title, standoff=4))
    return fig


def note_figure(title: str, note: str) -> go.Figure:
    """A figure that says, in words, why there is nothing to plot."""
    fig = new_figure(title)
    fig.update_xaxes(visible=False)
    fig.update_yaxes(visible=False)
    fig.add_annotation(text=_wrap(note, 70), x=0.5, y=0.5, xref="paper", yref="paper",
                       showarrow=False, font=dict(size=13, color="#4b5563"), align="center")
    return fig


def _wrap(text: str, width: int) -> str:
    """Break a note into lines for a plotly annotation (which does not wrap)."""
    lines, line = [], ""
    for word in text.split():
        if line and len(line) + 1 + len(word) > width:
            lines.append(line)
            line = word
        else:
            line = f"{line} {word}".strip()
    lines.append(line)
    return "<br>".join(lines)


def add_line(fig: go.Figure, steps, values, name: str, colour: str, smoothing: float,
             dash: str | None = None, yaxis: str = "y", show_legend: bool = True) -> list[float]:
    """Add a metric line: raw points faint plus a smoothed line when smoothing > 0.

    Returns the values actually drawn as the line (smoothed or raw), so a band
    can follow them.
    """
    weight = check_smoothing(smoothing)
    line = dict(color=colour, width=2, dash=dash)
    if weight > 0:
        fig.add_trace(go.Scatter(x=steps, y=values, name=f"{name} (raw)", mode="lines+markers",
                                 line=dict(color=colour, width=1), marker=dict(size=4),
                                 opacity=RAW_OPACITY, showlegend=False, yaxis=yaxis, hoverinfo="skip"))
        drawn = smooth(values, weight)
    else:
        drawn = list(values)
    steps = list(steps)
    mode = "lines+markers" if len(steps) <= 60 else "lines"
    fig.add_trace(go.Scatter(x=steps, y=drawn, name=name, mode=mode, line=line, marker=dict(size=5),
                             yaxis=yaxis, showlegend=show_legend))
    _tick_every_step_when_few(fig)
    return drawn


def _tick_every_step_when_few(fig: go.Figure) -> None:
    """One tick per step when all the figure's lines span few steps; plotly's own ticks otherwise.

    Plotly's automatic ticks fall on 1.5, 2.5 ... for a few steps, and steps are
    whole numbers. The span is over every trace, so a short run overlaid on a
    long one does not put a tick on each of the long run's steps.
    """
    steps = [x for trace in fig.data for x in (trace.x or ()) if x is not None]
    short = bool(steps) and max(steps) - min(steps) <= SHORT_STEP_SPAN
    fig.update_xaxes(dtick=1 if short else None)


def add_band(fig: go.Figure, steps, lower, upper, colour: str, name: str, yaxis: str = "y") -> None:
    """Shade the area between `lower` and `upper` (a std or min-max band)."""
    if not steps:
        return
    # mode "lines": plotly's default for a short trace adds markers, which would dot the band's corners.
    fig.add_trace(go.Scatter(x=list(steps) + list(steps)[::-1], y=list(upper) + list(lower)[::-1], mode="lines",
                             fill="toself", fillcolor=_rgba(colour, BAND_OPACITY), line=dict(width=0),
                             name=name, hoverinfo="skip", showlegend=False, yaxis=yaxis))


def add_fraction_axis(fig: go.Figure, title: str) -> None:
    """A right-hand 0-100 % axis for a share (clipped ratio, groups without signal)."""
    fig.update_layout(
        yaxis2=dict(overlaying="y", side="right", range=[0, 1.05], tickvals=[0, 0.25, 0.5, 0.75, 1],
                    tickformat=".0%", showgrid=False, zeroline=False, title=dict(text=title, standoff=4)),
        margin=dict(r=60),
    )


def _aligned(frame: pd.DataFrame, metric: str, other: str) -> tuple[list, list, list]:
    """Steps where both metrics are present, with both value lists."""
    part = frame[[STEP, metric, other]].dropna()
    return part[STEP].tolist(), part[metric].tolist(), part[other].tolist()


def _mean_with_std_band(fig, frame, mean_col, std_col, name, colour, smoothing) -> None:
    steps, values = _series(frame, mean_col)
    drawn = add_line(fig, steps, values, name, colour, smoothing)
    if std_col in frame.columns:
        band_steps, _, stds = _aligned(frame, mean_col, std_col)
        centre = dict(zip(steps, drawn))
        mids = [centre[s] for s in band_steps]
        add_band(fig, band_steps, [m - s for m, s in zip(mids, stds)],
                 [m + s for m, s in zip(mids, stds)], colour, f"{name} ± std")


# ---------------------------------------------------------------- the figures

def reward_figure(records, smoothing: float = 0.0) -> go.Figure:
    """Total reward and each reward function's mean, each with a ± std band."""
    frame = metrics_frame(records)
    title = "Reward (mean ± std over the completions of a step)"
    if not has_metric(frame, "reward"):
        return note_figure(title, WAITING_NOTE if frame.empty else "This run logged no `reward`.")
    fig = new_figure(title, "reward")
    _mean_with_std_band(fig, frame, "reward", "reward_std", "total", PALETTE[0], smoothing)
    for i, func in enumerate(reward_function_names(frame), start=1):
        _mean_with_std_band(fig, frame, f"rewards/{func}/mean", f"rewards/{func}/std", func,
                            PALETTE[i % len(PALETTE)], smoothing)
    return fig


def reward_std_figure(records, smoothing: float = 0.0) -> go.Figure:
    """Spread of rewards, and the share of groups whose rewards were all equal."""
    frame = metrics_frame(records)
    title = "Reward spread and groups with no signal"
    if not (has_metric(frame, "reward_std") or has_metric(frame, "frac_reward_zero_std")):
        return note_figure(title, WAITING_NOTE if frame.empty else "This run logged no `reward_std`.")
    fig = new_figure(title, "reward std")
    fig.update_yaxes(rangemode="tozero")
    add_line(fig, *_series(frame, "reward_std"), "reward_std", PALETTE[0], smoothing)
    if has_metric(frame, "frac_reward_zero_std"):
        add_line(fig, *_series(frame, "frac_reward_zero_std"), "frac_reward_zero_std (right)",
                 PALETTE[4], smoothing, dash="dot", yaxis="y2")
        add_fraction_axis(fig, "fraction of groups")
    return fig


def completion_length_figure(records, smoothing: float = 0.0) -> go.Figure:
    """Mean completion length with its min-max band, and the clipped ratio on the right."""
    frame = metrics_frame(records)
    title = "Completion length (tokens)"
    mean_col = "completions/mean_length"
    if not has_metric(frame, mean_col):
        return note_figure(title, WAITING_NOTE if frame.empty else "This run logged no completion lengths.")
    fig = new_figure(title, "tokens")
    fig.update_yaxes(rangemode="tozero")
    colour = PALETTE[0]
    steps, _ = _series(frame, mean_col)
    if {"completions/min_length", "completions/max_length"} <= set(frame.columns):
        part = frame[[STEP, "completions/min_length", "completions/max_length"]].dropna()
        add_band(fig, part[STEP].tolist(), part["completions/min_length"].tolist(),
                 part["completions/max_length"].tolist(), colour, "min-max")
        # An invisible trace so the legend explains the shaded band.
        fig.add_trace(go.Scatter(x=[None], y=[None], mode="lines", name="min-max",
                                 line=dict(color=_rgba(colour, 0.4), width=8)))
    add_line(fig, *_series(frame, mean_col), "mean", colour, smoothing)
    if has_metric(frame, "completions/clipped_ratio"):
        add_line(fig, *_series(frame, "completions/clipped_ratio"), "clipped ratio (right)", PALETTE[4],
                 smoothing, dash="dot", yaxis="y2")
        add_fraction_axis(fig, "hit max length")
    return fig


def clip_ratio_figure(records, smoothing: float = 0.0) -> go.Figure:
    """Share of tokens whose probability ratio was clipped (PPO-style trust region)."""
    frame = metrics_frame(records)
    title = "Clip ratio (share of tokens clipped)"
    columns = [("clip_ratio/region_mean", "region"), ("clip_ratio/low_mean", "low"),
               ("clip_ratio/high_mean", "high")]
    present = [(col, label) for col, label in columns if has_metric(frame, col)]
    if not present:
        return note_figure(title, WAITING_NOTE if frame.empty else "This run logged no clip ratio.")
    fig = new_figure(title, "fraction")
    fig.update_yaxes(rangemode="tozero")
    for i, (col, label) in enumerate(present):
        add_line(fig, *_series(frame, col), label, PALETTE[i], smoothing, dash=None if i == 0 else "dot")
    if all((frame[col].dropna() == 0).all() for col, _ in present):
        fig.update_yaxes(range=[0, 0.1])
        fig.add_annotation(text=_wrap("0 throughout: with num_iterations = 1 each batch is used once, so the "
                                      "probability ratio is exactly 1 and nothing is clipped.", 80),
                           x=0.5, y=0.6, xref="paper", yref="paper", showarrow=False,
                           font=dict(size=11, color="#4b5563"))
    return fig


def metric_figure(records, metric: str, title: str, y_title: str = "", smoothing: float = 0.0,
                  colour: str = PALETTE[0], log_y: bool = False, from_zero: bool = False) -> go.Figure:
    """One metric as a line (with faint raw points when smoothed), or a note if absent."""
    frame = metrics_frame(records)
    if not has_metric(frame, metric):
        note = WAITING_NOTE if frame.empty else MISSING_NOTES.get(metric, f"This run logged no `{metric}`.")
        return note_figure(title, note)
    fig = new_figure(title, y_title)
    add_line(fig, *_series(frame, metric), metric, colour, smoothing, show_legend=False)
    if log_y:
        fig.update_yaxes(type="log")
    elif from_zero:
        fig.update_yaxes(rangemode="tozero")
    return fig


def kl_figure(records, smoothing: float = 0.0) -> go.Figure:
    return metric_figure(records, "kl", "KL to the base model", "kl", smoothing, PALETTE[3], from_zero=True)


def loss_figure(records, smoothing: float = 0.0) -> go.Figure:
    fig = metric_figure(records, "loss", "Loss", "loss", smoothing, PALETTE[1])
    if fig.data:
        # A zero line helps read the grpo loss: with one iteration it hovers around 0 by construction.
        fig.add_hline(y=0, line=dict(color="#9ca3af", width=1, dash="dot"))
    return fig


def entropy_figure(records, smoothing: float = 0.0) -> go.Figure:
    return metric_figure(records, "entropy", "Entropy of the policy (nats per token)", "entropy",
                         smoothing, PALETTE[2])


def grad_norm_figure(records, smoothing: float = 0.0) -> go.Figure:
    return metric_figure(records, "grad_norm", "Gradient norm", "grad norm", smoothing, PALETTE[5], from_zero=True)


def learning_rate_figure(records, smoothing: float = 0.0) -> go.Figure:
    # Smoothing a schedule would only blur it: always raw.
    fig = metric_figure(records, "learning_rate", "Learning rate", "lr", 0.0, PALETTE[6], from_zero=True)
    fig.update_yaxes(exponentformat="e")
    return fig


def step_time_figure(records, smoothing: float = 0.0) -> go.Figure:
    return metric_figure(records, "step_time", "Step time (seconds)", "s", smoothing, PALETTE[7], from_zero=True)


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
}


def build_figures(records, smoothing: float = 0.0, names: Iterable[str] | None = None) -> dict[str, go.Figure]:
    """The dashboard figures for one run, keyed as in FIGURE_BUILDERS (all of them, or those `names`)."""
    records = list(records)
    check_smoothing(smoothing)
    wanted = FIGURE_BUILDERS if names is None else list(names)
    return {name: FIGURE_BUILDERS[name](records, smoothing) for name in wanted}


def overlay_runs(runs: Mapping[str, Iterable[Mapping]], metric: str, smoothing: float = 0.0) -> go.Figure:
    """One metric of several runs on one figure, one line per run (name -> records).

    Runs that did not log the metric are named in a note under the title.
    """
    weight = check_smoothing(smoothing)
    title = f"{metric}: runs compared"
    if not runs:
        return note_figure(title, "Pick one or more runs to compare.")
    frames = {name: metrics_frame(records) for name, records in runs.items()}
    missing = [name for name, frame in frames.items() if not has_metric(frame, metric)]
    if len(missing) == len(frames):
        return note_figure(title, MISSING_NOTES.get(metric, f"None of these runs logged `{metric}`."))
    if missing:
        # Said under the title rather than on the plot, where it could cover a line.
        title += f"<br><sup>not logged by: {', '.join(missing)}</sup>"
    fig = new_figure(title, metric)
    for i, (name, frame) in enumerate(frames.items()):
        if name not in missing:
            add_line(fig, *_series(frame, metric), name, PALETTE[i % len(PALETTE)], weight)
    return fig
