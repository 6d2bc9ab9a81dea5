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
  instead of materialising the full logits;
- evaluation phase (eval_strategy=steps, between steps): the held-out prompts
  answered EVAL_BATCH completions at a time (their KV cache and logits), and
  every answer kept until scored, eval_size x (1 + eval_pass_k) completions
  (Python lists of token ids and their text: host memory, counted on a CPU
  run, a note on a GPU run; a rough figure, not measured).

The phases follow each other, so the peak is the always-alive memory plus the
largest phase. The constants were checked on CPU float32 runs of
SmolLM2-135M-Instruct (benchmarks/bench_memory.py measures the real peak);
GPU and bf16 figures follow the same arithmetic but were not measured here.

`driving_field` names the setting that drives an estimate (the one whose
default would shrink it most), for a refusal that says what to lower.

Pure standard library (reads JSON): importable without torch.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from workbench.errors import WorkbenchError
from workbench.spec.speed import memory_merged_dtype, resolve_packed_decode

GIB = 2**30
# bytes per weight of merged_generation's copy, by what it resolved to
MERGED_COPY_BYTES = {"no": 0, "float32": 4, "bfloat16": 2}
MIB = 2**20

# Resident memory of a CPU Python process once torch, transformers, peft and
# trl are imported, before the model loads: shared libraries (libtorch alone
# is ~400 MB) and interpreter state. benchmarks/bench_memory.py measures it
# ("runtime after imports": 464 MB = 443 MiB on this machine).
RUNTIME_BASELINE_CPU_BYTES = 443 * MIB
# A CUDA context with cuBLAS workspaces and the kernels' modules, per process: a GPU's used memory
# (NVML) less torch's peak reserved memory, 752.8 MiB in each of the three settings of
# benchmarks/bench_memory.py --device cuda (H100 80GB, torch 2.11.0+cu130, 2026-11-27).
CUDA_CONTEXT_BYTES = 753 * MIB
# torch's caching allocator reserves more than its tensors need (rounded blocks, freed blocks kept for
# reuse). 5% of the tensors brings the three settings' totals within 1%, 1% and 9% of the card's peak;
# torch's peak reserved was 1.03 to 1.09 times the last step's peak allocated (the runs' own peak
# allocated was not recorded), so this is a fitted figure, not one read off a counter.
CUDA_ALLOCATOR_OVERHEAD = 0.05

# Floats autograd keeps per token and per decoder layer for the backward pass,
# read off torch's saved-tensor hooks on SmolLM2-135M and the tiny Llama with
# LoRA (sdpa attention, a padding mask as GRPO batches always have):
# - 6 x hidden: both RMSNorm inputs and outputs, q, and the attention output;
# - 2 x heads x head_dim: k and v, repeated to every query head (grouped-query
#   attention is expanded when a mask is given);
# - 4 x intermediate: gate, silu(gate), up and their product;
# - lora_r per wrapped linear layer (the output of lora_A);
# - one attention-mask row of T floats, and a few per-head scalars.
# SmolLM2, T = 80, r = 16: 10,955 by this count, 10,975 measured.
HIDDEN_COPIES_SAVED = 6
ATTENTION_COPIES_SAVED = 2
INTERMEDIATE_COPIES_SAVED = 4
# With gradient checkpointing only each layer's input stays, plus one layer's
# full activations while it is recomputed.
# TRL's fused LM head (trl.kernels.chunked_logprob): the vocabulary is scored
# in tiles of at most TOKEN_TILE tokens x VOCAB_TILE words, float32. In the
# backward of a tile, its CPU (torch) path holds about eight tile-sized
# tensors at once: the tile, its scaled copy, z, log p, p, the gradient and
# two temporaries of the target one-hot.
TOKEN_TILE = 4096
VOCAB_TILE = 32768
# A no-grad forward (reference or old log-probs) holds the tile and about
# four temporaries (scaled logits, z - max, exp, exp * z).
# On a GPU TRL folds each tile in a Triton kernel (`_use_triton`): one tile, no temporaries. Measured
# on an H100 (g8-len128, 1,352 tokens): the backward's peak above what it began with was 170 MB, one
# tile 177 MB; the reference pass's 140 MB.
LOGIT_TILE_COPIES = {"cpu": {"forward": 5, "backward": 8}, "cuda": {"forward": 1, "backward": 1}}
# A no-grad forward also holds a few activations of the current layer only.
INFERENCE_FLOATS_PER_TOKEN = (4, 3)  # (hidden copies, intermediate copies)
# Sampling keeps the logits of the last position, their processed copy and
# the probabilities, per sequence, at every decoding step.
SAMPLING_LOGIT_COPIES = 3
# LoRA adapter memory per parameter: the float32 weight, its gradient and
# AdamW's two moments (PEFT keeps adapters in float32 even on a bf16 model).
LORA_BYTES_PER_PARAM = 4 + 4 + 8
# Held-out evaluation answers this many completions per generate call (trainer/answering.py's GENERATE_BATCH),
# and keeps each answer's token ids (a Python int and its list slot, 36 bytes) and text until it is scored.
EVAL_BATCH = 64
ANSWER_BYTES_PER_TOKEN = 48
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

LINEAR_NAMES = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")

# config.json keys, with the aliases other architectures use.
_ALIASES = {
    "hidden_size": ("hidden_size", "n_embd", "d_model"),
    "num_hidden_layers": ("num_hidden_layers", "n_layer", "num_layers"),
    "num_attention_heads": ("num_attention_heads", "n_head", "num_heads"),
    "vocab_size": ("vocab_size",),
}


class MemoryInputError(WorkbenchError):
    """An input the estimate cannot use; the message names the field, the rule and a fix."""


@dataclass(frozen=True)
class ModelShape:
    """What the estimate needs to know about a decoder-only transformer."""

    hidden_size: int
    intermediate_size: int
    num_hidden_layers: int
    num_attention_heads: int
    num_key_value_heads: int
    head_dim: int
    vocab_size: int
    tie_word_embeddings: bool = True
    num_parameters: int | None = None  # counted from the shape when not given

    @property
    def kv_size(self) -> int:
        return self.num_key_value_heads * self.head_dim

    @property
    def attention_size(self) -> int:
        return self.num_attention_heads * self.head_dim

    def linear_shapes(self) -> dict[str, tuple[int, int]]:
        """(in, out) features of each linear layer of one decoder layer (Llama naming)."""
        h, a, kv, i = self.hidden_size, self.attention_size, self.kv_size, self.intermediate_size
        return {
            "q_proj": (h, a),
            "k_proj": (h, kv),
            "v_proj": (h, kv),
            "o_proj": (a, h),
            "gate_proj": (h, i),
            "up_proj": (h, i),
            "down_proj": (i, h),
        }

    def parameter_count(self) -> int:
        if self.num_parameters:
            return int(self.num_parameters)
        per_layer = sum(i * o for i, o in self.linear_shapes().values()) + 2 * self.hidden_size
        embeddings = self.vocab_size * self.hidden_size
        head = 0 if self.tie_word_embeddings else embeddings
        return embeddings + self.num_hidden_layers * per_layer + self.hidden_size + head


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


# ---------------------------------------------------------------- model shape


def _first(config: Mapping, field_name: str, source: str) -> int:
    for key in _ALIASES[field_name]:
        if config.get(key) is not None:
            return int(config[key])
    raise MemoryInputError(
        f"{field_name}: missing from {source}; the estimate needs a decoder-only model config "
        f"with {' or '.join(_ALIASES[field_name])} (a transformers config.json)"
    )


def model_shape(config: Mapping, source: str = "the model config") -> ModelShape:
    """A ModelShape from a transformers config dict (the text config of a multimodal one)."""
    if not isinstance(config, Mapping):
        raise MemoryInputError(
            f"model: expected a config dict, a ModelShape or a model folder, got {type(config).__name__}"
        )
    config = config.get("text_config") or config
    hidden = _first(config, "hidden_size", source)
    heads = _first(config, "num_attention_heads", source)
    shape = ModelShape(
        hidden_size=hidden,
        intermediate_size=int(config.get("intermediate_size") or config.get("n_inner") or 4 * hidden),
        num_hidden_layers=_first(config, "num_hidden_layers", source),
        num_attention_heads=heads,
        num_key_value_heads=int(config.get("num_key_value_heads") or heads),
        head_dim=int(config.get("head_dim") or hidden // heads),
        vocab_size=_first(config, "vocab_size", source),
        tie_word_embeddings=bool(config.get("tie_word_embeddings", True)),
        num_parameters=config.get("num_parameters"),
    )
    return shape


def from_model_dir(path: str | Path) -> ModelShape:
    """The shape of the model in `path`, from its config.json alone (no weights, no torch)."""
    config_path = Path(path) / "config.json"
    try:
        config = json.loads(config_path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise MemoryInputError(f"model: no config.json in {path}; point at a transformers model folder") from None
    except json.JSONDecodeError as exc:
        raise MemoryInputError(f"model: {config_path} is not valid JSON ({exc.msg}, line {exc.lineno})") from None
    return model_shape(config, source=str(config_path))


def _as_shape(model: Any) -> ModelShape:
    if isinstance(model, ModelShape):
        return model
    if isinstance(model, (str, Path)):
        return from_model_dir(model)
    return model_shape(model)


def lora_target_names(lora_target_modules: Any) -> list[str]:
    """The per-layer linear layers LoRA wraps: "all-linear", a comma list or a list of names."""
    if isinstance(lora_target_modules, str):
        if lora_target_modules.strip() == "all-linear":
            return list(LINEAR_NAMES)
        names = [n.strip() for n in lora_target_modules.split(",") if n.strip()]
    else:
        names = [str(n) for n in lora_target_modules or ()]
    unknown = [n for n in names if n not in LINEAR_NAMES]
    if unknown or not names:
        raise MemoryInputError(
            f'lora_target_modules: {unknown or names!r} not understood; use "all-linear" or '
            f"names from {', '.join(LINEAR_NAMES)}"
        )
    return names


def _positive(name: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 1 or int(value) != value:
        raise MemoryInputError(f"{name}: got {value!r}; it must be a whole number of at least 1")
    return int(value)


# ---------------------------------------------------------------- the estimate


@dataclass(frozen=True)
class _RunSizes:
    """The checked sizes the terms are counted from: a micro-batch, a round's share, LoRA's layers, the head's tiles."""

    shape: ModelShape
    batch: int
    spg: int
    seq: int  # tokens per sequence at max length (prompt + completion)
    completion: int
    rank: int
    targets: list[str]
    dtype_bytes: int
    device: str

    @property
    def train_tokens(self) -> int:
        return self.batch * self.seq  # (B, T) of one micro-batch

    @property
    def gen_sequences(self) -> int:
        return self.batch * self.spg  # this process's share of a generation round

    @property
    def vocab_tile(self) -> int:
        return min(self.shape.vocab_size, VOCAB_TILE)

    @property
    def token_tile(self) -> int:
        return min(self.train_tokens, TOKEN_TILE)


def _run_sizes(
    model: Any,
    lora_r: int,
    lora_target_modules: Any,
    per_device_train_batch_size: int,
    num_generations: int,
    gradient_accumulation_steps: int,
    steps_per_generation: int | None,
    max_prompt_length: int,
    max_completion_length: int,
    dtype_bytes: int,
    device: str,
) -> _RunSizes:
    """The estimate's inputs checked (a MemoryInputError naming the first bad one) and turned into sizes."""
    shape = _as_shape(model)
    batch = _positive("per_device_train_batch_size", per_device_train_batch_size)
    _positive("num_generations", num_generations)
    spg = _positive("steps_per_generation", steps_per_generation or gradient_accumulation_steps)
    prompt = _positive("max_prompt_length", max_prompt_length)
    completion = _positive("max_completion_length", max_completion_length)
    rank = _positive("lora_r", lora_r)
    if dtype_bytes not in (1, 2, 4):
        raise MemoryInputError(f"dtype_bytes: got {dtype_bytes!r}; use 4 (float32), 2 (bf16/fp16) or 1 (8-bit)")
    if device not in ("cpu", "cuda"):
        raise MemoryInputError(f'device: got {device!r}; use "cpu" or "cuda"')
    return _RunSizes(
        shape,
        batch,
        spg,
        prompt + completion,
        completion,
        rank,
        lora_target_names(lora_target_modules),
        dtype_bytes,
        device,
    )


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
    sizes = _run_sizes(
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

    _add_resident(add, sizes, merged_copy_dtype_bytes, packed_decode)
    _add_generation(add, notes, sizes, use_vllm, vllm_mode, vllm_gpu_memory_utilization, device_total_bytes)
    _add_scoring(add, sizes, beta, num_iterations, gradient_accumulation_steps)
    if reward_model is not None:
        _add_reward_model(
            add, _as_shape(reward_model), reward_model_dtype_bytes or dtype_bytes, sizes.gen_sequences * sizes.seq
        )
    _add_training(add, sizes, gradient_checkpointing)
    if eval_sequences > 0:
        _add_evaluation(add, notes, sizes.shape, eval_sequences, sizes.seq, sizes.completion, dtype_bytes, device)

    phases = ("generation", "scoring", "training", "evaluation")
    peak = max(phases, key=lambda p: sum(t.bytes for t in terms if t.phase == p))
    if device == "cuda":
        tensors = sum(t.bytes for t in terms if t.phase in ("always", peak) and t.name not in ("runtime", "vllm"))
        add(
            "allocator reserve",
            tensors * CUDA_ALLOCATOR_OVERHEAD,
            "always",
            f"torch's caching allocator holds about {CUDA_ALLOCATOR_OVERHEAD:.0%} more than its tensors (fitted to "
            f"peaks measured on an H100)",
        )
    if device == "cuda" and dtype_bytes == 4:
        notes.append("float32 on a GPU: bf16 (dtype_bytes=2) halves weights and activations.")
    return MemoryEstimate(terms=terms, peak_phase=peak, device=device, notes=notes)


def _add_resident(add, sizes: _RunSizes, merged_copy_dtype_bytes: int, packed_decode: bool) -> None:
    """What is alive for the whole run: the runtime, the weights (and their merged or packed copies), the LoRA
    adapter with its gradient and optimizer state."""
    shape, dtype_bytes, rank, targets = sizes.shape, sizes.dtype_bytes, sizes.rank, sizes.targets
    shapes = shape.linear_shapes()
    lora_params = shape.num_hidden_layers * sum(rank * (shapes[n][0] + shapes[n][1]) for n in targets)
    if sizes.device == "cpu":
        add(
            "runtime",
            RUNTIME_BASELINE_CPU_BYTES,
            "always",
            "Python, torch, transformers, TRL and the trainer before the first step (measured)",
        )
    else:
        add("runtime", CUDA_CONTEXT_BYTES, "always", "CUDA context and cuBLAS workspaces")
    add(
        "weights",
        shape.parameter_count() * dtype_bytes,
        "always",
        f"{shape.parameter_count() / 1e6:.0f}M parameters x {dtype_bytes} bytes",
    )
    if merged_copy_dtype_bytes:
        add(
            "merged copy",
            shape.parameter_count() * merged_copy_dtype_bytes,
            "always",
            f"merged_generation's plain copy of the weights the rounds are sampled from "
            f"({merged_copy_dtype_bytes} bytes each)",
        )
    if packed_decode:
        packed = shape.num_hidden_layers * sum(i * o for i, o in shapes.values()) + shape.vocab_size * shape.hidden_size
        add(
            "packed weights",
            packed * 4,
            "always",
            f"packed_decode: the copy's {packed / 1e6:.0f}M linear weights (LM head included) packed for MKL's GEMM, "
            f"float32",
        )
    add(
        "lora",
        lora_params * LORA_BYTES_PER_PARAM,
        "always",
        f"{lora_params / 1e6:.2f}M LoRA parameters (r={rank}, {len(targets)} layers each): float32 weight, "
        f"gradient and two AdamW moments",
    )


def _add_generation(
    add,
    notes: list[str],
    sizes: _RunSizes,
    use_vllm: bool,
    vllm_mode: str,
    vllm_gpu_memory_utilization: float,
    device_total_bytes: int | None,
) -> None:
    """Generation: every completion of the round decodes at once (or vLLM holds its share of the GPU)."""
    shape, seq, gen_sequences, layers = sizes.shape, sizes.seq, sizes.gen_sequences, sizes.shape.num_hidden_layers
    if use_vllm and vllm_mode == "server":
        add("generation", 0, "generation", "vLLM server on its own GPUs: no generation memory here")
    elif use_vllm:
        if device_total_bytes:
            # Reserved when the trainer starts and held for the whole run.
            add(
                "vllm",
                vllm_gpu_memory_utilization * device_total_bytes,
                "always",
                f"vLLM colocated reserves {vllm_gpu_memory_utilization:.0%} of the GPU for its weights and cache",
            )
        else:
            notes.append(
                "vLLM colocate reserves vllm_gpu_memory_utilization of the GPU: give device_total_bytes to count it."
            )
    else:
        kv = 2 * layers * shape.kv_size * seq * gen_sequences * sizes.dtype_bytes
        add(
            "kv cache",
            kv,
            "generation",
            f"keys and values of {gen_sequences} sequences x {seq} tokens x {layers} layers",
        )
        add(
            "sampling logits",
            gen_sequences * shape.vocab_size * 4 * SAMPLING_LOGIT_COPIES,
            "generation",
            f"next-token logits of {gen_sequences} sequences over {shape.vocab_size} words",
        )


def _add_scoring(add, sizes: _RunSizes, beta: float, num_iterations: int, gradient_accumulation_steps: int) -> None:
    """Scoring: no-grad forwards over micro-batches (reference model, old log-probs)."""
    needs_old = num_iterations > 1 or gradient_accumulation_steps % (sizes.spg * num_iterations) != 0
    if beta > 0 or needs_old:
        h_copies, i_copies = INFERENCE_FLOATS_PER_TOKEN
        layer_floats = sizes.train_tokens * (
            h_copies * sizes.shape.hidden_size + i_copies * sizes.shape.intermediate_size
        )
        tiles = sizes.token_tile * sizes.vocab_tile * 4 * LOGIT_TILE_COPIES[sizes.device]["forward"]
        why = (
            "reference log-probs (base model with adapters disabled, no second copy of the weights)"
            if beta > 0
            else "old log-probs for num_iterations > 1"
        )
        add(
            "reference forward",
            layer_floats * sizes.dtype_bytes + tiles,
            "scoring",
            f"{why}: one layer's activations and the vocabulary tiles of {sizes.batch} sequences",
        )


def _add_training(add, sizes: _RunSizes, gradient_checkpointing: bool) -> None:
    """Training: what autograd keeps for backward, then the head's backward tiles on top."""
    shape, seq, train_tokens = sizes.shape, sizes.seq, sizes.train_tokens
    layers = shape.num_hidden_layers
    per_layer_floats = (
        HIDDEN_COPIES_SAVED * shape.hidden_size
        + ATTENTION_COPIES_SAVED * shape.attention_size
        + INTERMEDIATE_COPIES_SAVED * shape.intermediate_size
        + sizes.rank * len(sizes.targets)
        + seq
        + shape.num_attention_heads
        + 2
    )
    if gradient_checkpointing:
        activations = train_tokens * (layers * shape.hidden_size + per_layer_floats) * sizes.dtype_bytes
        how = "gradient checkpointing: each layer's input plus one layer recomputed"
    else:
        activations = train_tokens * layers * per_layer_floats * sizes.dtype_bytes
        how = f"{per_layer_floats:,} floats per token per layer"
    add(
        "activations",
        activations,
        "training",
        f"backward state of {sizes.batch} completions x {seq} tokens (prompt + completion) x {layers} layers: {how}",
    )
    tile_copies = LOGIT_TILE_COPIES[sizes.device]["backward"]
    add(
        "logits tiles",
        sizes.token_tile * sizes.vocab_tile * 4 * tile_copies,
        "training",
        f"fused LM head backward: {tile_copies} float32 tile(s) of {sizes.token_tile} tokens x {sizes.vocab_tile} "
        f"words (never the full {train_tokens} x {shape.vocab_size} logits)",
    )


def _add_evaluation(
    add, notes: list[str], shape: ModelShape, sequences: int, seq: int, completion: int, dtype_bytes: int, device: str
) -> None:
    """Held-out evaluation between steps: one generate call's cache and logits, and every answer kept."""
    at_once = min(sequences, EVAL_BATCH)
    add(
        "evaluation cache",
        2 * shape.num_hidden_layers * shape.kv_size * seq * at_once * dtype_bytes
        + at_once * shape.vocab_size * 4 * SAMPLING_LOGIT_COPIES,
        "evaluation",
        f"held-out prompts answered {at_once} completions at a time: their keys, values and logits",
    )
    answers = sequences * completion * ANSWER_BYTES_PER_TOKEN
    if device == "cpu":
        add(
            "held-out answers",
            answers,
            "evaluation",
            f"{sequences:,} held-out completions of up to {completion:,} tokens kept until scored "
            f"(token ids and text, about {ANSWER_BYTES_PER_TOKEN} bytes a token)",
        )
    else:
        notes.append(
            f"Held-out evaluation keeps about {answers / GIB:,.1f} GiB of answers in the machine's memory "
            "(not the GPU's), not counted here."
        )


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


def _add_reward_model(add, shape: ModelShape, dtype_bytes: int, tokens: int) -> None:
    """A reward model's weights (no LM head: a one-number score head) and its no-grad forward over `tokens`."""
    head = 0 if shape.tie_word_embeddings or shape.num_parameters else shape.vocab_size * shape.hidden_size
    params = shape.parameter_count() - head
    add(
        "reward model",
        params * dtype_bytes,
        "always",
        f"reward_model: {params / 1e6:.0f}M parameters x {dtype_bytes} bytes, loaded by TRL for the whole run",
    )
    h_copies, i_copies = INFERENCE_FLOATS_PER_TOKEN
    add(
        "reward model forward",
        tokens * (h_copies * shape.hidden_size + i_copies * shape.intermediate_size) * dtype_bytes,
        "scoring",
        f"one layer's activations of the reward model over {tokens:,} tokens: the whole "
        "generation round, scored in one no-grad call",
    )


def reward_model_shape(name: str) -> tuple[ModelShape | None, int | None, str]:
    """(shape, bytes per weight, note) of a run's reward model: read from its folder's config.json; a hub id's
    config is not on disk, so it is not counted and the note says so."""
    config_path = Path(name).expanduser() / "config.json"
    try:
        if not config_path.is_file():
            return None, None, f"reward_model {name:.200} is not a local folder: its memory is not counted."
        config = json.loads(config_path.read_text(encoding="utf-8"))
    except (OSError, ValueError):  # a name no file system holds, or a config that is not JSON
        return None, None, f"reward_model {name:.200}: its config.json cannot be read, so its memory is not counted."
    dtype = str(config.get("dtype") or config.get("torch_dtype") or "")
    if not isinstance(config, dict):
        return None, None, f"reward_model {name:.200}: its config.json is not an object, so its memory is not counted."
    return model_shape(config, str(config_path)), {"float32": 4, "bfloat16": 2, "float16": 2}.get(dtype), ""


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
