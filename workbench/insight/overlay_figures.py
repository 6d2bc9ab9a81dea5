"""Figures that lay one series over another: a metric of several runs on one axis (the Runs tab's comparison),
and a run's held-out accuracy over its training reward.

Drawn with `figure_drawing`'s building blocks and template, so they look like the one-run figures beside them;
pure functions of the records, like those.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping

import pandas as pd
import plotly.graph_objects as go

from workbench.insight.figure_drawing import (
    PALETTE,
    Drawing,
    add_fraction_axis,
    add_line,
    check_smoothing,
    note_figure,
)
from workbench.insight.figures import MISSING_NOTES
from workbench.insight.metric_frames import frame_of, has_metric, metric_steps


def overlay_runs(runs: Mapping[str, Iterable[Mapping]], metric: str, smoothing: float = 0.0) -> go.Figure:
    """One metric of several runs on one figure, one line per run (name -> records, or their metrics_frame).

    Runs that did not log the metric are named in a note under the title.
    """
    weight = check_smoothing(smoothing)
    title = f"{metric}: runs compared"
    if not runs:
        return note_figure(title, "Pick one or more runs to compare.")
    frames = {name: frame_of(records) for name, records in runs.items()}
    missing = [name for name, frame in frames.items() if not has_metric(frame, metric)]
    if len(missing) == len(frames):
        return note_figure(title, MISSING_NOTES.get(metric, f"None of these runs logged `{metric}`."))
    if missing:
        # Said under the title rather than on the plot, where it could cover a line.
        title += f"<br><sup>not logged by: {', '.join(missing)}</sup>"
    drawing = Drawing(title, metric)
    for i, (name, frame) in enumerate(frames.items()):
        if name not in missing:
            add_line(drawing, *metric_steps(frame, metric), name, PALETTE[i % len(PALETTE)], weight)
    return drawing.figure()


HELD_OUT_TITLE = "Held-out accuracy (right) beside the training reward"
NO_EVAL_NOTE = (
    "This run evaluates no held-out prompts. Train with eval_strategy=steps (and eval_steps, eval_size) "
    "to see whether a rising reward means right answers on prompts it never trained on."
)
EVAL_WAITING_NOTE = "No evaluation yet: the first, of the base model at step 0, lands before the first update."


def held_out_figure(eval_records: list[Mapping], records, smoothing: float = 0.0, evaluates: bool = True) -> go.Figure:
    """Held-out accuracy and pass@k (eval.jsonl, right-hand 0-100 % axis) on the training reward's step axis.

    `eval_records`: one per evaluation in step order (`insight.eval_results.read_evals`); `records` the run's
    metrics (or their frame); `evaluates`: whether the run's config turns evaluation on (which note to show).
    """
    if not eval_records:
        return note_figure(HELD_OUT_TITLE, EVAL_WAITING_NOTE if evaluates else NO_EVAL_NOTE)
    frame = frame_of(records if isinstance(records, pd.DataFrame) else list(records))
    drawing = Drawing(HELD_OUT_TITLE, "training reward")
    if has_metric(frame, "reward"):
        add_line(drawing, *metric_steps(frame, "reward"), "training reward", PALETTE[0], smoothing)
    steps = [record["step"] for record in eval_records]
    for key, name, colour, dash in (
        ("accuracy", "held-out accuracy", PALETTE[2], None),
        ("pass_at_k", f"pass@{eval_records[-1].get('k')}", PALETTE[3], "dot"),
    ):
        values = [record.get(key) for record in eval_records]
        if any(value is not None for value in values):
            add_line(
                drawing,
                steps,
                [math.nan if v is None else v for v in values],
                f"{name} (right)",
                colour,
                0.0,
                dash=dash,
                yaxis="y2",
            )
    add_fraction_axis(drawing, "share of held-out prompts")
    return drawing.figure()
