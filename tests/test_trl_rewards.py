"""TRL's reward library by name: the names and aliases, their parameters and checks, and the functions built."""

from __future__ import annotations

import pytest

from workbench.spec import rewards
from workbench.spec.config import ConfigError, RunConfig, parse_assignment
from workbench.spec.config_checks import validate_config
from workbench.spec.rewards import RewardError, trl_reward_library
from workbench.spec.rewards.trl_reward_library import TRL_REWARDS, TrlReward


def _reward_problems(**changes) -> list[str]:
    cfg = RunConfig(**{"task": "arithmetic", "model": "tiny", "device": "cpu", **changes})
    return [
        str(p)
        for p in validate_config(cfg)
        if p.field in ("reward_params", "reward_names", "reward_errors", "reward_failure_score", "reward_model")
    ]


@pytest.mark.parametrize(
    "name, canonical",
    [
        ("accuracy_reward", "accuracy_reward"),
        ("get_cosine_scaled_reward", "cosine_scaled_reward"),
        ("get_repetition_penalty_reward", "repetition_penalty_reward"),
        ("get_soft_overlong_punishment", "soft_overlong_punishment_reward"),
        ("repetition_penalty", "repetition_penalty_reward"),  # the workbench's own, before TRL's replaced it
    ],
)
def test_names_and_aliases_find_trls_reward(name, canonical):
    found = rewards.get_reward(name)
    assert isinstance(found, TrlReward) and found.name == canonical


def test_the_accuracy_rewards_need_a_solution_column():
    assert rewards.reward_columns(rewards.get_reward("accuracy_reward")) == (("solution",), ())
    # the arithmetic task's rows have `answer`, not `solution`: refused before any model loads
    problems = _reward_problems(reward_names=["accuracy_reward"])
    assert any("accuracy_reward needs the column `solution`" in p for p in problems)


def test_a_run_without_parameters_takes_the_defaults_and_the_runs_length():
    reward = trl_reward_library.trl_reward("get_soft_overlong_punishment")
    assert trl_reward_library.resolved_params(reward, None, 96) == {"max_completion_len": 96, "soft_punish_cache": 0}
    cosine = trl_reward_library.resolved_params(TRL_REWARDS["cosine_scaled_reward"], {"max_len": "64"}, 96)
    assert cosine["max_len"] == 64 and cosine["max_value_correct"] == 1.0


@pytest.mark.parametrize(
    "params, message",
    [
        ({"repetition_penalty_reward": {"ngram_size": 0}}, "repetition_penalty_reward.ngram_size must be >= 1, got 0"),
        ({"repetition_penalty_reward": {"max_penalty": 0.5}}, "max_penalty must be <= 0"),
        ({"repetition_penalty_reward": {"ngram": 2}}, "has no parameter 'ngram'; use one of ngram_size, max_penalty"),
        ({"repetition_penalty_reward": {"ngram_size": "two"}}, "ngram_size must be >= 1, got 'two'"),
        ({"cosine_scaled_reward": {"max_len": 10}}, "sets parameters of 'cosine_scaled_reward', which reward_names"),
        ({"think_format_reward": {"x": 1}}, "'think_format_reward' takes no parameters"),
        ({"repetition_penalty_reward": 3}, "must be an object of parameters"),
    ],
    ids=["range", "sign", "unknown", "type", "unchosen", "no-params", "not-object"],
)
def test_bad_parameters_are_refused_naming_the_field_and_the_rule(params, message):
    problems = _reward_problems(reward_names=["repetition_penalty_reward", "think_format_reward"], reward_params=params)
    assert any(p.startswith("reward_params: ") and message in p for p in problems), problems


def test_good_parameters_pass_and_come_from_the_command_line_as_json():
    name, value = parse_assignment('reward_params={"repetition_penalty_reward": {"ngram_size": 4}}')
    assert (name, value) == ("reward_params", {"repetition_penalty_reward": {"ngram_size": 4}})
    assert _reward_problems(reward_names=["repetition_penalty_reward"], reward_params=value) == []
    with pytest.raises(ConfigError, match="reward_params: must be a JSON object"):
        parse_assignment("reward_params={not json")


def test_reward_errors_and_the_failure_score_are_checked():
    assert any("reward_errors: 'skip' is not one of fail, record" in p for p in _reward_problems(reward_errors="skip"))
    assert any(
        "reward_failure_score: must be a finite number" in p
        for p in _reward_problems(reward_failure_score=float("nan"))
    )


def test_trying_a_trl_reward_in_the_dashboard_says_where_it_runs():
    # TRL imports torch, which the dashboard's process never loads
    with pytest.raises(RewardError, match="accuracy_reward is TRL's own reward .* Smoke test"):
        rewards.score(["accuracy_reward"], "q", ["\\boxed{1}"], solution="1")


def test_every_trl_reward_is_described_with_its_parameters():
    described = rewards.describe_trl_rewards()
    assert set(described) == set(TRL_REWARDS)
    assert "`ngram_size` (default 3)" in described["repetition_penalty_reward"]
    assert "`max_len` (default the run's max_completion_length)" in described["cosine_scaled_reward"]


@pytest.mark.slow  # imports TRL (and torch)
def test_built_rewards_are_trls_own_with_the_runs_parameters():
    import trl.rewards

    from workbench.trainer.trl_reward_builders import build_trl_reward

    cfg = RunConfig(
        max_completion_length=8,
        reward_params={
            "repetition_penalty": {"ngram_size": 2},
            "get_soft_overlong_punishment": {"soft_punish_cache": 4},
        },
    )
    texts = ["so \\boxed{3}", "it is $4$", "<think>add</think> \\boxed{3}"]
    ids = [[1, 1, 1], [1, 2, 3, 4, 5, 6, 7], [5] * 9]
    messages = [[{"role": "assistant", "content": t}] for t in texts]
    solution = ["3", "3", "3"]

    def built(name):
        func = build_trl_reward(cfg, name, trl_reward_library.trl_reward(name))
        assert func.__name__ == name
        return func(prompts=["q"] * 3, completions=texts, completion_ids=ids, solution=solution)  # plain text

    assert built("accuracy_reward") == trl.rewards.accuracy_reward(messages, solution) == [1.0, 0.0, 1.0]
    assert built("reasoning_accuracy_reward") == [0.0, 0.0, 1.0]
    assert built("think_format_reward") == [0.0, 0.0, 1.0]
    assert built("repetition_penalty") == trl.rewards.get_repetition_penalty_reward(2)(ids) == [-0.5, 0.0, -0.875]
    assert built("get_soft_overlong_punishment") == [0.0, -0.75, -1.0]
    assert built("get_cosine_scaled_reward") == trl.rewards.get_cosine_scaled_reward(8)(messages, solution, ids)
