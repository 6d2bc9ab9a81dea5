"""The GRPOConfig settings a RunConfig makes, under TRL's names.

One list for the training process (`trainer/training.py` adds the run
folder's own choices: output_dir, trackers, the device) and for the exported
training script (`insight/script_export.py`), so a script trains with every
setting its run used. Pure: no TRL import.
"""

from __future__ import annotations

from workbench.spec.config import RunConfig, trl_reward_weights

# RunConfig fields passed to GRPOConfig under the same name and value.
SAME_NAME_FIELDS = (
    "logging_steps", "save_steps", "save_total_limit", "max_steps", "num_train_epochs", "learning_rate",
    "lr_scheduler_type", "warmup_steps", "per_device_train_batch_size", "gradient_accumulation_steps",
    "num_generations", "steps_per_generation", "max_completion_length", "temperature", "top_p", "top_k",
    "repetition_penalty", "beta", "epsilon", "epsilon_high", "importance_sampling_level",
    "mask_truncated_completions", "top_entropy_quantile", "loss_type", "scale_rewards", "num_iterations", "seed",
    "bf16", "gradient_checkpointing",
)


def grpo_settings(cfg: RunConfig) -> dict:
    """GRPOConfig keyword arguments for `cfg`'s training settings (not the output folder, trackers or device)."""
    settings = {name: getattr(cfg, name) for name in SAME_NAME_FIELDS}
    settings["reward_weights"] = trl_reward_weights(cfg)
    settings["save_strategy"] = "steps"
    # LoRA leaves most parameters frozen; DDP must not wait for their gradients
    settings["ddp_find_unused_parameters"] = False
    return settings
