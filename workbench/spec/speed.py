"""The speed settings a run gets on the machine it trains on, and why: pure rules over measured figures.

`merged_generation="auto"` and `shared_prompt_pass="auto"` (the defaults) resolve here, when the training
process starts and in the Setup tab's notes, so a config says "auto" and the run and the page say what it
became. The rules follow what benchmarks/bench_speed.py measured (the demo on a 2-core Xeon with
avx512_bf16 and no AMX, 8 steps, two runs per row; figures in MEASURED): on a CPU, sampling from a merged
float32 copy of the policy is faster and draws exactly the policy's completions; running each prompt once
per group when scoring and sampling is faster again, with the same values; a bfloat16 copy was no faster
there and changes the draws, and bfloat16 weights (`bf16`) or TRL's bf16 autocast made every step slower.
On a GPU the two were measured only together, on the demo's 135M model (MEASURED_GPU: a step 1.7x
faster on an H100, 2.0x on an H200, the same rewards on the H100), not each alone nor on a larger model,
where a merged copy costs a second set of weights; so a run there keeps bare TRL's way unless its config
turns them on. With vLLM the rounds are sampled by the server anyway. Whether the shared prompt pass can
run at all (`unsupported_reason`) is judged here too, once more when the training process has loaded the
model and knows its type.
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
# the bf16 rows, from an earlier run of every row (the machine was faster that day: bare TRL float32 5.66 s)
MEASURED_BF16 = {
    "workbench, float32": 5.80,
    "workbench, merged bfloat16 copy": 5.30,
    "workbench, bf16 weights": 7.48,
}

# median step time (s) on one GPU (tests/test_gpu.py::test_the_cpu_speed_levers_measured_on_a_gpu): the demo,
# bundled model, bf16, G = 8 completions of up to 64 tokens, 4 steps, one run each (2026-11-27); on the
# H100 the two runs logged the same reward at every step (the H200's metrics were not kept)
MEASURED_GPU = {
    "H100": {"both off": 4.04, "shared prompt pass and a merged bfloat16 copy": 2.33},
    "H200": {"both off": 4.63, "shared prompt pass and a merged bfloat16 copy": 2.36},
}
# why `auto` keeps TRL's way on a GPU, for either lever
GPU_REASON = "on a GPU: TRL's way unless set; measured there only with both levers on, on one small model"


def gpu_figures_note() -> str:
    """The one line on what the CPU speed levers did on a GPU, for the Setup tab."""
    h100, h200 = MEASURED_GPU["H100"], MEASURED_GPU["H200"]
    both = "shared prompt pass and a merged bfloat16 copy"
    return (f"On a GPU, shared_prompt_pass=yes with merged_generation=bfloat16 made the demo's step "
            f"{h100[both]:.2f} s instead of {h100['both off']:.2f} s on an H100 ({h200[both]:.2f} s instead of "
            f"{h200['both off']:.2f} s on an H200), with the same reward at every step on the H100; neither was "
            f"measured alone or on a larger model, where a merged copy costs a second set of weights, so auto "
            f"leaves both off there.")


@dataclass(frozen=True)
class SpeedChoice:
    """One setting as the run will use it, and the reason in plain words."""

    field: str
    value: str
    why: str


def resolve_merged_generation(setting: str, generation: str, on_cpu: bool,
                              distributed_backend: str = "ddp") -> SpeedChoice:
    """What `merged_generation=setting` means for a run with this generation backend, on this device."""
    if generation != "transformers":
        return SpeedChoice("merged_generation", "no", f"generation={generation}: the vLLM server samples the rounds")
    if distributed_backend != "ddp":
        # sharded weights: no process holds the whole model to copy
        return SpeedChoice("merged_generation", "no", f"distributed_backend={distributed_backend}: the weights are "
                                                      f"sharded, so sampling stays TRL's")
    if setting != "auto":
        return SpeedChoice("merged_generation", setting, "set in the config")
    if not on_cpu:
        return SpeedChoice("merged_generation", "no", GPU_REASON)
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
        return SpeedChoice("shared_prompt_pass", "no", GPU_REASON)
    shared, bare = MEASURED["workbench, shared prompt pass"], MEASURED["workbench, sampling and scoring as TRL"]
    return SpeedChoice(
        "shared_prompt_pass", "yes",
        f"on a CPU, each prompt runs once per group when scoring and sampling, and only completion tokens meet "
        f"the vocabulary: the same log-probabilities (demo step {shared:.2f} s instead of {bare:.2f} s in "
        f"benchmarks/bench_speed.py)")


def _note(choice: SpeedChoice, setting: str) -> str:
    return (f"{choice.field}={setting}" + (f" -> {choice.value}" if choice.value != setting else "")
            + f" ({choice.why}).")


def speed_notes(merged_generation: str, generation: str, bf16: bool, on_cpu: bool,
                distributed_backend: str = "ddp", shared_prompt_pass: str = "auto",
                gradient_checkpointing: bool = False, processes: int = 1) -> list[str]:
    """The Setup tab's lines on speed for this machine."""
    choice = resolve_merged_generation(merged_generation, generation, on_cpu, distributed_backend)
    sharing = resolve_shared_prompt_pass(shared_prompt_pass, on_cpu, gradient_checkpointing, processes)
    notes = [f"Speed: {_note(choice, merged_generation)} {_note(sharing, shared_prompt_pass)}"]
    if not on_cpu and generation == "transformers":
        notes.append(gpu_figures_note())
    if on_cpu and bf16:
        notes.append(f"bf16 on this CPU made the demo's step slower ({MEASURED_BF16['workbench, bf16 weights']:.2f} s "
                     f"against {MEASURED_BF16['workbench, float32']:.2f} s in float32, "
                     f"benchmarks/bench_speed.py); leave it off unless memory is short.")
    return notes
