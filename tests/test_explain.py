"""Tests for workbench.calc.explain: every known message form, fixes that are valid plans, no exceptions."""

import time

import pytest

from workbench.calc import explain as explain_from_calculator
from workbench.calc.explain import explain

OLD_TRL = (
    "ValueError: The global train batch size (3 x 1) must be evenly divisible by the number of generations "
    "per prompt (8). Given the current train batch size, the valid values for the number of generations "
    "are: [3]."
)

KNOWN = [
    pytest.param(
        OLD_TRL,
        "global_train_batch_not_divisible",
        "older TRL",
        {"num_processes": 3, "per_device_train_batch_size": 1, "num_generations": 8},
        id="old-trl-3x1-G8",
    ),
    pytest.param(
        "The global train batch size (1 x 1) must be evenly divisible by the number of generations per prompt (8)",
        "global_train_batch_not_divisible",
        "older TRL",
        {"num_processes": 1, "per_device_train_batch_size": 1, "num_generations": 8},
        id="old-trl-1x1-G8",
    ),
    pytest.param(
        "generation_batch_size (4) must be divisible by num_generations (8).",
        "generation_batch_not_divisible",
        "TRL 1.16",
        {"generation_batch_size": 4, "num_generations": 8},
        id="trl-groups",
    ),
    pytest.param(
        "generation_batch_size (10) must be divisible by the global batch size (4).",
        "generation_batch_vs_global_batch",
        "TRL 1.16",
        {"generation_batch_size": 10, "global_batch_size": 4},
        id="trl-global-batch",
    ),
    pytest.param(
        "'generation_batch_size' and 'steps_per_generation' can not be both configured at the same time",
        "both_generation_settings",
        "TRL 1.16",
        {},
        id="trl-both-set",
    ),
    pytest.param(
        "The global eval batch size (3 * 2) must be divisible by the number of generations used for evaluation (4).",
        "eval_batch_not_divisible",
        "TRL 1.16",
        {"per_device_eval_batch_size": 3, "num_processes": 2, "num_generations_eval": 4},
        id="trl-eval",
    ),
    pytest.param(
        "GRPO requires at least 2 generations per prompt to calculate the advantages. You provided 1, "
        "which is less than the minimum required.",
        "too_few_generations",
        "TRL 1.16",
        {"num_generations": 1},
        id="fewer-than-2",
    ),
    pytest.param(
        "generation_batch_size (12) must be divisible by num_generations (8). Valid values: [2, 3, 4, 6, 12]",
        "generation_batch_not_divisible",
        "ms-swift",
        {"generation_batch_size": 12, "num_generations": 8, "valid_values": [2, 3, 4, 6, 12]},
        id="ms-swift",
    ),
]


@pytest.mark.parametrize("text, kind, source, values", KNOWN)
def test_known_messages(text, kind, source, values):
    result = explain(text)
    assert result.recognised
    assert (result.kind, result.source, result.values) == (kind, source, values)
    assert result.why
    # The rebuilt plan reproduces an error of the same rule, and every fix is a valid plan.
    assert result.plan is not None and not result.plan.valid
    assert result.fixes
    assert all(fix.plan.valid for fix in result.fixes)


def test_reproduced_plan_has_the_pasted_text():
    text = "generation_batch_size (4) must be divisible by num_generations (8)."
    assert explain(text).plan.errors[0] == text


def test_traceback_wrapped_over_lines():
    text = (
        'Traceback (most recent call last):\n  File "train.py", line 3, in <module>\nValueError: The global train'
        "\n batch size (3 x 1) must be evenly divisible by the number of generations per prompt (8)."
    )
    result = explain(text)
    assert result.recognised and result.values["num_processes"] == 3
    assert result.fixes[0].changes == {"num_generations": 3}


def test_empty_dataloader_message():
    result = explain(
        "ValueError: args.max_steps must be set to a positive value if dataloader does not have a length, was -1"
    )
    assert result.recognised and result.values == {"max_steps": -1}
    assert "fewer prompts" in result.why


@pytest.mark.parametrize(
    "text",
    [
        "CUDA out of memory. Tried to allocate 2.00 GiB",
        "",
        "   ",
        None,
        42,
        "generation_batch_size (",
        "generation_batch_size (99999999999) must be divisible by num_generations (0).",
    ],
    ids=["oom", "empty", "blank", "none", "number", "truncated", "absurd-numbers"],
)
def test_unrecognised_or_odd_text_never_raises(text):
    result = explain(text)
    assert isinstance(result.to_dict(), dict)
    if not result.recognised:
        assert result.why.startswith("Not recognised")
        assert result.fixes == [] and result.plan is None


def test_absurd_numbers_are_read_but_not_planned():
    result = explain("generation_batch_size (99999999999) must be divisible by num_generations (8).")
    assert result.recognised and result.plan is None
    assert "generation_batch_size" in result.why


def test_reachable_from_calculator():
    assert explain_from_calculator is explain


# ---------------------------------------------------------------- a multi-megabyte paste

FIVE_MB = 5 * 1024 * 1024
ERROR_LINE = "ValueError: generation_batch_size (3) must be divisible by num_generations (8)."


@pytest.mark.parametrize(
    "paste",
    [
        ("at least 2 generations per prompt " * (FIVE_MB // 34 + 1))[:FIVE_MB],  # the phrase, never its number
        "generation_batch_size (" + "1" * FIVE_MB,  # a number without an end
        "x" * FIVE_MB,
    ],
    ids=["repeated-phrase", "endless-number", "no-error"],
)
def test_a_5_mb_paste_is_answered_in_well_under_a_second(paste):
    started = time.perf_counter()
    result = explain(paste)
    assert time.perf_counter() - started < 0.5
    assert not result.recognised and "only its first and last 32 KB were read" in result.why


def test_the_error_at_the_end_of_a_5_mb_log_is_found_and_the_reading_said():
    started = time.perf_counter()
    result = explain("INFO step done\n" * (FIVE_MB // 15) + ERROR_LINE)
    assert time.perf_counter() - started < 0.5
    assert result.recognised and result.values == {"generation_batch_size": 3, "num_generations": 8}
    assert "The paste is 5,242," in result.note and "first and last 32 KB" in result.note
    assert explain(ERROR_LINE).note == ""  # a short paste is read whole


def test_a_number_too_long_to_convert_is_not_an_exception():
    result = explain("generation_batch_size (" + "7" * 5000 + ") must be divisible by num_generations (8).")
    assert not result.recognised
