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
legend above the plot area so it never covers data. A line of more than
MAX_POINTS points is drawn through the highest and lowest point of each of
MAX_POINTS / 2 slices of it (`thin`): a figure that wide shows no more, a
spike stays visible, and a 10,000-step run costs the server and the browser
what an 800-step one does. Smoothing is computed over every point first.
Each figure is assembled as plain values and made once (`Drawing`), without
plotly's checks and copies at every added trace.

A builder takes the records or their `metrics_frame`; `build_figures` makes
the frame once for all figures, and a page that keeps the frame of the
records it has (`metrics_frame(records, previous=...)`) adds one row a step.

The figures that lay one series over another (several runs, held-out accuracy over the reward) are
`overlay_figures`, built from the blocks here.

No torch or gradio here: importable by the UI process and by notebooks.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Callable, Iterable, Mapping, Sequence

import numpy as np
import orjson
import pandas as pd
import plotly.graph_objects as go

from workbench.errors import WorkbenchError
from workbench.spec.run_records import metric_problem, well_formed

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
# Points a line or band is drawn through at most (see `thin`): two per pixel of a figure's plot area.
MAX_POINTS = 800
# Set on a frame whose rows are its records, one each and in their order (nothing dropped or reordered).
ROWS_ARE_RECORDS = "rows_are_records"

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
        legend=dict(
            orientation="h",
            x=0,
            xanchor="left",
            y=1.0,
            yanchor="bottom",
            bgcolor="rgba(255,255,255,0)",
            font=dict(size=11),
        ),
        xaxis=dict(
            title=dict(text="step", standoff=4),
            gridcolor=GRID,
            zeroline=False,
            linecolor="#9ca3af",
            ticks="outside",
            tickcolor="#9ca3af",
        ),
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
    "held_out/accuracy": "None of these runs evaluates held-out prompts: train with eval_strategy=steps (and "
    "eval_steps, eval_size) to compare their held-out accuracy.",
    "held_out/pass_at_k": "None of these runs sampled held-out answers: train with eval_strategy=steps and "
    "eval_pass_k (e.g. 4) to compare their pass@k.",
}


# ---------------------------------------------------------------- data shaping


def metrics_frame(records: Iterable[Mapping], previous: tuple[list, pd.DataFrame | None] | None = None) -> pd.DataFrame:
    """Metric records as a DataFrame: one row per step, sorted, numbers only.

    A record without `step` takes its position (1-based). When a step appears
    twice the later record wins; records read from a resumed run's file go
    through `resumed.merge_metrics` first, which also drops the later steps
    logged before the resume. Values that are not numbers (None, text) become
    NaN, so a figure shows a gap, not an error; a record of the wrong shape
    (`spec.run_records.metric_problem`: not an object, a step that is not a
    number, a list for a value) is left out.

    `previous` is (records, frame) of an earlier call. When these records are
    those same record objects with more appended, or with the last one
    replaced (how `merge_metrics` grows a run's list), only the rows of the
    new ones are built; otherwise, or when that frame had to drop or reorder
    records, the frame is built anew. Either way the result is the same.
    """
    records = records if isinstance(records, list) else list(records)
    if previous is not None:
        frame = _extend_frame(records, *previous)
        if frame is not None:
            return frame
    return _build_frame(records)


def _build_frame(records: list, first_position: int = 1) -> pd.DataFrame:
    kept = well_formed(records, metric_problem)
    rows = []
    for position, record in enumerate(kept, start=first_position):
        row = dict(record)
        row.setdefault(STEP, position)
        rows.append(row)
    if not rows:
        frame = pd.DataFrame({STEP: pd.Series(dtype="float64")})
        frame.attrs[ROWS_ARE_RECORDS] = not records
        return frame
    frame = pd.DataFrame(rows)
    # Columns pandas already holds as numbers (or booleans) are what to_numeric would give back.
    odd = [name for name, dtype in frame.dtypes.items() if dtype.kind not in "iufb"]
    if odd:
        frame[odd] = frame[odd].apply(pd.to_numeric, errors="coerce")
    frame = frame[frame[STEP].notna()]
    in_order = len(frame) == len(rows) == len(records) and frame[STEP].is_monotonic_increasing and frame[STEP].is_unique
    if not in_order:
        frame = frame.drop_duplicates(subset=STEP, keep="last").sort_values(STEP, kind="stable")
    frame = frame.reset_index(drop=True)
    frame.attrs[ROWS_ARE_RECORDS] = bool(in_order)
    return frame


def _extend_frame(records: list, old_records, old_frame) -> pd.DataFrame | None:
    """The frame of `records` from that of `old_records`, building only the new rows; None when it cannot."""
    if (
        old_frame is None
        or not isinstance(old_records, list)
        or not old_frame.attrs.get(ROWS_ARE_RECORDS)
        or len(old_frame) != len(old_records)
    ):
        return None
    shared = len(old_records)
    if len(records) < shared or (shared and records[shared - 1] is not old_records[shared - 1]):
        shared -= 1  # the last record merged with a newer one for the same step
    if shared < 0 or len(records) < shared or not all(map(operator.is_, records[:shared], old_records[:shared])):
        return None
    if shared == len(records) == len(old_records):
        return old_frame
    added = _build_frame(records[shared:], first_position=shared + 1)
    if not added.attrs[ROWS_ARE_RECORDS] or len(added) != len(records) - shared:
        return None
    if shared and len(added) and added[STEP].iloc[0] <= old_frame[STEP].iloc[shared - 1]:
        return None
    kept = old_frame.iloc[:shared]
    frame = pd.concat([kept, added], ignore_index=True) if shared else added
    frame.attrs[ROWS_ARE_RECORDS] = True
    return frame


def frame_of(records) -> pd.DataFrame:
    """`records` if they already are a metrics frame, else their frame."""
    return records if isinstance(records, pd.DataFrame) else metrics_frame(records)


def check_smoothing(smoothing: float) -> float:
    """`smoothing` as a float in [0, 0.99], or a ValueError saying how to fix it."""
    try:
        value = float(smoothing)
    except (TypeError, ValueError):
        raise WorkbenchError(
            f"smoothing: got {smoothing!r}; it must be a number from 0 to {MAX_SMOOTHING} "
            f"(0 = raw values, 0.9 = strong smoothing)"
        ) from None
    if not 0.0 <= value <= MAX_SMOOTHING:
        raise WorkbenchError(
            f"smoothing: got {value}; it must be from 0 to {MAX_SMOOTHING} "
            f"(1 would freeze the line at its first value); use e.g. 0.6"
        )
    return value


def smooth(values: Sequence[float], smoothing: float) -> list[float]:
    """Exponential moving average: s[0] = x[0], s[t] = w * s[t-1] + (1 - w) * x[t].

    NaN inputs stay NaN in the output and do not disturb the average, so a
    missing point is a gap rather than a dip.
    """
    return _smoothed(values, check_smoothing(smoothing)).tolist()


def _smoothed(values: Sequence[float], weight: float) -> np.ndarray:
    # pandas' ewm runs this very recurrence in compiled code (bit for bit the same numbers); where
    # an input is NaN it carries the average on, so those points are set back to NaN.
    series = pd.Series(np.asarray(values, dtype="float64"))
    if weight == 0:
        return series.to_numpy()
    out = series.ewm(alpha=1.0 - weight, adjust=False, ignore_na=True).mean().to_numpy().copy()
    out[series.isna().to_numpy()] = np.nan
    return out


def metric_steps(frame: pd.DataFrame, metric: str) -> tuple[np.ndarray, np.ndarray]:
    """(steps, values) of one metric with its missing points dropped."""
    if metric not in frame.columns:
        return np.empty(0), np.empty(0)
    column = frame[metric]
    present = column.notna().to_numpy()
    return frame[STEP].to_numpy()[present], column.to_numpy()[present]


def has_metric(frame: pd.DataFrame, metric: str) -> bool:
    return metric in frame.columns and bool(frame[metric].notna().any())


def reward_function_names(frame: pd.DataFrame) -> list[str]:
    """Names of the reward functions logged as `rewards/<func>/mean`, in log order."""
    return [
        col[len("rewards/") : -len("/mean")]
        for col in frame.columns
        if col.startswith("rewards/") and col.endswith("/mean")
    ]


# ---------------------------------------------------------------- building blocks


def _rgba(hex_colour: str, alpha: float) -> str:
    r, g, b = (int(hex_colour[i : i + 2], 16) for i in (1, 3, 5))
    return f"rgba({r},{g},{b},{alpha})"


def new_figure(title: str, y_title: str = "") -> go.Figure:
    """An empty figure in the workbench's template (for figures of one's own, as the notebooks draw)."""
    fig = go.Figure(layout=dict(template=TEMPLATE, title=dict(text=title), height=FIGURE_HEIGHT))
    fig.update_yaxes(title=dict(text=y_title, standoff=4))
    return fig


class Drawing:
    """A figure being drawn: its traces and layout kept as plain values, made into a go.Figure once, at the end.

    Plotly checks and copies a whole figure on every `add_trace` and axis
    update, which cost ten times what drawing a run's curves does; a Drawing
    builds the figure in one go, without those checks (`_validate=False`):
    this module writes every property, in the form plotly's own checks give
    (nested dicts, tuples for ranges), and the tests build and serialise
    every figure.
    """

    def __init__(self, title: str, y_title: str = ""):
        self.traces: list = []
        self.layout: dict = {
            "template": TEMPLATE,
            "title": {"text": title},
            "height": FIGURE_HEIGHT,
            "xaxis": {},
            "yaxis": {"title": {"text": y_title, "standoff": 4}},
        }
        self.annotations: list[dict] = []
        self.shapes: list[dict] = []

    def add_trace(self, **properties) -> None:
        self.traces.append(go.Scatter(**properties, _validate=False))

    def figure(self) -> go.Figure:
        layout = dict(self.layout, xaxis=dict(self.layout["xaxis"]))
        if self.annotations:
            layout["annotations"] = self.annotations
        if self.shapes:
            layout["shapes"] = self.shapes
        if "dtick" not in layout["xaxis"] and _spans_few_steps(self.traces):
            layout["xaxis"]["dtick"] = 1
        if not layout["xaxis"]:
            del layout["xaxis"]
        return go.Figure(data=self.traces, layout=layout, _validate=False)


def figure_json(fig: go.Figure) -> str:
    """The figure's JSON as `fig.to_json()` writes it, but with arrays as plain lists of numbers, and faster.

    Plotly packs numpy arrays (base64): the page draws them, but keeps them
    packed in the figure's `data`, which the page's own readers (and the
    browser tests) read as arrays; and it deep-copies the whole figure first.
    """
    spec = {"data": [trace.to_plotly_json() for trace in fig.data], "layout": fig.layout.to_plotly_json()}
    return orjson.dumps(spec, default=_plain, option=orjson.OPT_SERIALIZE_NUMPY).decode()


def _plain(value):
    if hasattr(value, "to_plotly_json"):  # a plotly object inside the layout (the template)
        return value.to_plotly_json()
    if isinstance(value, np.generic):
        return value.item()
    raise TypeError(f"{type(value).__name__} is not JSON")


def note_figure(title: str, note: str) -> go.Figure:
    """A figure that says, in words, why there is nothing to plot."""
    drawing = Drawing(title)
    drawing.layout["xaxis"]["visible"] = False
    drawing.layout["yaxis"]["visible"] = False
    drawing.annotations.append(
        dict(
            text=_wrap(note, 70),
            x=0.5,
            y=0.5,
            xref="paper",
            yref="paper",
            showarrow=False,
            font=dict(size=13, color="#4b5563"),
            align="center",
        )
    )
    return drawing.figure()


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


def thin(high: Sequence[float], low: Sequence[float] | None = None, max_points: int = MAX_POINTS) -> np.ndarray | None:
    """Indices of the points to draw of a line (`high` = `low` = its values) or a band; None: draw them all.

    Beyond `max_points` points the line is cut into (max_points - 2) / 2
    slices and each keeps the point where `high` is highest and the one where
    `low` is lowest, in step order, plus the first and last point: the drawing
    keeps every spike and dip a figure a few hundred pixels wide can show.
    """
    count = len(high)
    if count <= max_points:
        return None
    size = math.ceil(count / ((max_points - 2) // 2))
    slices = math.ceil(count / size)
    padded = slices * size

    def extreme(values, pad, pick):
        array = np.full(padded, pad, dtype="float64")
        array[:count] = np.asarray(values, dtype="float64")
        return pick(array.reshape(slices, size), axis=1) + np.arange(slices) * size

    keep = [
        np.array([0, count - 1]),
        extreme(high, -np.inf, np.argmax),
        extreme(high if low is None else low, np.inf, np.argmin),
    ]
    indices = np.sort(np.concatenate(keep))
    indices = indices[indices < count]
    return indices[np.r_[True, indices[1:] != indices[:-1]]]  # each once


def _points(values, indices: np.ndarray | None = None) -> np.ndarray:
    """The values drawn, as an array (plotly takes arrays without copying each number); whole steps as
    integers (they go to the page as `1`, not `1.0`)."""
    array = np.asarray(values)
    if array.dtype.kind not in "iuf":
        array = array.astype("float64")
    if indices is not None:
        array = array[indices]
    if (
        array.dtype.kind == "f"
        and len(array)
        and np.isfinite(array).all()
        and (array == np.round(array)).all()
        and np.abs(array).max() < 2**31
    ):
        array = array.astype("int32")
    elif array.dtype.kind in "iu" and (not len(array) or np.abs(array).max() < 2**31):
        array = array.astype("int32")
    return array


def add_line(
    drawing: Drawing,
    steps,
    values,
    name: str,
    colour: str,
    smoothing: float,
    dash: str | None = None,
    yaxis: str = "y",
    show_legend: bool = True,
) -> np.ndarray:
    """Add a metric line: raw points faint plus a smoothed line when smoothing > 0.

    Returns the values of every point of the line (smoothed or raw), so a
    band can follow them; the figure draws at most MAX_POINTS of them.
    """
    weight = check_smoothing(smoothing)
    line = dict(color=colour, width=2, dash=dash) if dash else dict(color=colour, width=2)
    values = np.asarray(values, dtype="float64")
    if weight > 0:
        shown = thin(values)
        drawing.add_trace(
            x=_points(steps, shown),
            y=_points(values, shown),
            name=f"{name} (raw)",
            mode="lines+markers",
            line=dict(color=colour, width=1),
            marker=dict(size=4),
            opacity=RAW_OPACITY,
            showlegend=False,
            yaxis=yaxis,
            hoverinfo="skip",
        )
        drawn = _smoothed(values, weight)
    else:
        drawn = values
    mode = "lines+markers" if len(drawn) <= 60 else "lines"
    shown = thin(drawn)
    drawing.add_trace(
        x=_points(steps, shown),
        y=_points(drawn, shown),
        name=name,
        mode=mode,
        line=line,
        marker=dict(size=5),
        yaxis=yaxis,
        showlegend=show_legend,
    )
    return drawn


def _spans_few_steps(traces) -> bool:
    """Whether all the lines span few steps: then each step gets a tick; plotly's own ticks otherwise.

    Plotly's automatic ticks fall on 1.5, 2.5 ... for a few steps, and steps are
    whole numbers. The span is over every trace, so a short run overlaid on a
    long one does not put a tick on each of the long run's steps.
    """
    ends = []
    for trace in traces:
        steps = np.asarray(trace.x if trace.x is not None else (), dtype="float64")
        steps = steps[~np.isnan(steps)]
        if len(steps):
            ends += [steps.min(), steps.max()]
    return bool(ends) and max(ends) - min(ends) <= SHORT_STEP_SPAN


def add_band(drawing: Drawing, steps, lower, upper, colour: str, name: str, yaxis: str = "y") -> None:
    """Shade the area between `lower` and `upper` (a std or min-max band)."""
    if not len(steps):
        return
    shown = thin(upper, lower)
    steps, lower, upper = _points(steps, shown), _points(lower, shown), _points(upper, shown)
    # mode "lines": plotly's default for a short trace adds markers, which would dot the band's corners.
    drawing.add_trace(
        x=np.concatenate([steps, steps[::-1]]),
        y=np.concatenate([upper, lower[::-1]]),
        mode="lines",
        fill="toself",
        fillcolor=_rgba(colour, BAND_OPACITY),
        line=dict(width=0),
        name=name,
        hoverinfo="skip",
        showlegend=False,
        yaxis=yaxis,
    )


def add_fraction_axis(drawing: Drawing, title: str) -> None:
    """A right-hand 0-100 % axis for a share (clipped ratio, groups without signal)."""
    drawing.layout["yaxis2"] = dict(
        overlaying="y",
        side="right",
        range=(0, 1.05),
        tickvals=(0, 0.25, 0.5, 0.75, 1),
        tickformat=".0%",
        showgrid=False,
        zeroline=False,
        title=dict(text=title, standoff=4),
    )
    drawing.layout["margin"] = dict(r=60)


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
        drawing.add_trace(
            x=[None], y=[None], mode="lines", name="min-max", line=dict(color=_rgba(colour, 0.4), width=8)
        )
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
                text=_wrap(
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
    """The dashboard figures for one run (its records or their metrics_frame), keyed as in FIGURE_BUILDERS
    (all of them, or those `names`)."""
    frame = frame_of(records if isinstance(records, pd.DataFrame) else list(records))
    check_smoothing(smoothing)
    wanted = FIGURE_BUILDERS if names is None else list(names)
    return {name: FIGURE_BUILDERS[name](frame, smoothing) for name in wanted}
