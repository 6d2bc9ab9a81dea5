"""Pure functions behind the Setup tab's signal check: the correctness_reward choices and the report as HTML.

The check itself runs in a process of its own (jobs/signal_job.py); the tab reads how it stands and
hands it here. No gradio, no I/O.
"""

from __future__ import annotations

from html import escape

from workbench.spec.reward_choice import NO_CORRECTNESS

TASKS_OWN = "the task's"


def correctness_choices(reward_names: list[str]) -> list[tuple[str, str]]:
    """(label, value) for the correctness_reward dropdown: blank for the task's own, each of the run's
    rewards, and none (no reward means a right answer)."""
    return (
        [(f"({TASKS_OWN})", "")]
        + [(name, name) for name in reward_names]
        + [(f"{NO_CORRECTNESS} (no reward means a right answer)", NO_CORRECTNESS)]
    )


def kept_correctness(current: str | None, reward_names: list[str]) -> str:
    """The chosen correctness reward while it is still one of the run's rewards, else the task's (blank)."""
    return current if current in (*reward_names, NO_CORRECTNESS) else ""


def _percent(value) -> str:
    return "-" if value is None else f"{value:.0%}"


def signal_html(state: dict) -> str:
    """The check while it runs, its report with the verdict, or why it failed."""
    if state.get("state") == "running":
        return '<p class="wb-note">Checking the signal: sampling groups from the base model with these settings ...</p>'
    if state.get("state") == "failed":
        return (
            f'<div class="wb-badge wb-badge-invalid"><span class="wb-badge-title">Signal check failed</span>'
            f"<pre>{escape(str(state.get('error', ''))[-2000:])}</pre></div>"
        )
    report = state.get("report") or {}
    rows = [
        ("groups sampled", f"{report.get('groups')} ({report.get('completions')} completions)"),
        ("reward spread (mean of group std)", f"{report.get('reward_spread', 0.0):.3f}"),
        (
            "groups with zero spread",
            f"{report.get('groups', 0) - report.get('groups_with_spread', 0)} of "
            f"{report.get('groups')} ({_percent(report.get('zero_spread_share'))})",
        ),
    ]
    if report.get("correctness_reward"):
        rows += [
            (f"correct ({report['correctness_reward']} full marks)", _percent(report.get("correctness_rate"))),
            ("groups with a correct answer", f"{report.get('groups_with_correct')} of {report.get('groups')}"),
        ]
    else:
        rows.append(("correctness", "the run has no correctness reward"))
    rows.append(
        (
            "cut at max_completion_length",
            f"{_percent(report.get('truncation_rate'))} (mean length {report.get('mean_length', 0.0):.1f} tokens)",
        )
    )
    table = "".join(f"<tr><td>{escape(k)}</td><td class='wb-num'>{escape(v)}</td></tr>" for k, v in rows)
    badge = "wb-badge-valid" if report.get("learns") else "wb-badge-invalid"
    return (
        f'<div class="wb-badge {badge}" id="wb-signal-verdict"><span class="wb-badge-title">'
        f"{'Has a learning signal' if report.get('learns') else 'Will not learn'}</span>"
        f"{escape(str(report.get('verdict', '')))}</div><table class='wb-table'>{table}</table>"
    )
