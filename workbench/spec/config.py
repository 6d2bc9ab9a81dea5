"""One description of a training run: `RunConfig`, its help text, and its checks.

The UI, the CLI, the notebooks and the training process all use `RunConfig`.
GRPO settings carry TRL's own field names (`learning_rate`,
`per_device_train_batch_size`, `num_generations`, `beta`, ...) so a value means
exactly what TRL's documentation says; the defaults are the workbench's, chosen
for LoRA on a small model (TRL's defaults suit full fine-tuning on GPUs):
beta 0.04 so KL is plotted, learning_rate 1e-3 for LoRA, float32 and no
gradient checkpointing on CPU.

Each field's help text sits beside it (`setting(default, help)`); `FIELD_HELP`
collects them for the UI's info lines.
`check_config` refuses a config that cannot work - an invalid batch plan, a
missing dataset, an unknown reward, a missing model folder or GPU - in well
under a second, before any model loads. It imports no torch.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import math
import os
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from workbench.errors import WorkbenchError
from workbench.spec.cluster import DEFAULT_PORT, DISTRIBUTED_BACKENDS
from workbench.spec.data_mapping import CHAT_TEMPLATE_CHOICES, SOLUTION_TRANSFORMS
from workbench.spec.generation import GENERATIONS, SERVER_GENERATIONS, TRL_MODES
from workbench.spec.trackers import REPORT_TO

LOSS_TYPES = ("dapo", "grpo", "bnpo", "dr_grpo", "cispo", "sapo", "luspo", "vespo")
SCALE_REWARDS = ("group", "batch", "none")
IMPORTANCE_SAMPLING_LEVELS = ("token", "sequence")
DEVICES = ("auto", "cpu", "cuda")
LR_SCHEDULERS = ("linear", "constant", "cosine", "constant_with_warmup")
SOLUTION_TRANSFORM_CHOICES = tuple(SOLUTION_TRANSFORMS)
EVAL_STRATEGIES = ("no", "steps")
MERGED_GENERATION = ("auto", "no", "float32", "bfloat16")
SHARED_PROMPT_PASS = ("auto", "yes", "no")
PACKED_DECODE = ("auto", "yes", "no")


def setting(default: Any, help: str, choices: tuple | None = None) -> Any:
    """A RunConfig field with its help text (and allowed values) beside it, as TRL's configs do."""
    metadata = {"help": help} if choices is None else {"help": help, "choices": choices}
    if isinstance(default, (list, dict)):
        return field(default_factory=lambda: type(default)(default), metadata=metadata)
    return field(default=default, metadata=metadata)


@dataclass
class RunConfig:
    """Everything that makes a run; GRPO fields under TRL's names, each with its help text."""

    # what to train
    run_name: str = setting("", "A label for the run, added to its folder name (letters, digits, - and _).")
    model: str = setting(
        "smollm2-135m-instruct",
        "smollm2-135m-instruct (bundled, works offline), tiny (a 2-layer random model for tests), a "
        "local model folder, or a hub id like Qwen/Qwen2-0.5B-Instruct.",
    )
    task: str = setting(
        "demo",
        "A built-in task: its prompts and reward functions. 'demo' learns to answer briefly within minutes on CPU.",
    )
    dataset_name: str = setting(
        "",
        "The training data in place of the task's prompts (TRL's dataset_name): a hub id like openai/gsm8k (read "
        "from the hub cache, or downloaded where the hub can be reached), a folder laid out as the hub lays it out "
        "(README.md with `configs:`, data files per split), a `save_to_disk` folder, or a JSONL, JSON, CSV or "
        "Parquet file. Every column reaches the reward functions.",
    )
    dataset_config: str = setting("", "The dataset's config (subset), e.g. main for openai/gsm8k; empty: its default.")
    dataset_train_split: str = setting(
        "train",
        "The split to train on; a slice such as train[:200] or train[:10%] reads only those rows.",
    )
    dataset_test_split: str = setting(
        "test",
        "The split held out for evaluation: with eval_strategy=steps its first eval_size rows are evaluated "
        "(training never reads it); a slice of the train split such as train[-50:] works when it never overlaps "
        "dataset_train_split (prompts found in both are left out of the evaluation).",
    )
    prompt_column: str = setting(
        "prompt",
        "The column holding the prompts (text, or chat messages used as they are); TRL receives it as `prompt`.",
    )
    solution_column: str = setting(
        "",
        "The column holding the reference answers (optional); rewards get it under TRL's name `solution` (after "
        "solution_transform) and under its own name.",
    )
    solution_transform: str = setting(
        "none",
        "How the reference answer becomes `solution`: none (as it is), after_hashes (GSM8K: the text after "
        "`####`, stripped, commas removed).",
        choices=SOLUTION_TRANSFORM_CHOICES,
    )
    chat_template: str = setting(
        "auto",
        "How a text prompt reaches the model: apply (a user message, after the system prompt, in the model's "
        "chat template), none (the raw text, TRL's standard format), auto (apply when the model's tokenizer has "
        "a chat template). Chat-message prompts always use the template.",
        choices=CHAT_TEMPLATE_CHOICES,
    )
    system_prompt: str = setting(
        "",
        "System message put before each text prompt (the task's when it has one); empty: none.",
    )
    dataset_path: str = setting(
        "",
        "The older name of dataset_name for a local file or folder, kept so older configs and commands work; "
        "use dataset_name.",
    )
    reward_names: list[str] = setting(
        [],
        "Reward functions by name: the workbench's, TRL's (accuracy_reward, cosine_scaled_reward, ...; "
        "docs/own-data.md lists them all) or your reward file's; empty uses the task's own.",
    )
    reward_params: dict = setting(
        {},
        'Parameters of TRL\'s rewards, by reward name, e.g. {"repetition_penalty_reward": {"ngram_size": 4}} (JSON '
        "on the command line); a parameter left out keeps its default.",
    )
    reward_weights: list[float] = setting(
        [],
        "One weight per reward function (the reward is their weighted sum); empty means the task's weights or all 1.",
    )
    correctness_reward: str = setting(
        "",
        "The reward that means 'correct' (full marks = a right answer), e.g. exact_answer or accuracy_reward; the "
        "run's other rewards are shaping (format, length). Held-out evaluation and the alarms read it. Empty: the "
        "task's; 'none': the run has no notion of a right answer.",
    )
    reward_file: str = setting(
        "",
        "A Python file defining your own reward functions f(prompts, completions, **kwargs) -> "
        "list[float]; its source is copied into the run folder.",
    )
    reward_timeout_s: float = setting(
        120.0,
        "Longest one call of a reward function may take during training; a call that takes longer ends the "
        "run 'failed' with the function's name (a hung reward never blocks a run forever). 0 = no limit.",
    )
    reward_errors: str = setting(
        "fail",
        "What a reward function that raises does: fail ends the run naming it; record gives each completion it "
        "raises on reward_failure_score, keeps the error with the completion (completions.jsonl) and trains on. A "
        "function that raises on every completion of a batch, or hangs, still ends the run.",
        choices=("fail", "record"),
    )
    reward_failure_score: float = setting(
        0.0,
        "With reward_errors=record: the reward a completion gets from a function that raised on it.",
    )
    reward_model: str = setting(
        "",
        "A sequence-classification model (a local folder or a hub id) whose score is one more reward, after "
        "reward_names: TRL loads it with num_labels=1 and its own tokenizer. Empty: none.",
    )
    reward_model_weight: float = setting(1.0, "The reward model's weight in the weighted sum of rewards.")
    # LoRA
    lora_r: int = setting(16, "LoRA rank: size of the trained low-rank update. 8-32 is typical.")
    lora_alpha: int = setting(32, "LoRA scaling; the update is multiplied by lora_alpha / lora_r. Commonly 2 x lora_r.")
    lora_dropout: float = setting(0.0, "Dropout on the LoRA input during training (0 to 0.1).")
    lora_target_modules: str = setting(
        "all-linear",
        "Layers that get LoRA adapters: 'all-linear' or comma-separated names like q_proj,v_proj.",
    )
    # GRPO (TRL's GRPOConfig names)
    learning_rate: float = setting(
        1e-3,
        "Optimizer step size. LoRA wants 1e-4 to 1e-3; TRL's default 1e-6 suits full fine-tuning.",
    )
    lr_scheduler_type: str = setting(
        "linear",
        "How the learning rate changes over the run: linear decay to 0, constant, cosine.",
        choices=LR_SCHEDULERS,
    )
    warmup_steps: int = setting(0, "Steps over which the learning rate rises from 0 to learning_rate.")
    per_device_train_batch_size: int = setting(
        8,
        "Completions (not prompts) per process per micro-step. With one process, batch 8 and 8 "
        "generations train on one prompt per step.",
    )
    gradient_accumulation_steps: int = setting(1, "Micro-steps added up before each optimizer step.")
    num_generations: int = setting(
        8,
        "G: completions sampled per prompt. Advantages compare the G completions of one prompt; the "
        "generation batch must hold whole groups.",
    )
    steps_per_generation: int | None = setting(
        None,
        "Micro-steps that reuse one generation round; empty means gradient_accumulation_steps.",
    )
    max_completion_length: int = setting(
        48,
        "Longest completion in tokens; longer ones are cut (and counted in clipped_ratio).",
    )
    temperature: float = setting(1.0, "Sampling temperature; higher gives more varied completions within a group.")
    top_p: float = setting(1.0, "Nucleus sampling: keep the smallest set of tokens whose probability adds up to top_p.")
    top_k: int = setting(0, "Sample only among the top_k most likely tokens; 0 keeps them all.")
    repetition_penalty: float = setting(
        1.0,
        "Above 1 makes tokens already in the prompt or completion less likely; 1.0 changes nothing.",
    )
    beta: float = setting(
        0.04,
        "Weight of the KL penalty to the base model. 0 means no KL term, no reference pass and no "
        "'kl' plot; 0.04 is the GRPO paper's value.",
    )
    epsilon: float = setting(0.2, "Clipping range of the policy ratio (PPO-style), 0.2 by default.")
    epsilon_high: float | None = setting(
        None,
        "Upper clipping range of the policy ratio (DAPO's clip-higher, 0.28 in the paper); empty means epsilon. "
        "With loss_type cispo it is the ratio cap (5.0). Acts only when the ratio can move off 1: num_iterations "
        "> 1 or steps_per_generation > gradient_accumulation_steps.",
    )
    importance_sampling_level: str = setting(
        "token",
        "token: one policy ratio per token; sequence: one per completion, the mean log-ratio over its tokens "
        "(GSPO). Acts only when the ratio can move off 1 (see epsilon_high).",
        choices=IMPORTANCE_SAMPLING_LEVELS,
    )
    mask_truncated_completions: bool = setting(
        False,
        "Leave completions cut at max_completion_length out of the loss (DAPO: they are not wrong, only unfinished).",
    )
    top_entropy_quantile: float = setting(
        1.0,
        "Train only on the share of tokens with the highest entropy (0.2 in 'Beyond the 80/20 rule'); 1.0 keeps "
        "every token.",
    )
    loss_type: str = setting(
        "dapo",
        "How per-token losses are averaged: grpo (per sequence, as the paper), bnpo (tokens of the "
        "micro-batch), dr_grpo (fixed length), dapo (tokens of the generation batch, TRL's default).",
        choices=LOSS_TYPES,
    )
    scale_rewards: str = setting(
        "group",
        "Divide advantages by the reward std of the group, of the whole batch, or not at all (none).",
        choices=SCALE_REWARDS,
    )
    num_iterations: int = setting(1, "Optimizer passes over each generation round (mu in the paper).")
    recipe: str = setting(
        "",
        "The published recipe these settings started from (grpo, dapo, dr_grpo, gspo; see workbench/spec/recipes.py); "
        "empty: none. A record only: the fields themselves are what the run uses.",
    )
    max_steps: int = setting(30, "Optimizer steps to train; -1 runs num_train_epochs over the dataset.")
    num_train_epochs: float = setting(1.0, "Passes over the dataset when max_steps is -1.")
    logging_steps: int = setting(1, "Write metrics every this many optimizer steps.")
    record_tokens: bool = setting(
        True,
        "At logging steps, record each completion's values token by token (log-probability, reference's, KL, "
        "entropy, clipped) in tokens.jsonl, for the token view; false records none.",
    )
    save_steps: int = setting(
        10,
        "Save a LoRA checkpoint every this many optimizer steps (resume starts from the last one).",
    )
    save_total_limit: int | None = setting(
        3,
        "Keep only this many newest checkpoints (older ones are deleted as new ones are saved); empty keeps "
        "all. The final adapter is kept apart.",
    )
    # held-out evaluation (workbench/trainer/evaluator.py), under TRL's names where TRL has them
    eval_strategy: str = setting(
        "no",
        "steps: evaluate held-out prompts before the first update (step 0), every eval_steps steps and at the end, "
        "written to eval.jsonl (accuracy from the correctness reward, pass@k, each reward's mean); no: never.",
        choices=EVAL_STRATEGIES,
    )
    eval_steps: int = setting(10, "With eval_strategy=steps: evaluate every this many optimizer steps.")
    eval_size: int = setting(
        16,
        "Held-out prompts evaluated each time: the first rows of dataset_test_split, or for a built-in task "
        "questions it generates after the training ones (never trained on).",
    )
    eval_pass_k: int = setting(
        0,
        "k completions sampled per held-out prompt at the run's temperature, for pass@k (the share of prompts "
        "with at least one right answer among k); 0: greedy answers only (cheaper).",
    )
    seed: int = setting(42, "Random seed for sampling and initialisation.")
    bf16: bool = setting(
        False,
        "Train in bfloat16 (the weights loaded in bfloat16, LoRA kept in float32 by PEFT, and TRL's bf16 autocast). "
        "Usual on GPUs; on a CPU it saves memory, and whether it is faster depends on the CPU "
        "(benchmarks/bench_speed.py's `bf16` row measures it).",
    )
    merged_generation: str = setting(
        "auto",
        "With generation=transformers: sample each round from a plain copy of the policy with the LoRA update "
        "merged in (refreshed once a step), in float32 or bfloat16, instead of through PEFT's LoRA layers; "
        "training and every log-probability still use the policy. float32 draws the same completions; bfloat16 "
        "samples off-policy by rounding. no: sample from the policy itself (bare TRL's way). auto: what this "
        "machine's speed probe measured fastest for the model and shape (`python -m workbench tune`; a run "
        "measures it when it starts, once), among the exact levers (workbench/tuning/).",
    )
    shared_prompt_pass: str = setting(
        "auto",
        "Score log-probabilities (the policy's forward and backward, the reference pass) running each prompt "
        "once for its whole group instead of once per completion, and projecting only completion tokens "
        "through the vocabulary; the values equal TRL's to float32 rounding. yes: wherever it can run (one "
        "process, no gradient checkpointing, llama/qwen2/qwen3 models; elsewhere TRL's way runs). no: TRL's "
        "way. auto: as this machine's speed probe measured (see merged_generation).",
    )
    packed_decode: str = setting(
        "auto",
        "With a float32 merged copy on a CPU (merged_generation): decode through MKL's packed GEMM, the copy's "
        "linear weights stored once a step in the layout MKL's kernel reads, for faster products of a few rows; "
        "on Llama models each decode step runs as one function written for its layers (checked against "
        "transformers' own at start-up), and the sampler's draws are torch.multinomial's, made faster. The same "
        "numbers to float32 rounding and the same draws, for a second copy of the linear weights in memory. "
        "yes: wherever that copy samples and torch has MKL. auto: as this machine's speed probe measured (faster "
        "on some CPUs, slower on others). no: torch's plain matmul and transformers' generate as they are "
        "(workbench/trainer/packed_decode.py, llama_decode.py, exact_draws.py).",
    )
    gradient_checkpointing: bool = setting(
        False,
        "Recompute activations to save memory; costs time, useless for small models on CPU.",
    )
    report_to: list[str] = setting(
        [],
        "Trackers that also receive TRL's metrics, written inside the run folder and offline: tensorboard "
        "(`tensorboard --logdir runs/<id>/tensorboard`), trackio (`TRACKIO_DIR=runs/<id>/trackio trackio show`). "
        "Empty: none; the run folder is the record either way.",
        choices=REPORT_TO,
    )
    # hardware
    device: str = setting("auto", 'auto (GPUs when present, else CPU), cpu, or cuda.', choices=DEVICES)
    gpu_ids: list[int] = setting([], "Which GPUs to train on (CUDA_VISIBLE_DEVICES); empty means all visible.")
    num_processes: int = setting(
        1,
        "Training processes (one per GPU; on CPU several processes share the cores). More than one "
        "goes through accelerate launch.",
    )
    # several machines (workbench/spec/cluster.py); started from a cluster bundle (`python -m workbench export`)
    num_machines: int = setting(
        1,
        "Machines the training processes are spread over (accelerate's --num_machines). num_processes counts "
        "the processes of every machine together and must split evenly over them.",
    )
    main_process_ip: str = setting(
        "",
        "Address of machine rank 0, where the other machines meet (--main_process_ip). Empty: the cluster "
        "bundle's Slurm script takes the job's first node; its launch scripts read $MAIN_PROCESS_IP.",
    )
    main_process_port: int = setting(
        DEFAULT_PORT,
        "Port on machine rank 0 for that meeting (--main_process_port); it must be open between the machines. "
        "A run on one machine picks a free port itself.",
    )
    distributed_backend: str = setting(
        "ddp",
        "How GPU processes share the model: ddp (a full copy each), deepspeed-zero2 (optimizer state and "
        "gradients split), deepspeed-zero3 (weights split too: models larger than one GPU), fsdp (PyTorch FSDP2). "
        "Written as an accelerate config file; DeepSpeed and FSDP need CUDA.",
        choices=DISTRIBUTED_BACKENDS,
    )
    vllm_node: bool = setting(
        False,
        "Give the vLLM server a machine of its own, beside the num_machines training machines (Open-R1's "
        "layout): the cluster bundle starts it first and points training at it. Needs vllm-server or trl-server.",
    )
    # generation
    generation: str = setting(
        "transformers",
        "How completions are generated. transformers: TRL's generate inside each training process (works "
        "everywhere). vllm-server: a vLLM server that hot-loads the LoRA adapter after every step (only the "
        "adapter moves); on CPU it proves the path but is slower than transformers, on GPUs it is the fast one. "
        "trl-colocate / trl-server: TRL's own vLLM modes, which merge the adapter and broadcast every weight "
        "each step (CUDA only).",
        choices=GENERATIONS,
    )
    vllm_gpu_ids: list[int] = setting(
        [],
        "GPUs given to the vLLM server (CUDA_VISIBLE_DEVICES of the server), apart from the training GPUs "
        "(Open-R1's layout: 4 GPUs, 1 serves, 3 train). Empty: the server shares the training GPU, or the CPU.",
    )
    vllm_server_base_url: str = setting(
        "",
        "Address of a vLLM server that is already running, e.g. http://127.0.0.1:8000 (started with "
        "--enable-lora for vllm-server). Empty: the run starts its own server and stops it when it ends.",
    )
    vllm_host: str = setting(
        "127.0.0.1",
        "Address the run's own vLLM server listens on. 127.0.0.1 keeps it private to this machine.",
    )
    vllm_port: int = setting(0, "Port of the run's own vLLM server; 0 picks a free one.")
    vllm_max_model_len: int = setting(
        1024,
        "Longest prompt + completion, in tokens, the vLLM server accepts (--max-model-len); it sizes the KV "
        "cache, so larger costs memory.",
    )
    vllm_max_lora_rank: int | None = setting(
        None,
        "The server's --max-lora-rank; empty picks the smallest value vLLM accepts that holds lora_r.",
    )
    vllm_gpu_memory_utilization: float = setting(
        0.3,
        "Share of a GPU's memory vLLM reserves for weights and KV cache: in trl-colocate the training GPU's "
        "(0.3 leaves room to train); a server on GPUs of its own can take 0.9.",
    )
    vllm_tensor_parallel_size: int = setting(
        1,
        "GPUs one vLLM model is split across. For a server it equals the number of vllm_gpu_ids.",
    )
    vllm_server_timeout: float = setting(
        300.0,
        "Seconds to wait for the vLLM server to be ready (it loads the model first, about 50 s for SmolLM2 on "
        "CPU), and the longest one generation request may take.",
    )
    vllm_python: str = setting(
        "",
        "Python interpreter of the venv that has vLLM; empty uses .venv-vllm (made by `make vllm`), else this Python.",
    )

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> "RunConfig":
        """A RunConfig from a dict (e.g. config.json); unknown keys are refused by name."""
        data = _renamed_fields(data)
        unknown = sorted(set(data) - set(field_names()))
        if unknown:
            raise ConfigError([ConfigProblem(unknown[0], "is not a RunConfig field",
                                             f"remove it; valid fields: {', '.join(field_names())}")])
        return cls(**{name: _coerce(name, value) for name, value in data.items()})

    def save(self, path: str | os.PathLike) -> Path:
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(self.to_dict(), indent=2) + "\n", encoding="utf-8")
        return path

    @classmethod
    def load(cls, path: str | os.PathLike) -> "RunConfig":
        path = Path(path)
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise ConfigError([ConfigProblem("config", f"no file at {path}", "give the path of a config.json")]) from None
        except json.JSONDecodeError as exc:
            raise ConfigError([ConfigProblem("config", f"{path} is not valid JSON ({exc.msg}, line {exc.lineno})",
                                             "fix the file or write it again with RunConfig.save")]) from None
        if not isinstance(data, dict):
            raise ConfigError([ConfigProblem("config", f"{path} holds a {type(data).__name__}, not an object",
                                             "write it with RunConfig.save")])
        return cls.from_dict(data)

    def with_changes(self, **changes: Any) -> "RunConfig":
        return RunConfig.from_dict({**self.to_dict(), **changes})

    def with_absolute_paths(self, base: str | os.PathLike | None = None) -> "RunConfig":
        """This config with its local paths (model folder, dataset_path, reward_file, reward_model) made absolute.

        A path typed relative to the app's folder means nothing to the trainer,
        which runs in the run folder; a run's config.json therefore holds
        absolute paths. Only names that exist on disk change: `tiny`, the
        bundled model and hub ids such as `org/name` stay as they are.
        """
        from workbench.sources.model_files import MODEL_CHOICES

        changes = {}
        for name in PATH_FIELDS:
            value = getattr(self, name).strip()
            if not value or (name == "model" and value in MODEL_CHOICES):
                continue
            path = Path(value).expanduser()
            if not path.is_absolute():
                path = Path(base or os.getcwd()) / path
            if (path.is_dir() if name in ("model", "reward_model") else path.exists()):
                changes[name] = str(path.resolve())
        return self.with_changes(**changes) if changes else self

    @classmethod
    def for_task(cls, task: str = "demo", **changes: Any) -> "RunConfig":
        """The config a task is designed around: defaults, the task's preset settings, then `changes`.

        The CLI, the Setup tab and the notebooks all start from this, so
        `--task arithmetic` trains with the same settings everywhere.
        """
        from workbench.spec import tasks

        try:
            preset = tasks.get_task(task)
        except tasks.TaskError as exc:
            raise ConfigError([_problem_from("task", exc)]) from None
        return cls.from_dict({**cls().to_dict(), **preset.settings, "task": task, **changes})


def _renamed_fields(data: dict) -> dict:
    """A config written before `generation` existed: `use_vllm` + `vllm_mode` read as the generation they meant."""
    if "use_vllm" not in data and "vllm_mode" not in data:
        return data
    data = dict(data)
    use_vllm, mode = data.pop("use_vllm", False), data.pop("vllm_mode", "colocate")
    if use_vllm in (True, "true", "True", 1) and "generation" not in data:
        data["generation"] = f"trl-{mode}"
    return data


def trl_vllm_settings(cfg: "RunConfig", server_url: str | None = None) -> dict:
    """GRPOConfig's vLLM fields: TRL's own modes switch `use_vllm` on (the server at `server_url`, when the run started one)."""
    mode = TRL_MODES.get(cfg.generation)
    if mode is None:
        return {"use_vllm": False}
    settings = {"use_vllm": True, "vllm_mode": mode, "vllm_gpu_memory_utilization": cfg.vllm_gpu_memory_utilization,
                "vllm_tensor_parallel_size": cfg.vllm_tensor_parallel_size,
                "vllm_max_model_length": cfg.vllm_max_model_len}
    if mode == "server":
        settings["vllm_server_base_url"] = server_url or cfg.vllm_server_base_url.strip() or None
        settings["vllm_server_timeout"] = cfg.vllm_server_timeout
    return settings


# Each field's help text, for the UI's info lines and the CLI's --help.
FIELD_HELP: dict[str, str] = {f.name: f.metadata["help"] for f in dataclasses.fields(RunConfig)}


@dataclass
class ConfigProblem:
    """One thing wrong with a config: the field, the rule it breaks, and a fix."""

    field: str
    rule: str
    fix: str

    def __str__(self) -> str:
        return f"{self.field}: {self.rule}" + (f"; {self.fix}" if self.fix else "")


def _problem_from(field_name: str, exc: Exception) -> ConfigProblem:
    """A ConfigProblem from an error whose message already names the field and a fix."""
    return ConfigProblem(field_name, str(exc).removeprefix(f"{field_name}: "), "")


class ConfigError(WorkbenchError):
    """A config that cannot run; `problems` lists each one, the message says them all."""

    def __init__(self, problems: list[ConfigProblem], plan: Any = None):
        self.problems = list(problems)
        self.plan = plan
        first = self.problems[0] if self.problems else ConfigProblem("", "", "")
        super().__init__("\n".join(str(p) for p in self.problems), field=first.field, rule=first.rule, fix=first.fix)


def field_names() -> list[str]:
    return [f.name for f in dataclasses.fields(RunConfig)]


@functools.lru_cache(maxsize=1)
def _field_types() -> dict[str, Any]:
    # resolving the hints walks every annotation of the class: ~0.5 ms, once, not once per field
    return typing.get_type_hints(RunConfig)


def field_type(name: str) -> Any:
    return _field_types()[name]


def _coerce(name: str, value: Any) -> Any:
    """`value` as the type of field `name`; a ConfigError naming the field when it cannot be."""
    kind = field_type(name)
    try:
        return _convert(kind, value)
    except (TypeError, ValueError):
        raise ConfigError([ConfigProblem(name, f"must be {_describe_type(kind)}, got {value!r}",
                                         f"give {_describe_type(kind)} (default {_default(name)!r})")]) from None


def _convert(kind: Any, value: Any) -> Any:
    origin, args = typing.get_origin(kind), typing.get_args(kind)
    if origin is typing.Union or origin is getattr(__import__("types"), "UnionType", None):
        inner = [a for a in args if a is not type(None)][0]
        if value is None or (isinstance(value, str) and value.strip().lower() in ("", "none", "null")):
            return None
        return _convert(inner, value)
    if kind is dict:
        if isinstance(value, str):
            value = json.loads(value) if value.strip() else {}
        if not isinstance(value, dict):
            raise TypeError(value)
        return value
    if origin is list:
        if isinstance(value, str):
            value = [v.strip() for v in value.split(",") if v.strip()]
        if not isinstance(value, (list, tuple)):
            raise TypeError(value)
        return [_convert(args[0], v) for v in value]
    if kind is bool:
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.strip().lower() in ("true", "1", "yes", "on", "false", "0", "no", "off"):
            return value.strip().lower() in ("true", "1", "yes", "on")
        if isinstance(value, int) and value in (0, 1):
            return bool(value)
        raise TypeError(value)
    if kind is int:
        if isinstance(value, bool):
            raise TypeError(value)
        number = float(value) if isinstance(value, str) else value
        if not isinstance(number, (int, float)) or not float(number).is_integer():
            raise ValueError(value)
        return int(number)
    if kind is float:
        if isinstance(value, bool):
            raise TypeError(value)
        return float(value)
    if kind is str:
        if not isinstance(value, (str, int, float)):
            raise TypeError(value)
        return str(value)
    return value


def _describe_type(kind: Any) -> str:
    origin, args = typing.get_origin(kind), typing.get_args(kind)
    if origin is list:
        return f"a list of {_describe_type(args[0])}s (comma-separated on the command line)"
    if args and type(None) in args:
        return f"{_describe_type([a for a in args if a is not type(None)][0])} or empty"
    return {int: "a whole number", float: "a number", bool: "true or false", str: "text",
            dict: "a JSON object"}.get(kind, str(kind))


def _default(name: str) -> Any:
    return RunConfig().to_dict()[name]


def parse_assignment(text: str) -> tuple[str, Any]:
    """`field=value` from the command line, typed by the field; ConfigError naming an unknown field."""
    name, sep, raw = text.partition("=")
    name = name.strip()
    if not sep or not name:
        raise ConfigError([ConfigProblem("--set", f"{text!r} is not field=value", "write e.g. --set beta=0.0")])
    if name not in field_names():
        raise ConfigError([ConfigProblem(name, "is not a RunConfig field",
                                         f"use one of: {', '.join(field_names())}")])
    return name, _coerce(name, raw.strip())


# ---------------------------------------------------------------- checks


def _number_problems(cfg: RunConfig) -> list[ConfigProblem]:
    rules = [
        ("learning_rate", cfg.learning_rate > 0 and math.isfinite(cfg.learning_rate), "must be > 0", "try 1e-4 to 1e-3 for LoRA"),
        ("beta", cfg.beta >= 0 and math.isfinite(cfg.beta), "must be >= 0", "use 0.04, or 0 for no KL term"),
        ("epsilon", cfg.epsilon > 0, "must be > 0", "use 0.2"),
        ("temperature", cfg.temperature > 0, "must be > 0", "use 1.0 (0.7 for less varied completions)"),
        ("top_p", 0 < cfg.top_p <= 1, "must be in (0, 1]", "use 1.0"),
        ("top_k", cfg.top_k >= 0, "must be >= 0", "use 0 (no top-k filtering)"),
        ("repetition_penalty", cfg.repetition_penalty > 0, "must be > 0", "use 1.0"),
        ("lora_r", cfg.lora_r >= 1, "must be >= 1", "use 16"),
        ("lora_alpha", cfg.lora_alpha > 0, "must be > 0", "use 2 x lora_r"),
        ("lora_dropout", 0 <= cfg.lora_dropout < 1, "must be in [0, 1)", "use 0 or 0.05"),
        ("max_steps", cfg.max_steps == -1 or cfg.max_steps >= 1, "must be -1 (use epochs) or >= 1", "use e.g. 30"),
        ("num_train_epochs", cfg.num_train_epochs > 0, "must be > 0", "use 1"),
        ("logging_steps", cfg.logging_steps >= 1, "must be >= 1", "use 1 to see every step"),
        ("record_tokens", isinstance(cfg.record_tokens, bool), "must be true or false",
         "use true (the token view) or false (no tokens.jsonl)"),
        ("save_steps", cfg.save_steps >= 1, "must be >= 1", "use e.g. 10"),
        ("warmup_steps", cfg.warmup_steps >= 0, "must be >= 0", "use 0"),
        ("save_total_limit", cfg.save_total_limit is None or cfg.save_total_limit >= 1, "must be >= 1 or empty",
         "use 3, or leave it empty to keep every checkpoint"),
        ("seed", cfg.seed >= 0, "must be >= 0", "use 42"),
        ("max_completion_length", cfg.max_completion_length >= 1, "must be >= 1", "use 32 for the demo, 256+ for reasoning"),
        ("reward_timeout_s", math.isfinite(cfg.reward_timeout_s) and cfg.reward_timeout_s >= 0,
         "must be a number of seconds >= 0", "use 120, or 0 for no limit"),
        ("num_processes", cfg.num_processes >= 1, "must be >= 1", "use 1, or one per GPU"),
        ("vllm_gpu_memory_utilization", 0 < cfg.vllm_gpu_memory_utilization < 1, "must be in (0, 1)", "use 0.3"),
        ("epsilon_high", cfg.epsilon_high is None or (cfg.epsilon_high > 0 and math.isfinite(cfg.epsilon_high)),
         "must be > 0 or empty", "use 0.28 (DAPO), or leave it empty to use epsilon"),
        ("top_entropy_quantile", 0 <= cfg.top_entropy_quantile <= 1, "must be in [0, 1]",
         "use 1.0 (every token), or 0.2 as in 'Beyond the 80/20 rule'"),
        ("eval_steps", cfg.eval_steps >= 1, "must be >= 1", "use e.g. 10 (evaluate every 10 steps)"),
        ("eval_size", cfg.eval_size >= 1, "must be >= 1", "use e.g. 16 held-out prompts"),
        ("eval_pass_k", cfg.eval_pass_k >= 0, "must be >= 0", "use 0 (greedy only) or e.g. 4"),
    ]
    problems = [ConfigProblem(name, f"{rule}, got {getattr(cfg, name)!r}", fix) for name, ok, rule, fix in rules if not ok]
    choices = [("loss_type", LOSS_TYPES), ("scale_rewards", SCALE_REWARDS), ("device", DEVICES),
               ("lr_scheduler_type", LR_SCHEDULERS), ("importance_sampling_level", IMPORTANCE_SAMPLING_LEVELS),
               ("solution_transform", SOLUTION_TRANSFORM_CHOICES), ("chat_template", CHAT_TEMPLATE_CHOICES),
               ("eval_strategy", EVAL_STRATEGIES), ("merged_generation", MERGED_GENERATION),
               ("shared_prompt_pass", SHARED_PROMPT_PASS), ("packed_decode", PACKED_DECODE)]
    for name, allowed in choices:
        if getattr(cfg, name) not in allowed:
            problems.append(ConfigProblem(name, f"{getattr(cfg, name)!r} is not one of {', '.join(allowed)}",
                                          f"choose one of {', '.join(allowed)}"))
    from workbench.spec.recipes import recipe_problem

    found = recipe_problem(cfg.recipe)
    if found:
        problems.append(ConfigProblem(*found))
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
    return [ConfigProblem("num_generations", error.rstrip("."), f"valid nearby settings: {fixes}")
            for error in result.errors], result


def data_field(cfg: RunConfig) -> tuple[str, str]:
    """(field, value) of the data a run reads instead of its task's: dataset_name, else the older dataset_path;
    ("", "") for the task's own prompts."""
    for name in ("dataset_name", "dataset_path"):
        value = getattr(cfg, name).strip()
        if value:
            return name, value
    return "", ""


def column_mapping(cfg: RunConfig, has_template: bool | None = None):
    """The run's column mapping (spec/data_mapping.py), the chat template resolved for a model with/without one."""
    from workbench.spec.data_mapping import ColumnMapping, resolve_chat_template

    return ColumnMapping(cfg.prompt_column.strip() or "prompt", cfg.solution_column.strip(), cfg.solution_transform,
                         cfg.system_prompt, resolve_chat_template(cfg.chat_template, has_template)[0])


def _source_problems(cfg: RunConfig, names: list[str], extra: dict) -> list[ConfigProblem]:
    """The data source, its config and split, the column mapping and the chat template, read cheaply."""
    from workbench.spec import columns, data_mapping, tasks
    from workbench.sources.dataset_reading import CHECK_ROWS, DatasetError
    from workbench.sources.model_files import model_location

    field_name, value = data_field(cfg)
    if cfg.dataset_name.strip() and cfg.dataset_path.strip() and cfg.dataset_name.strip() != cfg.dataset_path.strip():
        return [ConfigProblem("dataset_path", "is set beside dataset_name, its newer name",
                              "keep one: clear dataset_path and give the data as dataset_name")]
    if cfg.task not in tasks.TASKS and not value:
        return [ConfigProblem("task", f"unknown task {cfg.task!r}",
                              f"choose one of {', '.join(tasks.TASKS)}, or give dataset_name")]
    task = tasks.TASKS.get(cfg.task)
    # a task that trains on a hub dataset ships a few of its rows: offline, they are the way to try it
    sample = f"; to try the task offline, its bundled sample: dataset_name={task.sample_dataset}" \
        if task and task.sample_dataset else ""
    if not value and task.dataset_required:
        return [ConfigProblem("dataset_name", f"is empty, and the {cfg.task} task trains on a dataset",
                              f"give {task.settings['dataset_name']} (or a local copy's folder){sample}")]
    try:
        found = columns.source_rows(cfg.task, value, cfg.dataset_config, cfg.dataset_train_split, cfg.seed,
                                    count=CHECK_ROWS if value else 1, field=field_name or "dataset_name")
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
    problems += [ConfigProblem(*p) for p in data_mapping.mapping_problems(
        data_columns, found.rows, mapping, named, cfg.chat_template,
        field_name or "task")]
    if cfg.solution_transform not in SOLUTION_TRANSFORM_CHOICES:  # named with the other choices
        return problems
    mapped = data_columns + (["solution"] if mapping.solution_column else [])
    problems += [ConfigProblem(*p) for p in columns.missing_problems(mapped, columns.reward_needs(names, extra), source)]
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
            extra = rewards.load_reward_file(cfg.reward_file) if import_reward_file else \
                rewards.read_reward_file(cfg.reward_file)
        except rewards.RewardError as exc:
            problems.append(_problem_from("reward_file", exc))
    names = reward_names_for(cfg)
    for name in names:
        try:
            rewards.get_reward(name, extra)
        except rewards.RewardError as exc:
            problems.append(_problem_from("reward_names", exc))
    problems += _source_problems(cfg, names, extra) if read_data else []
    if not names and (cfg.task in tasks.TASKS or data_field(cfg)[1]):
        problems.append(ConfigProblem("reward_names", "no reward function is chosen",
                                      f"name at least one of {', '.join(rewards.REWARDS)}"))
    weights = reward_weights_for(cfg)
    if len(weights) != len(names):
        problems.append(ConfigProblem("reward_weights", f"{len(weights)} weights for {len(names)} rewards",
                                      "give one weight per reward, or leave it empty"))
    return problems + _reward_setting_problems(cfg, names)


def _reward_setting_problems(cfg: RunConfig, names: list[str]) -> list[ConfigProblem]:
    """TRL rewards' parameters, what a raising reward does, and the reward model."""
    from workbench.spec import trl_rewards
    from workbench.sources.model_files import ModelError, check_reward_model
    from workbench.spec.rewards import REWARD_ERROR_MODES

    problems = [ConfigProblem(*found) for found in
                trl_rewards.param_problems(cfg.reward_params, names, cfg.max_completion_length)]
    if cfg.reward_errors not in REWARD_ERROR_MODES:
        problems.append(ConfigProblem("reward_errors", f"{cfg.reward_errors!r} is not one of "
                                      f"{', '.join(REWARD_ERROR_MODES)}",
                                      "use fail (a raising reward ends the run) or record (it scores "
                                      "reward_failure_score and the run goes on)"))
    for name in ("reward_failure_score", "reward_model_weight"):
        if not math.isfinite(getattr(cfg, name)):
            problems.append(ConfigProblem(name, f"must be a finite number, got {getattr(cfg, name)!r}",
                                          "use e.g. 0.0" if name == "reward_failure_score" else "use e.g. 1.0"))
    if cfg.reward_model.strip():
        try:
            check_reward_model(cfg.reward_model.strip())
        except ModelError as exc:
            problems.append(ConfigProblem("reward_model", str(exc).removeprefix("model: "),
                                          "give a sequence-classification model's folder or hub id, or clear "
                                          "reward_model"))
    return problems


def reward_names_for(cfg: RunConfig) -> list[str]:
    """The reward functions a run uses: the config's, else the task's."""
    if cfg.reward_names:
        return list(cfg.reward_names)
    from workbench.spec import tasks

    task = tasks.TASKS.get(cfg.task)
    return list(task.reward_names) if task else []


def reward_weight_map(config: dict) -> dict[str, float]:
    """Each reward's weight in the total, from a run folder's config.json; empty when it does not read as a
    RunConfig (a folder written by another version, or damaged): the cards then show scores without weights."""
    try:
        cfg = RunConfig.from_dict(dict(config))
        names, weights = reward_names_for(cfg), reward_weights_for(cfg)
    except (ConfigError, TypeError, ValueError):
        return {}
    return dict(zip(names, weights)) if len(names) == len(weights) else {}


def reward_weights_for(cfg: RunConfig) -> list[float]:
    """One weight per reward: the config's, else the task's (when its rewards are used), else all 1."""
    if cfg.reward_weights:
        return [float(w) for w in cfg.reward_weights]
    if not cfg.reward_names:
        from workbench.spec import tasks

        task = tasks.TASKS.get(cfg.task)
        if task and getattr(task, "reward_weights", None):
            return [float(w) for w in task.reward_weights]
    return [1.0] * len(reward_names_for(cfg))


NO_CORRECTNESS = "none"


def correctness_reward_for(cfg: RunConfig) -> str:
    """The reward that means a right answer: the config's, else the task's when the run uses the task's rewards;
    "" when the run has none."""
    chosen = cfg.correctness_reward.strip()
    if chosen:
        return "" if chosen == NO_CORRECTNESS else chosen
    from workbench.spec import tasks

    task = tasks.TASKS.get(cfg.task)
    if task is None or not task.correctness_reward or task.correctness_reward not in reward_names_for(cfg):
        return ""
    return task.correctness_reward


def shaping_rewards_for(cfg: RunConfig) -> list[str]:
    """The run's other rewards: format, length and the like, which pay for something besides a right answer."""
    correct = correctness_reward_for(cfg)
    return [name for name in reward_names_for(cfg) if name != correct]


def _correctness_problems(cfg: RunConfig) -> list[ConfigProblem]:
    chosen = cfg.correctness_reward.strip()
    names = reward_names_for(cfg)
    if chosen and chosen != NO_CORRECTNESS and chosen not in names:
        return [ConfigProblem("correctness_reward", f"{chosen!r} is not one of the run's rewards ({', '.join(names)})",
                              f"name one of them, or '{NO_CORRECTNESS}' when no reward means a right answer")]
    return []


def trl_reward_weights(cfg: RunConfig) -> list[float]:
    """TRL's reward_weights: one per reward function, then the reward model's when there is one."""
    return reward_weights_for(cfg) + ([float(cfg.reward_model_weight)] if cfg.reward_model.strip() else [])


def _tracker_problems(cfg: RunConfig) -> list[ConfigProblem]:
    from workbench.spec import trackers

    return [ConfigProblem(*found) for found in trackers.problems(cfg.report_to)]


def _hardware_problems(cfg: RunConfig) -> list[ConfigProblem]:
    from workbench.spec import cluster
    from workbench.sources.gpus import list_gpus, runs_on_cpu

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
            problems.append(ConfigProblem("gpu_ids", f"GPU {cfg.gpu_ids[0]} does not exist: this machine has no "
                                          "visible CUDA GPU", "clear gpu_ids to train on the CPU"))
        elif cfg.device == "cuda":
            problems.append(ConfigProblem("device", "needs a CUDA GPU, and this machine has none visible",
                                          "set device=cpu (or auto)"))
        return problems
    known = {g.index for g in gpus}
    for gpu in cfg.gpu_ids:
        if gpu not in known:
            problems.append(ConfigProblem("gpu_ids", f"GPU {gpu} does not exist (this machine has {sorted(known)})",
                                          "pick from the GPUs listed"))
    if len(set(cfg.gpu_ids)) != len(cfg.gpu_ids):
        problems.append(ConfigProblem("gpu_ids", "lists a GPU twice", "list each GPU once"))
    if gpus and cfg.device != "cpu" and cfg.generation not in generation.SERVER_GENERATIONS:
        available = len(cfg.gpu_ids) or len(gpus)
        if cfg.num_processes > available:
            problems.append(ConfigProblem("num_processes", f"{cfg.num_processes} processes for {available} GPU(s)",
                                          f"use at most {available}, or choose more gpu_ids"))
    return problems


# Linux's limits: a whole path (PATH_MAX) and one name in it (NAME_MAX, bytes); longer ones cannot even be looked up.
MAX_PATH_CHARS = 4096
MAX_NAME_BYTES = 255
PATH_FIELDS = ("model", "dataset_name", "dataset_path", "reward_file", "reward_model")


def path_problem(name: str, value: str) -> ConfigProblem | None:
    """The problem with path field `name` when no file system could hold `value` (looking it up would raise)."""
    value = value or ""
    if len(value) > MAX_PATH_CHARS or any(len(part.encode("utf-8", "replace")) > MAX_NAME_BYTES
                                          for part in value.split("/")):
        return ConfigProblem(name, f"is not a usable path ({len(value)} characters; at most "
                                   f"{MAX_PATH_CHARS}, and {MAX_NAME_BYTES} bytes per folder or file name)",
                             "give the path of an existing file or folder")
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
        problems.append(_problem_from("model", exc))
    problems += _data_problems(cfg, import_reward_file, read_data)
    problems += _correctness_problems(cfg)
    if cfg.eval_strategy == "steps" and not problems and read_data:  # the held-out data is looked at once the rest is sound
        from workbench.spec.heldout import eval_problems

        problems += [ConfigProblem(*found) for found in eval_problems(cfg, correctness_reward_for(cfg), data_field(cfg))]
    problems += _tracker_problems(cfg)
    problems += _hardware_problems(cfg)
    return problems


def check_config(cfg: RunConfig, import_reward_file: bool = True, read_data: bool = True) -> None:
    """Raise ConfigError (field, rule, fix for each problem) when `cfg` cannot run (see validate_config)."""
    problems = validate_config(cfg, import_reward_file, read_data)
    if problems:
        plan = _plan_problems(cfg)[1] if not _number_problems(cfg) else None
        raise ConfigError(problems, plan)
