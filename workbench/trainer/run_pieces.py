"""The pieces a run's trainer is built from, each from one RunConfig: the model and its tokenizer, the prompts, the
rewards, the LoRA config and GRPOConfig.

trainer/training.py assembles them into a run; the speed probe, the signal check and a saved checkpoint's
evaluation build the same pieces for their own trainer or model.
"""

from __future__ import annotations

from pathlib import Path

from workbench.sources.gpus import runs_on_cpu_here
from workbench.spec import trackers
from workbench.spec.config import RunConfig, reward_names_for
from workbench.spec.trl_settings import grpo_settings, trl_vllm_settings


def load_model_and_tokenizer(cfg: RunConfig):
    """The base model (float32, or bfloat16 when cfg.bf16) and its tokenizer."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from workbench.sources.model_files import (
        ModelError,
        hub_unreachable_message,
        looks_like_path,
        resolve_model,
    )

    path = resolve_model(cfg.model)
    try:
        tokenizer = AutoTokenizer.from_pretrained(path)
        model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.bfloat16 if cfg.bf16 else torch.float32)
    except OSError as exc:
        if not Path(path).is_dir() and not looks_like_path(path):
            raise ModelError(hub_unreachable_message(cfg.model)) from exc
        raise
    if tokenizer.pad_token is None:  # GRPO pads completions; many base models ship without a pad token
        tokenizer.pad_token = tokenizer.eos_token
    return model, tokenizer


def load_dataset_for(cfg: RunConfig, has_chat_template: bool = True):
    """The prompts to train on, as TRL reads them: the named data's split (or the task's own rows), its columns
    mapped (`prompt`, `solution`) and text prompts rendered as the config's chat_template says
    (`has_chat_template`: whether the model's tokenizer has one)."""
    from workbench.spec.config import ConfigError, ConfigProblem, column_mapping, data_field
    from workbench.spec.data_mapping import map_row, resolve_chat_template

    field_name, name = data_field(cfg)
    if name:
        from workbench.sources import hub_datasets

        source = hub_datasets.locate(name, field_name)
        dataset = hub_datasets.load_split(source, cfg.dataset_config, hub_datasets.parse_split(cfg.dataset_train_split))
    else:
        from workbench.spec.tasks import load_task_dataset

        dataset = load_task_dataset(cfg.task, seed=cfg.seed)
    rule = resolve_chat_template(cfg.chat_template, has_chat_template)[1]
    if rule:  # a hub model's tokenizer is read only now: check_config could not see it
        raise ConfigError([ConfigProblem("chat_template", rule, "set chat_template=auto, or choose a chat model")])
    mapping = column_mapping(cfg, has_chat_template)
    return dataset.map(lambda row: map_row(row, mapping))


def build_reward_funcs(cfg: RunConfig) -> list:
    """TRL's `reward_funcs` for the run: its reward functions, each guarded, then its reward model's folder or
    hub id (a str, which TRL loads as AutoModelForSequenceClassification with num_labels=1 and its own tokenizer)."""
    from functools import partial

    from workbench.sources.model_files import resolve_model
    from workbench.spec.rewards import resolve_rewards
    from workbench.trainer.trl_reward_builders import build_trl_reward

    funcs = resolve_rewards(
        reward_names_for(cfg),
        cfg.reward_file or None,
        timeout_s=cfg.reward_timeout_s or None,
        training=True,
        build_trl=partial(build_trl_reward, cfg),
        errors=cfg.reward_errors,
        failure_score=cfg.reward_failure_score,
    )
    return funcs + ([resolve_model(cfg.reward_model.strip())] if cfg.reward_model.strip() else [])


def build_lora_config(cfg: RunConfig):
    from peft import LoraConfig

    targets = cfg.lora_target_modules.strip()
    return LoraConfig(
        r=cfg.lora_r,
        lora_alpha=cfg.lora_alpha,
        lora_dropout=cfg.lora_dropout,
        target_modules=targets if targets == "all-linear" else [t.strip() for t in targets.split(",") if t.strip()],
        task_type="CAUSAL_LM",
    )


def build_grpo_config(cfg: RunConfig, run_dir: Path, show_progress: bool = False, server_url: str | None = None):
    """GRPOConfig from the RunConfig: same names, plus the run folder's fixed choices.

    `server_url`: the vLLM server the run started, for generation=trl-server.
    """
    from trl import GRPOConfig

    return GRPOConfig(
        output_dir=str(run_dir),
        # the run folder is the record; trackers the config names get TRL's metrics too, written inside it
        report_to=list(cfg.report_to) or "none",
        run_name=run_dir.name,
        project=trackers.TRACKIO_PROJECT,
        trackio_static_space_id=False,  # trackio stays local: no Space is made or synced, ever
        disable_tqdm=not show_progress,
        **grpo_settings(cfg),
        # held-out evaluation is the run's own callback (trainer/evaluator.py): TRL's eval loop never runs beside it
        eval_strategy="no",
        use_cpu=runs_on_cpu_here(cfg.device),
        **trl_vllm_settings(cfg, server_url),
    )
