"""How a run takes its speed levers: the speed choice made (or read back) before the model loads, the levers
attached to the built trainer, and what status.json says of both.

The levers themselves are trainer/levers.py; the choice and its probe are trainer/speed_choice.py and
trainer/speed_probe.py, which builds its trainer with `probe_trainer` here.
"""

from __future__ import annotations

from functools import partial
from pathlib import Path

from workbench.runstore import runfolder
from workbench.spec.config import RunConfig
from workbench.trainer import levers, speed_choice
from workbench.trainer.grpo_subclass import make_trainer_class
from workbench.trainer.recorder import StatusWriter
from workbench.trainer.run_pieces import (
    build_grpo_config,
    build_lora_config,
    build_reward_funcs,
    load_dataset_for,
    load_model_and_tokenizer,
)
from workbench.tuning.choice import LEVER_FIELDS


def probe_progress(status, line: str) -> None:
    """A speed probe's progress line: in the log, and in status.json, which the Train tab's bar shows."""
    print(f"[workbench] speed probe: {line}", flush=True)
    status.set(speed_probe=line)


def report_idle_levers(status: StatusWriter, speed_record: dict, problems: list[str]) -> None:
    """Say in status.json and the log that a lever attached for speed did not run (trainer/levers.not_taking_effect)."""
    status.set(speed_choice={**speed_record, "not_taking_effect": problems})
    print("[workbench] a speed lever did not take effect: " + "; ".join(problems), flush=True)


def probe_trainer(cfg: RunConfig, folder: Path):
    """A trainer built as a run's, writing nothing but into `folder`, for the speed probe (trainer/speed_probe.py)."""
    model, tokenizer = load_model_and_tokenizer(cfg)
    dataset = load_dataset_for(cfg, has_chat_template=tokenizer.chat_template is not None)
    trainer = make_trainer_class()(
        model=model,
        reward_funcs=build_reward_funcs(cfg),
        args=build_grpo_config(cfg, folder),
        train_dataset=dataset,
        processing_class=tokenizer,
        peft_config=build_lora_config(cfg),
    )
    trainer.completions_path = folder / runfolder.COMPLETIONS_FILE  # its rounds' records are kept, never written
    return trainer


def choose_speed(cfg: RunConfig, status: StatusWriter) -> dict:
    """The run's speed choice (status.json's `speed_choice`), made before the run's model loads: a probe loads its
    own, and frees it, when this machine has no choice yet."""
    status.set(state="tuning")
    _, speed_record = speed_choice.choose(cfg, partial(probe_progress, status), probe_trainer)
    status.set(state="loading_model", speed_choice=speed_record, speed_probe=None)
    return speed_record


def attach_levers(trainer, cfg: RunConfig, model_type: str, status: StatusWriter, speed_record: dict) -> None:
    """Attach the levers `speed_record` chose to the built trainer, say in status.json what each decided, and check
    at the first steps that each attached lever ran."""
    lever_cfg = cfg.with_changes(**{k: v for k, v in speed_record.items() if k in LEVER_FIELDS})
    attached = levers.attach(trainer, lever_cfg, model_type, tuned=cfg.merged_generation == "auto")
    status.set(**speed_choice.explained(attached, cfg, speed_record))
    trainer.add_callback(levers.took_effect_check(trainer, partial(report_idle_levers, status, speed_record)))
