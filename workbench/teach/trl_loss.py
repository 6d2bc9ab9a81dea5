"""TRL's own loss on tensors you choose: GRPOTrainer's loss (its `_compute_loss`) of TRL 1.16 without a model or a run.

The variants (DAPO's clip-higher, GSPO's sequence-level ratio) only act when
the policy has moved since the completions were generated, which a short run
on the workbench's on-policy defaults never shows. This module hands TRL's
real loss code a batch with old log-probabilities that differ from the new
ones, so notebook 02 and tests/test_losses.py can put `workbench.teach.losses`
beside TRL's number for any setting.

It builds a GRPOTrainer without running its `__init__` (which needs a model,
a dataset and reward functions) and sets the attributes `__init__` derives
from GRPOConfig that the loss reads, under the names TRL 1.16 gives
them; the model's forward pass is replaced by the log-probabilities given.
The loss and some of these attributes are TRL's private API, reached through
workbench/library_compat.py (its registry checks them against the installed
TRL), and the test comparing the two losses fails when they change.

    loss, metrics = trl_loss(logps, old_logps, advantages, mask, loss_type="grpo",
                             epsilon_high=0.28, importance_sampling_level="sequence")
"""

from __future__ import annotations

import tempfile
import warnings

import torch

from workbench import library_compat


def trl_config(batch_size: int, **settings):
    """A GRPOConfig on the CPU, one group of `batch_size` completions, beta 0 unless `settings` say otherwise."""
    from trl import GRPOConfig

    settings = {"beta": 0.0, **settings}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return GRPOConfig(
            output_dir=tempfile.gettempdir(),
            use_cpu=True,
            bf16=False,
            report_to="none",
            per_device_train_batch_size=batch_size,
            num_generations=batch_size,
            **settings,
        )


def _loss_host(args, per_token_logps: torch.Tensor):
    """A GRPOTrainer holding what its loss reads, as TRL 1.16's `__init__` sets it from `args`, whose
    log-probabilities are `per_token_logps`."""
    from accelerate import Accelerator
    from trl import GRPOTrainer

    entropies = torch.ones_like(per_token_logps)  # read only for the entropy metric and mask (off here)

    class LossHost(library_compat.GRPOHooks, GRPOTrainer):
        def token_logps_and_entropies(self, *args, **kwargs):
            return per_token_logps, entropies, None

    host = object.__new__(LossHost)
    host.args = args
    host.accelerator = Accelerator(cpu=True)
    host.model = torch.nn.Linear(1, 1)  # only its `.training` flag is read: train mode
    host.loss_type = args.loss_type
    host.beta = args.beta
    host.epsilon_low = args.epsilon
    host.epsilon_high = args.epsilon_high if args.epsilon_high is not None else args.epsilon
    host.importance_sampling_level = args.importance_sampling_level
    host.top_entropy_quantile = args.top_entropy_quantile
    host.off_policy_mask_threshold = args.off_policy_mask_threshold
    host.use_vllm = args.use_vllm
    host.vllm_importance_sampling_correction = args.vllm_importance_sampling_correction
    host.max_completion_length = args.max_completion_length
    host.aux_loss_enabled = False
    library_compat.entropy_bonus_off(host)
    host.current_gradient_accumulation_steps = 1
    library_compat.start_step_metrics(host)
    return host


def trl_loss(
    per_token_logps: torch.Tensor,
    old_per_token_logps: torch.Tensor,
    advantages: torch.Tensor,
    completion_mask: torch.Tensor,
    **settings,
) -> tuple[float, dict[str, float]]:
    """TRL's loss for one micro-batch (the whole batch) and the metrics it logged (clip ratios, entropy).

    `settings` are GRPOConfig fields: loss_type, epsilon, epsilon_high, importance_sampling_level,
    max_completion_length, ...
    """
    batch_size, length = per_token_logps.shape
    args = trl_config(batch_size, **{"max_completion_length": length, **settings})
    host = _loss_host(args, per_token_logps)
    inputs = {
        "prompt_ids": torch.zeros(batch_size, 1, dtype=torch.long),
        "prompt_mask": torch.ones(batch_size, 1, dtype=torch.long),
        "completion_ids": torch.zeros(batch_size, length, dtype=torch.long),
        "completion_mask": completion_mask.long(),
        "advantages": advantages,
        "old_per_token_logps": old_per_token_logps,
        "num_items_in_batch": completion_mask.sum(),
    }
    loss = host.grpo_loss(host.model, inputs)
    metrics = {name: values[-1] for name, values in library_compat.step_metrics(host, "train").items()}
    return float(loss.detach()), metrics
