"""The speed levers' one way in: give a trainer the levers a (resolved) config asks for, and take them off again.

A lever swaps a part of TRL's step for the workbench's own: rounds sampled from a merged copy of the policy
(trainer/generation_copy.py), each prompt scored once per group (trainer/prompt_sharing.py), the float32 copy decoding
through MKL's packed GEMM (trainer/packed_decode.py, llama_decode.py, exact_draws.py). `attach` returns what each
became, which the run's status records; the speed probe (trainer/speed_probe.py) attaches each candidate in turn.
"""

from __future__ import annotations

import gc

from workbench.sources.gpus import runs_on_cpu_here
from workbench.spec.config import RunConfig
from workbench.spec.lever_decisions import LeverDecision
from workbench.spec.memory import MERGED_COPY_BYTES
from workbench.spec.speed import (
    copy_fits_gpu,
    resolve_merged_generation,
    resolve_packed_decode,
    resolve_shared_prompt_pass,
)
from workbench.trainer import packed_decode
from workbench.trainer.generation_copy import GenerationCopy


def attach(trainer, cfg: RunConfig, model_type: str, tuned: bool = False) -> dict[str, LeverDecision]:
    """Every lever `cfg` asks for (auto already resolved; `tuned`: merged_generation was auto), after taking off any
    attached before; the status fields saying what each became and why."""
    detach(trainer)
    return {
        "merged_generation": attach_generation_copy(trainer, cfg, tuned),
        "shared_prompt_pass": attach_shared_prompt_pass(trainer, cfg, model_type),
        "packed_decode": attach_packed_decode(trainer, cfg),
    }


def detach(trainer) -> None:
    """TRL's own path again: no copy (its memory freed), no shared prompt pass."""
    trainer.generation_copy, trainer.shared_prompt_pass = None, False
    gc.collect()


def attach_generation_copy(trainer, cfg: RunConfig, tuned: bool = False) -> LeverDecision:
    """Give the trainer the plain merged copy `merged_generation` asks for (auto already resolved by the speed
    probe: `tuned`); returns what it resolved to ("no", "float32" or "bfloat16") and why, which the run's status
    records."""
    import torch

    on_cpu = runs_on_cpu_here(cfg.device)
    merged = resolve_merged_generation(cfg.merged_generation, cfg.generation, cfg.distributed_backend)
    value = merged.value if merged.value in MERGED_COPY_BYTES else "no"
    if value != "no" and tuned and not on_cpu:
        weights = sum(p.numel() for p in trainer.model.get_base_model().parameters())
        free_bytes, _ = torch.cuda.mem_get_info(trainer.accelerator.device)
        too_big = copy_fits_gpu(weights * MERGED_COPY_BYTES[value], free_bytes)
        if too_big:
            print(f"[workbench] merged_generation=auto -> no ({too_big})", flush=True)
            return LeverDecision("no", too_big)
    trainer.generation_copy = GenerationCopy(trainer.model, getattr(torch, value)) if value != "no" else None
    return LeverDecision(value, merged.why)


def attach_shared_prompt_pass(trainer, cfg: RunConfig, model_type: str) -> LeverDecision:
    """Turn on the shared prompt pass where `shared_prompt_pass` and the run allow it; returns "yes", or "no"
    with the reason, which the run's status records."""
    choice = resolve_shared_prompt_pass(
        cfg.shared_prompt_pass, cfg.gradient_checkpointing, trainer.accelerator.num_processes, model_type
    )
    trainer.shared_prompt_pass = choice.value == "yes"
    if trainer.shared_prompt_pass and trainer.generation_copy is not None:
        trainer.generation_copy.share_prompt_prefill()
    return LeverDecision("yes", choice.why) if trainer.shared_prompt_pass else LeverDecision("no", choice.why)


def attach_packed_decode(trainer, cfg: RunConfig) -> LeverDecision:
    """Let the merged float32 copy decode through MKL's packed GEMM where `packed_decode` and this machine allow
    it; returns "yes" with the decode step it runs, or "no" with the reason, which the run's status records."""

    copy = trainer.generation_copy
    merged = "no" if copy is None else str(copy.dtype).removeprefix("torch.")
    choice = resolve_packed_decode(cfg.packed_decode, merged, runs_on_cpu_here(cfg.device), packed_decode.available())
    if choice.value == "yes":
        # the sequences of one generation round in this process (GRPOConfig's generation batch, per process)
        how = copy.pack_decode(trainer.args.per_device_train_batch_size * trainer.args.steps_per_generation)
        return LeverDecision("yes", how)
    return LeverDecision("no", choice.why)


def not_taking_effect(trainer) -> list[str]:
    """The attached levers that have not run since they were attached (call after a round): the copy never sampled,
    or no decode step ran packed. A swap that silently fell back to TRL's path is reported, never taken for speed."""
    copy = trainer.generation_copy
    if copy is None:
        return []
    problems = [] if copy.rounds else ["merged_generation: no round was sampled from the copy"]
    if copy.packed is not None and not copy.packed.steps:
        problems.append("packed_decode: no decode step ran through MKL's packed GEMM")
    return problems


def took_effect_check(trainer, report):
    """A TrainerCallback that, after the run's first step, calls `report(problems)` with `not_taking_effect`'s list
    for `trainer` when it is not empty."""
    from transformers import TrainerCallback

    class TookEffect(TrainerCallback):
        def on_step_end(self, args, state, control, **kwargs):
            if state.global_step == 1:
                problems = not_taking_effect(trainer)
                if problems:
                    report(problems)

    return TookEffect()
