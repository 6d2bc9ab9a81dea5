"""Groups of completions: stats as TRL computes them, the arithmetic line, scaling and edge cases."""

import math

import pytest

from workbench.insight import groups


def trl_advantages(totals, group_size, scale_rewards="group"):
    """Advantages exactly as TRL 1.16's `_generate_and_score_completions` makes them (torch, nanstd)."""
    import torch
    from trl.trainer.utils import nanstd

    rewards = torch.tensor(totals, dtype=torch.float32)
    mean = torch.nanmean(rewards.view(-1, group_size), dim=1).repeat_interleave(group_size)
    if scale_rewards == "batch":
        std = nanstd(rewards).expand_as(rewards)
    else:
        std = nanstd(rewards.view(-1, group_size), dim=1).repeat_interleave(group_size)
    advantages = rewards - mean
    if scale_rewards != "none":
        advantages = advantages / (std + 1e-4)
    return torch.nan_to_num(advantages, nan=0.0).tolist()


def make_round(step, group_totals, scale_rewards="group", funcs=("brevity", "format"), **fields):
    """completions.jsonl records of one generation round, with TRL's advantages.

    `group_totals` is one list of total rewards per prompt; each total is
    split over the reward functions (the last one takes the remainder).
    """
    size = len(group_totals[0])
    flat = [t for totals in group_totals for t in totals]
    advantages = trl_advantages([math.nan if t is None else t for t in flat], size, scale_rewards)
    records = []
    for i, (total, advantage) in enumerate(zip(flat, advantages)):
        group, index = divmod(i, size)
        share = None if total is None else round(total / len(funcs), 6)
        scores = {f: share for f in funcs[:-1]}
        scores[funcs[-1]] = None if total is None else total - share * (len(funcs) - 1)
        records.append(
            {
                "step": step,
                "group": group,
                "prompt": f"Question {group}: name a colour.",
                "completion": f"Answer {index} to question {group}",
                "rewards": scores,
                "reward": total,
                "advantage": advantage,
                "length": 10 + index,
                "truncated": False,
                **fields,
            }
        )
    return records


@pytest.fixture
def two_rounds():
    return make_round(1, [[0.82, 0.61, 0.40, 0.61], [0.5, 0.5, 0.5, 0.5]]) + make_round(2, [[1.0, 0.0, 0.5, 0.25]])


def test_steps_are_listed_in_order(two_rounds):
    assert groups.available_steps(reversed(two_rounds)) == [1, 2]
    assert groups.latest_step(two_rounds) == 2
    assert groups.available_steps([]) == [] and groups.latest_step([]) is None


def test_group_stats_and_advantages_match_trl(two_rounds):
    first, second = groups.groups_for_step(two_rounds, 1)
    assert (first.group, second.group) == (0, 1)
    assert first.mean == pytest.approx(0.61)
    assert first.std == pytest.approx(0.1714643, abs=1e-6)  # Bessel-corrected: n - 1
    assert first.scaling == "group" and first.complete and first.notes == []
    for item, expected in zip(first.completions, trl_advantages([0.82, 0.61, 0.40, 0.61], 4)):
        assert item.recomputed_advantage == pytest.approx(expected, abs=1e-4)
        assert item.advantage == pytest.approx(expected)
    assert first.reward_names == ["brevity", "format"]


def test_arithmetic_line_reads_like_the_formula(two_rounds):
    first = groups.groups_for_step(two_rounds, 1)[0]
    # (0.82 - 0.61) / 0.17 is 1.24, not the +1.22 shown: enough digits that the shown numbers give it
    assert first.completions[0].arithmetic == "(0.8200 - 0.6100) / 0.1715 = +1.22"
    assert first.completions[2].arithmetic == "(0.4000 - 0.6100) / 0.1715 = -1.22"
    assert first.completions[1].arithmetic.endswith("= +0.00") and first.completions[1].zero_advantage


def test_equal_rewards_mean_no_signal(two_rounds):
    flat = groups.groups_for_step(two_rounds, 1)[1]
    assert flat.std == 0.0
    assert all(item.zero_advantage for item in flat.completions)
    assert flat.completions[0].arithmetic == "(0.50 - 0.50) / (0 + 1e-4) = +0.00"
    assert any("teaches the model nothing" in note for note in flat.notes)


@pytest.mark.parametrize(
    "scaling, phrase", [("none", "0.82 - 0.61 = +0.21"), ("batch", "(step std)")], ids=["none", "batch"]
)
def test_other_scalings_are_recognised_and_named(scaling, phrase):
    records = make_round(5, [[0.82, 0.61, 0.40, 0.61], [0.1, 0.9, 0.3, 0.2]], scale_rewards=scaling)
    first = groups.groups_for_step(records, 5)[0]
    assert first.scaling == scaling
    assert phrase in first.completions[0].arithmetic
    assert any(f'scale_rewards="{scaling}"' in note for note in first.notes)
    for item in first.completions:
        assert item.advantage == pytest.approx(item.recomputed_advantage, abs=1e-3)


def test_unexplained_advantages_are_shown_as_recorded():
    records = make_round(3, [[0.2, 0.4, 0.9]])
    for record, advantage in zip(records, (0.7, -1.3, 0.6)):
        record["advantage"] = advantage
    group = groups.groups_for_step(records, 3)[0]
    assert group.scaling == "unknown"
    assert [item.advantage for item in group.completions] == [0.7, -1.3, 0.6]
    assert group.completions[1].arithmetic == "recorded advantage -1.30"
    assert any("match none of TRL's scalings" in note for note in group.notes)


def test_given_scaling_that_disagrees_keeps_the_recorded_advantage():
    records = make_round(3, [[0.2, 0.4, 0.9]], scale_rewards="none")
    group = groups.groups_for_step(records, 3, scale_rewards="group")[0]
    assert group.completions[0].advantage == pytest.approx(records[0]["advantage"])
    assert group.completions[0].recomputed_advantage != pytest.approx(records[0]["advantage"])
    assert any("recorded ones are shown" in note for note in group.notes)


def test_half_written_group_is_marked_and_does_not_hide_the_scaling():
    records = make_round(4, [[0.9, 0.1, 0.5, 0.3], [0.2, 0.6, 0.4, 0.8]])[:6]  # the 2nd group is half there
    whole, half = groups.groups_for_step(records, 4)
    assert whole.scaling == "group" and whole.complete
    assert not half.complete and half.expected_size == 4 and len(half.completions) == 2
    assert any("2 of 4 completions recorded" in note for note in half.notes)
    # The trainer's advantage (from the whole group) is the one shown.
    assert half.completions[0].advantage == pytest.approx(records[4]["advantage"])


def test_unscorable_completion_is_left_out_of_the_stats():
    records = make_round(2, [[0.9, None, 0.3]])
    group = groups.groups_for_step(records, 2)[0]
    assert group.mean == pytest.approx(0.6)
    assert group.completions[1].reward is None and group.completions[1].advantage == 0.0
    assert "no reward function scored it" in group.completions[1].arithmetic
    assert group.completions[1].rewards == {"brevity": None, "format": None}


def test_missing_advantage_and_total_are_recomputed():
    records = make_round(1, [[1.0, 0.0]], funcs=("brevity",))
    for record in records:
        del record["advantage"], record["reward"]
    group = groups.groups_for_step(records, 1)[0]
    assert group.mean == pytest.approx(0.5)
    assert [round(item.advantage, 3) for item in group.completions] == [0.707, -0.707]


def test_chat_messages_become_text_and_flags_carry_over():
    records = make_round(1, [[0.3, 0.7]], truncated=True)
    records[0]["prompt"] = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Sky?"}]
    records[0]["completion"] = [{"role": "assistant", "content": "Blue."}]
    group = groups.groups_for_step(records, 1)[0]
    assert group.prompt == "system: Be brief.\nuser: Sky?"
    assert group.completions[0].completion == "Blue."
    assert all(item.truncated for item in group.completions)
    assert group.completions[1].length == 11


@pytest.mark.parametrize("step", [0, 99], ids=["before-first", "not-yet"])
def test_step_without_completions_is_empty(two_rounds, step):
    assert groups.groups_for_step(two_rounds, step) == []


def test_bad_scaling_names_the_field():
    with pytest.raises(ValueError, match=r"scale_rewards: got 'std'.*'group', 'batch', 'none'"):
        groups.groups_for_step([], 1, scale_rewards="std")


@pytest.mark.parametrize(
    "value, text",
    [(0.0, "0.00"), (0.615, "0.61"), (-1.1, "-1.10"), (0.0042, "0.0042"), (None, "—"), (12.345, "12.35")],
    ids=["zero", "two-decimals", "negative", "small", "missing", "large"],
)
def test_number_format(value, text):
    assert groups.format_number(value) == text


def test_signed_format_never_shows_minus_zero():
    assert groups.format_signed(-0.0001) == "-0.0001"
    assert groups.format_signed(-0.000) == "+0.00"
    assert groups.format_signed(1.1) == "+1.10"


def test_to_dict_is_plain_data(two_rounds):
    data = groups.groups_for_step(two_rounds, 2)[0].to_dict()
    assert data["complete"] is True and data["completions"][0]["arithmetic"].startswith("(1.000 - 0.438)")


# ---------------------------------------------------------------- a step recorded twice (resumed runs)


def test_a_step_recorded_again_after_a_resume_shows_its_newest_round_only():
    before = make_round(3, [[0.0, 0.0, 1.0, 1.0], [0.2, 0.4, 0.6, 0.8]])  # generated, then the crash
    after = make_round(3, [[0.9, 0.1, 0.5, 0.5], [1.0, 1.0, 0.0, 0.0]])  # the resumed run's round
    for records in (
        before + after,  # written one after the other
        make_round(2, [[0.1, 0.2, 0.3, 0.4]]) + before + make_round(2, [[0.5] * 4]) + after,
    ):
        first, second = groups.groups_for_step(records, 3)
        assert len(first.completions) == len(second.completions) == 4 and first.complete
        assert [c.reward for c in first.completions] == [0.9, 0.1, 0.5, 0.5]
        assert first.mean == pytest.approx(0.5) and first.notes == []


def test_a_one_group_round_written_twice_is_told_apart_by_num_generations():
    records = make_round(4, [[0.0, 1.0, 0.0, 1.0]]) + make_round(4, [[0.3, 0.3, 0.6, 0.6]])
    (group,) = groups.groups_for_step(records, 4, num_generations=4)
    assert [c.reward for c in group.completions] == [0.3, 0.3, 0.6, 0.6]
    assert group.std == pytest.approx(0.1732051, abs=1e-6)


def test_completions_a_reward_could_not_score_are_counted_and_shown_with_their_error():
    from workbench.insight.group_cards import render_groups_html

    records = make_round(1, [[1.0, 0.0, 0.0, 1.0]])
    records[1]["reward_errors"] = {"format": "ValueError: <no tag>"}
    records[2]["reward_errors"] = {"format": "ValueError: empty"}
    [group] = groups.groups_for_step(records, 1)
    assert group.unscored == {"format": 2}
    assert group.completions[1].reward_errors == {"format": "ValueError: <no tag>"}
    html = render_groups_html([group])
    assert "format could not score 2 of 4 completions" in html
    assert 'title="format: ValueError: &lt;no tag&gt;"' in html  # the error, escaped, on the card's badge


def test_cards_show_each_rewards_weight_in_the_total_when_the_config_gives_them():
    from workbench.insight.group_cards import render_groups_html
    from workbench.spec.config import RunConfig
    from workbench.spec.reward_choice import reward_weight_map

    weights = reward_weight_map(RunConfig.for_task("demo").to_dict())
    assert weights == {"mentions_answer": 0.1, "brief_if_correct": 0.9}
    records = make_round(1, [[1.0, 0.0, 0.0, 1.0]], funcs=("mentions_answer", "brief_if_correct"))
    [group] = groups.groups_for_step(records, 1)
    html = render_groups_html([group], weights=weights)
    assert html.count('<span class="wb-weight" title="its weight in the total">x0.1</span>') == 4
    assert html.count(">x0.9</span>") == 4
    assert 'wb-weight"' not in render_groups_html([group])  # no config, no weights
    # a config.json this version cannot read (a field it does not know): scores without weights
    assert reward_weight_map({"reward_names": ["brevity"], "field_from_the_future": 1}) == {}
