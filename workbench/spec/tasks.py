"""Built-in GRPO tasks: a dataset, the rewards that score it, and probe prompts.

- `demo`: short factual questions with their accepted answers, scored for a
  right answer and for brevity of a right answer (a wrong or empty one scores
  0). The bundled SmolLM2-135M-Instruct answers at length at first and learns
  to answer in one short sentence within a few minutes on a CPU, with 16
  questions held out and evaluated during the run - learning you can watch.
- `reward_hacking`: the same questions scored by brevity alone, a lesson: the
  model learns to reply with one made-up word, the reward rises and the
  held-out accuracy (mentions_answer, recorded with weight 0) falls.
- `arithmetic`: generated `a + b` and `a * b` questions with an `answer`
  column, scored by the exact answer and by the `<answer>` tag format.
- `keywords`: write a sentence on a topic using given words (a `keywords`
  column), scored by the share of words used and a length target.
- `gsm8k`: grade-school math word problems from the hub dataset
  `openai/gsm8k` (or a local copy), reasoning then a `\\boxed{}` answer,
  scored by TRL's `accuracy_reward` (math_verify) against the number after
  GSM8K's `####`, and a small format reward. A few of its rows ship in
  `workbench/spec/data/gsm8k_sample/`, laid out as the hub lays them out.

Datasets are built in code or read from the small files in `workbench/data/`
(no downloads). Prompts are conversational (`[{"role": "user", ...}]`) so the
model's chat template applies. A person's own dataset file is read by
`workbench.sources.dataset_reading.load_user_dataset`.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from workbench.errors import WorkbenchError
from workbench.spec.data_mapping import ColumnMapping, map_row

DATA_DIR = Path(__file__).parent / "data"


class TaskError(WorkbenchError):
    """An unknown task or a dataset size it cannot give; the message says what to use."""


@dataclass(frozen=True)
class Task:
    """A built-in task.

    `reward_names` and `reward_weights` are what a run of this task uses by
    default (TRL's `reward_weights`, one per function). `probe_prompts` are
    user messages answered by the base model and by checkpoints side by side.
    `settings` are RunConfig fields (TRL names) the task is designed around.
    `default_size` is the number of rows a run uses (None: all the task has).
    `dataset_required`: the task trains on the dataset its settings name
    (`dataset_name`), never on `build_rows`, which gives a few rows to show.
    `correctness_reward`: the reward whose full marks mean a right answer ("" when the task has no right
    answer); the task's other rewards shape (format, length).
    `sample_dataset`: a folder of a few of its dataset's rows shipped with the workbench.
    `gpu_settings`: the RunConfig changes that size the task for a GPU.
    """

    name: str
    title: str
    description: str
    reward_names: tuple[str, ...]
    reward_weights: tuple[float, ...]
    probe_prompts: tuple[str, ...]
    build_rows: Callable[[int | None, int], list[dict]] = field(repr=False)
    default_size: int | None
    settings: dict = field(default_factory=dict)
    correctness_reward: str = ""
    dataset_required: bool = False
    sample_dataset: str = ""
    gpu_settings: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        """Everything but the row builder, for the UI and the run folder."""
        return {
            "name": self.name,
            "title": self.title,
            "description": self.description,
            "reward_names": list(self.reward_names),
            "reward_weights": list(self.reward_weights),
            "probe_prompts": list(self.probe_prompts),
            "default_size": self.default_size,
            "settings": dict(self.settings),
            "correctness_reward": self.correctness_reward,
            "dataset_required": self.dataset_required,
            "sample_dataset": self.sample_dataset,
            "gpu_settings": dict(self.gpu_settings),
        }


def user_message(text: str) -> list[dict]:
    """A conversational prompt holding one user message."""
    return [{"role": "user", "content": text}]


# ---------------------------------------------------------------- demo: short and right


@dataclass(frozen=True)
class DemoQuestion:
    """A demo question and the answers accepted for it (any one, as a word or number in the answer)."""

    question: str
    answers: tuple[str, ...]


def demo_questions() -> list[DemoQuestion]:
    """The demo's short factual questions with their accepted answers, from data/demo_questions.tsv
    (`question<TAB>answer|variant|...`; lines starting with # are comments)."""
    lines = (DATA_DIR / "demo_questions.tsv").read_text(encoding="utf-8").splitlines()
    found = []
    for line in lines:
        if line.strip() and not line.startswith("#"):
            question, answers = line.split("\t")
            found.append(DemoQuestion(question.strip(), tuple(a.strip() for a in answers.split("|") if a.strip())))
    return found


def build_demo_rows(size: int | None, seed: int) -> list[dict]:
    """The questions in one shuffle of `seed`, the first `size`: a prefix of the same shuffle for any size,
    so the held-out questions (those after the training ones) were never trained on."""
    questions = demo_questions()
    size = len(questions) if size is None else size
    if size > len(questions):
        raise TaskError(
            f"dataset size: the demo task has {len(questions)} questions, asked for {size}; use at most {len(questions)}"
        )
    random.Random(seed).shuffle(questions)
    return [{"prompt": user_message(q.question), "answers": list(q.answers)} for q in questions[:size]]


# ---------------------------------------------------------------- arithmetic


ARITHMETIC_INSTRUCTION = "Give only the final number inside <answer></answer> tags."


def arithmetic_question(a: int, op: str, b: int) -> dict:
    """One row: the question (with the format instruction) and its `answer` as text."""
    value = a + b if op == "+" else a * b
    return {"prompt": user_message(f"What is {a} {op} {b}? {ARITHMETIC_INSTRUCTION}"), "answer": str(value)}


def build_arithmetic_rows(size: int, seed: int) -> list[dict]:
    # sums of two numbers up to 99 and products of a small by a two-digit number:
    # hard enough that a small model is often wrong, easy enough that it is sometimes right
    rng = random.Random(seed)
    seen: set[tuple[int, str, int]] = set()
    possible = 99 * 99 + 11 * 98
    if size > possible:
        raise TaskError(f"dataset size: the arithmetic task has {possible} distinct questions; use at most that")
    rows = []
    while len(rows) < size:
        if rng.random() < 0.5:
            question = (rng.randint(1, 99), "+", rng.randint(1, 99))
        else:
            question = (rng.randint(2, 12), "*", rng.randint(2, 99))
        if question not in seen:
            seen.add(question)
            rows.append(arithmetic_question(*question))
    return rows


# ---------------------------------------------------------------- keywords


def keyword_topics() -> dict[str, list[str]]:
    """Topic -> words that fit it, from data/keyword_topics.json."""
    return json.loads((DATA_DIR / "keyword_topics.json").read_text(encoding="utf-8"))


def keyword_prompt(topic: str, words: list[str]) -> str:
    listed = ", ".join(f'"{w}"' for w in words)
    return f"Write one short sentence about {topic} that uses the words {listed}."


def build_keyword_rows(size: int, seed: int) -> list[dict]:
    rng = random.Random(seed)
    topics = keyword_topics()
    rows, seen = [], set()
    attempts = 0
    while len(rows) < size:
        attempts += 1
        if attempts > size * 50:
            raise TaskError(
                f"dataset size: the keywords task cannot make {size} distinct prompts; use {len(rows)} or fewer"
            )
        topic = rng.choice(sorted(topics))
        words = sorted(rng.sample(topics[topic], rng.choice((2, 3))))
        key = (topic, tuple(words))
        if key not in seen:
            seen.add(key)
            rows.append({"prompt": user_message(keyword_prompt(topic, words)), "keywords": words})
    return rows


# ---------------------------------------------------------------- gsm8k: grade-school math

GSM8K_SAMPLE = DATA_DIR / "gsm8k_sample"
GSM8K_INSTRUCTION = "Solve the problem step by step, then give the final number inside \\boxed{}, e.g. \\boxed{42}."


def gsm8k_sample(split: str) -> list[dict]:
    """The bundled GSM8K rows of `split` (train or test) as the hub stores them: `question`, `answer`."""
    lines = (GSM8K_SAMPLE / "main" / f"{split}.jsonl").read_text(encoding="utf-8").splitlines()
    return [json.loads(line) for line in lines if line.strip()]


# GSM8K's columns as a run maps them (the task's settings below say the same to RunConfig)
GSM8K_MAPPING = ColumnMapping(
    prompt_column="question",
    solution_column="answer",
    solution_transform="after_hashes",
    system_prompt=GSM8K_INSTRUCTION,
)


def build_gsm8k_rows(size: int | None, seed: int) -> list[dict]:
    """The bundled train rows as a run sees them (system + user message, `solution` after `####`), to show."""
    return [map_row(row, GSM8K_MAPPING) for row in gsm8k_sample("train")[:size]]


# ---------------------------------------------------------------- the registry


DEMO_PROBES = (
    "What is the capital of France?",
    "What is the plural of mouse?",
    "Who wrote Romeo and Juliet?",
    "What is the largest ocean on Earth?",
)
DEMO_HELD_OUT = 16  # the last questions of the shuffle: held-out evaluation's prompts, never trained on
DEMO_TRAINED = len(demo_questions()) - DEMO_HELD_OUT
# the measured CPU demo (benchmarks/bench_demo.py): LoRA r=16, batch 8 of G=4 (two questions a step, so a
# step's reward depends less on the question drawn), lr 5e-4 for 50 steps (1e-3 shortened the answers
# faster, then lost right ones); 32 completion tokens cut the long first answers early, so a step is quick
DEMO_SETTINGS = {
    "learning_rate": 5e-4,
    "per_device_train_batch_size": 8,
    "num_generations": 4,
    "max_steps": 50,
    "max_completion_length": 32,
    "temperature": 0.7,
    "eval_strategy": "steps",
    "eval_steps": 10,
    "eval_size": DEMO_HELD_OUT,
}
# the lesson keeps the first demo's settings (one question a step, lr 1e-3, 30 steps) and samples at 1.0
REWARD_HACKING_SETTINGS = {
    **DEMO_SETTINGS,
    "learning_rate": 1e-3,
    "num_generations": 8,
    "max_steps": 30,
    "temperature": 1.0,
}

TASKS: dict[str, Task] = {
    task.name: task
    for task in (
        Task(
            name="demo",
            title="Answer briefly and right (demo)",
            description=(
                'Short factual questions, each with its accepted answers ("Paris"; "24" or "twenty-four"). '
                "Rewards: mentions_answer (1.0 when an accepted answer is in the reply as a word or number) and "
                "brief_if_correct (1 - characters/100, paid only for a right answer), weights 0.1 and 0.9: a right "
                "answer earns 0.1 to 1.0 by its length, a wrong or empty one 0. The bundled SmolLM2-135M-Instruct "
                "answers about three in four right at first, at length; over the 50 steps its answers shrink to a "
                'short sentence or a word ("Jane Austen.", "H2O"), under half as long, and the held-out '
                "questions are answered right as often or more. "
                f"{DEMO_HELD_OUT} of the questions are held out and evaluated at step 0, every 10 steps and at the end."
            ),
            reward_names=("mentions_answer", "brief_if_correct"),
            # correct x (0.1 + 0.9 x brevity): a long right answer (0.1) still beats a short wrong one (0),
            # and most of the reward is in getting shorter, which the model can learn in a few minutes
            reward_weights=(0.1, 0.9),
            probe_prompts=DEMO_PROBES,
            build_rows=build_demo_rows,
            default_size=DEMO_TRAINED,  # the rest of data/demo_questions.tsv is held out
            correctness_reward="mentions_answer",
            settings=DEMO_SETTINGS,
        ),
        Task(
            name="arithmetic",
            title="Arithmetic with a tagged answer",
            description=(
                "Generated `a + b` and `a * b` questions with the answer in an `answer` column. Rewards: "
                "exact_answer (1.0 when the number inside <answer> tags is right) and format_answer_tag "
                "(1.0 when the tags are there, weight 0.5) - two signals, one about format, one about truth."
            ),
            reward_names=("exact_answer", "format_answer_tag"),
            reward_weights=(1.0, 0.5),
            probe_prompts=(
                f"What is 23 + 19? {ARITHMETIC_INSTRUCTION}",
                f"What is 7 * 8? {ARITHMETIC_INSTRUCTION}",
                f"What is 56 + 77? {ARITHMETIC_INSTRUCTION}",
                f"What is 12 * 34? {ARITHMETIC_INSTRUCTION}",
            ),
            build_rows=build_arithmetic_rows,
            default_size=512,
            correctness_reward="exact_answer",
            settings={"max_completion_length": 64},
        ),
        Task(
            name="keywords",
            title="Use the given words",
            description=(
                "Write one sentence on a topic using two or three given words (a `keywords` column). Rewards: "
                "keyword_presence (share of the words used) and length_target (about 100 characters, weight 0.5) "
                "- following an instruction while keeping to a length."
            ),
            reward_names=("keyword_presence", "length_target"),
            reward_weights=(1.0, 0.5),
            probe_prompts=(
                keyword_prompt("the ocean", ["salt", "wave"]),
                keyword_prompt("winter", ["fire", "scarf", "snow"]),
                keyword_prompt("a market", ["basket", "fresh"]),
                keyword_prompt("music", ["drum", "guitar", "loud"]),
            ),
            build_rows=build_keyword_rows,
            default_size=256,
            correctness_reward="keyword_presence",  # full marks: every given word used
            settings={"max_completion_length": 64},
        ),
        Task(
            name="gsm8k",
            title="Grade-school math (GSM8K)",
            description=(
                "GSM8K's word problems (openai/gsm8k, config main; offline, a local copy as dataset_name, or the "
                f"bundled sample {GSM8K_SAMPLE}). The model reasons, then gives its answer in \\boxed{{}}. Rewards: "
                "accuracy_reward (TRL's, math_verify: 1.0 when the boxed answer equals the number after GSM8K's "
                "####) and boxed_format (1.0 when a \\boxed{} answer is there, weight 0.2). The bundled 135M model "
                "rarely gets one right: a 1.5B model on a GPU is where this task learns."
            ),
            reward_names=("accuracy_reward", "boxed_format"),
            reward_weights=(1.0, 0.2),
            # the first four problems of GSM8K's test split, never trained on
            probe_prompts=tuple(f"{row['question']} {GSM8K_INSTRUCTION}" for row in gsm8k_sample("test")),
            build_rows=build_gsm8k_rows,
            default_size=None,
            correctness_reward="accuracy_reward",
            dataset_required=True,
            sample_dataset=str(GSM8K_SAMPLE),
            settings={
                "dataset_name": "openai/gsm8k",
                "dataset_config": "main",
                "dataset_train_split": "train",
                "dataset_test_split": "test",
                "prompt_column": GSM8K_MAPPING.prompt_column,
                "solution_column": GSM8K_MAPPING.solution_column,
                "solution_transform": GSM8K_MAPPING.solution_transform,
                "chat_template": "auto",
                "system_prompt": GSM8K_MAPPING.system_prompt,
                # sized for the bundled model on a 2-core CPU: room for a short chain of reasoning, 2 prompts a step
                "max_completion_length": 192,
                "per_device_train_batch_size": 8,
                "num_generations": 4,
                "learning_rate": 2e-5,
                "temperature": 0.8,
            },
            gpu_settings={
                # a 1.5B instruct model on one GPU, as Open-R1-style GSM8K runs size it
                "model": "Qwen/Qwen2.5-1.5B-Instruct",
                "max_completion_length": 512,
                "per_device_train_batch_size": 16,
                "num_generations": 8,
                "gradient_accumulation_steps": 2,
                "learning_rate": 1e-5,
                "bf16": True,
                "max_steps": 200,
            },
        ),
        Task(
            name="reward_hacking",
            title="Reward hacking: watch a reward get gamed",
            description=(
                "A lesson, not a recipe: the demo's questions with brevity alone as the reward (1 - characters/200). "
                "The shortest reply wins, right or not, and the model finds it: within about ten steps every answer "
                'is one made-up word ("How many hours are in a day?" -> "Chester."), the reward is near 1.0, '
                "and the held-out accuracy falls. mentions_answer is recorded with weight 0 (it adds nothing to the "
                "reward) so its flat or falling curve shows what the rising reward hides; the health panel's alarms "
                "name it. Compare with the demo task, which pays for brevity only on a right answer."
            ),
            reward_names=("brevity", "mentions_answer"),
            reward_weights=(1.0, 0.0),
            probe_prompts=DEMO_PROBES,
            build_rows=build_demo_rows,
            default_size=DEMO_TRAINED,
            correctness_reward="mentions_answer",
            # the earlier demo's settings, with the demo's held-out evaluation
            settings=REWARD_HACKING_SETTINGS,
        ),
    )
}


def get_task(name: str) -> Task:
    """The built-in task called `name`, or an error listing the valid ones."""
    if name not in TASKS:
        raise TaskError(
            f"task: unknown task {name!r}; choose from {', '.join(TASKS)}, or give your own file as dataset_path"
        )
    return TASKS[name]


def load_task_dataset(name: str, size: int | None = None, seed: int = 0):
    """The task's training data as a `datasets.Dataset` (`prompt` plus the columns its rewards read)."""
    from workbench.sources.dataset_reading import rows_dataset  # imports datasets, only when data is built

    task = get_task(name)
    size = task.default_size if size is None else size
    if size is not None and size < 1:
        raise TaskError(f"dataset size: must be at least 1, got {size}")
    return rows_dataset(task.build_rows(size, seed))
