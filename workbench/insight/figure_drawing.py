"""Drawing a figure: the workbench's plotly template and palette, and the blocks every figure is built from.

A `Drawing` keeps a figure's traces and layout as plain values and makes the go.Figure once, without
plotly's checks and copies at every added trace. `add_line` draws a metric's line, faint raw points under it
when smoothed (`smooth`: an exponential moving average weight in [0, 0.99], computed over every point); a
line of more than MAX_POINTS points is drawn through the highest and lowest point of each of MAX_POINTS / 2
slices of it (`thin`): a figure that wide shows no more, a spike stays visible, and a 10,000-step run costs
the server and the browser what an 800-step one does. `note_figure` says in words why there is nothing to
plot; `figure_json` is the JSON the page draws.

The metric figures (`figures`) and those that lay one series over another (`overlay_figures`) are drawn
with these, so every figure looks alike. No torch or gradio here: importable by the UI process and by notebooks.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import orjson
import pandas as pd
import plotly.graph_objects as go

from workbench.errors import WorkbenchError

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

# Light, sized for about 600 x 300 px, with the legend above the plot area so it never covers data.
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


# ---------------------------------------------------------------- smoothing


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


# ---------------------------------------------------------------- building blocks


def rgba(hex_colour: str, alpha: float) -> str:
    """A palette colour (`#rrggbb`) made see-through, for bands and the legend's swatch of one."""
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
    the figures built with it write every property, in the form plotly's own checks give
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
            text=wrap_note(note, 70),
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


def wrap_note(text: str, width: int) -> str:
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
        fillcolor=rgba(colour, BAND_OPACITY),
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
