"""The speed settings a run gets, and why: pure rules over what this machine measured.

`merged_generation`, `shared_prompt_pass` and `packed_decode` set to "auto" (the defaults) are decided by a probe on
the machine, model and shape of the run (workbench/tuning/): it times each combination the run allows and keeps the
fastest exact one. The rules here say what can run at all (a vLLM server samples the rounds itself; sharded weights
leave no whole model to copy; the shared prompt pass needs one process, no gradient checkpointing and a checked model
type), what a setting becomes once the probe's choice (`tuned`, RunConfig values) is known, and the Setup tab's lines.
No figure measured on another machine decides anything here: the benchmarks keep those, with the CPU each came from.
"""

from __future__ import annotations

from dataclasses import dataclass

# auto takes a merged copy on a GPU only when it needs at most this share of the GPU's free memory: a second set of
# weights must leave a round's activations their room
GPU_COPY_SHARE = 0.25
NOT_MEASURED = "not measured on this machine yet: the run measures it when it starts"


def copy_fits_gpu(copy_bytes: int, free_bytes: int) -> str | None:
    """None when auto may take a merged copy of `copy_bytes` on a GPU with `free_bytes` free once the model has
    loaded, else why not."""
    if copy_bytes <= GPU_COPY_SHARE * free_bytes:
        return None
    return (
        f"on a GPU: the copy would take {copy_bytes / 2**30:.1f} GiB of the {free_bytes / 2**30:.1f} GiB free, "
        f"more than a quarter; set merged_generation=bfloat16 to take it anyway"
    )


@dataclass(frozen=True)
class SpeedChoice:
    """One setting as the run will use it, and the reason in plain words."""

    field: str
    value: str
    why: str
    by_probe: bool = False  # auto, left to this machine's speed probe (measured or not yet)


def _tuned(field: str, tuned: dict | None) -> SpeedChoice:
    if tuned is None:
        return SpeedChoice(field, "auto", NOT_MEASURED, by_probe=True)
    return SpeedChoice(field, tuned[field], "measured fastest on this machine", by_probe=True)


def resolve_merged_generation(
    setting: str, generation: str, distributed_backend: str = "ddp", tuned: dict | None = None
) -> SpeedChoice:
    """What `merged_generation=setting` means for a run with this generation backend; `tuned`: the probe's choice."""
    if generation != "transformers":
        return SpeedChoice("merged_generation", "no", f"generation={generation}: the vLLM server samples the rounds")
    if distributed_backend != "ddp":
        # sharded weights: no process holds the whole model to copy
        return SpeedChoice(
            "merged_generation",
            "no",
            f"distributed_backend={distributed_backend}: the weights are sharded, so sampling stays TRL's",
        )
    if setting != "auto":
        return SpeedChoice("merged_generation", setting, "set in the config")
    return _tuned("merged_generation", tuned)


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


def resolve_shared_prompt_pass(
    setting: str,
    gradient_checkpointing: bool = False,
    processes: int = 1,
    model_type: str | None = None,
    tuned: dict | None = None,
) -> SpeedChoice:
    """What `shared_prompt_pass=setting` means for a run with these settings, and with this model once it is
    loaded (the Setup tab passes none)."""
    if setting == "no":
        return SpeedChoice("shared_prompt_pass", "no", "set in the config")
    reason = unsupported_reason(model_type, gradient_checkpointing, processes)
    if reason:
        return SpeedChoice("shared_prompt_pass", "no", reason)
    if setting == "yes":
        return SpeedChoice("shared_prompt_pass", "yes", "set in the config")
    return _tuned("shared_prompt_pass", tuned)


def resolve_packed_decode(
    setting: str, merged: str, on_cpu: bool, mkl_missing: str | None = None, tuned: dict | None = None
) -> SpeedChoice:
    """What `packed_decode=setting` means for a run whose merged_generation resolved to `merged` (auto: not known
    before the probe), on this device; `mkl_missing` says why this torch cannot pack (trainer/packed_decode.available()),
    None when it can or when that is not known yet. A value other than auto or yes packs nothing."""
    if setting not in ("auto", "yes"):
        return SpeedChoice("packed_decode", "no", "set in the config")
    if not on_cpu:
        return SpeedChoice("packed_decode", "no", "MKL's packed GEMM is a CPU kernel")
    if merged not in ("float32", "auto"):
        return SpeedChoice(
            "packed_decode", "no", f"merged_generation is {merged}: only a float32 merged copy decodes this way"
        )
    if mkl_missing:
        return SpeedChoice("packed_decode", "no", mkl_missing)
    if setting == "yes":
        return SpeedChoice("packed_decode", "yes", "set in the config")
    return _tuned("packed_decode", tuned)


def _note(choice: SpeedChoice, setting: str) -> str:
    return f"{choice.field}={setting}" + (f" -> {choice.value}" if choice.value != setting else "")


def speed_notes(cfg, on_cpu: bool, tuned: dict | None = None, measured: str = "") -> list[str]:
    """The Setup tab's line on speed: what each lever becomes and why; `tuned` and `measured` (its one-line
    summary) from this machine's kept choice for the run, when there is one."""
    merged = resolve_merged_generation(cfg.merged_generation, cfg.generation, cfg.distributed_backend, tuned)
    choices = [
        merged,
        resolve_shared_prompt_pass(cfg.shared_prompt_pass, cfg.gradient_checkpointing, cfg.num_processes, tuned=tuned),
    ]
    if cfg.generation == "transformers" and on_cpu:
        choices.append(resolve_packed_decode(cfg.packed_decode, merged.value, on_cpu, tuned=tuned))
    settings = "; ".join(f"{_note(c, getattr(cfg, c.field))} ({c.why})" for c in choices if not c.by_probe)
    tuned_fields = [c for c in choices if c.by_probe]
    line = "Speed: " + (settings + ". " if settings else "")
    if tuned_fields and tuned is not None:
        line += f"auto chose {measured}."
    elif tuned_fields:
        line += f"{', '.join(c.field for c in tuned_fields)}=auto: {NOT_MEASURED}."
    return [line]


def memory_merged_dtype(setting: str, generation: str, on_cpu: bool, distributed_backend: str, bf16: bool) -> str:
    """The merged copy the memory estimate counts: the one set, or for auto the largest the probe may choose."""
    choice = resolve_merged_generation(setting, generation, distributed_backend)
    if choice.value != "auto":
        return choice.value
    return "float32" if on_cpu or not bf16 else "bfloat16"
