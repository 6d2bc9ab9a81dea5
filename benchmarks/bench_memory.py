"""Check the memory estimate against the real peak memory of short CPU GRPO runs.

For each setting, a fresh Python process trains LoRA GRPO with TRL's
GRPOTrainer on the bundled SmolLM2-135M-Instruct (float32, CPU) for two
optimizer steps on the demo task and reports its peak resident memory
(`ru_maxrss`). Completions are forced to their full max_completion_length
(`min_new_tokens`), because the estimate is for completions of max length.
The script prints, per setting, the estimate, the measurement and the
relative error, and exits non-zero when one is outside ±30 %.

    .venv/bin/python benchmarks/bench_memory.py            # the three settings
    .venv/bin/python benchmarks/bench_memory.py --only g4-len32 --json

Each run takes about a minute on a 2-core CPU (longer when the CPU is shared).
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

# Target agreement between estimate and measurement.
TOLERANCE = 0.30
# Settings: name -> GRPO values. One prompt per step (batch = G), LoRA r=16 on
# all linear layers, beta 0.04 as the workbench's default.
SETTINGS = {
    "g4-len32": dict(num_generations=4, per_device_train_batch_size=4, max_completion_length=32),
    "g8-len48": dict(num_generations=8, per_device_train_batch_size=8, max_completion_length=48),
    "g8-len128": dict(num_generations=8, per_device_train_batch_size=8, max_completion_length=128),
}
COMMON = dict(lora_r=16, lora_target_modules="all-linear", beta=0.04, gradient_accumulation_steps=1)
TRAIN_STEPS = 2


def _rss_bytes() -> int:
    """Current resident memory of this process (Linux /proc)."""
    with open("/proc/self/statm") as handle:
        pages = int(handle.read().split()[1])
    return pages * resource.getpagesize()


def run_child(setting: dict) -> dict:
    """Train one short run in this process and return what was measured."""
    import warnings

    import torch
    import transformers
    from peft import LoraConfig
    from trl import GRPOConfig, GRPOTrainer

    from workbench.spec.models import bundled_model_dir
    from workbench.spec.rewards import get_reward
    from workbench.spec.tasks import load_task_dataset

    imports_rss = _rss_bytes()
    torch.manual_seed(0)
    model_dir = str(bundled_model_dir())
    tokenizer = transformers.AutoTokenizer.from_pretrained(model_dir)
    dataset = load_task_dataset("demo", size=16)
    prompt_tokens = max(len(tokenizer.apply_chat_template(row["prompt"], add_generation_prompt=True, tokenize=True,
                                                           return_dict=True)["input_ids"])
                        if not isinstance(row["prompt"], str) else len(tokenizer(row["prompt"])["input_ids"])
                        for row in dataset)
    g = setting["num_generations"]
    length = setting["max_completion_length"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        args = GRPOConfig(
            output_dir="/tmp/bench-memory-unused", report_to="none", use_cpu=True, bf16=False,
            gradient_checkpointing=False, save_strategy="no", logging_steps=1, disable_tqdm=True, seed=0,
            learning_rate=1e-3, max_steps=TRAIN_STEPS, num_generations=g,
            per_device_train_batch_size=setting["per_device_train_batch_size"],
            gradient_accumulation_steps=setting["gradient_accumulation_steps"], beta=setting["beta"],
            max_completion_length=length, generation_kwargs={"min_new_tokens": length},
        )
        lora = LoraConfig(r=setting["lora_r"], lora_alpha=2 * setting["lora_r"],
                          target_modules=setting["lora_target_modules"], task_type="CAUSAL_LM")
        model = transformers.AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
        loaded_rss = _rss_bytes()
        trainer = GRPOTrainer(model=model, reward_funcs=get_reward("brevity"), args=args, train_dataset=dataset,
                              processing_class=tokenizer, peft_config=lora)
        trainer_rss = _rss_bytes()
        started = time.perf_counter()
        trainer.train()
    lengths = [r.get("completions/max_length") for r in trainer.state.log_history if "completions/max_length" in r]
    return {
        "imports_rss": imports_rss, "loaded_rss": loaded_rss, "trainer_rss": trainer_rss,
        "peak_rss": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
        "max_prompt_tokens": prompt_tokens, "completion_max_lengths": lengths,
        "train_seconds": round(time.perf_counter() - started, 1),
    }


def measure(name: str, timeout: float = 900) -> dict:
    """Run one setting in a fresh process (so peaks do not mix) and return its measurement."""
    setting = {**COMMON, **SETTINGS[name]}
    result = subprocess.run([sys.executable, __file__, "--child", json.dumps(setting)], capture_output=True,
                            text=True, timeout=timeout, cwd=REPO)
    if result.returncode != 0:
        raise RuntimeError(f"setting {name}: the training process failed:\n{result.stderr[-3000:]}")
    return {"setting": setting, **json.loads(result.stdout.strip().splitlines()[-1])}


def compare(name: str) -> dict:
    """Measure one setting and set the estimate beside it."""
    from workbench.spec.memory import estimate_memory, from_model_dir
    from workbench.spec.models import bundled_model_dir

    measured = measure(name)
    setting = measured["setting"]
    estimate = estimate_memory(
        from_model_dir(bundled_model_dir()), device="cpu", dtype_bytes=4,
        max_prompt_length=measured["max_prompt_tokens"],
        **{k: v for k, v in setting.items()},
    )
    error = estimate.total_bytes / measured["peak_rss"] - 1
    return {"name": name, "estimate_bytes": estimate.total_bytes, "measured_bytes": measured["peak_rss"],
            "relative_error": error, "within_tolerance": abs(error) <= TOLERANCE, "measured": measured,
            "breakdown": estimate.breakdown()}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", choices=sorted(SETTINGS), action="append", help="run only these settings")
    parser.add_argument("--json", action="store_true", help="print one JSON object per setting")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(run_child(json.loads(args.child))))
        return 0
    rows = [compare(name) for name in (args.only or SETTINGS)]
    for row in rows:
        if args.json:
            print(json.dumps(row))
            continue
        m = row["measured"]
        print(f"{row['name']:>10}: estimate {row['estimate_bytes'] / 2**30:5.2f} GiB, measured peak RSS "
              f"{row['measured_bytes'] / 2**30:5.2f} GiB, error {row['relative_error']:+.0%}  "
              f"(prompt {m['max_prompt_tokens']} tokens, runtime after imports {m['imports_rss'] / 2**30:.2f} GiB, "
              f"after model load {m['loaded_rss'] / 2**30:.2f} GiB, {m['train_seconds']} s)")
    return 0 if all(row["within_tolerance"] for row in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
