"""GRPO with TRL alone: the baseline the workbench's step times are compared with.

    python benchmarks/bare_trl.py '{"model": "smollm2-135m-instruct", "task": "demo", ...}' OUT_DIR

What a user would write with TRL 1.16 and PEFT and nothing of the workbench's
run machinery: the same model, data, reward functions and settings, no run
folder, no callbacks of ours, no completion capture, no checkpoints. Only the
model path, the task's data and its reward functions come from the workbench,
so both sides train on exactly the same thing.

It writes OUT_DIR/log.jsonl, one line per logged step (TRL's metrics plus the
wall-clock `time` it was logged at, so a benchmark can tell when the reward
rose), and OUT_DIR/summary.json at the end.

`"trl_bf16"` in the settings: false (the default here) trains in float32, as the workbench does on CPU;
null leaves GRPOConfig's own default, which is bf16 autocast over float32 weights wherever torch
supports bf16 (this CPU included): what a user who writes no precision gets.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path


def main(settings: dict, out: Path) -> None:
    from peft import LoraConfig
    from transformers import AutoModelForCausalLM, AutoTokenizer, TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    from workbench.sources.model_files import resolve_model
    from workbench.spec.rewards import REWARDS
    from workbench.spec.tasks import TASKS, load_task_dataset

    out.mkdir(parents=True, exist_ok=True)
    log_path = out / "log.jsonl"

    class WallClockLog(TrainerCallback):
        def on_log(self, args, state, control, logs=None, **kwargs):
            if logs and "reward" in logs:
                with open(log_path, "a", encoding="utf-8") as handle:
                    handle.write(json.dumps({**logs, "step": state.global_step, "time": time.time()}) + "\n")

    path = resolve_model(settings["model"])
    model = AutoModelForCausalLM.from_pretrained(path)
    tokenizer = AutoTokenizer.from_pretrained(path)
    task = TASKS[settings["task"]]
    trainer = GRPOTrainer(
        model=model,
        processing_class=tokenizer,
        reward_funcs=[REWARDS[name] for name in task.reward_names],
        train_dataset=load_task_dataset(settings["task"], seed=settings["seed"]),
        peft_config=LoraConfig(
            r=settings["lora_r"],
            lora_alpha=settings["lora_alpha"],
            lora_dropout=settings["lora_dropout"],
            target_modules="all-linear",
            task_type="CAUSAL_LM",
        ),
        args=GRPOConfig(
            output_dir=str(out / "trl"),
            report_to="none",
            disable_tqdm=True,
            save_strategy="no",
            logging_steps=1,
            gradient_checkpointing=False,
            use_cpu=True,
            **({} if settings.get("trl_bf16", False) is None else {"bf16": bool(settings.get("trl_bf16", False))}),
            **{name: settings[name] for name in GRPO_SETTINGS},
            reward_weights=list(task.reward_weights),
            ddp_find_unused_parameters=False,
        ),
        callbacks=[WallClockLog()],
    )
    runtime = trainer.train().metrics["train_runtime"]
    step_times = [h["step_time"] for h in trainer.state.log_history if "step_time" in h]
    (out / "summary.json").write_text(
        json.dumps({"step_time": step_times, "train_runtime": runtime, "steps": trainer.state.global_step})
    )


# RunConfig fields passed to GRPOConfig under the same names, so both sides train alike.
GRPO_SETTINGS = (
    "max_steps",
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
    "beta",
    "epsilon",
    "loss_type",
    "scale_rewards",
    "num_iterations",
    "seed",
)
# Every RunConfig field this script reads: callers pass exactly these.
SETTINGS = ("model", "task", "lora_r", "lora_alpha", "lora_dropout", *GRPO_SETTINGS)

if __name__ == "__main__":
    main(json.loads(sys.argv[1]), Path(sys.argv[2]))
