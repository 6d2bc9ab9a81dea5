"""RunConfig: defaults, round trips, typed --set values, and refusals before anything loads."""

import json
import subprocess
import sys
import time

import pytest

from workbench.spec.config import (
    FIELD_HELP,
    ConfigError,
    RunConfig,
    field_names,
    parse_assignment,
    reward_names_for,
    reward_weights_for,
)
from workbench.spec.config_checks import check_config, plan_for, validate_config


@pytest.fixture
def cfg():
    return RunConfig()


def test_defaults_are_the_workbenchs_not_trls(cfg):
    assert cfg.model == "smollm2-135m-instruct" and cfg.task == "demo"
    assert cfg.beta == 0.04 and cfg.learning_rate == 1e-3
    assert (cfg.lora_r, cfg.lora_alpha, cfg.lora_target_modules) == (16, 32, "all-linear")
    assert (cfg.per_device_train_batch_size, cfg.num_generations, cfg.max_completion_length) == (8, 8, 48)
    assert cfg.bf16 is False and cfg.gradient_checkpointing is False and cfg.logging_steps == 1


def test_every_field_has_help():
    assert set(FIELD_HELP) == set(field_names())
    assert all(text.strip() for text in FIELD_HELP.values())


@pytest.mark.slow  # imports TRL (about 7 s in a fresh process)
def test_grpo_fields_are_trls_own_names():
    from trl import GRPOConfig

    trl_fields = set(GRPOConfig.__dataclass_fields__)
    ours = {
        "learning_rate",
        "per_device_train_batch_size",
        "gradient_accumulation_steps",
        "num_generations",
        "steps_per_generation",
        "max_completion_length",
        "temperature",
        "top_p",
        "beta",
        "epsilon",
        "loss_type",
        "scale_rewards",
        "num_iterations",
        "max_steps",
        "num_train_epochs",
        "logging_steps",
        "save_steps",
        "save_total_limit",
        "seed",
        "bf16",
        "gradient_checkpointing",
        "vllm_gpu_memory_utilization",
        "vllm_tensor_parallel_size",
        "vllm_server_base_url",
        "vllm_server_timeout",
        "top_k",
        "repetition_penalty",
        "lr_scheduler_type",
        "warmup_steps",
        "epsilon_high",
        "importance_sampling_level",
        "mask_truncated_completions",
        "top_entropy_quantile",
    }
    assert ours <= set(field_names())
    assert ours <= trl_fields


def test_save_and_load_round_trip(cfg, tmp_path):
    changed = cfg.with_changes(beta=0.0, gpu_ids=[], reward_names=["brevity"], steps_per_generation=2)
    path = changed.save(tmp_path / "config.json")
    assert RunConfig.load(path) == changed
    assert json.loads(path.read_text())["beta"] == 0.0


def test_default_config_passes_quickly(cfg):
    started = time.perf_counter()
    check_config(cfg)
    assert time.perf_counter() - started < 1.0
    assert validate_config(cfg) == []


def test_checking_a_config_imports_no_torch():
    # a fresh interpreter: other tests in this session may have imported torch already
    code = (
        "import sys; from workbench.spec.config import RunConfig; "
        "from workbench.spec.config_checks import check_config; "
        "check_config(RunConfig()); print(sorted(m for m in ('torch', 'transformers', 'trl') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


@pytest.mark.parametrize(
    "text, expected",
    [
        ("beta=0", ("beta", 0.0)),
        ("max_steps=5", ("max_steps", 5)),
        ("bf16=true", ("bf16", True)),
        ("gpu_ids=0,1", ("gpu_ids", [0, 1])),
        ("reward_names=brevity,length_target", ("reward_names", ["brevity", "length_target"])),
        ("steps_per_generation=none", ("steps_per_generation", None)),
        ("model=tiny", ("model", "tiny")),
    ],
    ids=["float", "int", "bool", "int-list", "str-list", "optional-none", "str"],
)
def test_parse_assignment_types_values(text, expected):
    assert parse_assignment(text) == expected


@pytest.mark.parametrize(
    "text, field",
    [("nonsense=1", "nonsense"), ("max_steps=abc", "max_steps"), ("bf16=maybe", "bf16"), ("beta", "--set")],
    ids=["unknown-field", "not-a-number", "not-a-bool", "no-equals"],
)
def test_parse_assignment_refuses_naming_the_field(text, field):
    with pytest.raises(ConfigError) as info:
        parse_assignment(text)
    assert info.value.field == field and field in str(info.value)


def test_from_dict_refuses_unknown_keys():
    with pytest.raises(ConfigError, match="colour: is not a RunConfig field"):
        RunConfig.from_dict({"colour": "blue"})


def test_load_refuses_broken_json(tmp_path):
    path = tmp_path / "config.json"
    path.write_text("{not json")
    with pytest.raises(ConfigError, match="not valid JSON"):
        RunConfig.load(path)


@pytest.fixture
def broken_reward_file(tmp_path):
    path = tmp_path / "rewards.py"
    path.write_text("import no_such_package_here\n")
    return str(path)


@pytest.fixture
def no_prompt_file(tmp_path):
    path = tmp_path / "data.jsonl"
    path.write_text('{"question": "hi"}\n')
    return str(path)


@pytest.mark.parametrize(
    "changes, field, words",
    [
        ({"num_generations": 3}, "num_generations", ["divisible by num_generations (3)", "->"]),
        ({"per_device_train_batch_size": 1, "num_generations": 8}, "num_generations", ["divisible", "valid nearby"]),
        ({"num_generations": 1, "per_device_train_batch_size": 1}, "num_generations", ["at least 2"]),
        ({"dataset_path": "/no/such/data.jsonl"}, "dataset_path", ["no file or folder"]),
        ({"dataset_path": "NO_PROMPT"}, "dataset_path", ["no `prompt` column"]),
        ({"reward_names": ["bogus"]}, "reward_names", ["unknown reward 'bogus'", "brevity"]),
        ({"reward_file": "BROKEN"}, "reward_file", ["does not import", "no_such_package_here"]),
        ({"model": "/no/such/model"}, "model", ["does not exist"]),
        ({"gpu_ids": [7]}, "gpu_ids", ["GPU 7 does not exist"]),
        ({"learning_rate": 0.0}, "learning_rate", ["must be > 0", "1e-4"]),
        ({"beta": -0.1}, "beta", ["must be >= 0"]),
        ({"top_p": 1.5}, "top_p", ["(0, 1]"]),
        ({"max_steps": 0}, "max_steps", ["-1", ">= 1"]),
        ({"save_total_limit": 0}, "save_total_limit", [">= 1 or empty", "keep every checkpoint"]),
        ({"loss_type": "mean"}, "loss_type", ["dapo", "grpo"]),
        ({"task": "nope"}, "task", ["unknown task", "demo"]),
        ({"reward_weights": [1.0, 2.0, 3.0]}, "reward_weights", ["3 weights for 2 rewards"]),
    ],
    ids=[
        "batch-plan",
        "global-batch-too-small",
        "one-generation",
        "missing-dataset",
        "no-prompt-column",
        "unknown-reward",
        "reward-file-does-not-import",
        "missing-model-folder",
        "missing-gpu",
        "zero-lr",
        "negative-beta",
        "top-p",
        "zero-steps",
        "no-checkpoint-kept",
        "loss-type",
        "unknown-task",
        "weight-count",
    ],
)
def test_check_config_refuses_fast_with_field_rule_and_fix(
    cfg, changes, field, words, broken_reward_file, no_prompt_file
):
    values = {
        k: {"BROKEN": broken_reward_file, "NO_PROMPT": no_prompt_file}.get(v, v) if isinstance(v, str) else v
        for k, v in changes.items()
    }
    started = time.perf_counter()
    with pytest.raises(ConfigError) as info:
        check_config(cfg.with_changes(**values))
    assert time.perf_counter() - started < 1.0
    fields = [p.field for p in info.value.problems]
    assert field in fields
    message = str(info.value)
    for word in words:
        assert word in message
    assert all(p.rule for p in info.value.problems)


def test_a_reward_file_can_be_checked_without_running_it(cfg, tmp_path):
    marker = tmp_path / "ran"
    path = tmp_path / "shout.py"
    path.write_text(
        f"open({str(marker)!r}, 'w')\nimport no_such_package_here\n\n"
        "def shout(prompts, completions, **kwargs):\n    return []\n"
    )
    # What only running the file shows (a missing package) is left to the training process, which imports it.
    assert (
        validate_config(cfg.with_changes(reward_file=str(path), reward_names=["shout"]), import_reward_file=False) == []
    )
    assert [p.field for p in validate_config(cfg.with_changes(reward_file=str(path), reward_names=["shout"]))] == [
        "reward_file",
        "reward_names",
    ], "imported, as an open dashboard and the CLI do"
    marker.unlink()
    problems = validate_config(
        cfg.with_changes(reward_file=str(path), reward_names=["whisper"]), import_reward_file=False
    )
    assert [p.field for p in problems] == ["reward_names"] and "shout" in str(problems[0])
    assert not marker.exists()
    with pytest.raises(ConfigError, match="syntax error on line 1"):
        path.write_text("def shout(:\n")
        check_config(cfg.with_changes(reward_file=str(path)), import_reward_file=False)


def test_invalid_plan_carries_the_calculator_plan(cfg):
    with pytest.raises(ConfigError) as info:
        check_config(cfg.with_changes(num_generations=3))
    assert info.value.plan is not None and not info.value.plan.valid
    assert info.value.plan.suggestions


def test_plan_for_default_is_one_prompt_per_step(cfg):
    plan = plan_for(cfg)
    assert plan.valid and plan.prompts_per_generation == 1 and plan.total_steps == cfg.max_steps


def test_rewards_come_from_the_task_unless_named(cfg):
    assert reward_names_for(cfg) == ["mentions_answer", "brief_if_correct"] and reward_weights_for(cfg) == [0.1, 0.9]
    arithmetic = cfg.with_changes(task="arithmetic")
    assert reward_names_for(arithmetic) == ["exact_answer", "format_answer_tag"]
    assert reward_weights_for(arithmetic) == [1.0, 0.5]
    mine = cfg.with_changes(reward_names=["brevity", "length_target"])
    assert reward_weights_for(mine) == [1.0, 1.0]
