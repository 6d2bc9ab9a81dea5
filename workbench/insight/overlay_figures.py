"""Figures that lay one series over another: a metric of several runs on one axis (the Runs tab's comparison),
and a run's held-out accuracy over its training reward.

Drawn with `figure_drawing`'s building blocks and template, so they look like the one-run figures beside them;
pure functions of the records, like those.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import pandas as pd
import plotly.graph_objects as go

from workbench.insight.figure_drawing import (
    PALETTE,
    Drawing,
    add_band,
    add_fraction_axis,
    add_line,
    check_smoothing,
    note_figure,
)
from workbench.insight.figures import MISSING_NOTES
from workbench.insight.metric_frames import frame_of, has_metric, metric_steps


def overlay_runs(runs: Mapping[str, Iterable[Mapping]], metric: str, smoothing: float = 0.0) -> go.Figure:
    """One metric of several runs on one figure, one line per run (name -> records, or their metrics_frame).

    Runs that did not log the metric are named in a note under the title. A held-out figure with its bootstrap
    spread (`held_out/<name>_std`, `eval_results.as_metrics`) gets ± one spread as a band.
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
            colour = PALETTE[i % len(PALETTE)]
            add_line(drawing, *metric_steps(frame, metric), name, colour, weight)
            if metric.startswith("held_out/") and has_metric(frame, f"{metric}_std"):  # not reward's reward_std
                _spread_band(drawing, frame[["step", metric, f"{metric}_std"]].dropna(), metric, colour, name)
    return drawing.figure()


def _spread_band(drawing: Drawing, rows: pd.DataFrame, metric: str, colour: str, name: str, yaxis: str = "y") -> None:
    """The band of ± one bootstrap spread around a held-out figure."""
    centre, spread = rows[metric].to_numpy(dtype=float), rows[f"{metric}_std"].to_numpy(dtype=float)
    add_band(drawing, rows["step"].to_numpy(), centre - spread, centre + spread, colour, f"{name} ± std", yaxis)


HELD_OUT_TITLE = "Held-out accuracy (right) beside the training reward"
NO_EVAL_NOTE = (
    "This run evaluates no held-out prompts. Train with eval_strategy=steps (and eval_steps, eval_size) "
    "to see whether a rising reward means right answers on prompts it never trained on."
)
EVAL_WAITING_NOTE = "No evaluation yet: the first, of the base model at step 0, lands before the first update."


def held_out_figure(eval_records: list[Mapping], records, smoothing: float = 0.0, evaluates: bool = True) -> go.Figure:
    """Held-out accuracy, pass@k and, with k >= 2 samples, mean@k and maj@k with their bootstrap spreads as bands
    (eval.jsonl, right-hand 0-100 % axis) on the training reward's step axis; best@k, a total reward, on the
    training reward's own axis, with its band.

    `eval_records`: one per evaluation in step order (`insight.eval_results.read_evals`); `records` the run's
    metrics (or their frame); `evaluates`: whether the run's config turns evaluation on (which note to show).
    """
    if not eval_records:
        return note_figure(HELD_OUT_TITLE, EVAL_WAITING_NOTE if evaluates else NO_EVAL_NOTE)
    frame = frame_of(records if isinstance(records, pd.DataFrame) else list(records))
    drawing = Drawing(HELD_OUT_TITLE, "training reward")
    if has_metric(frame, "reward"):
        add_line(drawing, *metric_steps(frame, "reward"), "training reward", PALETTE[0], smoothing)
    k = eval_records[-1].get("k")
    held_out = pd.DataFrame([{"step": r["step"], **{key: r.get(key) for key in HELD_OUT_KEYS}} for r in eval_records])
    for key, name, colour, dash, axis in (
        ("accuracy", "held-out accuracy", PALETTE[2], None, "y2"),
        ("pass_at_k", f"pass@{k}", PALETTE[3], "dot", "y2"),
        ("mean_at_k", f"mean@{k}", PALETTE[4], "dash", "y2"),
        ("maj_at_k", f"maj@{k}", PALETTE[5], "dashdot", "y2"),
        ("best_at_k", f"best@{k} (total reward)", PALETTE[1], "longdash", "y"),
    ):
        values = pd.to_numeric(held_out[key], errors="coerce")
        if values.notna().any():
            label = f"{name} (right)" if axis == "y2" else name
            add_line(
                drawing,
                held_out["step"].to_numpy(),
                values.to_numpy(dtype=float),
                label,
                colour,
                0.0,
                dash=dash,
                yaxis=axis,
            )
            spread = f"{key}_std"
            if spread in held_out and pd.to_numeric(held_out[spread], errors="coerce").notna().any():
                rows = held_out[["step", key, spread]].apply(pd.to_numeric, errors="coerce").dropna()
                _spread_band(drawing, rows, key, colour, label, axis)
    if eval_records[-1].get("maj_at_k_note"):
        drawing.layout["title"]["text"] += f"<br><sup>{eval_records[-1]['maj_at_k_note']}</sup>"
    add_fraction_axis(drawing, "share of held-out prompts")
    return drawing.figure()


HELD_OUT_KEYS = (
    "accuracy",
    "pass_at_k",
    *(f"{n}{s}" for n in ("mean_at_k", "maj_at_k", "best_at_k") for s in ("", "_std")),
)
