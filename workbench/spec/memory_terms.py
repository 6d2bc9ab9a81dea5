"""The memory estimate's terms, phase by phase (the runtime and weights, generation, scoring, training,
evaluation, a reward model), counted from a run's checked sizes, with the measured constants behind them.

Each `add_*` function calls `add(name, bytes, phase, explanation)` once per term; `workbench/spec/memory.py`
gathers the terms into a `MemoryEstimate` and says which phase peaks.

Pure standard library: importable without torch.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from workbench.spec.model_shape import MemoryInputError, ModelShape, as_shape, lora_target_names

GIB = 2**30
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


@dataclass(frozen=True)
class RunSizes:
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


def _positive(name: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 1 or int(value) != value:
        raise MemoryInputError(f"{name}: got {value!r}; it must be a whole number of at least 1")
    return int(value)


def run_sizes(
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
) -> RunSizes:
    """The estimate's inputs checked (a MemoryInputError naming the first bad one) and turned into sizes."""
    shape = as_shape(model)
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
    return RunSizes(
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


def add_resident(add, sizes: RunSizes, merged_copy_dtype_bytes: int, packed_decode: bool) -> None:
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


def add_generation(
    add,
    notes: list[str],
    sizes: RunSizes,
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


def add_scoring(add, sizes: RunSizes, beta: float, num_iterations: int, gradient_accumulation_steps: int) -> None:
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


def add_training(add, sizes: RunSizes, gradient_checkpointing: bool) -> None:
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


def add_evaluation(
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


def add_reward_model(add, shape: ModelShape, dtype_bytes: int, tokens: int) -> None:
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


def add_allocator_reserve(add, terms: list[Any], peak: str) -> None:
    """On a GPU, what torch's caching allocator holds beyond the tensors alive at the peak (the always-alive terms
    and the peak phase's; the CUDA context and vLLM's own share are not torch tensors)."""
    tensors = sum(t.bytes for t in terms if t.phase in ("always", peak) and t.name not in ("runtime", "vllm"))
    add(
        "allocator reserve",
        tensors * CUDA_ALLOCATOR_OVERHEAD,
        "always",
        f"torch's caching allocator holds about {CUDA_ALLOCATOR_OVERHEAD:.0%} more than its tensors (fitted to "
        f"peaks measured on an H100)",
    )
