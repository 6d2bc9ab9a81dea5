"""The checks of a config: `check_config` refuses one that cannot work - an invalid batch plan, a missing
dataset, an unknown reward, a missing model folder or GPU - in well under a second, before any model loads.

`validate_config` lists every problem (field, rule, fix); `check_config`
raises them as one ConfigError, with the calculator's plan when the batch
numbers are the trouble. It imports no torch: the launcher, the CLI and the
Setup tab call it before a run starts, the training process once more.
"""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path
from typing import Any

from workbench.spec.config import (
    BEST_CHECKPOINT_METRICS,
    CHAT_TEMPLATE_CHOICES,
    DEVICES,
    EVAL_STRATEGIES,
    IMPORTANCE_SAMPLING_LEVELS,
    LOSS_TYPES,
    LR_SCHEDULERS,
    MERGED_GENERATION,
    PACKED_DECODE,
    PATH_FIELDS,
    SCALE_REWARDS,
    SHARED_PROMPT_PASS,
    SOLUTION_TRANSFORM_CHOICES,
    RunConfig,
    column_mapping,
    data_field,
    field_names,
    reward_names_for,
    reward_weights_for,
)
from workbench.spec.config_problems import ConfigError, ConfigProblem, problem_from
from workbench.spec.generation import SERVER_GENERATIONS, TRL_MODES
from workbench.spec.reward_choice import NO_CORRECTNESS, correctness_reward_for

# A number rule: (field, whether its value holds, the rule, a fix). The groups below list them by what the
# fields set, in the order check_config reports them.
NumberRule = tuple[str, bool, str, str]


def _optimiser_rules(cfg: RunConfig) -> list[NumberRule]:
    """The optimiser's step and the loss's clip and KL term."""
    return [
        (
            "learning_rate",
            cfg.learning_rate > 0 and math.isfinite(cfg.learning_rate),
            "must be > 0",
            "try 1e-4 to 1e-3 for LoRA",
        ),
        ("beta", cfg.beta >= 0 and math.isfinite(cfg.beta), "must be >= 0", "use 0.04, or 0 for no KL term"),
        ("epsilon", cfg.epsilon > 0, "must be > 0", "use 0.2"),
    ]


def _sampling_rules(cfg: RunConfig) -> list[NumberRule]:
    """How the completions are sampled."""
    return [
        ("temperature", cfg.temperature > 0, "must be > 0", "use 1.0 (0.7 for less varied completions)"),
        ("top_p", 0 < cfg.top_p <= 1, "must be in (0, 1]", "use 1.0"),
        ("top_k", cfg.top_k >= 0, "must be >= 0", "use 0 (no top-k filtering)"),
        ("repetition_penalty", cfg.repetition_penalty > 0, "must be > 0", "use 1.0"),
    ]


def _lora_rules(cfg: RunConfig) -> list[NumberRule]:
    """The LoRA adapter."""
    return [
        ("lora_r", cfg.lora_r >= 1, "must be >= 1", "use 16"),
        ("lora_alpha", cfg.lora_alpha > 0, "must be > 0", "use 2 x lora_r"),
        ("lora_dropout", 0 <= cfg.lora_dropout < 1, "must be in [0, 1)", "use 0 or 0.05"),
    ]


def _schedule_rules(cfg: RunConfig) -> list[NumberRule]:
    """How long a run trains, and what it logs and saves as it goes."""
    return [
        ("max_steps", cfg.max_steps == -1 or cfg.max_steps >= 1, "must be -1 (use epochs) or >= 1", "use e.g. 30"),
        ("num_train_epochs", cfg.num_train_epochs > 0, "must be > 0", "use 1"),
        ("logging_steps", cfg.logging_steps >= 1, "must be >= 1", "use 1 to see every step"),
        (
            "record_tokens",
            isinstance(cfg.record_tokens, bool),
            "must be true or false",
            "use true (the token view) or false (no tokens.jsonl)",
        ),
        ("save_steps", cfg.save_steps >= 1, "must be >= 1", "use e.g. 10"),
        ("warmup_steps", cfg.warmup_steps >= 0, "must be >= 0", "use 0"),
        (
            "save_total_limit",
            cfg.save_total_limit is None or cfg.save_total_limit >= 1,
            "must be >= 1 or empty",
            "use 3, or leave it empty to keep every checkpoint",
        ),
        ("seed", cfg.seed >= 0, "must be >= 0", "use 42"),
    ]


def _round_rules(cfg: RunConfig) -> list[NumberRule]:
    """A generation round: the completions' length, a reward call's time limit, the processes and vLLM's share of
    the GPU."""
    return [
        (
            "max_completion_length",
            cfg.max_completion_length >= 1,
            "must be >= 1",
            "use 32 for the demo, 256+ for reasoning",
        ),
        (
            "reward_timeout_s",
            math.isfinite(cfg.reward_timeout_s) and cfg.reward_timeout_s >= 0,
            "must be a number of seconds >= 0",
            "use 120, or 0 for no limit",
        ),
        ("num_processes", cfg.num_processes >= 1, "must be >= 1", "use 1, or one per GPU"),
        ("vllm_gpu_memory_utilization", 0 < cfg.vllm_gpu_memory_utilization < 1, "must be in (0, 1)", "use 0.3"),
    ]


def _loss_variant_rules(cfg: RunConfig) -> list[NumberRule]:
    """The loss's variants: DAPO's upper clip and the entropy mask."""
    return [
        (
            "epsilon_high",
            cfg.epsilon_high is None or (cfg.epsilon_high > 0 and math.isfinite(cfg.epsilon_high)),
            "must be > 0 or empty",
            "use 0.28 (DAPO), or leave it empty to use epsilon",
        ),
        (
            "top_entropy_quantile",
            0 <= cfg.top_entropy_quantile <= 1,
            "must be in [0, 1]",
            "use 1.0 (every token), or 0.2 as in 'Beyond the 80/20 rule'",
        ),
        (
            "entropy_coef",
            0 <= cfg.entropy_coef <= 1,
            "must be in [0, 1] (a bonus weight; adaptive control keeps it within [0, 1])",
            "use 0 (no bonus) or a small weight such as 0.001",
        ),
        (
            "entropy_target",
            cfg.entropy_target >= 0 and math.isfinite(cfg.entropy_target),
            "must be a number >= 0 (nats)",
            "use the entropy curve's early value, or TRL's 0.2",
        ),
    ]


def _evaluation_rules(cfg: RunConfig) -> list[NumberRule]:
    """Held-out evaluation."""
    return [
        ("eval_steps", cfg.eval_steps >= 1, "must be >= 1", "use e.g. 10 (evaluate every 10 steps)"),
        ("eval_size", cfg.eval_size >= 1, "must be >= 1", "use e.g. 16 held-out prompts"),
        ("eval_pass_k", cfg.eval_pass_k >= 0, "must be >= 0", "use 0 (greedy only) or e.g. 4"),
        (
            "best_checkpoint_metric",
            cfg.eval_strategy != "steps" or cfg.eval_pass_k >= _PASS_K_NEEDED.get(cfg.best_checkpoint_metric, 0),
            f"{cfg.best_checkpoint_metric} needs eval_pass_k >= {_PASS_K_NEEDED.get(cfg.best_checkpoint_metric, 0)} "
            f"(it is read from sampled answers)",
            "set eval_pass_k (e.g. 4), or choose best_checkpoint_metric=accuracy",
        ),
    ]


# The samples each best_checkpoint_metric is read from: pass@k from one, mean@k, maj@k and best@k from two or more.
_PASS_K_NEEDED = {"pass_at_k": 1, "mean_at_k": 2, "maj_at_k": 2, "best_at_k": 2}


def _number_problems(cfg: RunConfig) -> list[ConfigProblem]:
    """The fields whose number breaks its rule, then those whose value is not one of their choices, then the
    recipe's problem, in this order."""
    rules = [
        *_optimiser_rules(cfg),
        *_sampling_rules(cfg),
        *_lora_rules(cfg),
        *_schedule_rules(cfg),
        *_round_rules(cfg),
        *_loss_variant_rules(cfg),
        *_evaluation_rules(cfg),
    ]
    problems = [
        ConfigProblem(name, f"{rule}, got {getattr(cfg, name)!r}", fix) for name, ok, rule, fix in rules if not ok
    ]
    problems += _choice_problems(cfg)
    from workbench.spec.recipes import recipe_problem

    found = recipe_problem(cfg.recipe)
    if found:
        problems.append(ConfigProblem(*found))
    return problems


def _choice_problems(cfg: RunConfig) -> list[ConfigProblem]:
    """The fields whose value is not one of their choices."""
    problems: list[ConfigProblem] = []
    choices = [
        ("loss_type", LOSS_TYPES),
        ("scale_rewards", SCALE_REWARDS),
        ("device", DEVICES),
        ("lr_scheduler_type", LR_SCHEDULERS),
        ("importance_sampling_level", IMPORTANCE_SAMPLING_LEVELS),
        ("solution_transform", SOLUTION_TRANSFORM_CHOICES),
        ("chat_template", CHAT_TEMPLATE_CHOICES),
        ("eval_strategy", EVAL_STRATEGIES),
        ("best_checkpoint_metric", BEST_CHECKPOINT_METRICS),
        ("merged_generation", MERGED_GENERATION),
        ("shared_prompt_pass", SHARED_PROMPT_PASS),
        ("packed_decode", PACKED_DECODE),
    ]
    for name, allowed in choices:
        if getattr(cfg, name) not in allowed:
            problems.append(
                ConfigProblem(
                    name,
                    f"{getattr(cfg, name)!r} is not one of {', '.join(allowed)}",
                    f"choose one of {', '.join(allowed)}",
                )
            )
    return problems


def plan_for(cfg: RunConfig, dataset_size: int | None = None):
    """The calculator's plan for this config (raises calculator.InputError on impossible values)."""
    from workbench.calc import plan

    return plan(
        per_device_train_batch_size=cfg.per_device_train_batch_size,
        gradient_accumulation_steps=cfg.gradient_accumulation_steps,
        num_generations=cfg.num_generations,
        num_processes=cfg.num_processes,
        steps_per_generation=cfg.steps_per_generation,
        num_iterations=cfg.num_iterations,
        dataset_size=dataset_size,
        num_train_epochs=cfg.num_train_epochs,
        max_steps=cfg.max_steps,
        max_completion_length=cfg.max_completion_length,
        # GPUs serving a vLLM server count in the split the calculator suggests moving
        vllm_gpus=len(cfg.vllm_gpu_ids) if cfg.generation in SERVER_GENERATIONS else 0,
    )


def _plan_problems(cfg: RunConfig) -> tuple[list[ConfigProblem], Any]:
    from workbench.calc import InputError

    try:
        result = plan_for(cfg)
    except InputError as exc:
        return [ConfigProblem(exc.field, exc.rule, "see the batch calculator")], None
    if result.valid:
        return [], result
    fixes = "; ".join(s.description for s in result.suggestions[:4]) or "open the batch calculator"
    return [
        ConfigProblem("num_generations", error.rstrip("."), f"valid nearby settings: {fixes}")
        for error in result.errors
    ], result


def _source_problems(cfg: RunConfig, names: list[str], extra: dict) -> list[ConfigProblem]:
    """The data source, its config and split, the column mapping and the chat template, read cheaply."""
    from workbench.sources.dataset_reading import CHECK_ROWS, DatasetError
    from workbench.sources.model_files import model_location
    from workbench.spec import columns, data_mapping, tasks

    field_name, value = data_field(cfg)
    if cfg.dataset_name.strip() and cfg.dataset_path.strip() and cfg.dataset_name.strip() != cfg.dataset_path.strip():
        return [
            ConfigProblem(
                "dataset_path",
                "is set beside dataset_name, its newer name",
                "keep one: clear dataset_path and give the data as dataset_name",
            )
        ]
    if cfg.task not in tasks.TASKS and not value:
        return [
            ConfigProblem(
                "task", f"unknown task {cfg.task!r}", f"choose one of {', '.join(tasks.TASKS)}, or give dataset_name"
            )
        ]
    task = tasks.TASKS.get(cfg.task)
    # a task that trains on a hub dataset ships a few of its rows: offline, they are the way to try it
    sample = (
        f"; to try the task offline, its bundled sample: dataset_name={task.sample_dataset}"
        if task and task.sample_dataset
        else ""
    )
    if not value and task.dataset_required:
        return [
            ConfigProblem(
                "dataset_name",
                f"is empty, and the {cfg.task} task trains on a dataset",
                f"give {task.settings['dataset_name']} (or a local copy's folder){sample}",
            )
        ]
    try:
        found = columns.source_rows(
            cfg.task,
            value,
            cfg.dataset_config,
            cfg.dataset_train_split,
            cfg.seed,
            count=CHECK_ROWS if value else 1,
            field=field_name or "dataset_name",
        )
    except DatasetError as exc:
        problem = _problem_from_message(exc, field_name or "dataset_name")
        if task and value == task.settings.get("dataset_name"):  # the task's own hub id, unreachable
            problem = dataclasses.replace(problem, rule=problem.rule + sample)
        return [problem]
    has_template = data_mapping.has_chat_template(model_location(cfg.model))
    problems = []
    rule = data_mapping.resolve_chat_template(cfg.chat_template, has_template)[1]
    if rule and cfg.chat_template in CHAT_TEMPLATE_CHOICES:  # an unknown choice is named with the other choices
        problems.append(ConfigProblem("chat_template", rule, "set chat_template=auto, or choose a chat model"))
    if found.rows is None:  # an uncached hub dataset the hub will give: its columns are known once downloaded
        return problems
    source = f"{field_name} {Path(value).name}" if value else f"the {cfg.task} task's data"
    data_columns = list(found.rows[0]) if found.rows else []
    mapping = column_mapping(cfg, has_template)
    named = f"the data ({Path(value).name})" if value else source  # the field already names where it is
    problems += [
        ConfigProblem(*p)
        for p in data_mapping.mapping_problems(
            data_columns, found.rows, mapping, named, cfg.chat_template, field_name or "task"
        )
    ]
    if cfg.solution_transform not in SOLUTION_TRANSFORM_CHOICES:  # named with the other choices
        return problems
    mapped = data_columns + (["solution"] if mapping.solution_column else [])
    problems += [
        ConfigProblem(*p) for p in columns.missing_problems(mapped, columns.reward_needs(names, extra), source)
    ]
    return problems


def _problem_from_message(exc: Exception, default_field: str) -> ConfigProblem:
    """A ConfigProblem from a message that starts with the field it is about (`field: ...` or `field '...'`)."""
    text = str(exc)
    for name in field_names():
        if text.startswith((f"{name}: ", f"{name} '")):
            return ConfigProblem(name, text.removeprefix(f"{name}: "), "")
    return ConfigProblem(default_field, text, "")


def _data_problems(cfg: RunConfig, import_reward_file: bool = True, read_data: bool = True) -> list[ConfigProblem]:
    from workbench.spec import rewards, tasks

    problems = []
    extra = {}
    if cfg.reward_file:
        try:
            extra = (
                rewards.load_reward_file(cfg.reward_file)
                if import_reward_file
                else rewards.read_reward_file(cfg.reward_file)
            )
        except rewards.RewardError as exc:
            problems.append(problem_from("reward_file", exc))
    names = reward_names_for(cfg)
    for name in names:
        try:
            rewards.get_reward(name, extra)
        except rewards.RewardError as exc:
            problems.append(problem_from("reward_names", exc))
    problems += _source_problems(cfg, names, extra) if read_data else []
    if not names and (cfg.task in tasks.TASKS or data_field(cfg)[1]):
        problems.append(
            ConfigProblem(
                "reward_names", "no reward function is chosen", f"name at least one of {', '.join(rewards.REWARDS)}"
            )
        )
    weights = reward_weights_for(cfg)
    if len(weights) != len(names):
        problems.append(
            ConfigProblem(
                "reward_weights",
                f"{len(weights)} weights for {len(names)} rewards",
                "give one weight per reward, or leave it empty",
            )
        )
    return problems + _reward_setting_problems(cfg, names)


def _reward_setting_problems(cfg: RunConfig, names: list[str]) -> list[ConfigProblem]:
    """TRL rewards' parameters, what a raising reward does, and the reward model."""
    from workbench.sources.model_files import ModelError, check_reward_model
    from workbench.spec.rewards import REWARD_ERROR_MODES
    from workbench.spec.rewards import trl_reward_library as trl_rewards

    problems = [
        ConfigProblem(*found)
        for found in trl_rewards.param_problems(cfg.reward_params, names, cfg.max_completion_length)
    ]
    if cfg.reward_errors not in REWARD_ERROR_MODES:
        problems.append(
            ConfigProblem(
                "reward_errors",
                f"{cfg.reward_errors!r} is not one of {', '.join(REWARD_ERROR_MODES)}",
                "use fail (a raising reward ends the run) or record (it scores "
                "reward_failure_score and the run goes on)",
            )
        )
    for name in ("reward_failure_score", "reward_model_weight"):
        if not math.isfinite(getattr(cfg, name)):
            problems.append(
                ConfigProblem(
                    name,
                    f"must be a finite number, got {getattr(cfg, name)!r}",
                    "use e.g. 0.0" if name == "reward_failure_score" else "use e.g. 1.0",
                )
            )
    if cfg.reward_model.strip():
        try:
            check_reward_model(cfg.reward_model.strip())
        except ModelError as exc:
            problems.append(
                ConfigProblem(
                    "reward_model",
                    str(exc).removeprefix("model: "),
                    "give a sequence-classification model's folder or hub id, or clear reward_model",
                )
            )
    return problems


def _correctness_problems(cfg: RunConfig) -> list[ConfigProblem]:
    chosen = cfg.correctness_reward.strip()
    names = reward_names_for(cfg)
    if chosen and chosen != NO_CORRECTNESS and chosen not in names:
        return [
            ConfigProblem(
                "correctness_reward",
                f"{chosen!r} is not one of the run's rewards ({', '.join(names)})",
                f"name one of them, or '{NO_CORRECTNESS}' when no reward means a right answer",
            )
        ]
    return []


def _tracker_problems(cfg: RunConfig) -> list[ConfigProblem]:
    from workbench.spec import trackers

    return [ConfigProblem(*found) for found in trackers.problems(cfg.report_to)]


def _hardware_problems(cfg: RunConfig) -> list[ConfigProblem]:
    from workbench.sources.gpus import list_gpus, runs_on_cpu
    from workbench.spec import cluster

    if cluster.is_multi_machine(cfg):  # this machine's GPUs say nothing about the cluster's
        return [ConfigProblem(*found) for found in cluster.problems(cfg, on_cpu=cfg.device == "cpu")]
    on_cpu = cfg.distributed_backend != "ddp" and runs_on_cpu(cfg.device)  # NVML only when it matters
    problems = [ConfigProblem(*found) for found in cluster.problems(cfg, on_cpu=on_cpu, here=True)]
    from workbench.spec import generation

    needs_gpu = cfg.device == "cuda" or cfg.gpu_ids or cfg.vllm_gpu_ids or cfg.generation in TRL_MODES
    gpus = list_gpus() if needs_gpu else []
    problems += [ConfigProblem(*found) for found in generation.problems(cfg, gpus)]
    if needs_gpu and not gpus:
        if cfg.gpu_ids:
            problems.append(
                ConfigProblem(
                    "gpu_ids",
                    f"GPU {cfg.gpu_ids[0]} does not exist: this machine has no visible CUDA GPU",
                    "clear gpu_ids to train on the CPU",
                )
            )
        elif cfg.device == "cuda":
            problems.append(
                ConfigProblem(
                    "device", "needs a CUDA GPU, and this machine has none visible", "set device=cpu (or auto)"
                )
            )
        return problems
    known = {g.index for g in gpus}
    for gpu in cfg.gpu_ids:
        if gpu not in known:
            problems.append(
                ConfigProblem(
                    "gpu_ids",
                    f"GPU {gpu} does not exist (this machine has {sorted(known)})",
                    "pick from the GPUs listed",
                )
            )
    if len(set(cfg.gpu_ids)) != len(cfg.gpu_ids):
        problems.append(ConfigProblem("gpu_ids", "lists a GPU twice", "list each GPU once"))
    if gpus and cfg.device != "cpu" and cfg.generation not in generation.SERVER_GENERATIONS:
        available = len(cfg.gpu_ids) or len(gpus)
        if cfg.num_processes > available:
            problems.append(
                ConfigProblem(
                    "num_processes",
                    f"{cfg.num_processes} processes for {available} GPU(s)",
                    f"use at most {available}, or choose more gpu_ids",
                )
            )
    return problems


# Linux's limits: a whole path (PATH_MAX) and one name in it (NAME_MAX, bytes); longer ones cannot even be looked up.
MAX_PATH_CHARS = 4096
MAX_NAME_BYTES = 255


def path_problem(name: str, value: str) -> ConfigProblem | None:
    """The problem with path field `name` when no file system could hold `value` (looking it up would raise)."""
    value = value or ""
    if len(value) > MAX_PATH_CHARS or any(
        len(part.encode("utf-8", "replace")) > MAX_NAME_BYTES for part in value.split("/")
    ):
        return ConfigProblem(
            name,
            f"is not a usable path ({len(value)} characters; at most "
            f"{MAX_PATH_CHARS}, and {MAX_NAME_BYTES} bytes per folder or file name)",
            "give the path of an existing file or folder",
        )
    return None


def _path_problems(cfg: RunConfig) -> list[ConfigProblem]:
    """Path fields no file system could hold (checked first: looking such a path up raises)."""
    return [problem for name in PATH_FIELDS if (problem := path_problem(name, getattr(cfg, name))) is not None]


def validate_config(cfg: RunConfig, import_reward_file: bool = True, read_data: bool = True) -> list[ConfigProblem]:
    """Every problem with `cfg`, cheaply: nothing loads, nothing trains.

    `import_reward_file` False: a reward file is read, never run (its function
    names parsed from the source), for a process that must not run a user's
    code: the dashboard of a shared server. The training process imports it.
    `read_data` False: the dataset's rows are not read here (a sandboxed run's
    queued start or resume, where no user's path rule is at hand: its data is
    read inside its sandbox, under its policy).
    """
    from workbench.sources.model_files import ModelError, check_model

    path_problems = _path_problems(cfg)
    if path_problems:
        return path_problems
    problems = _number_problems(cfg)
    if not problems:  # the calculator refuses the same impossible numbers; say it once
        problems += _plan_problems(cfg)[0]
    try:
        check_model(cfg.model)
    except ModelError as exc:
        problems.append(problem_from("model", exc))
    problems += _data_problems(cfg, import_reward_file, read_data)
    problems += _correctness_problems(cfg)
    if (
        cfg.eval_strategy == "steps" and not problems and read_data
    ):  # the held-out data is looked at once the rest is sound
        from workbench.spec.heldout import eval_problems

        problems += [
            ConfigProblem(*found) for found in eval_problems(cfg, correctness_reward_for(cfg), data_field(cfg))
        ]
    problems += _tracker_problems(cfg)
    problems += _hardware_problems(cfg)
    return problems


def shared_problems(cfg: RunConfig) -> list[ConfigProblem]:
    """What a shared dashboard (or any sandboxed launch) refuses besides paths: a reward call with no time limit
    (reward_timeout_s 0), which would let one reward hold its run, and the CPU slot it takes, as long as it likes."""
    if cfg.reward_timeout_s == 0:
        return [
            ConfigProblem(
                "reward_timeout_s",
                "0 means no time limit, and on a shared dashboard every reward call has one",
                f"set it to the seconds one call may take (the default is {RunConfig().reward_timeout_s:g})",
            )
        ]
    return []


def check_config(cfg: RunConfig, import_reward_file: bool = True, read_data: bool = True) -> None:
    """Raise ConfigError (field, rule, fix for each problem) when `cfg` cannot run (see validate_config)."""
    problems = validate_config(cfg, import_reward_file, read_data)
    if problems:
        plan = _plan_problems(cfg)[1] if not _number_problems(cfg) else None
        raise ConfigError(problems, plan)
