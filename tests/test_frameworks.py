"""Tests for workbench.calc.frameworks: TRL exact, Open-R1's vLLM split, ms-swift's step formula."""

import pytest

from workbench.calc import InputError, plan
from workbench.calc import compare_frameworks as compare_from_calculator
from workbench.calc.frameworks import FRAMEWORKS, compare_frameworks, ms_swift_max_steps

SEED_004 = dict(
    dataset_size=8000,
    num_generations=8,
    per_device_train_batch_size=8,
    num_processes=6,
    gradient_accumulation_steps=2,
    num_iterations=2,
)


def by_name(readings):
    return {r.framework: r for r in readings}


def test_seed_004_ms_swift_gives_1320():
    readings = by_name(compare_frameworks(train_data_ratio=0.99, **SEED_004))
    assert readings["ms-swift"].total_steps == 1320
    assert "1320" in readings["ms-swift"].steps_formula
    # TRL counts the same inputs its own way (dropped chunks, every row): 8000 // 12 x 2 x 2 / 2.
    assert readings["trl"].total_steps == plan(**SEED_004).total_steps == 1332


@pytest.mark.parametrize(
    "args, expected",
    [((8000, 8, 8, 6, 0.99, 2, 2), 1320), ((8000, 8, 8, 6, 1.0, 2, 1), 667), ((100, 4, 2, 1, 1.0, 1, 1), 200)],
    ids=["ms-swift-8000-rows", "ratio-1-rounds-up", "single-process"],
)
def test_ms_swift_formula(args, expected):
    assert ms_swift_max_steps(*args) == expected


def test_trl_reading_is_plan_exactly():
    inputs = dict(per_device_train_batch_size=3, num_generations=5, num_processes=2, gradient_accumulation_steps=2)
    reading = by_name(compare_frameworks(**inputs))["trl"]
    assert reading.plan.to_dict() == plan(**inputs).to_dict()
    assert reading.valid is False and reading.message == plan(**inputs).errors[0]


def test_open_r1_seed_001_split():
    readings = by_name(
        compare_frameworks(per_device_train_batch_size=1, num_generations=8, num_processes=3, vllm_gpus=1)
    )
    open_r1 = readings["open-r1"]
    assert (open_r1.training_processes, open_r1.vllm_gpus) == (3, 1)
    assert open_r1.message == "generation_batch_size (3) must be divisible by num_generations (8)."
    assert any("4 GPUs in all" in note for note in open_r1.notes)


def test_open_r1_gives_the_server_one_gpu_when_none_named():
    open_r1 = by_name(compare_frameworks(per_device_train_batch_size=2, num_generations=6, num_processes=4))["open-r1"]
    assert (open_r1.training_processes, open_r1.vllm_gpus) == (3, 1)
    assert open_r1.valid and open_r1.generation_batch_size == 6


def test_ms_swift_message_lists_valid_values():
    swift = by_name(compare_frameworks(per_device_train_batch_size=2, num_generations=8, num_processes=3))["ms-swift"]
    assert swift.message == (
        "generation_batch_size (6) must be divisible by num_generations (8). Valid values: [2, 3, 6]"
    )


def test_every_framework_answers_and_serialises():
    readings = compare_frameworks(**SEED_004)
    assert [r.framework for r in readings] == list(FRAMEWORKS)
    assert all(isinstance(r.to_dict()["plan"], dict) for r in readings)
    assert compare_from_calculator is compare_frameworks


@pytest.mark.parametrize(
    "kwargs, field",
    [
        (dict(train_data_ratio=0), "train_data_ratio"),
        (dict(train_data_ratio=1.5), "train_data_ratio"),
        (dict(frameworks=("axolotl",)), "framework"),
        (dict(num_processes=-1), "num_processes"),
    ],
    ids=["ratio-0", "ratio-above-1", "unknown-framework", "bad-plan-input"],
)
def test_bad_input(kwargs, field):
    with pytest.raises(InputError) as info:
        compare_frameworks(**kwargs)
    assert info.value.field == field
