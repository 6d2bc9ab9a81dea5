"""One description of a training run: `RunConfig`, its fields and their help text.

The UI, the CLI, the notebooks and the training process all use `RunConfig`.
GRPO settings carry TRL's own field names (`learning_rate`,
`per_device_train_batch_size`, `num_generations`, `beta`, ...) so a value means
exactly what TRL's documentation says; the defaults are the workbench's, chosen
for LoRA on a small model (TRL's defaults suit full fine-tuning on GPUs):
beta 0.04 so KL is plotted, learning_rate 1e-3 for LoRA, float32 and no
gradient checkpointing on CPU.

Each field's help text sits beside it (`setting(default, help)`); `FIELD_HELP`
collects them for the UI's info lines. The run's rewards and weights and the data it
reads follow from the fields here; `spec/config_checks.py` checks a config.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import os
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from workbench.spec.cluster import DEFAULT_PORT, DISTRIBUTED_BACKENDS
from workbench.spec.config_problems import ConfigError, ConfigProblem, problem_from
from workbench.spec.data_mapping import CHAT_TEMPLATE_CHOICES, SOLUTION_TRANSFORMS
from workbench.spec.field_values import convert, describe_type
from workbench.spec.generation import GENERATIONS
from workbench.spec.trackers import REPORT_TO

LOSS_TYPES = ("dapo", "grpo", "bnpo", "dr_grpo", "cispo", "sapo", "luspo", "vespo")
SCALE_REWARDS = ("group", "batch", "none")
IMPORTANCE_SAMPLING_LEVELS = ("token", "sequence")
DEVICES = ("auto", "cpu", "cuda")
LR_SCHEDULERS = ("linear", "constant", "cosine", "constant_with_warmup")
SOLUTION_TRANSFORM_CHOICES = tuple(SOLUTION_TRANSFORMS)
EVAL_STRATEGIES = ("no", "steps")
BEST_CHECKPOINT_METRICS = ("accuracy", "pass_at_k", "mean_at_k", "maj_at_k", "best_at_k")  # spec/heldout.py
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
    entropy_coef: float = setting(
        0.0,
        "Weight of an entropy bonus in the loss (minus coef x mean token entropy): > 0 keeps answers varied; "
        "0 adds none. With use_adaptive_entropy it is the starting weight (TRL's).",
    )
    use_adaptive_entropy: bool = setting(
        False,
        "Skywork-OR1's adaptive entropy control: the bonus acts only while entropy is at or below "
        "entropy_target, its weight moving by 0.005 a step within [0, 1] (TRL's).",
    )
    entropy_target: float = setting(
        0.2,
        "With use_adaptive_entropy: the mean token entropy (nats) at or below which the bonus acts; set it "
        "near the entropy curve's early value (TRL's default 0.2 acts only near collapse).",
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
        "with at least one right answer among k; k >= 2 adds mean@k, maj@k, best@k with bootstrap spreads); 0: "
        "greedy answers only (cheaper).",
    )
    eval_group_column: str = setting(
        "", "A test-split column naming each prompt's data source: held-out figures also per value; empty: none."
    )
    best_checkpoint_metric: str = setting(
        "accuracy",
        "The held-out figure that chooses the best checkpoint (kept whatever save_total_limit "
        "prunes); all but accuracy need eval_pass_k (maj_at_k, mean_at_k, best_at_k: >= 2).",
        choices=BEST_CHECKPOINT_METRICS,
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
    device: str = setting("auto", "auto (GPUs when present, else CPU), cpu, or cuda.", choices=DEVICES)
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
        "Seconds to wait for the vLLM server to be ready (it loads the model first, which on a CPU takes a "
        "while), and the longest one generation request may take.",
    )
    vllm_python: str = setting(
        "",
        "Python interpreter of the venv that has vLLM; empty uses .venv-vllm (made by `make vllm`), else this Python.",
    )

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> RunConfig:
        """A RunConfig from a dict (e.g. config.json); unknown keys are refused by name."""
        data = _renamed_fields(data)
        unknown = sorted(set(data) - set(field_names()))
        if unknown:
            raise ConfigError(
                [
                    ConfigProblem(
                        unknown[0], "is not a RunConfig field", f"remove it; valid fields: {', '.join(field_names())}"
                    )
                ]
            )
        return cls(**{name: _coerce(name, value) for name, value in data.items()})

    def save(self, path: str | os.PathLike) -> Path:
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(self.to_dict(), indent=2) + "\n", encoding="utf-8")
        return path

    @classmethod
    def load(cls, path: str | os.PathLike) -> RunConfig:
        path = Path(path)
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise ConfigError(
                [ConfigProblem("config", f"no file at {path}", "give the path of a config.json")]
            ) from None
        except json.JSONDecodeError as exc:
            raise ConfigError(
                [
                    ConfigProblem(
                        "config",
                        f"{path} is not valid JSON ({exc.msg}, line {exc.lineno})",
                        "fix the file or write it again with RunConfig.save",
                    )
                ]
            ) from None
        if not isinstance(data, dict):
            raise ConfigError(
                [
                    ConfigProblem(
                        "config", f"{path} holds a {type(data).__name__}, not an object", "write it with RunConfig.save"
                    )
                ]
            )
        return cls.from_dict(data)

    def with_changes(self, **changes: Any) -> RunConfig:
        return RunConfig.from_dict({**self.to_dict(), **changes})

    def with_absolute_paths(self, base: str | os.PathLike | None = None) -> RunConfig:
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
            if path.is_dir() if name in ("model", "reward_model") else path.exists():
                changes[name] = str(path.resolve())
        return self.with_changes(**changes) if changes else self

    @classmethod
    def for_task(cls, task: str = "demo", **changes: Any) -> RunConfig:
        """The config a task is designed around: defaults, the task's preset settings, then `changes`.

        The CLI, the Setup tab and the notebooks all start from this, so
        `--task arithmetic` trains with the same settings everywhere.
        """
        from workbench.spec import tasks

        try:
            preset = tasks.get_task(task)
        except tasks.TaskError as exc:
            raise ConfigError([problem_from("task", exc)]) from None
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


# Each field's help text, for the UI's info lines and the CLI's --help.
FIELD_HELP: dict[str, str] = {f.name: f.metadata["help"] for f in dataclasses.fields(RunConfig)}


def field_names() -> list[str]:
    return [f.name for f in dataclasses.fields(RunConfig)]


@functools.lru_cache(maxsize=1)
def _field_types() -> dict[str, Any]:
    # resolving the hints walks every annotation of the class: once, not once per field
    return typing.get_type_hints(RunConfig)


def field_type(name: str) -> Any:
    return _field_types()[name]


def _coerce(name: str, value: Any) -> Any:
    """`value` as the type of field `name`; a ConfigError naming the field when it cannot be."""
    kind = field_type(name)
    try:
        return convert(kind, value)
    except (TypeError, ValueError):
        rule, fix = (
            f"must be {describe_type(kind)}, got {value!r}",
            f"give {describe_type(kind)} (default {_default(name)!r})",
        )
        raise ConfigError([ConfigProblem(name, rule, fix)]) from None


def _default(name: str) -> Any:
    return RunConfig().to_dict()[name]


def parse_assignment(text: str) -> tuple[str, Any]:
    """`field=value` from the command line, typed by the field; ConfigError naming an unknown field."""
    name, sep, raw = text.partition("=")
    name = name.strip()
    if not sep or not name:
        raise ConfigError([ConfigProblem("--set", f"{text!r} is not field=value", "write e.g. --set beta=0.0")])
    if name not in field_names():
        raise ConfigError([ConfigProblem(name, "is not a RunConfig field", f"use one of: {', '.join(field_names())}")])
    return name, _coerce(name, raw.strip())


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

    return ColumnMapping(
        cfg.prompt_column.strip() or "prompt",
        cfg.solution_column.strip(),
        cfg.solution_transform,
        cfg.system_prompt,
        resolve_chat_template(cfg.chat_template, has_template)[0],
    )


def reward_names_for(cfg: RunConfig) -> list[str]:
    """The reward functions a run uses: the config's, else the task's."""
    if cfg.reward_names:
        return list(cfg.reward_names)
    from workbench.spec import tasks

    task = tasks.TASKS.get(cfg.task)
    return list(task.reward_names) if task else []


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


# The fields that name a file or folder: made absolute for the run folder, their length checked before any lookup.
PATH_FIELDS = ("model", "dataset_name", "dataset_path", "reward_file", "reward_model")
