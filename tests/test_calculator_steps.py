"""Real GRPOTrainer runs as the oracle for plan().total_steps.

Each case trains the tiny randomly initialised Llama (hidden 16, 2 layers) on
CPU and compares `trainer.state.global_step` with the calculator. Completions
are 4 tokens and datasets a handful of prompts so the file runs in about a
minute. num_train_epochs is always given: TrainingArguments defaults to 3.
"""

import warnings

import pytest

from workbench.calc import NO_LENGTH_ERROR, plan

pytestmark = pytest.mark.slow


def reward_length(completions, **kwargs):
    # Any reward with spread works; the step count does not depend on it.
    return [float(len(completion)) for completion in completions]


def train_steps(model_dir: str, output_dir, dataset_size: int, **grpo_args) -> int:
    """Train with these GRPOConfig values and return the Trainer's global_step."""
    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer

    dataset = Dataset.from_dict({"prompt": [f"Count to {i}." for i in range(dataset_size)]})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        config = GRPOConfig(
            output_dir=str(output_dir),
            report_to="none",
            use_cpu=True,
            bf16=False,
            gradient_checkpointing=False,
            max_completion_length=4,
            save_strategy="no",
            logging_steps=1,
            disable_tqdm=True,
            seed=0,
            **grpo_args,
        )
        trainer = GRPOTrainer(model=model_dir, reward_funcs=reward_length, args=config, train_dataset=dataset)
        trainer.train()
    return trainer.state.global_step


CASES = [
    pytest.param(7, dict(per_device_train_batch_size=4, num_generations=2, num_train_epochs=1), id="dropped-tail"),
    pytest.param(
        4,
        dict(
            per_device_train_batch_size=2,
            num_generations=2,
            gradient_accumulation_steps=2,
            num_iterations=2,
            num_train_epochs=1,
        ),
        id="num-iterations-2",
    ),
    pytest.param(
        5,
        dict(
            per_device_train_batch_size=2,
            num_generations=4,
            gradient_accumulation_steps=3,
            steps_per_generation=2,
            num_train_epochs=1,
        ),
        id="spg-not-ga",
    ),
    pytest.param(20, dict(per_device_train_batch_size=4, num_generations=4, max_steps=3), id="max-steps"),
    pytest.param(
        4, dict(per_device_train_batch_size=4, num_generations=2, num_train_epochs=1.5), id="fractional-epochs"
    ),
    pytest.param(1, dict(per_device_train_batch_size=4, num_generations=2, max_steps=2), id="n-less-than-p"),
]


@pytest.mark.parametrize("dataset_size, grpo_args", CASES)
def test_total_steps_equal_global_step(tiny_model, tmp_path, dataset_size, grpo_args):
    expected = plan(dataset_size=dataset_size, **grpo_args)
    assert expected.valid
    assert train_steps(tiny_model, tmp_path, dataset_size, **grpo_args) == expected.total_steps


def test_n_less_than_p_without_max_steps_raises_the_warned_text(tiny_model, tmp_path):
    grpo_args = dict(per_device_train_batch_size=4, num_generations=2, num_train_epochs=1)
    expected = plan(dataset_size=1, **grpo_args)
    assert expected.total_steps is None
    warned = NO_LENGTH_ERROR.format(max_steps=-1)
    assert any(warned in warning for warning in expected.warnings)
    with pytest.raises(ValueError) as info:
        train_steps(tiny_model, tmp_path, 1, **grpo_args)
    assert str(info.value) == warned
