"""The generation engine's side of the token records (workbench/spec/engine_records.py): TRL 1.16's
importance-sampling weight in every mode, the step's summary, the record rule, and how the token view, the CLI and
the Train tab's figure show them. Pure: no server, no model (tests/test_vllm_rollout.py checks a real vLLM run's
records against these)."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest

from workbench.spec import engine_records
from workbench.spec.engine_records import IS_MODES, importance_weight, step_metrics
from workbench.spec.token_records import token_problem


def trl_weight(diffs, masked, mode, clip_min, clip_max):
    """TRL 1.16's lines of `_generate_and_score_completions` that make `importance_sampling_ratio`, on one row, in
    numpy (old - sampling, masked, NaN to 0, summed for the sequence modes, exp, then truncated or masked)."""
    diff = np.array([[math.nan if d is None else d for d in diffs]])
    mask = np.array([[0.0 if m else 1.0 for m in masked]])
    diff = np.nan_to_num(diff * mask, nan=0.0)
    if mode.startswith("sequence"):
        diff = diff.sum(axis=-1, keepdims=True)
    ratio = np.exp(diff)
    low = clip_min if clip_min is not None else -math.inf
    high = clip_max if clip_max is not None else math.inf
    if mode.endswith("truncate"):
        ratio = np.clip(ratio, low, high)
    else:
        ratio = np.where((ratio < low) | (ratio > high), 0.0, ratio)
    return float(ratio[0, 0]) if mode.startswith("sequence") else ratio[0].tolist()


@pytest.mark.parametrize("mode", IS_MODES)
@pytest.mark.parametrize("clip_min, clip_max", [(None, 3.0), (0.5, 2.0), (0.9, None)])
def test_the_weight_is_trls_in_every_mode(mode, clip_min, clip_max):
    rng = random.Random(7)
    for _ in range(40):
        n = rng.randrange(1, 12)
        diffs = [None if rng.random() < 0.1 else rng.gauss(0, 0.4) for _ in range(n)]
        masked = [int(rng.random() < 0.2) for _ in range(n)]
        ours = importance_weight(diffs, masked, mode, clip_min, clip_max)
        theirs = trl_weight(diffs, masked, mode, clip_min, clip_max)
        assert ours == pytest.approx(theirs, rel=1e-9, abs=1e-12), (diffs, masked)


def test_sequence_mask_zeroes_a_completion_outside_the_bounds_and_keeps_one_inside():
    assert importance_weight([0.5, 0.7], [0, 0]) == 0.0  # exp(1.2) = 3.3 > TRL's default clip_max 3
    assert importance_weight([0.5, 0.7], [0, 1]) == pytest.approx(math.exp(0.5))  # the masked token counts 0
    assert importance_weight([0.5, 0.7], [0, 0], "sequence_truncate") == 3.0
    with pytest.raises(ValueError, match="sequence_mask"):
        importance_weight([0.1], [0], "sequence")


def _record(diffs, weight, mode="sequence_mask", masked=None, **changes):
    n = len(diffs)
    record = {
        "step": 1,
        "round": 1,
        "index": 0,
        "group": 0,
        "micro_batch": 0,
        "advantage": 0.5,
        "ref": "old policy",
        "ids": list(range(5, 5 + n)),
        "tokens": [f"t{i}" for i in range(n)],
        "logprob": [-1.0] * n,
        "ref_logprob": [-1.0] * n,
        "kl": None,
        "entropy": [1.0] * n,
        "ratio": [1.0] * n,
        "clipped": [0] * n,
        "masked": masked or [0] * n,
        "engine_logprob": [None if d is None else -1.0 - d for d in diffs],
        "engine_diff": diffs,
        "is_weight": weight,
        "is_mode": mode,
    }
    return {**record, **changes}


def test_the_step_summary_gives_the_mismatch_the_weights_and_the_masked_completions():
    records = [
        _record([0.01, -0.03], 0.98),
        _record([0.2, None, 0.9], 0.0, masked=[0, 0, 1]),  # masked token: left out of the mismatch
        _record([0.05], 1.05),
    ]
    metrics = step_metrics(records)
    assert metrics[engine_records.MISMATCH_MEAN] == pytest.approx((0.01 + 0.03 + 0.2 + 0.05) / 4)
    assert metrics[engine_records.MISMATCH_MAX] == pytest.approx(0.2)
    assert metrics[engine_records.WEIGHT_MIN] == 0.0 and metrics[engine_records.WEIGHT_MAX] == 1.05
    assert metrics[engine_records.WEIGHT_MEAN] == pytest.approx((0.98 + 0.0 + 1.05) / 3)
    assert metrics[engine_records.MASKED_COMPLETIONS] == 1
    # token modes: the weights of the tokens in the loss; a completion with a zeroed token counts as masked
    tokenwise = [_record([0.1, 2.0], [1.1, 0.0], "token_mask"), _record([0.1], [1.1], "token_mask")]
    assert step_metrics(tokenwise)[engine_records.MASKED_COMPLETIONS] == 1
    # the correction turned off: the mismatch without weights; no vLLM: nothing at all
    assert set(step_metrics([_record([0.1], None)])) == {engine_records.MISMATCH_MEAN, engine_records.MISMATCH_MAX}
    plain = {k: v for k, v in _record([0.1], 1.0).items() if k not in engine_records.ENGINE_FIELDS}
    assert step_metrics([plain]) == {}


@pytest.mark.parametrize(
    "changes, words",
    [
        ({}, None),
        ({"is_weight": None}, None),  # vllm_importance_sampling_correction=False
        ({"engine_diff": [0.1]}, "engine_diff"),
        ({"engine_logprob": ["x", 1.0]}, "engine_logprob"),
        ({"is_mode": "sequence"}, "is_mode"),
        ({"is_weight": [1.0, 1.0]}, "is_weight"),  # a list under a sequence mode
        ({"is_mode": "token_mask", "is_weight": 1.0}, "is_weight"),
    ],
)
def test_the_record_rule_checks_the_engine_fields_when_present(changes, words):
    problem = token_problem(_record([0.1, -0.2], 0.9, **changes))
    assert problem is None if words is None else words in problem


def test_the_token_view_offers_the_engine_channel_only_with_the_engines_values():
    from workbench.insight.token_cards import Scale, token_view_html

    record = _record([0.02, -0.3], 0.75)
    html = token_view_html(record, Scale.of([record]), "engine", page="t")
    assert 'class="wb-ch-engine" checked' in html and "engine vs trainer" in html
    assert "engine logprob -1.02 · trainer − engine 0.02" in html and "IS weight 0.75 (sequence_mask)" in html
    assert "g6" in html and "g1" in html  # the step's largest difference darkest, a small one pale
    plain = {k: v for k, v in record.items() if k not in engine_records.ENGINE_FIELDS}
    html = token_view_html(plain, Scale.of([plain]), "engine", page="t")
    assert "wb-ch-engine" not in html and "engine" not in html.split("</style>")[-1]
    assert 'class="wb-ch-logprob" checked' in html


def test_the_cli_prints_trainer_and_engine_logprobs_and_the_steps_summary(capsys):
    from workbench.cli.tokens_command import print_lines
    from workbench.insight import tokens

    record = _record([0.02, -0.3], 0.75)
    row = tokens.cli_row(record, [])
    assert row["engine_diff"] == [0.02, -0.3] and row["is_weight"] == 0.75 and row["is_mode"] == "sequence_mask"
    print_lines([row], {1: tokens.step_summary([record])})
    out = capsys.readouterr().out
    assert "engine vs trainer: mean |difference| 0.16, largest 0.3 nats" in out
    assert "IS weight min 0.75 mean 0.75 max 0.75, 0 completion(s) masked" in out
    assert "IS weight 0.75  't0':-1.00/-1.02 't1':-1.00/-0.70" in out
    plain = {k: v for k, v in record.items() if k not in engine_records.ENGINE_FIELDS}
    assert "engine_logprob" not in tokens.cli_row(plain, []) and tokens.step_summary([plain])["engine"] == {}


def test_the_engine_figure_draws_the_mismatch_and_the_weights_or_says_when_it_is_drawn():
    from workbench.insight import figures

    steps = [{"step": s, "loss": 0.1, **step_metrics([_record([0.01 * s, 0.02], w)])} for s, w in ((1, 0.97), (2, 0.0))]
    figure = figures.build_figures(steps, 0.0, ["engine_mismatch"])["engine_mismatch"]
    names = [trace.name for trace in figure.data]
    assert names == ["mean mismatch", "largest mismatch", "weight min-max", "mean weight (right)", "masked completions"]
    assert list(figure.data[-1].x) == [2]  # the step whose completion was masked
    plain = figures.build_figures([{"step": 1, "loss": 0.1}], 0.0, ["engine_mismatch"])["engine_mismatch"]
    assert "generate with vLLM" in plain.layout.annotations[0].text
