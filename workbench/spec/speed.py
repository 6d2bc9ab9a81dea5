"""The speed settings a run gets on the machine it trains on, and why: pure rules over measured figures.

`merged_generation`, `shared_prompt_pass` and `packed_decode` set to "auto" (the defaults) resolve here, when the training
process starts and in the Setup tab's notes, so a config says "auto" and the run and the page say what it
became. The rules follow what benchmarks/bench_speed.py measured (the demo on a 2-core Xeon with
avx512_bf16 and no AMX, 8 steps, two runs per row; figures in MEASURED): on a CPU, sampling from a merged
float32 copy of the policy is faster and draws exactly the policy's completions; running each prompt once
per group when scoring and sampling is faster again, with the same values; the float32 copy decoding
through MKL's packed GEMM (`packed_decode`, MEASURED_PACKED; on Llama models in a decode step written for their
layers, with torch.multinomial's draws made faster) is faster again, with the same draws; a
bfloat16 copy was no faster
there and changes the draws, and bfloat16 weights (`bf16`) or TRL's bf16 autocast made every step slower.
On a GPU (MEASURED_GPU: `bench_speed.py --device cuda` on an H100, the demo's 135M model and a 1.7B
model of random weights) the merged bfloat16 copy made the step faster on both, most on the larger model,
so with `bf16` on `auto` takes it there, if it is at most a quarter of the GPU's free memory when the
model has loaded (a second set of weights: `copy_fits_gpu`); the shared prompt pass made sampling from the
copy slower there, so `auto` leaves it off on a GPU. With vLLM the rounds are sampled by the server
anyway. Whether the shared prompt pass can run at all (`unsupported_reason`) is judged here too, once more
when the training process has loaded the model and knows its type.
"""

from __future__ import annotations

from dataclasses import dataclass

# median step time (s) per bench_speed.py row, demo task, bundled model, CPU, 8 steps x 2 runs, from
# `--rows bare-fp32 bare-trl-defaults workbench merged-fp32 shared-prompt defaults`
MEASURED = {
    "bare TRL float32": 6.22,
    "bare TRL default precision (bf16 autocast)": 7.81,
    "workbench, sampling and scoring as TRL": 6.20,
    "workbench, merged float32 copy": 6.05,
    "workbench, shared prompt pass": 5.39,
    "workbench, defaults": 5.05,
}
# packed_decode, from a later run of `--rows bare-fp32 defaults-plain-matmul defaults` (2026-11-28, 8 steps x 2 runs):
# on a Llama model it also carries the decode step written for Llama layers and the faster exact draws, and the
# shared prompt pass scores through the CPU LM head (the first measure, 2026-11-27, before those three: 5.87 s,
# 4.62 s, 4.17 s)
MEASURED_PACKED = {
    "bare TRL float32": 5.61,
    "workbench, defaults, plain matmul": 4.13,
    "workbench, defaults": 3.35,
}
# the bf16 rows, from an earlier run of every row (the machine was faster that day: bare TRL float32 5.66 s)
MEASURED_BF16 = {
    "workbench, float32": 5.80,
    "workbench, merged bfloat16 copy": 5.30,
    "workbench, bf16 weights": 7.48,
}

# median step time (s) on an H100 80GB (`bench_speed.py --device cuda`: the demo's settings on the GPU kit's
# G = 8 completions of up to 64 tokens, bf16 weights; 2026-11-27), each lever alone and both, one run each
# and a second run of two rows; the 1.7B model is `benchmarks/random_model.py smollm2-1.7b` (random weights:
# its completions always run to 64 tokens)
MEASURED_GPU = {
    "135M": {"both off": (6.33,), "merged bfloat16 copy": (4.68, 3.77), "shared prompt pass": (6.28,),
             "both": (5.34, 4.43, 4.58)},
    "1.7B": {"both off": (4.99,), "merged bfloat16 copy": (1.50, 1.84), "shared prompt pass": (3.17,),
             "both": (2.00, 2.39)},
}
# GPU memory peak (NVML, GiB) of the 1.7B rows: the copy is a second set of bfloat16 weights
MEASURED_GPU_PEAK_1P7B = {"both off": 6.81, "merged bfloat16 copy": 10.01}
# auto takes the copy on a GPU only when it needs at most this share of the GPU's free memory
GPU_COPY_SHARE = 0.25


def _seconds(figures: tuple[float, ...]) -> str:
    return "/".join(f"{t:.2f}" for t in figures) + " s"


GPU_SHARED_REASON = (f"on a GPU it slowed sampling from the merged copy (H100, 1.7B model: "
                     f"{_seconds(MEASURED_GPU['1.7B']['both'])} a step with both, "
                     f"{_seconds(MEASURED_GPU['1.7B']['merged bfloat16 copy'])} with the copy alone)")


def gpu_figures_note() -> str:
    """The one line on what the speed levers did on a GPU, for the Setup tab."""
    small, large = MEASURED_GPU["135M"], MEASURED_GPU["1.7B"]
    peak = MEASURED_GPU_PEAK_1P7B
    return (f"On an H100 a merged bfloat16 copy made the demo's step {_seconds(small['merged bfloat16 copy'])} "
            f"instead of {_seconds(small['both off'])} (135M model) and {_seconds(large['merged bfloat16 copy'])} "
            f"instead of {_seconds(large['both off'])} (1.7B), for {peak['merged bfloat16 copy']:.1f} instead of "
            f"{peak['both off']:.1f} GiB of GPU memory at 1.7B; the shared prompt pass alone gave "
            f"{_seconds(small['shared prompt pass'])} and {_seconds(large['shared prompt pass'])}, and with the copy "
            f"{_seconds(small['both'])} and {_seconds(large['both'])} (benchmarks/bench_speed.py --device cuda).")


def copy_fits_gpu(copy_bytes: int, free_bytes: int) -> str | None:
    """None when auto may take a merged copy of `copy_bytes` on a GPU with `free_bytes` free once the model has
    loaded, else why not: a second set of weights must leave the round's activations their room."""
    if copy_bytes <= GPU_COPY_SHARE * free_bytes:
        return None
    return (f"on a GPU: the copy would take {copy_bytes / 2**30:.1f} GiB of the {free_bytes / 2**30:.1f} GiB free, "
            f"more than a quarter; set merged_generation=bfloat16 to take it anyway")


@dataclass(frozen=True)
class SpeedChoice:
    """One setting as the run will use it, and the reason in plain words."""

    field: str
    value: str
    why: str


def resolve_merged_generation(setting: str, generation: str, on_cpu: bool,
                              distributed_backend: str = "ddp", bf16: bool = False) -> SpeedChoice:
    """What `merged_generation=setting` means for a run with this generation backend, on this device (on a GPU
    the training process checks the copy's room too: `copy_fits_gpu`)."""
    if generation != "transformers":
        return SpeedChoice("merged_generation", "no", f"generation={generation}: the vLLM server samples the rounds")
    if distributed_backend != "ddp":
        # sharded weights: no process holds the whole model to copy
        return SpeedChoice("merged_generation", "no", f"distributed_backend={distributed_backend}: the weights are "
                                                      f"sharded, so sampling stays TRL's")
    if setting != "auto":
        return SpeedChoice("merged_generation", setting, "set in the config")
    if not on_cpu:
        if not bf16:
            return SpeedChoice("merged_generation", "no", "on a GPU the copy was measured with bf16 weights only; "
                                                          "set merged_generation=float32 to take it")
        large = MEASURED_GPU["1.7B"]
        return SpeedChoice(
            "merged_generation", "bfloat16",
            f"on a GPU with bf16 weights, rounds are sampled from a bfloat16 copy with the LoRA update merged in: "
            f"a 1.7B model's step took {_seconds(large['merged bfloat16 copy'])} instead of "
            f"{_seconds(large['both off'])} on an H100, for a second set of weights (taken only if it needs at most "
            f"a quarter of the GPU's free memory)")
    merged, bare = MEASURED["workbench, merged float32 copy"], MEASURED["workbench, sampling and scoring as TRL"]
    return SpeedChoice(
        "merged_generation", "float32",
        f"on a CPU, rounds are sampled from a float32 copy with the LoRA update merged in: the same completions, "
        f"no LoRA layers per token (demo step {merged:.2f} s instead of {bare:.2f} s in benchmarks/bench_speed.py)")


# Model types whose forward was checked against TRL's with a cache passed in (tests/test_prompt_sharing.py
# builds a tiny model of each).
CHECKED_MODEL_TYPES = ("llama", "qwen2", "qwen3")


def unsupported_reason(model_type: str | None, gradient_checkpointing: bool, num_processes: int) -> str | None:
    """Why the shared prompt pass (trainer/prompt_sharing.py) cannot run for this model and run, or None when
    it can; a model type of None (not loaded yet) is not judged."""
    if gradient_checkpointing:
        return "gradient_checkpointing: its checkpointed layers drop the prompt's cache"
    if num_processes > 1:
        return f"{num_processes} processes: DDP expects one forward per backward"
    if model_type is not None and model_type not in CHECKED_MODEL_TYPES:
        return f"model type {model_type!r} not checked (checked: {', '.join(CHECKED_MODEL_TYPES)})"
    return None


def resolve_shared_prompt_pass(setting: str, on_cpu: bool, gradient_checkpointing: bool = False,
                               processes: int = 1, model_type: str | None = None) -> SpeedChoice:
    """What `shared_prompt_pass=setting` means for a run on this device with these settings, and with this
    model once it is loaded (the Setup tab passes none)."""
    if setting == "no":
        return SpeedChoice("shared_prompt_pass", "no", "set in the config")
    reason = unsupported_reason(model_type, gradient_checkpointing, processes)
    if reason:
        return SpeedChoice("shared_prompt_pass", "no", reason)
    if setting == "yes":
        return SpeedChoice("shared_prompt_pass", "yes", "set in the config")
    if not on_cpu:
        return SpeedChoice("shared_prompt_pass", "no", GPU_SHARED_REASON)
    return _measured_faster("shared_prompt_pass", "on a CPU, each prompt runs once per group when scoring and "
                            "sampling, and only completion tokens meet the vocabulary: the same log-probabilities",
                            MEASURED["workbench, shared prompt pass"], MEASURED["workbench, sampling and scoring as TRL"])


def _measured_faster(field: str, what: str, faster: float, slower: float) -> SpeedChoice:
    """`field` on ("yes"), for what it does and the demo step it was measured at against without it."""
    return SpeedChoice(field, "yes", f"{what} (demo step {faster:.2f} s instead of {slower:.2f} s in "
                                     f"benchmarks/bench_speed.py)")


def resolve_packed_decode(setting: str, merged: str, on_cpu: bool, mkl_missing: str | None = None) -> SpeedChoice:
    """What `packed_decode=setting` means for a run whose merged_generation resolved to `merged`, on this device;
    `mkl_missing` says why this torch cannot pack (trainer/packed_decode.available()), None when it can or
    when that is not known yet (the Setup tab). A value other than auto or yes (one check_config refuses)
    packs nothing, as the memory estimate counts it."""
    if setting not in ("auto", "yes"):
        return SpeedChoice("packed_decode", "no", "set in the config")
    if not on_cpu:
        return SpeedChoice("packed_decode", "no", "MKL's packed GEMM is a CPU kernel")
    if merged != "float32":
        return SpeedChoice("packed_decode", "no", f"merged_generation is {merged}: only a float32 merged copy "
                                                  f"decodes this way")
    if mkl_missing:
        return SpeedChoice("packed_decode", "no", mkl_missing)
    if setting == "yes":
        return SpeedChoice("packed_decode", "yes", "set in the config")
    return _measured_faster("packed_decode", "on a CPU, the float32 copy decodes through MKL's packed GEMM, its "
                            "weights packed once a step, a Llama model's decode step as one function written for its "
                            "layers, and torch.multinomial's draws made faster: the same numbers to float32 rounding "
                            "and the same draws, for a second copy of the linear weights in memory",
                            MEASURED_PACKED["workbench, defaults"],
                            MEASURED_PACKED["workbench, defaults, plain matmul"])


def _note(choice: SpeedChoice, setting: str) -> str:
    return (f"{choice.field}={setting}" + (f" -> {choice.value}" if choice.value != setting else "")
            + f" ({choice.why}).")


def speed_notes(merged_generation: str, generation: str, bf16: bool, on_cpu: bool,
                distributed_backend: str = "ddp", shared_prompt_pass: str = "auto",
                gradient_checkpointing: bool = False, processes: int = 1, packed_decode: str = "auto") -> list[str]:
    """The Setup tab's lines on speed for this machine."""
    choice = resolve_merged_generation(merged_generation, generation, on_cpu, distributed_backend, bf16)
    sharing = resolve_shared_prompt_pass(shared_prompt_pass, on_cpu, gradient_checkpointing, processes)
    packing = resolve_packed_decode(packed_decode, choice.value, on_cpu)
    notes = [f"Speed: {_note(choice, merged_generation)} {_note(sharing, shared_prompt_pass)}"
             + (f" {_note(packing, packed_decode)}" if choice.value == "float32" and on_cpu or packed_decode == "yes"
                else "")]
    if not on_cpu and generation == "transformers":
        notes.append(gpu_figures_note())
    if on_cpu and bf16:
        notes.append(f"bf16 on this CPU made the demo's step slower ({MEASURED_BF16['workbench, bf16 weights']:.2f} s "
                     f"against {MEASURED_BF16['workbench, float32']:.2f} s in float32, "
                     f"benchmarks/bench_speed.py); leave it off unless memory is short.")
    return notes
