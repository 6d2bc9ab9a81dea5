"""One numbering of a group's completions: the card, the step's token summary, the Explore table, its CSV and the
command line all count a completion's place in its group from 0 (the run folder's own count), so "#3" on a card
is "#3" in the token summary and 3 in the table."""

from __future__ import annotations

import re

from workbench.insight import groups
from workbench.insight.group_cards import render_group
from workbench.insight.token_cards import summary_html
from workbench.insight.tokens import step_summary
from workbench.ui.explorer_view import table_rows

G = 4


def _completions():
    return [
        {
            "step": 1,
            "group": g,
            "prompt": f"p{g}",
            "completion": f"c{g}{i}",
            "rewards": {"r": float(i)},
            "reward": float(i),
        }
        for g in range(2)
        for i in range(G)
    ]


def _token_records():
    """Token records of the round: only the last completion of group 1 has a large KL."""
    records = []
    for index in range(2 * G):
        big = index == 2 * G - 1
        records.append(
            {
                "step": 1,
                "round": 1,
                "index": index,
                "group": index // G,
                "tokens": ["a", "b"],
                "kl": [0.01, 9.0 if big else 0.02],
                "entropy": [0.1, 0.2],
                "clipped": [0, 0],
                "masked": [False, False],
                "ratio": None,
                "ref": True,
            }
        )
    return records


def test_the_card_and_the_token_summary_cite_the_same_number():
    step_groups = groups.groups_for_step(_completions(), 1)
    cards = "".join(render_group(g, i, len(step_groups)) for i, g in enumerate(step_groups, start=1))
    heads = re.findall(r"#(\d+) of (\d+)", cards)
    assert heads[:G] == [(str(i), str(G)) for i in range(G)]  # counted from 0
    summary = summary_html(step_summary(_token_records()), 1)
    assert "group 1 #3," in summary  # the 8th completion of the round is the 4th of group 1: card #3
    assert "#8" not in summary and "#7" not in summary


def test_the_explore_table_counts_as_the_csv_and_the_command_line():
    rows = [{"step": 1, "group": 1, "index": 3, "prompt": "p", "completion": "c", "reward": 1.0, "advantage": 0.5}]
    assert table_rows(rows)[0][:3] == [1, 1, 3]


def _worked_out(line: str) -> tuple[float, float]:
    """(what the shown numbers give, the advantage shown) of a card's arithmetic line."""
    found = re.fullmatch(
        r"\((-?[\d.]+) - (-?[\d.]+)\) / \(?([\d.]+)( \+ 1e-4\))?(?: \(step std\))? = ([+-][\d.]+)", line
    )
    assert found, line
    reward, mean, std, epsilon, shown = found.groups()
    return (float(reward) - float(mean)) / (float(std) + (1e-4 if epsilon else 0)), float(shown)


def test_the_advantage_arithmetic_works_out_with_the_numbers_shown():
    # rewards whose mean and std do not round to two decimals cleanly: (0.10 - 0.08) / 0.05 != +0.50
    rewards = [0.1, 0.04, 0.096, 0.084]
    records = [
        {"step": 1, "group": 0, "prompt": "p", "completion": f"c{i}", "rewards": {"r": r}, "reward": r}
        for i, r in enumerate(rewards)
    ]
    (group,) = groups.groups_for_step(records, 1)
    for item in group.completions:
        given, shown = _worked_out(item.arithmetic)
        assert abs(given - shown) <= 0.005 + 1e-9, item.arithmetic
