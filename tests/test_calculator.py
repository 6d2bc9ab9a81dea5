"""Unit tests for workbench.calc: plan numbers, warnings, suggestions, grid, bad input."""

import json
import subprocess
import sys

import pytest

from workbench.calc import InputError, Plan, grid, plan
from workbench.calc.suggestions import change_size


def test_calculator_imports_no_heavy_library():
    # A fresh interpreter: other tests in this process may already have imported torch.
    code = (
        "import sys, workbench.calc, workbench.calc.frameworks, workbench.calc.explain, workbench.calc.suggestions\n"
        "heavy = [m for m in ('torch', 'transformers', 'trl', 'gradio') if m in sys.modules]\n"
        "print(heavy)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


@pytest.mark.parametrize(
    "inputs, gbs, spg, prompts",
    [
        (dict(per_device_train_batch_size=8, num_generations=8), 8, 1, 1),
        (dict(per_device_train_batch_size=1, num_processes=8, num_generations=8), 8, 1, 1),
        (dict(per_device_train_batch_size=2, gradient_accumulation_steps=4, num_generations=4), 8, 4, 2),
        (dict(per_device_train_batch_size=2, num_processes=3, steps_per_generation=2, num_generations=6), 12, 2, 2),
        (dict(per_device_train_batch_size=2, num_processes=2, generation_batch_size=16, num_generations=8), 16, 4, 2),
    ],
    ids=["defaults", "batch1-G8", "ga-sets-spg", "spg-set", "gbs-set"],
)
def test_valid_plan_numbers(inputs, gbs, spg, prompts):
    result = plan(**inputs)
    assert result.valid and result.errors == []
    assert (result.generation_batch_size, result.steps_per_generation, result.prompts_per_generation) == (
        gbs,
        spg,
        prompts,
    )


def test_seed_001_failure_and_gpu_move():
    result = plan(per_device_train_batch_size=1, num_processes=3, num_generations=8, vllm_gpus=1)
    assert not result.valid
    assert result.errors == ["generation_batch_size (3) must be divisible by num_generations (8)."]
    changes = [s.changes for s in result.suggestions]
    assert {"num_generations": 3} == changes[0]
    assert any("vllm_gpus" in c for c in changes)
    assert all(s.plan.valid for s in result.suggestions)


def test_suggestions_are_valid_and_ordered_by_size():
    result = plan(per_device_train_batch_size=3, num_processes=1, num_generations=8, gradient_accumulation_steps=1)
    assert result.suggestions
    for suggestion in result.suggestions:
        assert suggestion.plan.valid
        for name, value in suggestion.changes.items():
            assert suggestion.plan.inputs[name] == value
    levers = {name for s in result.suggestions for name in s.changes}
    assert {"num_generations", "per_device_train_batch_size", "gradient_accumulation_steps"} <= levers
    sizes = [change_size(result.inputs, s.changes) for s in result.suggestions]
    assert sizes == sorted(sizes)
    assert result.suggestions[0].changes == {"num_generations": 3}  # 8 -> 3 is the smallest move for 3 x 1 x 1


def test_both_set_suggests_unsetting_one():
    result = plan(steps_per_generation=2, generation_batch_size=16)
    assert (
        result.errors[0]
        == "'generation_batch_size' and 'steps_per_generation' can not be both configured at the same time"
    )
    assert {"generation_batch_size": None} in [s.changes for s in result.suggestions]


@pytest.mark.parametrize(
    "inputs, per_epoch, total, dropped",
    [
        (dict(dataset_size=100, per_device_train_batch_size=8, num_generations=8), 100, 100, 0),
        (dict(dataset_size=10, per_device_train_batch_size=8, num_generations=4, num_train_epochs=2), 5, 10, 0),
        (dict(dataset_size=11, per_device_train_batch_size=8, num_generations=4), 5, 5, 1),
        (
            dict(
                dataset_size=10,
                per_device_train_batch_size=4,
                num_generations=4,
                num_iterations=2,
                gradient_accumulation_steps=2,
            ),
            10,
            10,
            0,
        ),
        (dict(dataset_size=3, per_device_train_batch_size=8, num_generations=2, max_steps=5), 0, 0, 3),
    ],
    ids=["one-prompt-per-step", "two-epochs", "dropped-tail", "iterations", "n-less-than-p"],
)
def test_step_counts(inputs, per_epoch, total, dropped):
    result = plan(**inputs)
    assert (result.steps_per_epoch, result.total_steps, result.prompts_dropped_per_epoch) == (per_epoch, total, dropped)


@pytest.mark.parametrize(
    "inputs, fragment",
    [
        (
            dict(dataset_size=3, per_device_train_batch_size=8, num_generations=2, max_steps=5),
            "silently trains 0 steps",
        ),
        (dict(dataset_size=3, per_device_train_batch_size=8, num_generations=2), "args.max_steps must be set"),
    ],
    ids=["n-lt-p-max-steps", "n-lt-p-epochs"],
)
def test_warnings(inputs, fragment):
    result = plan(**inputs)
    assert result.valid
    assert any(fragment in w for w in result.warnings), result.warnings


@pytest.mark.parametrize(
    "inputs, fragment",
    [
        (dict(dataset_size=11, per_device_train_batch_size=8, num_generations=4), "dropped each epoch"),
        (dict(num_iterations=3), "num_iterations=3"),
        (dict(dataset_size=100, max_steps=10), "covers 10% of one epoch"),
        (dict(dataset_size=10, max_steps=25), "runs 2.5 epochs"),
        (dict(gradient_accumulation_steps=2, num_generations=4, per_device_train_batch_size=2), "mixes completions"),
    ],
    ids=["dropped", "iterations", "max-steps-short", "max-steps-long", "spg"],
)
def test_notes_are_information_not_warnings(inputs, fragment):
    result = plan(**inputs)
    assert result.valid and result.warnings == []
    assert any(fragment in n for n in result.notes), result.notes


def test_no_warnings_for_plain_plan():
    assert plan(dataset_size=64).warnings == [] and plan(dataset_size=64).notes == []


@pytest.mark.parametrize(
    "inputs, field, rule",
    [
        (dict(per_device_train_batch_size=0), "per_device_train_batch_size", ">= 1"),
        (dict(gradient_accumulation_steps=-2), "gradient_accumulation_steps", ">= 1"),
        (dict(num_generations=2.5), "num_generations", "whole number"),
        (dict(num_processes=True), "num_processes", "whole number"),
        (dict(num_processes="4"), "num_processes", "whole number"),
        (dict(dataset_size=10**9), "dataset_size", "typing mistake"),
        (dict(per_device_train_batch_size=None), "per_device_train_batch_size", "missing"),
        (dict(max_steps=0), "max_steps", "-1"),
        (dict(num_train_epochs=0), "num_train_epochs", "> 0"),
        (dict(num_generations=0), "num_generations", "at least 2"),
        (dict(vllm_gpus=-1), "vllm_gpus", ">= 0"),
        (dict(per_device_train_batch_size=float("nan")), "per_device_train_batch_size", "whole number"),
        (dict(num_generations=float("inf")), "num_generations", "whole number"),
    ],
    ids=[
        "zero",
        "negative",
        "fraction",
        "bool",
        "string",
        "huge",
        "missing",
        "max-steps-0",
        "epochs-0",
        "g-0",
        "vllm-neg",
        "nan",
        "inf",
    ],
)
def test_bad_input_names_field_and_rule(inputs, field, rule):
    with pytest.raises(InputError) as info:
        plan(**inputs)
    assert info.value.field == field
    assert str(info.value).startswith(field)
    assert rule in str(info.value)


def test_integral_floats_are_accepted():
    assert plan(per_device_train_batch_size=4.0, num_generations=4.0).generation_batch_size == 4


def test_to_dict_is_json_with_suggestions():
    result = plan(per_device_train_batch_size=1, num_processes=3, num_generations=8)
    data = json.loads(json.dumps(result.to_dict()))
    assert data["valid"] is False
    assert data["suggestions"][0]["changes"] and data["suggestions"][0]["plan"]["valid"] is True
    assert isinstance(result, Plan)


def test_grid_matches_plan():
    table = grid(
        num_processes=3,
        gradient_accumulation_steps=1,
        per_device_train_batch_sizes=range(1, 9),
        num_generations_values=range(2, 9),
    )
    for gi, g in enumerate(table["num_generations"]):
        for bi, b in enumerate(table["per_device_train_batch_size"]):
            expected = plan(per_device_train_batch_size=b, num_generations=g, num_processes=3, with_suggestions=False)
            assert table["valid"][gi][bi] == expected.valid
            assert table["errors"][gi][bi] == (expected.errors[0] if expected.errors else "")
    assert table["valid"][table["num_generations"].index(3)][0]  # 3 x 1 with G=3: the 3-GPU fix


def test_grid_bad_input():
    with pytest.raises(InputError, match="num_processes"):
        grid(num_processes=0)


@pytest.mark.parametrize(
    "number, expected",
    [(1, [1]), (12, [1, 2, 3, 4, 6, 12]), (49, [1, 7, 49]), (97, [1, 97]), (10**10, None)],
    ids=["one", "twelve", "square", "prime", "too-large"],
)
def test_divisors(number, expected):
    from workbench.calc import divisors

    assert divisors(number) == expected


def test_absurd_but_allowed_values_still_answer():
    # Near the input cap: bounded searches keep this in milliseconds (a hang here would freeze the UI).
    import time

    start = time.perf_counter()
    result = plan(
        per_device_train_batch_size=999_999,
        num_generations=999_983,
        num_processes=8,
        do_eval=True,
        per_device_eval_batch_size=999_999,
    )
    assert time.perf_counter() - start < 2.0
    assert not result.valid
    assert all(s.plan.valid for s in result.suggestions)


def test_gpu_move_suggestion_keeps_total_gpus():
    result = plan(per_device_train_batch_size=2, num_processes=3, num_generations=8, vllm_gpus=1)
    moves = [s for s in result.suggestions if "vllm_gpus" in s.changes]
    assert moves
    for move in moves:
        assert move.plan.inputs["num_processes"] + move.plan.inputs["vllm_gpus"] == 4
        assert move.description.startswith("move ")


def test_unknown_input_is_named():
    from workbench.calc import normalise_inputs

    with pytest.raises(InputError, match="per_device_batch_size: is not a calculator input"):
        normalise_inputs(per_device_batch_size=8)
