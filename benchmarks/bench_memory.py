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
    .venv/bin/python benchmarks/bench_memory.py --device cuda    # on a GPU: the card's peak, within ±15 %

Each run takes about a minute on a 2-core CPU (longer when the CPU is shared). With `--device cuda`
the run trains on the first GPU and the measurement is the card's used memory above what was in use
before (NVML, sampled by workbench/jobs/gpu_watch.py: the CUDA context, torch's reserve and all),
against the estimate for `device="cuda"`; tests/test_gpu.py runs it (`make gpu-test`). On a GPU each
setting also records torch's peak reserved and allocated memory and each phase's own peak
(`watch_cuda_phases`): what the estimate's terms were checked against on an H100
(tests/data/gpu_memory_h100.json).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

# Target agreement between estimate and measurement, per device.
TOLERANCE = {"cpu": 0.30, "cuda": 0.15}
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

    from workbench.sources.model_files import bundled_model_dir
    from workbench.spec.rewards import get_reward
    from workbench.spec.tasks import load_task_dataset

    imports_rss = _rss_bytes()
    torch.manual_seed(0)
    model_dir = str(bundled_model_dir())
    tokenizer = transformers.AutoTokenizer.from_pretrained(model_dir)
    dataset = load_task_dataset("demo", size=16)
    prompt_tokens = max(
        len(
            tokenizer.apply_chat_template(row["prompt"], add_generation_prompt=True, tokenize=True, return_dict=True)[
                "input_ids"
            ]
        )
        if not isinstance(row["prompt"], str)
        else len(tokenizer(row["prompt"])["input_ids"])
        for row in dataset
    )
    g = setting["num_generations"]
    length = setting["max_completion_length"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        args = GRPOConfig(
            output_dir="/tmp/bench-memory-unused",
            report_to="none",
            use_cpu=setting["device"] == "cpu",
            bf16=False,
            gradient_checkpointing=False,
            save_strategy="no",
            logging_steps=1,
            disable_tqdm=True,
            seed=0,
            learning_rate=1e-3,
            max_steps=TRAIN_STEPS,
            num_generations=g,
            per_device_train_batch_size=setting["per_device_train_batch_size"],
            gradient_accumulation_steps=setting["gradient_accumulation_steps"],
            beta=setting["beta"],
            max_completion_length=length,
            generation_kwargs={"min_new_tokens": length},
        )
        lora = LoraConfig(
            r=setting["lora_r"],
            lora_alpha=2 * setting["lora_r"],
            target_modules=setting["lora_target_modules"],
            task_type="CAUSAL_LM",
        )
        model = transformers.AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
        loaded_rss = _rss_bytes()
        trainer = GRPOTrainer(
            model=model,
            reward_funcs=get_reward("brevity"),
            args=args,
            train_dataset=dataset,
            processing_class=tokenizer,
            peft_config=lora,
        )
        trainer_rss = _rss_bytes()
        phase_peaks, run_peak = watch_cuda_phases(trainer) if setting["device"] == "cuda" else ({}, None)
        started = time.perf_counter()
        trainer.train()
    lengths = [r.get("completions/max_length") for r in trainer.state.log_history if "completions/max_length" in r]
    cuda_peak = torch.cuda.max_memory_reserved() if setting["device"] == "cuda" else None
    return {
        "cuda_peak_reserved": cuda_peak,
        "cuda_peak_allocated": run_peak() if run_peak else None,
        "cuda_phase_peaks": phase_peaks,
        "imports_rss": imports_rss,
        "loaded_rss": loaded_rss,
        "trainer_rss": trainer_rss,
        "peak_rss": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
        "max_prompt_tokens": prompt_tokens,
        "completion_max_lengths": lengths,
        "train_seconds": round(time.perf_counter() - started, 1),
    }


def watch_cuda_phases(trainer):
    """Wrap the trainer's phases to record how much CUDA memory each allocated, from torch's own counters
    (exact where NVML's quarter-second samples are not). Returns (phases, run_peak).

    `phases` fills in as the run goes: for "generation", "scoring" (no-grad log-probs), "policy forward"
    (the loss), "backward" and "training" (a whole micro-batch step, the rollout inside it included), the
    call that reached the highest allocation: {"held": allocated as it began, "rise": its peak above that}.
    `run_peak()` is the most allocated at any moment of the run. Phases nest (a training step generates)
    and each window resets torch's peak counter, so every open window, and the run's own, folds the
    counter into its running peak before a reset.
    """
    import torch

    phases: dict = {}
    run_window = {"held": 0, "peak": 0}
    open_windows: list[dict] = [run_window]  # {"held": bytes at entry, "peak": absolute peak seen so far}

    def fold() -> None:
        current = torch.cuda.max_memory_allocated()
        for window in open_windows:
            window["peak"] = max(window["peak"], current)

    def watched(phase: str, method):
        def wrapper(*args, **kwargs):
            torch.cuda.synchronize()
            fold()
            held = torch.cuda.memory_allocated()
            window = {"held": held, "peak": held}
            open_windows.append(window)
            torch.cuda.reset_peak_memory_stats()
            try:
                return method(*args, **kwargs)
            finally:
                torch.cuda.synchronize()
                fold()
                open_windows[:] = [w for w in open_windows if w is not window]  # by identity: equal dicts nest
                best = phases.get(phase)
                if best is None or window["peak"] > best["held"] + best["rise"]:
                    phases[phase] = {"held": held, "rise": window["peak"] - held}

        return wrapper

    def run_peak() -> int:
        torch.cuda.synchronize()
        fold()
        return run_window["peak"]

    scorer = trainer._get_per_token_logps_and_entropies
    watched_scorer = watched("scoring", scorer)
    trainer._generate = watched("generation", trainer._generate)
    trainer.training_step = watched("training", trainer.training_step)
    trainer.compute_loss = watched("policy forward", trainer.compute_loss)
    trainer.accelerator.backward = watched("backward", trainer.accelerator.backward)
    trainer._get_per_token_logps_and_entropies = lambda *a, **k: (
        watched_scorer(*a, **k) if not torch.is_grad_enabled() else scorer(*a, **k)
    )
    return phases, run_peak


def measure(name: str, device: str = "cpu", timeout: float = 900, idle_used: dict | None = None) -> dict:
    """Run one setting in a fresh process (so peaks do not mix) and return its measurement.

    On `cuda` the peak is the first GPU's used memory above its baseline, watched from this process;
    `idle_used` (each GPU's used memory with nothing running) is waited for first, so the last
    setting's process, still handing its memory back, is not counted into this one's baseline."""
    from workbench.jobs.gpu_watch import GpuMemoryWatch, wait_for_release

    setting = {**COMMON, **SETTINGS[name], "device": device}
    if device == "cuda" and idle_used is not None and not wait_for_release(idle_used, timeout_s=120):
        print(
            f"setting {name}: GPU memory is still above its level when the benchmark began; the peak "
            "counts that memory out",
            file=sys.stderr,
        )
    # NVML counts GPUs in PCI bus order; CUDA does too with this set, so GPU 0 is the same card for both
    env = {**os.environ, "CUDA_DEVICE_ORDER": "PCI_BUS_ID"} if device == "cuda" else None
    with GpuMemoryWatch() as watch:
        result = subprocess.run(
            [sys.executable, __file__, "--child", json.dumps(setting)],
            capture_output=True,
            text=True,
            timeout=timeout,
            cwd=REPO,
            env=env,
        )
    if result.returncode != 0:
        raise RuntimeError(f"setting {name}: the training process failed:\n{result.stderr[-3000:]}")
    measured = {"setting": setting, **json.loads(result.stdout.strip().splitlines()[-1])}
    measured["peak"] = watch.peak_bytes().get(0, 0) if device == "cuda" else measured["peak_rss"]
    return measured


def compare(name: str, device: str = "cpu", idle_used: dict | None = None) -> dict:
    """Measure one setting and set the estimate beside it."""
    from workbench.sources.model_files import bundled_model_dir
    from workbench.spec.memory import estimate_memory, from_model_dir

    measured = measure(name, device, idle_used=idle_used)
    setting = {k: v for k, v in measured["setting"].items() if k != "device"}
    estimate = estimate_memory(
        from_model_dir(bundled_model_dir()),
        device=device,
        dtype_bytes=4,
        max_prompt_length=measured["max_prompt_tokens"],
        **setting,
    )
    error = estimate.total_bytes / measured["peak"] - 1
    return {
        "name": name,
        "device": device,
        "estimate_bytes": estimate.total_bytes,
        "measured_bytes": measured["peak"],
        "relative_error": error,
        "within_tolerance": abs(error) <= TOLERANCE[device],
        "measured": measured,
        "breakdown": estimate.breakdown(),
    }


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", choices=sorted(SETTINGS), action="append", help="run only these settings")
    parser.add_argument("--json", action="store_true", help="print one JSON object per setting")
    parser.add_argument(
        "--device",
        choices=("cpu", "cuda"),
        default="cpu",
        help="cuda: train on the first GPU and measure the card (NVML)",
    )
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(run_child(json.loads(args.child))))
        return 0
    from workbench.jobs.gpu_watch import used_bytes_per_gpu

    idle_used = used_bytes_per_gpu() if args.device == "cuda" else None
    rows = [compare(name, args.device, idle_used) for name in (args.only or SETTINGS)]
    for row in rows:
        if args.json:
            print(json.dumps(row))
            continue
        m = row["measured"]
        what = "peak RSS" if row["device"] == "cpu" else "GPU 0 peak (NVML)"
        print(
            f"{row['name']:>10}: estimate {row['estimate_bytes'] / 2**30:5.2f} GiB, measured {what} "
            f"{row['measured_bytes'] / 2**30:5.2f} GiB, error {row['relative_error']:+.0%}  "
            f"(prompt {m['max_prompt_tokens']} tokens, runtime after imports {m['imports_rss'] / 2**30:.2f} GiB, "
            f"after model load {m['loaded_rss'] / 2**30:.2f} GiB, {m['train_seconds']} s)"
        )
    return 0 if all(row["within_tolerance"] for row in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
