"""Health alarms: each fires on the pattern it names, stays quiet on a healthy run, and explains itself."""

import pytest

from workbench.insight import health


def make_metrics(steps=8, beta=0.04, **series):
    """Healthy metric records (TRL names); `series` replaces a metric by a per-step function or a value.

    `beta=0` leaves `kl` out, as TRL does; a value of None removes the metric.
    """
    records = []
    for step in range(1, steps + 1):
        record = {
            "step": step,
            "loss": 0.02 + 0.01 * (-1) ** step,
            "reward": 0.3 + 0.05 * step,
            "reward_std": 0.2,
            "frac_reward_zero_std": 0.125,
            "completions/mean_length": 30.0 - step,
            "completions/clipped_ratio": 0.1,
            "grad_norm": 0.8,
        }
        if beta:
            record["kl"] = 0.002 * step
        for name, value in series.items():
            value = value(step) if callable(value) else value
            if value is None:
                record.pop(name, None)
            else:
                record[name] = value
        records.append(record)
    return records


def kinds(alarms):
    return [alarm.kind for alarm in alarms]


CONFIG_SEED_002 = {
    "beta": 0.0,
    "num_iterations": 1,
    "loss_type": "grpo",
    "num_generations": 8,
    "max_completion_length": 48,
}


def test_healthy_run_raises_nothing():
    assert health.check_health(make_metrics(20)) == []


@pytest.mark.parametrize("records", [[], make_metrics(1), make_metrics(2)], ids=["empty", "one-step", "two-steps"])
def test_too_few_steps_raise_nothing(records):
    assert health.check_health(records) == []


@pytest.mark.parametrize(
    "zero_std, level",
    [(1.0, "error"), (lambda s: 1.0 if s % 2 else 0.75, "warning")],
    ids=["every-group", "most-groups"],
)
def test_no_learning_signal(zero_std, level):
    alarms = health.check_health(make_metrics(6, frac_reward_zero_std=zero_std), {"num_generations": 8})
    alarm = alarms[0]
    assert (alarm.kind, alarm.level, alarm.step) == ("no_signal", level, 6)
    assert "all 8 completions the same reward" in alarm.message
    assert "every advantage 0" in alarm.message and "temperature" in alarm.message


def test_no_signal_looks_only_at_recent_steps():
    recovered = make_metrics(8, frac_reward_zero_std=lambda s: 1.0 if s <= 5 else 0.0)
    assert "no_signal" not in kinds(health.check_health(recovered))


def test_loss_near_zero_explained_by_seed_002():
    records = make_metrics(5, beta=0, loss=lambda s: 1e-9 * (-1) ** s)
    alarm = health.check_health(records, CONFIG_SEED_002)[0]
    assert (alarm.kind, alarm.level) == ("loss_zero", "info")
    assert "-mean(advantage)" in alarm.message and "advantages sum to zero" in alarm.message


def test_loss_near_zero_without_config_infers_beta_zero_from_missing_kl():
    alarm = health.check_health(make_metrics(5, beta=0, loss=0.0))[0]
    assert alarm.kind == "loss_zero" and 'loss_type "grpo"' in alarm.message


def test_loss_near_zero_on_a_token_weighted_loss_names_that_loss_not_grpo():
    config = {**CONFIG_SEED_002, "loss_type": "dapo"}
    alarm = health.check_health(make_metrics(5, beta=0, loss=0.0), config)[0]
    assert alarm.kind == "loss_zero" and 'loss_type "dapo"' in alarm.message
    assert "grpo" not in alarm.message


def test_loss_near_zero_blamed_on_equal_rewards_when_that_is_the_cause():
    records = make_metrics(5, beta=0, loss=0.0, frac_reward_zero_std=1.0)
    alarms = health.check_health(records, CONFIG_SEED_002)
    assert kinds(alarms) == ["no_signal", "loss_zero"]
    assert "equal rewards" in alarms[1].message


def test_kl_spike_names_the_step_and_the_jump():
    records = make_metrics(15, kl=lambda s: 0.8 if s in (12, 13) else 0.02)
    alarm = health.check_health(records)[0]
    assert (alarm.kind, alarm.step) == ("kl_spike", 12)
    assert "0.8 from a median of 0.02" in alarm.message and "40x" in alarm.message
    assert "still 0.8 at the next step" in alarm.message


def test_a_kl_that_climbs_into_the_tenths_while_learning_is_no_spike():
    """The demo's first steps: 0 to 0.2 as the answers get shorter, 5x the median but far from a jump."""
    ramp = [0.0, 0.01, 0.02, 0.03, 0.04, 0.09, 0.04, 0.04, 0.22, 0.21, 0.15, 0.1]
    assert "kl_spike" not in kinds(health.check_health(make_metrics(12, kl=lambda s: ramp[s - 1])))


def test_one_high_kl_step_is_an_estimate_s_outlier_not_a_spike():
    """The demo's step 35: k3 over the sampled tokens, one token far likelier under the reference."""
    quiet = make_metrics(15, kl=lambda s: 13.3 if s == 12 else 0.2)
    assert "kl_spike" not in kinds(health.check_health(quiet))
    # the newest step alone high: not yet a spike, until the next step says whether it stayed
    assert "kl_spike" not in kinds(health.check_health(make_metrics(15, kl=lambda s: 13.3 if s == 15 else 0.2)))


def long_run(**series):
    """40 healthy steps (the answers' length steady) with `series` replaced, as make_metrics."""
    return make_metrics(40, **{"completions/mean_length": 20.0, **series})


def test_a_skipped_one_step_kl_outlier_is_named_with_the_rule_that_skipped_it():
    """The demo's step 35: KL 13.3, then back to 0.2; the page must not say "nothing unusual in KL"."""
    from workbench.ui.train_view import alarms_html

    alarms = health.check_health(long_run(kl=lambda s: 13.3 if s == 35 else 0.2))
    assert kinds(alarms) == ["kl_outlier"]
    note = alarms[0]
    assert (note.level, note.step, note.title) == ("info", 35, "KL outlier skipped")
    assert "KL: one-step spike to 13.3 at step 35, skipped as an outlier (it fell back to 0.2 the next step" in (
        note.message
    )
    assert "a KL alarm needs 2 steps in a row above 5x the median of the steps before" in note.message
    page = alarms_html(alarms, has_metrics=True)
    assert "nothing unusual in KL" not in page and "13.3 at step 35" in page


def test_the_newest_high_kl_step_is_named_until_the_next_step_decides():
    note = health.check_health(make_metrics(15, kl=lambda s: 13.3 if s == 15 else 0.2))[0]
    assert (note.kind, note.step, note.title) == ("kl_outlier", 15, "KL: one high step, not an alarm yet")
    assert "the next step says whether it stays" in note.message


def test_earlier_outliers_are_listed_and_a_spike_that_stays_is_none():
    spiky = long_run(kl=lambda s: 9.0 if s in (12, 20, 35) else 0.2)
    assert "Also skipped: steps 12, 20." in health.check_health(spiky)[0].message
    stayed = health.check_health(make_metrics(12, kl=lambda s: 6.0 if s >= 10 else 0.2))
    assert "kl_spike" in kinds(stayed) and "kl_outlier" not in kinds(stayed)
    # an outlier after a spike is still named, beside the spike's alarm
    both = health.check_health(long_run(kl=lambda s: 6.0 if s in (10, 11) else 9.0 if s == 35 else 0.2))
    assert kinds(both) == ["kl_spike", "kl_outlier"] and both[1].step == 35


@pytest.mark.parametrize(
    "kl",
    [lambda s: 1e-4 if s < 5 else 1e-3, lambda s: 0.01 * s, lambda s: float("nan") if s == 4 else 0.02],
    ids=["tiny-values", "steady-growth", "nan-point"],
)
def test_kl_without_a_spike_is_quiet(kl):
    assert "kl_spike" not in kinds(health.check_health(make_metrics(12, kl=kl)))


def test_kl_spike_from_zero_baseline():
    alarm = health.check_health(make_metrics(6, kl=lambda s: 0.6 if s >= 5 else 0.0))[0]
    assert alarm.kind == "kl_spike" and "up from zero" in alarm.message


def test_completions_all_at_max_length():
    alarm = health.check_health(make_metrics(6, **{"completions/clipped_ratio": 1.0}), CONFIG_SEED_002)[0]
    assert alarm.kind == "clipped" and "100% of the completions" in alarm.message
    assert "max_completion_length (48 tokens)" in alarm.message


def test_length_collapse_needs_a_fall_not_just_short_answers():
    collapsed = make_metrics(9, **{"completions/mean_length": lambda s: 30.0 if s <= 3 else 1.2})
    alarm = next(a for a in health.check_health(collapsed) if a.kind == "length_collapse")
    assert "1.2 tokens" in alarm.message and "from 30.0" in alarm.message
    always_short = make_metrics(9, **{"completions/mean_length": 1.5})
    assert "length_collapse" not in kinds(health.check_health(always_short))


def test_alarms_are_sorted_by_level_and_plain_data():
    records = make_metrics(6, beta=0, loss=0.0, frac_reward_zero_std=1.0, **{"completions/clipped_ratio": 1.0})
    alarms = health.check_health(records)
    assert [a.level for a in alarms] == sorted((a.level for a in alarms), key=health.LEVELS.index)
    assert set(alarms[0].to_dict()) == {"level", "title", "message", "step", "kind"}


def test_config_object_is_read_by_attribute():
    class Config:
        beta, num_iterations, loss_type = 0.0, 1, "grpo"

    alarm = health.check_health(make_metrics(4, loss=0.0), Config())[0]
    assert "That is expected here" in alarm.message


def test_records_out_of_order_and_with_junk_values():
    records = make_metrics(6, frac_reward_zero_std=1.0)[::-1]
    records[0]["frac_reward_zero_std"] = "n/a"  # step 6 unreadable: the window is steps 3-5
    alarm = health.check_health(records)[0]
    assert alarm.kind == "no_signal" and alarm.step == 5


def kl_spike_by_the_definition(series):
    """The latest KL spike as the rule reads, point by point: the reference for the vectorised check."""
    import statistics

    latest = None
    for i in range(1, len(series) - 1):
        step, value = series[i]
        baseline = statistics.median(v for _, v in series[max(0, i - health.KL_BASELINE_WINDOW) : i])
        threshold = max(health.KL_SPIKE_FLOOR, health.KL_SPIKE_FACTOR * max(baseline, 1e-12))
        if value > threshold and series[i + 1][1] > threshold:
            latest = (step, value, baseline, series[i + 1][1])
    return latest


@pytest.mark.parametrize("seed", range(6), ids=lambda seed: f"seed-{seed}")
def test_the_kl_check_finds_the_spike_the_rule_defines(seed):
    import random

    rng = random.Random(seed)
    count = rng.choice([2, 5, 10, 11, 12, 40, 300])
    # around the floor, with runs of high steps (a spike needs two in a row)
    high = [rng.random() < 0.15 for _ in range(count)]
    series = [
        (step, abs(rng.gauss(0.3, 0.3)) * (8 if high[step - 1] or (step > 1 and high[step - 2]) else 1))
        for step in range(1, count + 1)
    ]
    assert health._latest_kl_spike(series) == kl_spike_by_the_definition(series)


@pytest.mark.parametrize(
    "records",
    [
        make_metrics(15, kl=lambda s: 0.8 if s >= 12 else 0.02),
        make_metrics(6, beta=0, loss=0.0, frac_reward_zero_std=1.0),
        make_metrics(9, **{"completions/mean_length": lambda s: 30.0 if s <= 3 else 1.2}),
        make_metrics(12, kl=lambda s: float("nan") if s == 4 else 0.02),
        make_metrics(2000, kl=lambda s: 0.9 if s == 1500 else 0.02),
        make_metrics(6, **{"completions/clipped_ratio": 1.0}),
    ],
    ids=["kl-spike", "no-signal", "length-collapse", "nan-point", "long-run", "clipped"],
)
def test_a_metrics_frame_gives_the_alarms_its_records_give(records):
    from workbench.insight.figures import metrics_frame

    assert health.check_health(metrics_frame(records), CONFIG_SEED_002) == health.check_health(records, CONFIG_SEED_002)


def test_a_reward_that_could_not_score_some_completions_is_named_with_its_share():
    metrics = make_metrics(
        6, **{"rewards/picky/failed": lambda step: 0.25 if step in (2, 5) else 0.0, "rewards/fine/failed": 0.0}
    )
    alarms = [a for a in health.check_health(metrics, {"reward_failure_score": -1.0}) if a.kind == "reward_failures"]
    assert len(alarms) == 1 and alarms[0].step == 5 and alarms[0].title == "picky could not score some completions"
    assert "raised on 25% of the completions at step 5 (2 step(s) with failures so far)" in alarms[0].message
    assert "reward_failure_score (-1.0)" in alarms[0].message and "reward_errors" in alarms[0].message
    # the frame the dashboard reads gives the same alarm
    import pandas as pd

    assert health.check_reward_failures(pd.DataFrame(metrics), {"reward_failure_score": -1.0}) == alarms


# ---------------------------------------------------------------- the alarms that know which reward means "correct"

ARITHMETIC = {
    "task": "arithmetic",
    "reward_names": ["format_answer_tag", "exact_answer"],
    "reward_weights": [0.2, 1.0],
    "correctness_reward": "exact_answer",
}


def easy_reward_metrics(steps=8, right=lambda s: 0.1, tag=lambda s: min(1.0, 0.2 * s)):
    return make_metrics(steps, **{"rewards/exact_answer/mean": right, "rewards/format_answer_tag/mean": tag})


def test_a_shaping_reward_learned_while_correctness_stays_flat_is_named():
    alarms = [a for a in health.check_health(easy_reward_metrics(), ARITHMETIC) if a.kind == "easy_reward"]
    assert len(alarms) == 1 and alarms[0].step == 8 and alarms[0].title == "Learned format_answer_tag, not the answers"
    assert (
        "rose from 0.40 to 1.00" in alarms[0].message
        and "exact_answer, the reward for a right answer, stayed at 0.10" in alarms[0].message
    )
    # the frame the dashboard reads gives the same alarm
    from workbench.insight.figures import metrics_frame

    assert health.check_easy_reward(metrics_frame(easy_reward_metrics()), ARITHMETIC) == alarms


@pytest.mark.parametrize(
    "metrics, config",
    [
        (easy_reward_metrics(right=lambda s: 0.05 * s), ARITHMETIC),  # the answers improve too: both learned
        (easy_reward_metrics(tag=lambda s: 0.8), ARITHMETIC),  # not saturated
        (easy_reward_metrics(tag=lambda s: 0.95), ARITHMETIC),  # full marks from the start: learned nothing new
        (easy_reward_metrics(steps=5), ARITHMETIC),  # too few steps to tell a start from now
        (easy_reward_metrics(), {**ARITHMETIC, "correctness_reward": "none"}),  # no reward means "correct"
        (easy_reward_metrics(), None),
        (easy_reward_metrics(), {"not_a_field": 1}),  # a config it cannot read: no roles to judge by
    ],
    ids=[
        "both-rise",
        "not-saturated",
        "saturated-from-start",
        "few-steps",
        "no-correctness",
        "no-config",
        "bad-config",
    ],
)
def test_the_easy_reward_alarm_stays_quiet_otherwise(metrics, config):
    assert "easy_reward" not in kinds(health.check_health(metrics, config))


def evals_at(*points, n=16):
    """eval.jsonl records: (step, accuracy) each."""
    return [{"step": step, "accuracy": accuracy, "n": n, "rewards": {}} for step, accuracy in points]


def test_held_out_accuracy_falling_while_the_training_reward_rises_is_named():
    metrics = make_metrics(12)  # the reward rises 0.05 a step
    evals = evals_at((0, 0.25), (4, 0.5), (8, 0.375), (12, 0.25))
    alarms = [a for a in health.check_health(metrics, None, evals) if a.kind == "held_out_falls"]
    assert len(alarms) == 1 and alarms[0].step == 12
    assert "fell from 50% at step 4 to 25% at step 12 (16 prompts)" in alarms[0].message
    assert "training reward rose from 0.45 to 0.85" in alarms[0].message  # the 3-step means ending at steps 4 and 12
    assert "overfitting" in alarms[0].message and "reward hacking" in alarms[0].message


@pytest.mark.parametrize(
    "metrics, evals",
    [
        (make_metrics(12), evals_at((0, 0.25), (4, 0.5), (12, 0.75))),  # both rise: learning
        (make_metrics(12, reward=0.5), evals_at((0, 0.5), (12, 0.25))),  # the reward is flat too
        (make_metrics(12), evals_at((0, 0.5), (12, 0.4375))),  # one prompt of 16 flipped: noise
        (make_metrics(12), evals_at((0, 0.5), (12, 0.25), n=4)),  # 25 points, but one prompt of 4
        (make_metrics(12), evals_at((0, 0.5))),  # one evaluation: no trend
        (make_metrics(12), []),  # evaluation off
    ],
    ids=["both-rise", "flat-reward", "one-prompt", "small-drop-small-n", "one-eval", "no-eval"],
)
def test_the_held_out_alarm_stays_quiet_otherwise(metrics, evals):
    assert "held_out_falls" not in kinds(health.check_health(metrics, None, evals))
