"""Which columns rewards read, the first rows of the chosen data, and the check that refuses a reward whose column is missing."""

from __future__ import annotations

import json

import pytest

from workbench.spec import columns
from workbench.spec.columns import RewardColumns
from workbench.spec.config import RunConfig
from workbench.spec.config_checks import validate_config
from workbench.spec.rewards import REWARDS, keyword_presence, reward_columns

USER_REWARDS = """
def needs_label(prompts, completions, label, **kwargs):
    return [1.0 for _ in completions]

def reads_hint(completions, hint=None, trainer_state=None, **kwargs):
    return [0.0 for _ in completions]

def declared(completions, **kwargs):
    return [0.0 for _ in completions]
declared.needs_columns = ("gold",)
"""


@pytest.fixture
def reward_file(tmp_path):
    path = tmp_path / "my_rewards.py"
    path.write_text(USER_REWARDS)
    return path


@pytest.mark.parametrize(
    "name, needs, optional",
    [
        ("exact_answer", ("answer",), ()),
        ("numeric_answer", ("answer",), ()),
        ("keyword_presence", ("keywords",), ()),
        ("length_target", (), ("target_chars",)),
        ("brevity", (), ()),
        ("format_answer_tag", (), ()),
    ],
    ids=lambda v: v if isinstance(v, str) else None,
)
def test_built_in_rewards_declare_their_columns(name, needs, optional):
    assert reward_columns(REWARDS[name]) == (needs, optional)


def test_a_keyword_reward_with_fixed_words_needs_no_column():
    assert reward_columns(keyword_presence(["salt"])) == ((), ())


def test_user_rewards_declare_or_name_their_columns(reward_file):
    from workbench.spec.rewards import load_reward_file

    found = columns.reward_needs(
        ["needs_label", "reads_hint", "declared", "no_such_reward"], load_reward_file(reward_file)
    )
    assert found == [
        RewardColumns("needs_label", ("label",), ()),
        RewardColumns("reads_hint", (), ("hint",)),
        RewardColumns("declared", ("gold",), ()),
    ]


@pytest.mark.parametrize(
    "task, expected",
    [("demo", ["prompt", "answers"]), ("arithmetic", ["prompt", "answer"]), ("keywords", ["prompt", "keywords"])],
)
def test_first_rows_of_a_task_are_the_runs_own(task, expected):
    from workbench.spec.tasks import load_task_dataset

    rows = columns.first_rows(task, seed=7, count=3)
    assert len(rows) == 3 and list(rows[0]) == expected
    assert rows == load_task_dataset(task, seed=7).select(range(3)).to_list()  # what the trainer reads first


def test_first_rows_of_a_file_read_only_the_head(tmp_path):
    path = tmp_path / "data.jsonl"
    path.write_text(
        "".join(json.dumps({"prompt": f"q{i}", "label": str(i)}) + "\n" for i in range(1000)) + "not json\n"
    )
    preview = columns.preview(columns.DataChoice("demo", str(path)), ["brevity"], count=4)
    assert preview.error == "" and preview.columns == ["prompt", "label"]
    assert [row["prompt"] for row in preview.rows] == ["q0", "q1", "q2", "q3"]


def test_a_preview_of_an_unreadable_file_says_why(tmp_path):
    preview = columns.preview(columns.DataChoice("demo", str(tmp_path / "nope.jsonl")), ["exact_answer"])
    assert "no file or folder" in preview.error and preview.rows == [] and preview.missing == []
    assert preview.rewards == [RewardColumns("exact_answer", ("answer",), ())]


def test_missing_columns_are_named_per_reward(reward_file, tmp_path):
    path = tmp_path / "data.csv"
    path.write_text("prompt,answer\nWhat is 2 + 2?,4\n")
    preview = columns.preview(
        columns.DataChoice("demo", str(path)), ["exact_answer", "needs_label", "reads_hint"], str(reward_file)
    )
    assert preview.missing == [("needs_label", "label")]


def test_check_config_refuses_a_reward_whose_column_the_data_lacks(tmp_path, reward_file):
    problems = [
        p
        for p in validate_config(RunConfig(task="demo", reward_names=["brevity", "exact_answer"]))
        if p.field == "reward_names"
    ]
    assert [str(p) for p in problems] == [
        "reward_names: exact_answer needs the column `answer`, and the demo task's data has only `prompt`, `answers`; "
        "add the column `answer` (one value per prompt) to the dataset, or choose a reward other than exact_answer"
    ]
    path = tmp_path / "data.jsonl"
    path.write_text(json.dumps({"prompt": "Hi", "hint": "x"}) + "\n")
    problems = validate_config(
        RunConfig(dataset_path=str(path), reward_file=str(reward_file), reward_names=["needs_label", "reads_hint"])
    )
    assert [p.rule for p in problems] == [
        "needs_label needs the column `label`, and dataset_path data.jsonl has only `prompt`, `hint`"
    ]


@pytest.mark.parametrize("task", ["demo", "arithmetic", "keywords"])
def test_every_task_with_its_own_rewards_passes(task):
    assert validate_config(RunConfig.for_task(task)) == []
