"""A rough memory estimate for a LoRA GRPO run, before anything loads.

`estimate_memory(model, ...)` takes a model's shape (`from_model_dir(path)`
reads only its config.json, or pass the config dict) and the run's GRPO and
LoRA settings under TRL's names, and returns a `MemoryEstimate`: a list of
named terms and a total.

What is counted, and when it is alive:

- always: the runtime itself (a CPU process's Python + torch + transformers +
  TRL resident memory, measured; on a GPU the CUDA context), the model
  weights, and the LoRA adapter with its gradients and AdamW's two moments;
- generation phase: the KV cache of every completion of the generation batch
  at full prompt + completion length and the sampling logits;
  vLLM colocated instead reserves `vllm_gpu_memory_utilization` of the GPU;
- scoring phase: with beta > 0 the reference log-probs. With LoRA the
  reference model is the base model with adapters disabled: no second copy
  of the weights, only a no-grad forward over each micro-batch; a reward
  model (`reward_model`) adds its weights for the whole run and a no-grad
  forward over the whole generation round (TRL scores it in one call);
- training phase: the activations autograd keeps for the backward pass of a
  micro-batch of completions at max length, and TRL's fused LM head, which
  projects onto the vocabulary in tiles of up to 4096 tokens x 32768 words
  instead of materialising the full logits (the entropy settings, entropy_coef and use_adaptive_entropy,
  add no term: TRL computes each token's entropy in every training forward already, for its `entropy`
  metric, and the bonus only adds that tensor, already kept for the backward, to the loss);
- evaluation phase (eval_strategy=steps, between steps): the held-out prompts
  answered EVAL_BATCH completions at a time (their KV cache and logits), and
  every answer kept until scored, eval_size x (1 + eval_pass_k) completions
  (Python lists of token ids and their text: host memory, counted on a CPU
  run, a note on a GPU run; a rough figure, not measured).

The phases follow each other, so the peak is the always-alive memory plus the
largest phase. The constants were checked on CPU float32 runs of
SmolLM2-135M-Instruct (benchmarks/bench_memory.py measures the real peak);
GPU and bf16 figures follow the same arithmetic but were not measured here.

The model's shape is read in `workbench/spec/model_shape.py`, each phase's terms are counted in
`workbench/spec/memory_terms.py` (with the measured constants); this module adds them up.

`driving_field` names the setting that drives an estimate (the one whose
default would shrink it most), for a refusal that says what to lower.

Pure standard library (reads JSON): importable without torch.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from workbench.spec.memory_terms import (
    ANSWER_BYTES_PER_TOKEN,
    EVAL_BATCH,
    GIB,
    LOGIT_TILE_COPIES,
    LORA_BYTES_PER_PARAM,
    TOKEN_TILE,
    VOCAB_TILE,
    add_allocator_reserve,
    add_evaluation,
    add_generation,
    add_resident,
    add_reward_model,
    add_scoring,
    add_training,
    run_sizes,
)
from workbench.spec.model_shape import (
    MemoryInputError,
    ModelShape,
    as_shape,
    from_model_dir,
    model_shape,
    reward_model_shape,
)
from workbench.spec.speed import memory_merged_dtype, resolve_packed_decode

# Names tests, notebooks, benchmarks and the Setup tab import from here, whose modules are now
# workbench/spec/model_shape.py (the model's shape) and workbench/spec/memory_terms.py (the terms).
__all__ = [
    "ANSWER_BYTES_PER_TOKEN",
    "DRIVERS",
    "EVAL_BATCH",
    "GIB",
    "LOGIT_TILE_COPIES",
    "LORA_BYTES_PER_PARAM",
    "MERGED_COPY_BYTES",
    "TOKEN_TILE",
    "VOCAB_TILE",
    "MemoryEstimate",
    "MemoryInputError",
    "MemoryTerm",
    "ModelShape",
    "driving_field",
    "estimate_for_config",
    "estimate_memory",
    "from_model_dir",
    "model_shape",
]

# bytes per weight of merged_generation's copy, by what it resolved to
MERGED_COPY_BYTES = {"no": 0, "float32": 4, "bfloat16": 2}
# The phases of a step (and an evaluation between steps), one after another.
PHASES = ("generation", "scoring", "training", "evaluation")
# The settings an estimate grows with, asked in this order which one drives it (`driving_field`).
DRIVERS = (
    "max_completion_length",
    "per_device_train_batch_size",
    "steps_per_generation",
    "gradient_accumulation_steps",
    "num_generations",
    "eval_size",
    "eval_pass_k",
    "lora_r",
    "reward_model",
    "vllm_gpu_memory_utilization",
    "merged_generation",
    "packed_decode",
    "bf16",
    "gradient_checkpointing",
)


@dataclass(frozen=True)
class MemoryTerm:
    name: str
    bytes: int
    phase: str  # "always", "generation", "scoring" or "training"
    explanation: str

    @property
    def gib(self) -> float:
        return self.bytes / GIB


@dataclass
class MemoryEstimate:
    terms: list[MemoryTerm]
    peak_phase: str
    device: str
    notes: list[str] = field(default_factory=list)

    def phase_bytes(self, phase: str) -> int:
        return sum(t.bytes for t in self.terms if t.phase == phase)

    @property
    def total_bytes(self) -> int:
        """Always-alive memory plus the largest phase."""
        return self.phase_bytes("always") + self.phase_bytes(self.peak_phase)

    @property
    def total_gib(self) -> float:
        return self.total_bytes / GIB

    def breakdown(self) -> list[dict[str, Any]]:
        """One row per term (name, phase, GiB, what it is), for a table."""
        return [{"term": t.name, "phase": t.phase, "GiB": round(t.gib, 3), "what": t.explanation} for t in self.terms]

    def check_fits(self, free_bytes: int | None) -> str | None:
        """A warning when the estimate exceeds `free_bytes`, else None."""
        if free_bytes is None or self.total_bytes <= free_bytes:
            return None
        return (
            f"The run needs about {self.total_gib:.1f} GiB at its peak ({self.peak_phase}) but the device has "
            f"{free_bytes / GIB:.1f} GiB free. Lower per_device_train_batch_size or max_completion_length, "
            f"turn on gradient_checkpointing, or pick a device with more free memory."
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "terms": [asdict(t) for t in self.terms],
            "peak_phase": self.peak_phase,
            "device": self.device,
            "total_bytes": self.total_bytes,
            "total_gib": round(self.total_gib, 3),
            "notes": list(self.notes),
        }


def estimate_memory(
    model: Any,
    *,
    lora_r: int = 16,
    lora_target_modules: Any = "all-linear",
    per_device_train_batch_size: int = 8,
    num_generations: int = 8,
    gradient_accumulation_steps: int = 1,
    steps_per_generation: int | None = None,
    max_prompt_length: int = 64,
    max_completion_length: int = 48,
    beta: float = 0.04,
    num_iterations: int = 1,
    dtype_bytes: int = 4,
    device: str = "cpu",
    gradient_checkpointing: bool = False,
    use_vllm: bool = False,
    vllm_mode: str = "colocate",
    vllm_gpu_memory_utilization: float = 0.3,
    device_total_bytes: int | None = None,
    reward_model: Any = None,
    reward_model_dtype_bytes: int | None = None,
    merged_copy_dtype_bytes: int = 0,
    packed_decode: bool = False,
    eval_sequences: int = 0,
) -> MemoryEstimate:
    """Peak memory of one training process of a LoRA GRPO run, term by term.

    `reward_model`: the shape (as `model`) of a sequence-classification reward
    model, None for none; `reward_model_dtype_bytes` its weights' bytes each
    (transformers loads it in its saved dtype), default `dtype_bytes`.

    `model` is a ModelShape, a config.json dict or a model folder.
    `max_prompt_length` is the longest prompt in tokens (after the chat template).
    `dtype_bytes`: 4 for float32 (CPU), 2 for bf16/fp16.
    `device`: "cpu" or "cuda". `device_total_bytes` is the GPU's memory, used for vLLM's share.
    `merged_copy_dtype_bytes`: bytes per weight of merged_generation's plain copy (4, 2), 0 for none.
    `packed_decode`: that copy's linear weights are packed once more for MKL's GEMM (float32).
    `eval_sequences`: the held-out completions one evaluation answers and keeps (eval_size x (1 + eval_pass_k));
    0 for a run that does not evaluate.
    """
    sizes = run_sizes(
        model,
        lora_r,
        lora_target_modules,
        per_device_train_batch_size,
        num_generations,
        gradient_accumulation_steps,
        steps_per_generation,
        max_prompt_length,
        max_completion_length,
        dtype_bytes,
        device,
    )
    notes: list[str] = []
    terms: list[MemoryTerm] = []

    def add(name: str, size: float, phase: str, explanation: str) -> None:
        terms.append(MemoryTerm(name, int(size), phase, explanation))

    add_resident(add, sizes, merged_copy_dtype_bytes, packed_decode)
    add_generation(add, notes, sizes, use_vllm, vllm_mode, vllm_gpu_memory_utilization, device_total_bytes)
    add_scoring(add, sizes, beta, num_iterations, gradient_accumulation_steps)
    if reward_model is not None:
        add_reward_model(
            add, as_shape(reward_model), reward_model_dtype_bytes or dtype_bytes, sizes.gen_sequences * sizes.seq
        )
    add_training(add, sizes, gradient_checkpointing)
    if eval_sequences > 0:
        add_evaluation(add, notes, sizes.shape, eval_sequences, sizes.seq, sizes.completion, dtype_bytes, device)

    peak = _peak_phase(terms)
    if device == "cuda":
        add_allocator_reserve(add, terms, peak)
    if device == "cuda" and dtype_bytes == 4:
        notes.append("float32 on a GPU: bf16 (dtype_bytes=2) halves weights and activations.")
    return MemoryEstimate(terms=terms, peak_phase=peak, device=device, notes=notes)


def _peak_phase(terms: list[MemoryTerm]) -> str:
    """The phase whose terms add up to the most (the first of PHASES on a tie): the phases follow each other, so
    the peak is the always-alive memory plus this one."""
    return max(PHASES, key=lambda phase: sum(t.bytes for t in terms if t.phase == phase))


def driving_field(
    config: Mapping[str, Any], total: Callable[[Mapping[str, Any]], int], defaults: Mapping[str, Any]
) -> str:
    """The setting that drives `total(config)` (an estimate's bytes): the one of DRIVERS whose value in `defaults`
    would shrink it most; "model" when none would (the model itself is what takes the room)."""
    base, driver, saved = total(config), "model", 0
    for name in DRIVERS:
        if name in config and name in defaults and config[name] != defaults[name]:
            shrunk = base - total({**config, name: defaults[name]})
            if shrunk > saved:
                driver, saved = name, shrunk
    return driver


def estimate_for_config(
    config: Any, model: Any, max_prompt_length: int, device: str = "cpu", device_total_bytes: int | None = None
) -> MemoryEstimate:
    """The estimate for a RunConfig (or its dict), reading its fields by TRL's names."""

    def get(name: str, default: Any = None) -> Any:
        return config.get(name, default) if isinstance(config, Mapping) else getattr(config, name, default)

    shape, shape_bytes, note = (
        reward_model_shape(get("reward_model").strip()) if get("reward_model", "").strip() else (None, None, "")
    )
    # a value check_config refuses (the Setup tab estimates before it checks) counts no copy, or nothing packed
    merged = memory_merged_dtype(
        get("merged_generation", "auto"),
        get("generation", "transformers"),
        device == "cpu",
        get("distributed_backend", "ddp"),
        bool(get("bf16", False)),
    )
    estimate = estimate_memory(
        model,
        reward_model=shape,
        reward_model_dtype_bytes=shape_bytes,
        lora_r=get("lora_r", 16),
        lora_target_modules=get("lora_target_modules", "all-linear"),
        per_device_train_batch_size=get("per_device_train_batch_size", 8),
        num_generations=get("num_generations", 8),
        gradient_accumulation_steps=get("gradient_accumulation_steps", 1),
        steps_per_generation=get("steps_per_generation"),
        max_prompt_length=max_prompt_length,
        max_completion_length=get("max_completion_length", 48),
        beta=get("beta", 0.04),
        num_iterations=get("num_iterations", 1),
        dtype_bytes=2 if get("bf16", False) else 4,
        device=device,
        gradient_checkpointing=bool(get("gradient_checkpointing", False)),
        use_vllm=str(get("generation", "transformers")).startswith("trl-"),
        vllm_mode="server" if get("generation") == "trl-server" else "colocate",
        vllm_gpu_memory_utilization=get("vllm_gpu_memory_utilization", 0.3),
        device_total_bytes=device_total_bytes,
        merged_copy_dtype_bytes=MERGED_COPY_BYTES.get(merged, 0),
        packed_decode=resolve_packed_decode(get("packed_decode", "auto"), merged, device == "cpu").value != "no",
        eval_sequences=_eval_sequences(get("eval_strategy", "no"), get("eval_size", 0), get("eval_pass_k", 0)),
    )
    if note:
        estimate.notes.append(note)
    return estimate


def _eval_sequences(strategy: Any, size: Any, pass_k: Any) -> int:
    """The held-out completions one evaluation keeps: eval_size greedy answers and eval_pass_k samples of each
    (0 without evaluation, or for values check_config refuses)."""
    if strategy != "steps" or not isinstance(size, int) or not isinstance(pass_k, int):
        return 0
    return max(0, size) * (1 + max(0, pass_k))
