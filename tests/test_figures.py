"""Figures from metric records: frame shaping, smoothing math, notes for missing metrics."""

import json
import math
import subprocess
import sys

import pytest

from workbench.insight import figures, overlay_figures

# The dashboard's pure modules: the UI process and notebooks import them without torch or gradio.
PURE_MODULES = (
    "workbench.insight.figures",
    "workbench.insight.groups",
    "workbench.insight.health",
    "workbench.spec.memory",
    "workbench.ui.completions_view",
)


def make_metrics(steps=5, reward_funcs=("brevity",), beta=0.04, **overrides):
    """Records as the training process writes them: TRL's names, one dict per logging step.

    `beta=0` leaves out `kl`, as TRL does; `overrides` replace a metric by a
    value or a function of the step (None removes it).
    """
    records = []
    for step in range(1, steps + 1):
        reward = 0.2 + 0.1 * step
        record = {
            "step": step,
            "epoch": step / steps,
            "loss": 0.01 * (-1) ** step,
            "grad_norm": 0.5 + 0.1 * step,
            "learning_rate": 1e-3 * (1 - step / (steps + 1)),
            "num_tokens": 400.0 * step,
            "reward": reward,
            "reward_std": 0.2,
            "frac_reward_zero_std": 0.0,
            "entropy": 1.5 - 0.05 * step,
            "completions/mean_length": 30.0 - step,
            "completions/min_length": 5.0,
            "completions/max_length": 48.0,
            "completions/clipped_ratio": 0.25,
            "clip_ratio/region_mean": 0.0,
            "clip_ratio/low_mean": 0.0,
            "clip_ratio/high_mean": 0.0,
            "step_time": 8.5,
        }
        for func in reward_funcs:
            record[f"rewards/{func}/mean"] = reward / len(reward_funcs)
            record[f"rewards/{func}/std"] = 0.1
        if beta:
            record["kl"] = 0.002 * step
        for key, value in overrides.items():
            value = value(step) if callable(value) else value
            if value is None:
                record.pop(key, None)
            else:
                record[key] = value
        records.append(record)
    return records


def trace_names(fig):
    return [trace.name for trace in fig.data]


def annotation_text(fig):
    return " ".join(a.text for a in fig.layout.annotations)


# ---------------------------------------------------------------- metrics_frame


def test_frame_sorts_by_step_and_later_duplicate_wins():
    records = make_metrics(3)
    records = [records[2], records[0], dict(records[1], reward=9.0), dict(records[1], reward=0.5)]
    frame = figures.metrics_frame(records)
    assert frame["step"].tolist() == [1, 2, 3]
    assert frame.loc[frame["step"] == 2, "reward"].item() == 0.5


@pytest.mark.parametrize(
    "bad", [None, "n/a", float("nan"), [1, 2], {"a": 1}], ids=["none", "text", "nan", "list", "dict"]
)
def test_frame_turns_non_numbers_into_gaps(bad):
    frame = figures.metrics_frame([{"step": 1, "reward": 0.1}, {"step": 2, "reward": bad}])
    assert frame["reward"].iloc[0] == 0.1 and math.isnan(frame["reward"].iloc[1])


def test_frame_without_step_uses_position_and_empty_is_empty():
    assert figures.metrics_frame([{"reward": 1.0}, {"reward": 2.0}])["step"].tolist() == [1, 2]
    assert figures.metrics_frame([]).empty


def test_frame_reads_records_written_as_json_lines(tmp_path):
    from workbench.runstore.runfolder import append_jsonl, read_jsonl

    path = tmp_path / "metrics.jsonl"
    append_jsonl(path, make_metrics(4))
    assert figures.metrics_frame(read_jsonl(path))["reward"].round(3).tolist() == [0.3, 0.4, 0.5, 0.6]


# ---------------------------------------------------------------- smoothing


@pytest.mark.parametrize(
    "values, weight, expected",
    [
        ([1.0, 2.0, 3.0], 0.0, [1.0, 2.0, 3.0]),
        ([0.0, 1.0, 1.0], 0.5, [0.0, 0.5, 0.75]),
        ([0.0, 1.0], 0.9, [0.0, 0.1]),
        ([4.0, 4.0, 4.0], 0.99, [4.0, 4.0, 4.0]),
        ([0.0, float("nan"), 1.0], 0.5, [0.0, float("nan"), 0.5]),
        ([float("nan"), 2.0, 4.0], 0.5, [float("nan"), 2.0, 3.0]),
        ([], 0.6, []),
    ],
    ids=["zero-is-raw", "half", "strong", "constant-stays", "nan-is-gap", "leading-nan", "empty"],
)
def test_smooth_is_an_ema_seeded_with_the_first_value(values, weight, expected):
    out = figures.smooth(values, weight)
    assert len(out) == len(expected)
    for got, want in zip(out, expected):
        assert (math.isnan(got) and math.isnan(want)) or got == pytest.approx(want)


@pytest.mark.parametrize("bad", [-0.1, 1.0, 5, "lots", None], ids=["negative", "one", "five", "text", "none"])
def test_bad_smoothing_names_the_field_and_the_range(bad):
    with pytest.raises(ValueError, match=r"smoothing: got .* from 0 to 0.99"):
        figures.smooth([1.0], bad)
    with pytest.raises(ValueError, match="smoothing"):
        figures.build_figures(make_metrics(2), smoothing=bad)


def test_smoothing_keeps_raw_points_faint_under_the_line():
    fig = figures.kl_figure(make_metrics(6), smoothing=0.8)
    raw, line = fig.data
    assert raw.opacity == figures.RAW_OPACITY and raw.showlegend is False
    assert list(raw.y) == pytest.approx([0.002 * s for s in range(1, 7)])
    assert list(line.y) == pytest.approx(figures.smooth(raw.y, 0.8))


# ---------------------------------------------------------------- figures


# what a run that generates with vLLM adds (workbench/spec/engine_records.py's step summary)
ENGINE_METRICS = {
    "engine/logprob_mismatch_mean": 0.02,
    "engine/logprob_mismatch_max": 0.3,
    "engine/is_weight_min": 0.9,
    "engine/is_weight_mean": 1.0,
    "engine/is_weight_max": 1.1,
    "engine/masked_completions": lambda step: int(step == 3),
}


def test_every_figure_builds_from_realistic_records():
    metrics = make_metrics(8, reward_funcs=("brevity", "format"), **ENGINE_METRICS)
    figs = figures.build_figures(metrics, smoothing=0.6)
    assert list(figs) == list(figures.FIGURE_BUILDERS)
    for name, fig in figs.items():
        assert fig.data, f"{name} has no traces"
        assert fig.layout.height == figures.FIGURE_HEIGHT
        json.loads(fig.to_json())  # serialisable for the browser


def test_reward_figure_has_total_each_function_and_std_bands():
    fig = figures.reward_figure(make_metrics(5, reward_funcs=("brevity", "format")))
    names = trace_names(fig)
    assert {"total", "brevity", "format"} <= set(names)
    band = next(t for t in fig.data if t.name == "total ± std")
    # The band goes out along mean + std and back along mean - std.
    assert band.y[0] == pytest.approx(0.3 + 0.2) and band.y[-1] == pytest.approx(0.3 - 0.2)
    assert band.fill == "toself" and band.mode == "lines"  # no markers at the band's corners


def test_length_figure_has_min_max_band_and_clipped_ratio_on_a_right_axis():
    fig = figures.completion_length_figure(make_metrics(4))
    clipped = next(t for t in fig.data if t.name.startswith("clipped ratio"))
    assert clipped.yaxis == "y2" and fig.layout.yaxis2.range == (0, 1.05)
    band = next(t for t in fig.data if t.fill == "toself")
    assert max(band.y) == 48.0 and min(band.y) == 5.0


def test_clip_ratio_all_zero_is_explained():
    fig = figures.clip_ratio_figure(make_metrics(4))
    assert "num_iterations = 1" in annotation_text(fig)
    fig = figures.clip_ratio_figure(make_metrics(4, **{"clip_ratio/region_mean": 0.02}))
    assert "num_iterations" not in annotation_text(fig)


@pytest.mark.parametrize(
    "builder, records, phrase",
    [
        (figures.kl_figure, make_metrics(4, beta=0), "KL is not computed when beta = 0"),
        (figures.entropy_figure, make_metrics(4, entropy=None), "logged no `entropy`"),
        (figures.reward_figure, [], "No metrics yet"),
        (figures.step_time_figure, [], "No metrics yet"),
        (figures.clip_ratio_figure, [{"step": 1, "loss": 0.1}], "no clip ratio"),
        (figures.completion_length_figure, [{"step": 1}], "no completion lengths"),
    ],
    ids=["kl-beta-zero", "no-entropy", "reward-empty", "step-time-empty", "no-clip", "no-lengths"],
)
def test_missing_metric_gives_a_note_not_an_error(builder, records, phrase):
    fig = builder(records, smoothing=0.5)
    assert not fig.data
    assert phrase in annotation_text(fig).replace("<br>", " ")


def test_one_step_and_a_nan_point_still_plot():
    one = figures.build_figures(make_metrics(1))
    assert len(one["loss"].data[0].x) == 1
    records = make_metrics(4, loss=lambda s: float("nan") if s == 2 else 0.1 * s)
    xs = figures.loss_figure(records).data[0].x
    assert list(xs) == [1, 3, 4]


def test_learning_rate_is_never_smoothed():
    records = make_metrics(5)
    fig = figures.learning_rate_figure(records, smoothing=0.9)
    assert len(fig.data) == 1
    assert list(fig.data[0].y) == pytest.approx([r["learning_rate"] for r in records])


# ---------------------------------------------------------------- overlay


def test_overlay_draws_one_line_per_run_and_names_runs_without_the_metric():
    runs = {"lr-1e-3": make_metrics(5), "lr-1e-4": make_metrics(3), "beta-0": make_metrics(4, beta=0)}
    fig = overlay_figures.overlay_runs(runs, "kl")
    assert trace_names(fig) == ["lr-1e-3", "lr-1e-4"]
    assert "not logged by: beta-0" in fig.layout.title.text
    assert len(fig.data[1].x) == 3


@pytest.mark.parametrize(
    "runs, phrase",
    [({}, "Pick one or more runs"), ({"a": make_metrics(2, beta=0)}, "beta = 0"), ({"a": []}, "None of these")],
    ids=["no-runs", "kl-never-logged", "empty-run"],
)
def test_overlay_without_data_is_a_note(runs, phrase):
    metric = "kl" if "beta" in phrase else "reward"
    assert phrase in annotation_text(overlay_figures.overlay_runs(runs, metric)).replace("<br>", " ")


def test_overlay_smoothing_applies_per_run():
    fig = overlay_figures.overlay_runs({"a": make_metrics(4)}, "reward", smoothing=0.5)
    line = fig.data[-1]
    assert list(line.y) == pytest.approx(figures.smooth([0.3, 0.4, 0.5, 0.6], 0.5))


def test_a_short_run_gets_a_tick_on_every_step_and_a_long_one_plotly_ticks():
    assert figures.reward_figure(make_metrics(3)).layout.xaxis.dtick == 1
    assert figures.reward_figure(make_metrics(40)).layout.xaxis.dtick is None


@pytest.mark.parametrize("order", [("short", "long"), ("long", "short")])
def test_overlay_of_a_short_and_a_long_run_keeps_plotly_ticks(order):
    runs = {"short": make_metrics(3), "long": make_metrics(400)}
    fig = overlay_figures.overlay_runs({name: runs[name] for name in order}, "reward")
    assert fig.layout.xaxis.dtick is None


# ---------------------------------------------------------------- purity


@pytest.mark.slow
@pytest.mark.parametrize("module", PURE_MODULES)
def test_pure_modules_import_without_torch_or_gradio(module):
    code = (
        f"import sys, {module}; "
        "heavy = [m for m in ('torch', 'gradio', 'transformers', 'trl') if m in sys.modules]; "
        "print(','.join(heavy))"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "", f"{module} pulled in {result.stdout.strip()}"


# ---------------------------------------------------------------- long runs


def grown(records, how):
    """`records` grown one way the Train tab's list grows (resumed.merge_metrics)."""
    from workbench.insight.resumed import merge_metrics

    new = {
        "appended": [{"step": len(records) + 1, "reward": 0.7, "entropy": 1.0}],
        "last-step-merged": [{"step": len(records), "train_runtime": 12.0}],
        "new-metric-appears": [{"step": len(records) + 1, "reward": 0.7, "new/metric": 3.0}],
        "resumed": [{"step": 2, "reward": 0.9}],
        "step-missing": [{"reward": 0.1}],
    }[how]
    return merge_metrics(records, new)


@pytest.mark.parametrize("how", ["appended", "last-step-merged", "new-metric-appears", "resumed", "step-missing"])
def test_a_frame_extended_from_the_previous_one_is_the_frame_built_anew(how):
    import pandas as pd

    records = make_metrics(12)
    frame = figures.metrics_frame(records)
    more = grown(records, how)
    extended = figures.metrics_frame(more, previous=(records, frame))
    pd.testing.assert_frame_equal(extended, figures.metrics_frame(more))
    if how in ("appended", "last-step-merged", "new-metric-appears"):
        assert extended.attrs[figures.ROWS_ARE_RECORDS]


def test_a_long_line_is_drawn_through_its_extremes():
    steps = list(range(1, 10_001))
    values = [0.5 + 0.001 * math.sin(s) for s in steps]
    values[7_777] = 9.0  # one spike and one dip: both must stay on the figure
    values[3_333] = -4.0
    fig = figures.metric_figure([{"step": s, "kl": v} for s, v in zip(steps, values)], "kl", "KL")
    line = fig.data[0]
    assert len(line.x) <= figures.MAX_POINTS
    assert max(line.y) == 9.0 and min(line.y) == -4.0 and line.x[0] == 1 and line.x[-1] == 10_000
    assert list(line.x) == sorted(line.x)


def test_a_long_run_s_figures_stay_small_and_smoothing_uses_every_point():
    records = make_metrics(5000)
    built = figures.build_figures(figures.metrics_frame(records), 0.9)
    assert all(
        len(trace.x if trace.x is not None else ()) <= 2 * figures.MAX_POINTS
        for fig in built.values()
        for trace in fig.data
    )
    smoothed = figures.smooth([r["reward"] for r in records], 0.9)
    line = next(t for t in built["reward"].data if t.name == "total")
    assert line.y[-1] == pytest.approx(smoothed[-1]) and line.x[-1] == 5000


def decoded(spec):
    """A figure's JSON with plotly's packed arrays ({"dtype", "bdata"}) read back as lists."""
    import base64

    import numpy as np

    if isinstance(spec, dict) and set(spec) == {"dtype", "bdata"}:
        return np.frombuffer(base64.b64decode(spec["bdata"]), dtype=spec["dtype"]).tolist()
    if isinstance(spec, dict):
        return {key: decoded(value) for key, value in spec.items()}
    if isinstance(spec, list):
        return [decoded(value) for value in spec]
    return spec


@pytest.mark.parametrize("steps", [3, 900], ids=["short", "thinned"])
def test_figure_json_is_plotly_s_json_with_plain_lists(steps):
    for fig in figures.build_figures(make_metrics(steps, reward_funcs=("a", "b")), 0.5).values():
        sent = json.loads(figures.figure_json(fig))
        assert sent == decoded(json.loads(fig.to_json()))
        assert all(isinstance(trace.get("x", []), list) for trace in sent["data"])
