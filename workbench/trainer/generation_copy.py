"""Sampling a GRPO round from a plain copy of the policy with its LoRA update merged in (`merged_generation`).

Why: on a CPU, decoding is bound by memory traffic and Python layers, not arithmetic. Every generated
token runs each of PEFT's LoRA wrappers (two extra small matmuls, dropout and scaling per linear layer),
which makes generation markedly slower than the bare model (benchmarks/bench_speed.py). PEFT's own
`merge_adapter` folds the update into the weights but keeps the wrappers, so it gains nothing. A second, plain
model of the same architecture whose linear weights are `W + scale * B @ A` has neither cost, and in bfloat16 it
reads half the bytes per token.

The copy is refreshed once per optimizer step, before the first generation after it (as TRL syncs vLLM
weights; held-out evaluation answers from it too, refreshing it first when it evaluates a step before the
step's round): for a plain LoRA linear layer one `addmm` writes `W + scale * B @ A` into the copy in a single
pass (faster than PEFT's `get_delta_weight`, which makes the product and scales it, then a sum and a copy:
one pass over the weight instead of several; the copy's `merged_generation/sync_seconds` metric times it);
any other layer goes
through `get_delta_weight`. Training, the
reference pass and every log-probability still use the PEFT policy; only sampling moves. In bfloat16 the
sampling distribution differs from the float32 policy's by rounding, which makes the round very slightly
off-policy; TRL's `sampling/sampling_logp_difference` is not logged for this path, so the speed benchmark
(benchmarks/bench_speed.py) compares the reward reached against generation from the policy itself.

Ties to TRL and PEFT: `GRPOTrainer._generate_single_turn` unwraps `self.model_wrapped` for generation
(`unwrap_model_for_generation`); `GenerationCopy.swapped_in` puts the copy there for the duration of
one call (the private tie is in workbench/library_compat.py's registry). The tied LM head is left to weight
tying: transformers' public `all_tied_weights_keys`. PEFT's `LoraLayer.get_delta_weight(adapter)` gives the
merged update (scaling and fan-in/out handled by PEFT).
"""

from __future__ import annotations

import contextlib
import time

# Weights of the PEFT model that are LoRA's own, not the base model's.
LORA_KEY_PARTS = ("lora_A", "lora_B", "lora_embedding_A", "lora_embedding_B", "lora_magnitude_vector")


def plain_name(peft_key: str) -> str:
    """A base-model state key inside a PEFT LoRA model, as the plain model names it."""
    return peft_key.replace(".base_layer.", ".")


def is_lora_key(key: str) -> bool:
    return any(f".{part}." in key for part in LORA_KEY_PARTS)


class GenerationCopy:
    """A plain model of the policy's architecture holding base weights + the current LoRA update."""

    def __init__(self, peft_model, dtype):
        import torch
        from peft.tuners.lora import LoraLayer
        from transformers import AutoModelForCausalLM

        base = peft_model.get_base_model()
        with torch.device("meta"):
            copy = AutoModelForCausalLM.from_config(base.config, dtype=dtype)
        copy.to_empty(device=next(base.parameters()).device)
        state = {plain_name(k): v for k, v in base.state_dict().items() if not is_lora_key(k)}
        missing, unexpected = copy.load_state_dict(state, strict=False)
        # tied weights (the LM head, where the config ties it to the embeddings) are left to tie_weights() below
        if unexpected or [k for k in missing if k not in copy.all_tied_weights_keys]:
            raise RuntimeError(
                f"merged_generation: the plain copy does not match the policy "
                f"(missing {missing[:3]}, unexpected {unexpected[:3]})"
            )
        # buffers left out of the state dict (rotary frequencies) came out of to_empty() uninitialised
        plain_buffers = dict(copy.named_buffers())
        with torch.no_grad():
            for name, buffer in base.named_buffers():
                if plain_name(name) in plain_buffers:
                    plain_buffers[plain_name(name)].copy_(buffer)
        copy.tie_weights()
        copy.generation_config = base.generation_config
        copy.eval().requires_grad_(False)
        self.model = copy
        self.adapter = peft_model.active_adapter
        # (plain weight, LoRA layer) for every layer the adapter wraps
        self.merged = [
            (copy.get_submodule(name).weight, module)
            for name, module in base.named_modules()
            if isinstance(module, LoraLayer) and self.adapter in module.lora_A
        ]
        self.synced_step: int | None = None
        self.unlogged_sync: float | None = None  # the last refresh's seconds, until a round's metrics take them
        self.packed = None  # packed_decode's FusedLlamaDecode or PackedDecode over the copy, once pack_decode() runs
        self.rounds = 0  # rounds sampled from the copy: a swap that never took effect shows as none (trainer/levers.py)

    def pack_decode(self, rows: int) -> str:
        """Decode steps of `rows` rows run through MKL's packed GEMM, repacked after each sync, in the decode
        step written for Llama layers where it computes the model's (trainer/llama_decode.py), else in the
        model's own layers (trainer/packed_decode.py); returns which, and why not the first."""
        from workbench.trainer.llama_decode import FusedLlamaDecode, unsupported
        from workbench.trainer.packed_decode import PackedDecode

        why_not = unsupported(self.model)
        if why_not is None:
            fused = FusedLlamaDecode(self.model, rows)
            try:
                why_not = fused.check()
            except Exception as error:  # a variant the step does not fit: the model's own layers decode
                why_not = f"its start-up check failed: {type(error).__name__}: {error}"
            if why_not is None:
                self.packed = fused
                return "the decode step written for llama layers"
            fused.detach()
        self.packed = PackedDecode(self.model, rows)
        return f"the model's own layers ({why_not})"

    def share_prompt_prefill(self) -> None:
        """Prefill each distinct prompt of a round once (shared_prompt_pass; trainer/prompt_sharing.py)."""
        import functools

        from workbench.trainer.prompt_sharing import generate_with_shared_prefill

        self.model.generate = functools.partial(generate_with_shared_prefill, self.model, self.model.generate)

    @property
    def dtype(self):
        return next(self.model.parameters()).dtype

    def sync(self, step: int) -> None:
        """Fold the LoRA update of `step` into the copy (once per step)."""
        import torch

        if self.synced_step == step:
            return
        started = time.perf_counter()
        with torch.no_grad():
            for weight, module in self.merged:
                base = module.get_base_layer().weight
                if self._fusable(module, base, weight):
                    # base + scaling x (B @ A) written straight into the copy: one pass over the weights
                    # instead of get_delta_weight's product, then its scaling, the sum and the copy (four)
                    torch.addmm(
                        base,
                        module.lora_B[self.adapter].weight,
                        module.lora_A[self.adapter].weight,
                        alpha=module.scaling[self.adapter],
                        out=weight,
                    )
                else:
                    weight.copy_(base + module.get_delta_weight(self.adapter).to(base.dtype))
        if self.packed is not None:
            self.packed.invalidate([weight for weight, _ in self.merged])
        self.synced_step = step
        self.unlogged_sync = time.perf_counter() - started

    def take_sync_seconds(self) -> float | None:
        """The seconds of the last refresh, once: None when it was taken already."""
        seconds, self.unlogged_sync = self.unlogged_sync, None
        return seconds

    def _fusable(self, module, base, weight) -> bool:
        """A plain LoRA linear layer whose update is exactly base + scaling x (B @ A), all in one dtype (in
        half precision only off the CPU, where get_delta_weight computes the product in float32 instead)."""
        import torch
        from peft.tuners.lora import Linear

        a, b = module.lora_A[self.adapter].weight, module.lora_B[self.adapter].weight
        return (
            type(module) is Linear
            and not module.fan_in_fan_out
            and not module.use_dora.get(self.adapter)
            and not getattr(module, "lora_bias", {}).get(self.adapter)
            and base.dtype == weight.dtype == a.dtype == b.dtype
            and base.dim() == 2
            and (base.dtype == torch.float32 or base.device.type != "cpu")
        )

    @contextlib.contextmanager
    def swapped_in(self, trainer):
        """`trainer.model_wrapped` is the copy, synced to the trainer's step, for the duration; with
        `packed_decode` its one-token draws are torch.multinomial's, made faster (trainer/exact_draws.py)."""
        from workbench.trainer import exact_draws

        self.sync(trainer.state.global_step)
        self.rounds += 1
        wrapped = trainer.model_wrapped
        trainer.model_wrapped = self.model
        try:
            with exact_draws.faster_multinomial() if self.packed is not None else contextlib.nullcontext():
                yield self.model
        finally:
            trainer.model_wrapped = wrapped
