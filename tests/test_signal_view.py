"""The Setup tab's signal check, shown (ui/signal_view.py): the correctness_reward choices and the report."""

from workbench.spec.signal_check import GroupScores, signal_report
from workbench.ui import signal_view


def test_correctness_choices_follow_the_rewards_ticked():
    values = [value for _, value in signal_view.correctness_choices(["exact_answer", "format_answer_tag"])]
    assert values == ["", "exact_answer", "format_answer_tag", "none"]
    assert signal_view.kept_correctness("exact_answer", ["exact_answer"]) == "exact_answer"
    assert signal_view.kept_correctness("exact_answer", ["brevity"]) == ""  # unticked: back to the task's
    assert signal_view.kept_correctness("none", ["brevity"]) == "none"


def test_report_shows_verdict_and_figures_escaped():
    report = signal_report(
        [GroupScores(totals=[0.0, 0.5], lengths=[4, 8], truncated=[False, True], correctness=[0.0, 0.0])],
        "<b>x</b>",
        "exact_answer",
    )
    html = signal_view.signal_html({"state": "done", "report": report.to_dict()})
    assert "Will not learn" in html and "0 of 1 groups have any correct answer" in html
    assert "&lt;b&gt;x&lt;/b&gt;" in html and "<b>x</b>" not in html
    assert "50%" in html  # one of two completions cut at max_completion_length
    assert "Signal check failed" in signal_view.signal_html({"state": "failed", "error": "exit code 2"})
    assert "Checking the signal" in signal_view.signal_html({"state": "running"})
