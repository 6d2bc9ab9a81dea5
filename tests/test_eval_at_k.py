"""mean@k, maj@k, best@k and their bootstrap spreads against brute force; per data source; the best checkpoint by a
chosen figure; the extractors maj@k compares answers by; the settings' checks. Pure: no model, no torch."""

from __future__ import annotations

import itertools
import math
from collections import Counter

import pytest

from workbench.insight import eval_results
from workbench.insight.overlay_figures import held_out_figure, overlay_runs
from workbench.spec.config import RunConfig
from workbench.spec.config_checks import validate_config
from workbench.spec.eval_at_k import Sample, bootstrap_std, figures_at_k, point_figures
from workbench.spec.heldout import best_evaluation, eval_record
from workbench.spec.rewards.answer_keys import answer_key_for, majority_note
from workbench.spec.rewards.reward_errors import RewardError
from workbench.spec.tasks import GSM8K_SAMPLE

# three prompts, k = 4: (right?, total reward, answer)
KNOWN = [
    [Sample(True, 1.2, "4"), Sample(False, 0.2, "5"), Sample(True, 1.0, "4"), Sample(False, 0.0, None)],
    [Sample(False, 0.1, "7"), Sample(False, 0.3, "8"), Sample(True, 0.9, "6"), Sample(False, 0.2, "7")],
    [Sample(False, 0.0, "a"), Sample(True, 1.0, "b"), Sample(False, 0.5, "c"), Sample(True, 1.1, "b")],
]


def brute_majority(samples) -> float:
    """The written-out rule: most votes among readable answers, a tie to the answer seen first, none -> wrong."""
    votes = Counter(s.answer for s in samples if s.answer is not None)
    if not votes:
        return 0.0
    top = max(votes.values())
    winner = next(s.answer for s in samples if s.answer is not None and votes[s.answer] == top)
    return float(next(s.correct for s in samples if s.answer == winner))


def brute_figures(prompts) -> dict:
    return {
        "mean_at_k": sum(sum(s.correct for s in p) / len(p) for p in prompts) / len(prompts),
        "maj_at_k": sum(brute_majority(p) for p in prompts) / len(prompts),
        "best_at_k": sum(max(s.total for s in p) for p in prompts) / len(prompts),
    }


def test_each_figure_equals_its_brute_force_computation_on_known_samples():
    found = point_figures(KNOWN, with_majority=True)
    assert found == pytest.approx(brute_figures(KNOWN))
    # by hand: mean (2/4 + 1/4 + 2/4) / 3; maj: "4" right, "7" wrong, "b" right; best (1.2 + 0.9 + 1.1) / 3
    assert found == pytest.approx({"mean_at_k": 5 / 12, "maj_at_k": 2 / 3, "best_at_k": 3.2 / 3})


def test_a_tie_goes_to_the_earliest_answer_and_a_prompt_with_no_readable_answer_is_wrong():
    tie = [Sample(False, 0, "x"), Sample(True, 1, "y"), Sample(True, 1, "y"), Sample(False, 0, "x")]
    assert point_figures([tie], True)["maj_at_k"] == brute_majority(tie) == 0.0
    unread = [Sample(True, 1.0), Sample(True, 1.0)]
    assert point_figures([unread], True)["maj_at_k"] == 0.0
    assert point_figures([unread], False)["maj_at_k"] is None  # no extractor: unavailable, not 0


def exact_bootstrap_std(prompts) -> dict:
    """The bootstrap's exact distribution: every k-draw with replacement of every prompt's samples, each equally
    likely; the population std of each figure over all of them."""
    per_prompt = [list(itertools.product(p, repeat=len(p))) for p in prompts]
    values: dict[str, list[float]] = {"mean_at_k": [], "maj_at_k": [], "best_at_k": []}
    for draw in itertools.product(*per_prompt):
        for name, value in brute_figures(draw).items():
            values[name].append(value)
    out = {}
    for name, found in values.items():
        mean = sum(found) / len(found)
        out[f"{name}_std"] = math.sqrt(sum((v - mean) ** 2 for v in found) / len(found))
    return out


def test_the_bootstrap_spread_is_the_spread_over_redrawn_sample_subsets_and_is_seeded():
    small = [[Sample(True, 1.0, "1"), Sample(False, 0.2, "2"), Sample(False, 0.5, "2")], KNOWN[2][:3]]
    exact = exact_bootstrap_std(small)  # 27 x 27 draws, enumerated
    sampled = bootstrap_std(small, with_majority=True, rounds=4000)
    for name, value in exact.items():
        assert sampled[name] == pytest.approx(value, abs=0.012), name
    assert bootstrap_std(small, True) == bootstrap_std(small, True)  # the same samples, the same spread
    assert figures_at_k(small, False)["maj_at_k_std"] is None


def test_a_record_carries_the_figures_and_per_source_figures_equal_those_of_the_sources_prompts():
    prompts = ["p1", "p2", "p3"]
    record = eval_record(
        3,
        prompts,
        ["a", "b", "c"],
        {"exact_answer": [1.0, 0.0, 1.0]},
        [2, 2, 2],
        "exact_answer",
        k=4,
        samples=KNOWN,
        groups=["math", "trivia", "math"],
        best_metric="maj_at_k",
    )
    assert record["pass_at_k"] == 1.0 and record["best_checkpoint_metric"] == "maj_at_k"
    assert record["mean_at_k"] == pytest.approx(5 / 12) and record["best_at_k_std"] > 0
    math_group = record["groups"]["math"]
    assert math_group["n"] == 2 and math_group["accuracy"] == 1.0
    assert {k: math_group[k] for k in ("mean_at_k", "maj_at_k", "best_at_k")} == pytest.approx(
        brute_figures([KNOWN[0], KNOWN[2]])
    )
    assert [p["group"] for p in record["prompts"]] == ["math", "trivia", "math"]
    from workbench.ui.heldout_view import changed_answers_html

    assert "Per data source: math: n 2, accuracy 1.000, pass@4 1.000, mean@4 0.500 ±" in changed_answers_html(
        [record], []
    )
    assert any(line.startswith("trivia: n 1") for line in eval_results.group_texts(record))
    unavailable = eval_record(
        3, prompts, ["a"] * 3, {"r": [1.0] * 3}, [1] * 3, "r", k=4, samples=KNOWN, majority_note="no extractor"
    )
    assert unavailable["maj_at_k"] is None and unavailable["maj_at_k_note"] == "no extractor"
    assert "maj@4 unavailable" in eval_results.at_k_text(unavailable)
    greedy_only = eval_record(1, prompts, ["a"] * 3, {"r": [1.0] * 3}, [1] * 3, "r")
    assert "mean_at_k" not in greedy_only and "groups" not in greedy_only
    assert eval_results.curve_points([greedy_only])[0]["mean_at_k"] is None


def test_the_best_checkpoint_is_chosen_by_the_runs_figure():
    records = [
        {"step": 1, "accuracy": 0.5, "pass_at_k": 0.5, "maj_at_k": 0.9, "best_checkpoint_metric": "maj_at_k"},
        {"step": 2, "accuracy": 0.8, "pass_at_k": 0.6, "maj_at_k": 0.4, "best_checkpoint_metric": "maj_at_k"},
    ]
    assert best_evaluation(records)["step"] == 1
    assert best_evaluation(records, metric="accuracy")["step"] == 2
    assert (
        best_evaluation([{k: v for k, v in r.items() if k != "best_checkpoint_metric"} for r in records])["step"] == 2
    )
    from workbench.ui.runs_view import best_text

    assert best_text({**records[0], "k": 4}) == "best 1 (maj@4 90%)"
    assert best_text({"step": 2, "accuracy": 0.8}) == "best 2 (80%)"


def test_maj_compares_answers_as_each_correctness_reward_reads_them():
    row = {"answers": ["Paris"]}
    exact = answer_key_for("exact_answer")
    assert exact("so <answer> 42. </answer>", {}) == exact("<answer>42</answer>", {}) == "42"
    demo = answer_key_for("mentions_answer")
    assert demo("It is PARIS.", row) == demo("paris", row) == "paris" and demo("Lyon", row) == "lyon"
    pytest.importorskip("math_verify")
    gsm8k = answer_key_for("accuracy_reward")
    assert gsm8k("so \\boxed{18}", {}) == gsm8k("The answer is \\boxed{ 18 }", {}) and gsm8k("18", {}) is None
    assert majority_note("exact_answer") == ""
    assert "keyword_presence has no answer extractor" in majority_note("keyword_presence")

    def own(completions=None, **kwargs):
        return [1.0] * len(completions)

    own.answer_key = lambda text: text.strip()[-1:]
    assert majority_note("own", own) == "" and answer_key_for("own", own)("x = 3", {}) == "3"

    def broken(completions=None, **kwargs):
        return [0.0] * len(completions)

    broken.answer_key = lambda text: text[100]
    with pytest.raises(RewardError, match="reward 'broken': its answer_key failed on a held-out completion"):
        answer_key_for("broken", broken)("short", {})


def test_the_held_out_chart_and_the_runs_overlay_draw_the_spread_as_bands():
    records = [
        eval_record(
            s, ["p1", "p2", "p3"], ["a"] * 3, {"exact_answer": [1.0, 0, 0]}, [1] * 3, "exact_answer", k=4, samples=KNOWN
        )
        for s in (0, 2)
    ]
    figure = held_out_figure(records, [{"step": 1, "reward": 0.5}, {"step": 2, "reward": 0.7}])
    names = [trace.name for trace in figure.data]
    assert {"mean@4 (right)", "maj@4 (right)", "best@4 (total reward)"} <= set(names)
    assert sum(trace.fill == "toself" for trace in figure.data) == 3
    overlay = overlay_runs({"run": eval_results.as_metrics(records)}, eval_results.HELD_OUT_AT_K["mean_at_k"])
    assert [trace.fill for trace in overlay.data].count("toself") == 1


def test_the_settings_are_checked_before_any_model_loads():
    gsm8k = RunConfig.for_task("gsm8k", dataset_name=str(GSM8K_SAMPLE), eval_strategy="steps", eval_size=2)
    found = {p.field: p for p in validate_config(gsm8k.with_changes(eval_group_column="source"))}
    assert "'source'" in found["eval_group_column"].rule and "question" in found["eval_group_column"].rule
    assert validate_config(gsm8k.with_changes(eval_group_column="answer")) == []
    needs_k = {p.field: p for p in validate_config(gsm8k.with_changes(best_checkpoint_metric="mean_at_k"))}
    assert "needs eval_pass_k >= 2" in needs_k["best_checkpoint_metric"].rule
    keywords = RunConfig.for_task("keywords", eval_strategy="steps", eval_pass_k=2, best_checkpoint_metric="maj_at_k")
    assert any(p.field == "best_checkpoint_metric" and "reads none" in p.rule for p in validate_config(keywords))
    wrong = {p.field for p in validate_config(RunConfig(entropy_coef=-0.1, entropy_target=-1.0))}
    assert {"entropy_coef", "entropy_target"} <= wrong


def test_trls_entropy_settings_reach_grpoconfig_under_their_names():
    from workbench.spec.trl_settings import grpo_settings

    settings = grpo_settings(RunConfig(entropy_coef=0.01, use_adaptive_entropy=True, entropy_target=1.5))
    assert (settings["entropy_coef"], settings["use_adaptive_entropy"], settings["entropy_target"]) == (0.01, True, 1.5)


@pytest.mark.slow  # loads the tiny model; 3 prompts answered greedily and twice sampled, 6 tokens each
def test_the_evaluator_gives_each_data_source_its_figures_and_votes_by_a_reward_files_answer_key(tiny_model):
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from workbench.trainer.evaluator import Evaluator, Policy

    def own(completions=None, **kwargs):  # a reward file's correctness reward, with its own extractor
        return [1.0 if len(c) % 2 == 0 else 0.0 for c in completions]

    own.answer_key = lambda text: str(len(text) % 2)
    tokenizer = AutoTokenizer.from_pretrained(tiny_model)
    model = AutoModelForCausalLM.from_pretrained(tiny_model)
    cfg = RunConfig(
        model=tiny_model,
        reward_names=["own"],
        correctness_reward="own",
        eval_pass_k=2,
        eval_group_column="source",
        max_completion_length=6,
    )
    rows = [{"prompt": p, "source": s} for p, s in (("one", "a"), ("two", "b"), ("three", "a"))]
    policy = Policy(model, tokenizer, torch.device("cpu"), [tokenizer.eos_token_id], [own])
    record = Evaluator(policy, cfg, rows).evaluate(0)
    assert set(record["groups"]) == {"a", "b"} and record["groups"]["a"]["n"] == 2
    assert record["maj_at_k"] is not None and "maj_at_k_note" not in record
    for name in ("mean_at_k", "best_at_k"):
        weighted = sum(record["groups"][g][name] * record["groups"][g]["n"] for g in ("a", "b")) / 3
        assert weighted == pytest.approx(record[name])  # every prompt counts once, in its own source
    assert record["mean_at_k_std"] >= 0 and [p["group"] for p in record["prompts"]] == ["a", "b", "a"]
