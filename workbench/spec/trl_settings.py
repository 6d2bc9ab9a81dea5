"""The GRPOConfig settings a RunConfig makes, under TRL's names.

One list for the training process (`trainer/run_pieces.py` adds the run
folder's own choices: output_dir, trackers, the device) and for the exported
training script (`insight/script_export.py`), so a script trains with every
setting its run used; TRL's vLLM fields and its reward weights (one per reward
function, then the reward model's) come from here too. Pure: no TRL import.
"""

from __future__ import annotations

from workbench.spec.config import RunConfig, reward_weights_for
from workbench.spec.generation import TRL_MODES

# RunConfig fields passed to GRPOConfig under the same name and value.
SAME_NAME_FIELDS = (
    "logging_steps",
    "save_steps",
    "save_total_limit",
    "max_steps",
    "num_train_epochs",
    "learning_rate",
    "lr_scheduler_type",
    "warmup_steps",
    "per_device_train_batch_size",
    "gradient_accumulation_steps",
    "num_generations",
    "steps_per_generation",
    "max_completion_length",
    "temperature",
    "top_p",
    "top_k",
    "repetition_penalty",
    "beta",
    "epsilon",
    "epsilon_high",
    "importance_sampling_level",
    "mask_truncated_completions",
    "top_entropy_quantile",
    "entropy_coef",
    "use_adaptive_entropy",
    "entropy_target",
    "loss_type",
    "scale_rewards",
    "num_iterations",
    "seed",
    "bf16",
    "gradient_checkpointing",
)


def grpo_settings(cfg: RunConfig) -> dict:
    """GRPOConfig keyword arguments for `cfg`'s training settings (not the output folder, trackers or device)."""
    settings = {name: getattr(cfg, name) for name in SAME_NAME_FIELDS}
    settings["reward_weights"] = trl_reward_weights(cfg)
    settings["save_strategy"] = "steps"
    # LoRA leaves most parameters frozen; DDP must not wait for their gradients
    settings["ddp_find_unused_parameters"] = False
    return settings


def trl_reward_weights(cfg: RunConfig) -> list[float]:
    """TRL's reward_weights: one per reward function, then the reward model's when there is one."""
    return reward_weights_for(cfg) + ([float(cfg.reward_model_weight)] if cfg.reward_model.strip() else [])


def trl_vllm_settings(cfg: RunConfig, server_url: str | None = None) -> dict:
    """GRPOConfig's vLLM fields: TRL's own modes switch `use_vllm` on (the server at `server_url`, when the run started one)."""
    mode = TRL_MODES.get(cfg.generation)
    if mode is None:
        return {"use_vllm": False}
    settings = {
        "use_vllm": True,
        "vllm_mode": mode,
        "vllm_gpu_memory_utilization": cfg.vllm_gpu_memory_utilization,
        "vllm_tensor_parallel_size": cfg.vllm_tensor_parallel_size,
        "vllm_max_model_length": cfg.vllm_max_model_len,
    }
    if mode == "server":
        settings["vllm_server_base_url"] = server_url or cfg.vllm_server_base_url.strip() or None
        settings["vllm_server_timeout"] = cfg.vllm_server_timeout
    return settings
