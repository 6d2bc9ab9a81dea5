"""The token view's records: tokens.jsonl from real tiny runs checked against TRL's own logged metrics, its rule,
its readers and `python -m workbench tokens`."""

from __future__ import annotations

import json
import math

import pytest
from helpers import TINY

from workbench.cli import main
from workbench.insight import tokens
from workbench.runstore import jsonl_cache, runfolder
from workbench.spec.config import ConfigError, RunConfig
from workbench.spec.config_checks import check_config
from workbench.spec.token_records import completion_length, rounded, token_problem


def _record(**changes):
    record = {
        "step": 2,
        "round": 2,
        "index": 1,
        "group": 0,
        "micro_batch": 0,
        "advantage": 0.5,
        "ref": "reference",
        "ids": [5, 6],
        "tokens": ["a", "b"],
        "logprob": [-1.0, -2.0],
        "ref_logprob": [-1.1, -2.0],
        "kl": [0.004, 0.0],
        "entropy": [3.0, 1.0],
        "ratio": None,
        "clipped": [0, 0],
        "masked": [0, 1],
    }
    return {**record, **changes}


@pytest.mark.parametrize(
    "changes, words",
    [
        ({}, None),
        ({"kl": None, "ref": "old policy"}, None),  # beta = 0: no KL term
        ({"logprob": [-1.0]}, "logprob"),  # one value short of its tokens
        ({"ratio": "1"}, "ratio"),
        ({"ref": "base"}, "ref"),
        ({"advantage": None}, "advantage"),
        ({"step": True}, "step"),
    ],
)
def test_the_tokens_rule_wants_one_value_per_token(changes, words):
    problem = token_problem(_record(**changes))
    assert problem is None if words is None else words in problem


def test_completion_length_stops_at_the_first_end_token_else_at_padding():
    assert completion_length([4, 9, 2, 0, 0], eos_ids={2}, pad_id=0) == 3
    assert completion_length([4, 9, 0, 0], eos_ids={2}, pad_id=0) == 2
    assert completion_length([4, 9, 7], eos_ids={2}, pad_id=2) == 3  # cut at max_completion_length
    assert rounded(-10.123456) == -10.123 and rounded(float("nan")) is None


def test_round_passes_counts_the_steps_one_generation_round_feeds():
    assert tokens.round_passes({}) == 1
    assert tokens.round_passes({"num_iterations": 2}) == 2
    assert tokens.round_passes({"gradient_accumulation_steps": 2, "steps_per_generation": 4}) == 2


def test_the_step_summary_ranks_tokens_in_the_loss_and_says_why_nothing_clips_on_policy():
    records = [_record(), _record(index=2, tokens=["c", "d"], kl=[0.2, 0.9], entropy=[0.5, 4.0], masked=[0, 0])]
    summary = tokens.step_summary(records, count=2)
    assert [(t["token"], t["value"]) for t in summary["top_kl"]] == [("d", 0.9), ("c", 0.2)]
    assert [t["token"] for t in summary["top_entropy"]] == ["d", "a"]  # "b" has 1.0 but is masked
    assert summary["on_policy"] and "exactly 1" in summary["note"] and summary["clipped_low"] == 0
    clipped = tokens.step_summary([_record(ratio=[0.5, 1.0], clipped=[-1, 0], masked=[0, 0])])
    assert clipped["clipped_low"] == 0.5 and not clipped["on_policy"] and clipped["note"] == ""


def test_record_tokens_must_be_true_or_false():
    with pytest.raises(ConfigError, match="record_tokens"):
        check_config(RunConfig(**TINY, record_tokens="yes"))


# ---------------------------------------------------------------- real runs


def _mean_of_micro_batch_means(records, values_of):
    """TRL's way: each loss computation logs sum(x·mask)/sum(mask) over its rows; `log` averages them."""
    means = []
    for batch in sorted({r["micro_batch"] for r in records}):
        pairs = [(v, m) for r in records if r["micro_batch"] == batch for v, m in zip(values_of(r), r["masked"])]
        kept = [v for v, m in pairs if not m]
        means.append(sum(kept) / max(len(kept), 1))
    return sum(means) / len(means)


def _check_cards_own_their_tokens(run_dir, tokenizer_dir):
    """Every token record's ids decode to its completions.jsonl record's text, with the same advantage."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tokenizer_dir)
    rows = tokens.cli_rows(run_dir)
    assert rows
    for step in tokens.token_steps(run_dir):
        for record in tokens.tokens_of_step(run_dir, step):
            completion = jsonl_cache.records_of_step(run_dir / runfolder.COMPLETIONS_FILE, record["round"])[
                record["index"]
            ]
            assert tokenizer.decode(record["ids"], skip_special_tokens=True) == completion["completion"]
            assert math.isclose(record["advantage"], completion["advantage"], rel_tol=1e-4, abs_tol=1e-6)
            assert record["group"] == completion["group"]
    return rows


@pytest.mark.slow  # reads the shared 2-step tiny run (beta 0.04, the default) and loads its tokenizer
def test_a_two_step_run_records_well_formed_tokens_whose_kl_matches_trls(tiny_trained_run, tiny_model, capsys):
    lines = runfolder.read_jsonl(tiny_trained_run / runfolder.TOKENS_FILE)
    assert lines and all(token_problem(r) is None for r in lines)
    assert tokens.token_steps(tiny_trained_run) == [1, 2]
    metrics = {m["step"]: m for m in runfolder.read_jsonl(tiny_trained_run / runfolder.METRICS_FILE)}
    # generated by transformers, not vLLM: no engine fields in the records, no engine/* metrics
    assert not any("engine_logprob" in r or "is_weight" in r for r in lines)
    assert not any(key.startswith("engine/") for m in metrics.values() for key in m)
    for step in (1, 2):
        records = tokens.tokens_of_step(tiny_trained_run, step)
        assert len(records) == TINY["per_device_train_batch_size"]  # every completion of the step's batch
        assert all(r["ref"] == "reference" and r["ratio"] is None for r in records)  # beta > 0, on-policy
        ours = _mean_of_micro_batch_means(records, lambda r: r["kl"])
        assert math.isclose(ours, metrics[step]["kl"], rel_tol=1e-3, abs_tol=1e-9), (step, ours, metrics[step]["kl"])
        entropy = _mean_of_micro_batch_means(records, lambda r: r["entropy"])
        assert math.isclose(entropy, metrics[step]["entropy"], rel_tol=1e-3)
    assert metrics[2]["kl"] > 0  # one update in: a KL that is not zero was matched, not only 0 = 0
    rows = _check_cards_own_their_tokens(tiny_trained_run, tiny_model)

    assert main(["tokens", str(tiny_trained_run), "--step", "2", "--json"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed == [r for r in rows if r["step"] == 2] and len(printed) == 4
    for row in printed:
        assert isinstance(row["advantage"], float) and row["prompt"] and row["completion"] is not None
        lists = [row[k] for k in ("tokens", "logprob", "ref_logprob", "entropy", "kl", "clipped")]
        assert len({len(values) for values in lists}) == 1 and lists[0]
    assert main(["tokens", str(tiny_trained_run), "--step", "9"]) == 2


@pytest.fixture(scope="module")
def clipping_run(tmp_path_factory):
    """Two steps on one round (num_iterations 2), two micro-batches a step, a large learning rate and a tiny
    epsilon: the second pass's ratio moves off 1 far enough to be clipped on both sides."""
    from workbench.trainer.training import run_training

    run_dir = tmp_path_factory.mktemp("clipping")
    cfg = RunConfig(
        **{**TINY, "per_device_train_batch_size": 2},
        task="reward_hacking",
        gradient_accumulation_steps=2,
        max_steps=2,
        num_iterations=2,
        learning_rate=0.05,
        epsilon=0.001,
        save_steps=10,
    )
    assert run_training(cfg, run_dir) == 0, runfolder.read_status(run_dir).get("error")
    return run_dir


@pytest.mark.slow  # trains 2 tiny steps
def test_clipping_shows_on_the_tokens_trl_counts_as_clipped(clipping_run, tiny_model):
    """What this proves: the clipped flags stored per token give TRL's own clip_ratio/low_mean and /high_mean
    (mean over the step's micro-batches), they sit where the stored ratio and advantage say they must, and the
    second pass over a round is recorded against that round's completions (rows shuffled and split in two)."""
    metrics = {m["step"]: m for m in runfolder.read_jsonl(clipping_run / runfolder.METRICS_FILE)}
    first, second = tokens.tokens_of_step(clipping_run, 1), tokens.tokens_of_step(clipping_run, 2)
    assert {r["round"] for r in first + second} == {1} and {r["micro_batch"] for r in second} == {0, 1}
    assert all(v == 1.0 for r in first for v in r["ratio"])  # old policy computed, nothing moved yet
    assert tokens.step_summary(second)["clipped_low"] > 0 and tokens.step_summary(second)["clipped_high"] > 0
    for step, records in ((1, first), (2, second)):
        kl = _mean_of_micro_batch_means(records, lambda r: r["kl"])  # two micro-batches: the mean of their means
        assert math.isclose(kl, metrics[step]["kl"], rel_tol=1e-3, abs_tol=1e-9), (step, kl, metrics[step]["kl"])
        for side, flag in (("low", -1), ("high", 1)):
            ours = _mean_of_micro_batch_means(records, lambda r, flag=flag: [c == flag for c in r["clipped"]])
            assert math.isclose(ours, metrics[step][f"clip_ratio/{side}_mean"], abs_tol=1e-6), (step, side)
    for record in second:
        for ratio, clipped in zip(record["ratio"], record["clipped"]):
            low, high = ratio < 1 - 0.001 and record["advantage"] < 0, ratio > 1 + 0.001 and record["advantage"] > 0
            if abs(ratio - 1) > 0.002:  # away from the edge, where rounding to 5 digits cannot flip it
                assert clipped == (-1 if low else 1 if high else 0)
    _check_cards_own_their_tokens(clipping_run, tiny_model)
    assert not tokens.step_summary(second)["on_policy"]


@pytest.mark.slow  # reads the 2-step run above (trained for the test before)
def test_a_round_trained_twice_shows_each_tokens_first_pass_values_on_hover(clipping_run):
    shown = tokens.tokens_of_round(clipping_run, 1, passes=2)
    assert {r["step"] for r in shown.values()} == {2}  # the newest pass of each completion
    completions = jsonl_cache.records_of_step(clipping_run / runfolder.COMPLETIONS_FILE, 1)
    earlier = tokens.earlier_of_round(clipping_run, shown, {i: c["prompt"] for i, c in enumerate(completions)})
    first = {r["index"]: r for r in tokens.tokens_of_step(clipping_run, 1)}
    assert set(earlier) == set(shown)
    for index, values in earlier.items():  # the same completion at step 1: every token, its step-1 log-probability
        assert values == [(1, logprob) for logprob in first[index]["logprob"]]
    assert any(v[1] != now for index, values in earlier.items() for v, now in zip(values, shown[index]["logprob"]))


@pytest.mark.slow  # trains 1 tiny step
def test_record_tokens_false_writes_no_tokens(tmp_path):
    from workbench.trainer.training import run_training

    assert run_training(RunConfig(**TINY, max_steps=1, save_steps=10, record_tokens=False), tmp_path) == 0
    assert (tmp_path / runfolder.COMPLETIONS_FILE).is_file() and not (tmp_path / runfolder.TOKENS_FILE).exists()


# ---------------------------------------------------------------- the token view's HTML


def test_the_token_view_escapes_model_text_and_shows_every_value_on_hover():
    from workbench.insight.token_cards import Scale, token_view_html

    record = _record(tokens=["<b>", "&x"], kl=[0.004, 0.0])
    html = token_view_html(record, Scale.of([record]), "kl", page="t")
    assert "<b>" not in html.replace("<b>Tokens", "") and "&lt;b&gt;" in html and "&amp;x" in html
    assert 'class="wb-ch-kl" checked' in html and "KL 0.004" in html and "masked: outside the loss" in html
    assert "k6" in html  # the step's largest KL gets the darkest colour
    assert "Nothing is clipped here. On-policy" in html  # ratio null: the clipped channel says why it is empty


def test_without_a_kl_term_the_view_offers_no_kl_channel_and_names_the_old_policy():
    from workbench.insight.token_cards import Scale, token_view_html

    record = _record(kl=None, ref="old policy", ratio=[0.5, 1.0], clipped=[-1, 0], masked=[0, 0], advantage=-1.0)
    html = token_view_html(record, Scale.of([record]), "kl")
    assert "wb-ch-kl" not in html and 'class="wb-ch-logprob" checked' in html
    assert "against the old policy (beta 0)" in html and "clo" in html and "Nothing is clipped" not in html


def test_the_step_views_fit_each_card_and_say_where_the_rest_are_past_the_cap(monkeypatch):
    from workbench.insight import token_cards

    records = {i: _record(index=i, group=i // 2) for i in range(4)}
    views, header = token_cards.step_token_views(records, group_size=2, step=2)
    assert set(views) == {(0, 0), (0, 1), (1, 0), (1, 1)} and "Tokens of step 2" in header
    monkeypatch.setattr(token_cards, "MAX_TOKENS_SHOWN", 5)
    views, _ = token_cards.step_token_views(records, group_size=2, step=2)
    assert "workbench tokens RUN --step 2" in views[(1, 1)] and "wb-toks" in views[(0, 0)]


@pytest.mark.slow  # writes the shared tiny run's report (plotly.js inlined)
def test_the_report_shows_the_last_steps_highest_and_lowest_advantage_token_by_token(tiny_trained_run, tmp_path):
    out = tmp_path / "report.html"
    assert main(["report", str(tiny_trained_run), "--out", str(out)]) == 0
    page = out.read_text(encoding="utf-8")
    last = tokens.tokens_of_step(tiny_trained_run, 2)
    high, low = max(last, key=lambda r: r["advantage"]), min(last, key=lambda r: r["advantage"])
    assert "Token by token: step 2" in page
    for label, record in (("Highest", high), ("Lowest", low)):
        assert f"{label} advantage: completion #{record['index'] + 1} of step 2" in page
    assert page.count('<details class="wb-tokview" open>') == 2


def test_the_same_tokens_after_the_same_prefix_at_an_earlier_step_are_found_the_newest_first():
    earlier = [
        _record(step=1, ids=[5, 6, 7], logprob=[-1.0, -2.0, -3.0]),
        _record(step=3, ids=[5, 6, 9], logprob=[-0.5, -1.5, -0.1]),
        _record(step=2, ids=[8], logprob=[-4.0]),
    ]
    # 5 and 6 were sampled at steps 1 and 3 (step 3 is newer); 7 follows 5 6 only at step 1; then 4 breaks the prefix
    assert tokens.prefix_matches([5, 6, 7, 4, 6], earlier) == [(3, -0.5), (3, -1.5), (1, -3.0), None, None]
    assert tokens.prefix_matches([6], earlier) == [None]  # the same token at another place is not the same token


def test_the_hover_names_the_earlier_step_of_the_same_token():
    from workbench.insight.token_cards import Scale, token_view_html

    record = _record()
    html = token_view_html(record, Scale.of([record]), earlier=[(1, -0.75), None])
    assert "at step 1, same prompt and tokens before: logprob -0.75" in html and html.count("at step 1") == 1
