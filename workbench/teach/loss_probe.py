"""A GRPOTrainer that records every micro-batch it trains on, with the loss
under each loss type computed twice: by TRL's own `_compute_loss` and by
`workbench.teach.losses`.

Used by notebook 02 (loss normalisation on a real batch) and by
tests/test_losses.py, so the notebook's numbers and the test's check are the
same code. It relies on TRL 1.16's private `_compute_loss(model, inputs)`, overridden
under the workbench's name `grpo_loss` (workbench/library_compat.py's GRPOHooks and
registry); the test pins that.

    ProbeTrainer = loss_probe_trainer_class()
    trainer = ProbeTrainer(model=..., args=GRPOConfig(...), ...)
    trainer.train()
    trainer.probes[-1].trl["grpo"], trainer.probes[-1].ours["grpo"]["loss"]
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from workbench import library_compat
from workbench.teach import losses


@dataclass
class MicroBatchProbe:
    """One micro-batch as the trainer saw it, and its loss under every type.

    Tensors are detached CPU copies, shapes (B, T) or (B,). `trl[t]` is the
    value TRL's `_compute_loss` returned with `loss_type=t`; `ours[t]` is
    `workbench.teach.losses.compute_loss(...).as_floats()` for the same inputs.
    """

    step: int  # optimizer step the micro-batch belongs to (0-based)
    trained_type: str
    prompt_ids: torch.Tensor
    completion_ids: torch.Tensor
    completion_mask: torch.Tensor
    advantages: torch.Tensor
    per_token_logps: torch.Tensor
    ref_per_token_logps: torch.Tensor | None
    num_items_in_batch: float
    trl: dict[str, float] = field(default_factory=dict)
    ours: dict[str, dict] = field(default_factory=dict)


def loss_probe_trainer_class():
    """Build the probing subclass of TRL's GRPOTrainer (imports TRL only when called)."""
    from trl import GRPOTrainer

    class LossProbeTrainer(library_compat.GRPOHooks, GRPOTrainer):
        """Trains exactly like GRPOTrainer; additionally fills `self.probes`."""

        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            self.probes: list[MicroBatchProbe] = []

        def grpo_loss(self, model, inputs):
            trained_type = self.loss_type
            per_token_logps = losses.completion_logps(
                model,
                inputs["prompt_ids"],
                inputs["prompt_mask"],
                inputs["completion_ids"],
                inputs["completion_mask"],
                self.temperature,
            )
            ref = inputs.get("ref_per_token_logps")
            probe = MicroBatchProbe(
                step=self.state.global_step,
                trained_type=trained_type,
                prompt_ids=inputs["prompt_ids"].detach().cpu(),
                completion_ids=inputs["completion_ids"].detach().cpu(),
                completion_mask=inputs["completion_mask"].detach().cpu(),
                advantages=inputs["advantages"].detach().cpu(),
                per_token_logps=per_token_logps.detach().cpu(),
                ref_per_token_logps=None if ref is None else ref.detach().cpu(),
                num_items_in_batch=float(inputs["num_items_in_batch"]),
            )
            for loss_type in losses.LOSS_TYPES:
                probe.ours[loss_type] = losses.compute_loss(
                    per_token_logps.detach(),
                    inputs["advantages"],
                    inputs["completion_mask"],
                    loss_type=loss_type,
                    beta=self.beta,
                    ref_per_token_logps=ref,
                    max_completion_length=self.max_completion_length,
                    num_items_in_batch=inputs["num_items_in_batch"],
                    gradient_accumulation_steps=self.current_gradient_accumulation_steps,
                    steps_per_generation=self.args.steps_per_generation,
                    num_processes=self.accelerator.num_processes,
                ).as_floats()
                if loss_type != trained_type:
                    # Ask TRL itself for the other types' value on the same
                    # inputs, without touching gradients or the trained type.
                    self.loss_type = loss_type
                    try:
                        with torch.no_grad():
                            probe.trl[loss_type] = float(super().grpo_loss(model, inputs))
                    finally:
                        self.loss_type = trained_type
            loss = super().grpo_loss(model, inputs)
            probe.trl[trained_type] = float(loss.detach())
            self.probes.append(probe)
            return loss

    return LossProbeTrainer
