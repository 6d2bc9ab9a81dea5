"""The signal check's report from made-up group scores (spec/signal_check.py)."""

import pytest

from workbench.spec.signal_check import GroupScores, report_lines, signal_report


def group(totals, correctness=None, lengths=None, truncated=None):
    n = len(totals)
    return GroupScores(
        totals=totals, correctness=correctness, lengths=lengths or [10] * n, truncated=truncated or [False] * n
    )


def test_no_correct_answer_says_nothing_will_learn():
    groups = [group([0.5, 0.2], [0.0, 0.0]) for _ in range(8)]  # format rewards spread, answers all wrong
    report = signal_report(groups, "gsm8k on tiny", "accuracy_reward")
    assert report.groups_with_correct == 0 and report.correctness_rate == 0.0
    assert report.groups_with_spread == 8
    assert not report.learns
    assert report.verdict == (
        "gsm8k on tiny: 0 of 8 groups have any correct answer; nothing will learn - "
        "pick a larger model or an easier task"
    )


def test_zero_spread_groups_are_counted_and_none_counts_as_zero():
    groups = [
        group([1.0, 0.0, 1.0, 0.0], [1.0, 0.0, 1.0, 0.0]),
        group([0.0, 0.0, 0.0, 0.0], [0.0] * 4),
        group([None, 0.0, None, 0.0], [None, 0.0, None, 0.0]),
        group([0.3, 0.3, 0.3, 0.3], [0.0] * 4),
    ]
    report = signal_report(groups, "arithmetic on tiny", "exact_answer")
    assert report.groups_with_spread == 1
    assert report.zero_spread_share == pytest.approx(0.75)
    assert report.reward_spread == pytest.approx(0.57735 / 4, rel=1e-4)  # stdev([1,0,1,0]) over 4 groups
    assert report.correctness_rate == pytest.approx(2 / 16)
    assert report.groups_with_correct == 1
    assert report.learns and "1 of 4 groups have a spread" in report.verdict


def test_without_correctness_reward_the_spread_decides():
    report = signal_report([group([0.1, 0.9]), group([0.4, 0.4])], "demo on tiny")
    assert report.correctness_rate is None and report.groups_with_correct is None
    assert report.verdict == "demo on tiny: 1 of 2 groups have a spread: this run has a signal"
    assert "no correctness reward" in "\n".join(report_lines(report))
    flat = signal_report([group([0.4, 0.4]), group([0.0, 0.0])], "demo on tiny")
    assert not flat.learns and "none of 2 groups has a reward spread" in flat.verdict


def test_truncation_and_all_correct_are_named():
    cut = signal_report([group([0.0, 1.0], [0.0, 1.0], lengths=[32, 20], truncated=[True, True])], "x", "exact_answer")
    assert cut.truncation_rate == 1.0 and cut.mean_length == 26.0
    assert cut.learns and "100% of completions are cut at max_completion_length" in cut.verdict
    solved = signal_report([group([1.0, 1.2], [1.0, 1.0])], "x", "exact_answer")
    assert not solved.learns and "already correct" in solved.verdict


def test_report_dict_and_lines_carry_every_figure():
    report = signal_report([group([0.0, 1.0], [0.0, 1.0])], "x", "exact_answer")
    data = report.to_dict()
    assert {
        "groups",
        "reward_spread",
        "zero_spread_share",
        "correctness_rate",
        "groups_with_correct",
        "truncation_rate",
        "verdict",
        "learns",
    } <= set(data)
    assert report_lines(report)[-1] == f"verdict: {report.verdict}"


def test_no_groups_is_refused():
    with pytest.raises(ValueError, match="at least one group"):
        signal_report([], "x")
