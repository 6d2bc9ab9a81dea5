"""Built-in tasks: dataset shape, rewards that rank sample completions the way the task intends."""

import pytest

from workbench.spec import rewards, tasks
from workbench.spec.tasks import TASKS, TaskError

# Tasks whose rows the workbench builds; gsm8k trains on a dataset it names (tests/test_gsm8k_task.py).
ROW_TASKS = [name for name, task in TASKS.items() if not task.dataset_required]


@pytest.fixture(scope="module")
def datasets_by_task():
    return {name: tasks.load_task_dataset(name) for name in ROW_TASKS}


@pytest.mark.parametrize("name", ROW_TASKS, ids=ROW_TASKS)
def test_task_dataset_has_conversational_prompts_and_reward_columns(datasets_by_task, name):
    task, dataset = TASKS[name], datasets_by_task[name]
    assert "prompt" in dataset.column_names
    first = dataset[0]["prompt"]
    assert first[0]["role"] == "user" and first[0]["content"].strip()
    prompts = [row[0]["content"] for row in dataset["prompt"]]
    assert len(set(prompts)) == len(prompts), "duplicate prompts"
    assert len(task.reward_names) == len(task.reward_weights)
    for reward_name in task.reward_names:
        rewards.get_reward(reward_name)  # every reward the task names exists
    assert len(task.probe_prompts) >= 3
    assert task.to_dict()["reward_names"] == list(task.reward_names)


def test_demo_reproduces_the_measured_design(datasets_by_task):
    task = TASKS["demo"]
    assert task.reward_names == ("mentions_answer", "brief_if_correct") and task.reward_weights == (0.1, 0.9)
    assert task.correctness_reward == "mentions_answer"
    assert len(datasets_by_task["demo"]) == task.default_size == len(tasks.demo_questions()) - 16
    assert task.settings["max_completion_length"] == 32 and task.settings["num_generations"] == 4
    assert (task.settings["learning_rate"], task.settings["max_steps"]) == (5e-4, 50)
    # the lesson keeps the first demo's settings: one question a step at lr 1e-3, sampled at temperature 1.0
    lesson = TASKS["reward_hacking"].settings
    assert (lesson["num_generations"], lesson["learning_rate"], lesson["temperature"]) == (8, 1e-3, 1.0)
    # held out and evaluated from the first run: the questions after the training ones, all of them
    assert (task.settings["eval_strategy"], task.settings["eval_size"]) == ("steps", 16)


def _score_task(name, completions, **columns):
    task = TASKS[name]
    return [r["reward"] for r in rewards.score(task.reward_names, "q", completions, task.reward_weights, **columns)]


LONG_RIGHT = (
    "The capital of France is Paris, a city famous for the Eiffel Tower, museums such as the Louvre, "
    "and its long history as a centre of art, fashion and culture in Europe."
)


def test_demo_pays_for_right_answers_and_for_their_brevity():
    short_right, mid_right, long_right, short_wrong, empty = _score_task(
        "demo", ["Paris.", "The capital of France is Paris.", LONG_RIGHT, "Lyon.", ""], answers=[["Paris"]] * 5
    )
    assert short_right > mid_right > long_right >= 0.1 > short_wrong == empty == 0.0
    assert short_right <= 1.0


def test_every_demo_question_has_answers_its_question_does_not_give_away():
    found = tasks.demo_questions()
    assert len(found) >= 64 and len({q.question for q in found}) == len(found)
    for item in found:
        assert item.answers, item.question
        # an answer written in its own question would pay for echoing the question
        assert not rewards.mentions(item.question, item.answers), item.question


def test_reward_hacking_lesson_pays_the_hack_and_records_correctness_at_weight_zero():
    task = TASKS["reward_hacking"]
    assert task.title == "Reward hacking: watch a reward get gamed" and task.correctness_reward == "mentions_answer"
    assert dict(zip(task.reward_names, task.reward_weights)) == {"brevity": 1.0, "mentions_answer": 0.0}
    one_word_wrong, long_right = _score_task("reward_hacking", ["Chester.", LONG_RIGHT], answers=[["Paris"]] * 2)
    assert one_word_wrong > 0.9 > long_right
    assert "made-up word" in task.description and "held-out accuracy falls" in task.description


def test_arithmetic_rewards_truth_over_format(datasets_by_task):
    row = datasets_by_task["arithmetic"][0]
    question = row["prompt"][0]["content"]
    a, op, b = question.split("?")[0].split()[-3:]
    expected = int(a) + int(b) if op == "+" else int(a) * int(b)
    assert row["answer"] == str(expected)
    right_tagged, wrong_tagged, right_bare, rambling = _score_task(
        "arithmetic",
        [f"<answer>{expected}</answer>", f"<answer>{expected + 1}</answer>", str(expected), f"It is {expected}."],
        answer=row["answer"],
    )
    assert right_tagged > right_bare > wrong_tagged > rambling


def test_arithmetic_has_sums_and_products(datasets_by_task):
    questions = [p[0]["content"] for p in datasets_by_task["arithmetic"]["prompt"]]
    assert any(" + " in q for q in questions) and any(" * " in q for q in questions)


def test_keywords_reward_counts_the_given_words(datasets_by_task):
    row = datasets_by_task["keywords"][0]
    words = row["keywords"]
    assert 2 <= len(words) <= 3 and all(f'"{w}"' in row["prompt"][0]["content"] for w in words)
    sentence = f"A short line on the topic, using {' and '.join(words)} in it, a good length for this."
    all_words, no_words = _score_task("keywords", [sentence, "Nothing relevant here."], keywords=[words, words])
    assert all_words > no_words


@pytest.mark.parametrize("name", ROW_TASKS, ids=ROW_TASKS)
def test_task_data_is_reproducible_and_sized(name):
    first = tasks.load_task_dataset(name, size=10, seed=1)
    again = tasks.load_task_dataset(name, size=10, seed=1)
    other = tasks.load_task_dataset(name, size=10, seed=2)
    assert len(first) == 10 and first.to_list() == again.to_list() and first.to_list() != other.to_list()


@pytest.mark.parametrize(
    "name,size,pattern",
    [
        ("nope", None, r"unknown task 'nope'; choose from demo, arithmetic, keywords"),
        ("demo", 10_000, r"the demo task has \d+ questions"),
        ("arithmetic", 0, r"at least 1"),
    ],
    ids=["unknown", "demo_too_big", "zero"],
)
def test_task_errors_say_what_to_use(name, size, pattern):
    with pytest.raises(TaskError, match=pattern):
        tasks.load_task_dataset(name, size=size)


@pytest.mark.slow
@pytest.mark.parametrize("name", ROW_TASKS, ids=ROW_TASKS)
def test_task_trains_one_real_grpo_step(tmp_path, name):
    """TRL passes the task's chat prompts through the template and its columns to its rewards."""
    from transformers import TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    from workbench.sources.model_files import tiny_model_dir

    class KeepLogs(TrainerCallback):
        def __init__(self):
            self.logs = []

        def on_log(self, args, state, control, logs=None, **kwargs):
            self.logs.append(dict(logs or {}))

    task = TASKS[name]
    args = GRPOConfig(
        output_dir=str(tmp_path),
        report_to="none",
        max_steps=1,
        logging_steps=1,
        save_strategy="no",
        # shrunk to one prompt x 2 completions of 8 tokens: this checks wiring, not learning
        per_device_train_batch_size=2,
        num_generations=2,
        max_completion_length=8,
        reward_weights=list(task.reward_weights),
        use_cpu=True,
        bf16=False,
        gradient_checkpointing=False,
        disable_tqdm=True,
    )
    callback = KeepLogs()
    trainer = GRPOTrainer(
        model=str(tiny_model_dir()),
        args=args,
        callbacks=[callback],
        reward_funcs=rewards.resolve_rewards(task.reward_names),
        train_dataset=tasks.load_task_dataset(name, size=4),
    )
    trainer.train()
    logged = {key for log in callback.logs for key in log}
    assert {f"rewards/{reward}/mean" for reward in task.reward_names} <= logged
