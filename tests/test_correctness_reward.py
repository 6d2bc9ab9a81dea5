"""Which reward means 'correct': the task's, a run's own choice, or none; the others are shaping rewards."""

import pytest

from workbench.spec.config import RunConfig
from workbench.spec.config_checks import validate_config
from workbench.spec.reward_choice import correctness_reward_for, shaping_rewards_for


@pytest.mark.parametrize(
    "task,correct,shaping",
    [
        ("arithmetic", "exact_answer", ["format_answer_tag"]),
        ("keywords", "keyword_presence", ["length_target"]),
        ("gsm8k", "accuracy_reward", ["boxed_format"]),
        ("demo", "mentions_answer", ["brief_if_correct"]),
        # the lesson trains on brevity alone; mentions_answer is recorded (weight 0) as its correctness reward
        ("reward_hacking", "mentions_answer", ["brevity"]),
    ],
)
def test_each_task_names_its_correctness_reward_and_its_shaping_ones(task, correct, shaping):
    cfg = RunConfig.for_task(task)
    assert (correctness_reward_for(cfg), shaping_rewards_for(cfg)) == (correct, shaping)


def test_a_run_names_its_own_or_none_and_a_reward_it_does_not_use_is_refused():
    own = RunConfig.for_task("demo", reward_names=["brevity", "exact_answer"], correctness_reward="exact_answer")
    assert (correctness_reward_for(own), shaping_rewards_for(own)) == ("exact_answer", ["brevity"])
    none = RunConfig.for_task("arithmetic", correctness_reward="none")
    assert correctness_reward_for(none) == "" and shaping_rewards_for(none) == ["exact_answer", "format_answer_tag"]
    # the task's correctness reward counts only while the run uses it
    assert correctness_reward_for(RunConfig.for_task("arithmetic", reward_names=["format_answer_tag"])) == ""
    wrong = RunConfig.for_task("arithmetic", correctness_reward="brevity")
    problems = [str(p) for p in validate_config(wrong) if p.field == "correctness_reward"]
    assert problems == [
        "correctness_reward: 'brevity' is not one of the run's rewards (exact_answer, "
        "format_answer_tag); name one of them, or 'none' when no reward means a right answer"
    ]
