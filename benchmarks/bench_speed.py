"""The speed levers of a GRPO step, each alone and combined, against bare TRL: one table.

    python benchmarks/bench_speed.py                       # every row, 8 steps each, two runs per row
    python benchmarks/bench_speed.py --rows bare-fp32 bf16 --steps 6 --runs 1
    python benchmarks/bench_speed.py --device cuda --steps 5 --runs 1   # the GPU rows, on GPU 0
    python benchmarks/bench_speed.py --device cuda --model DIR          # another model (benchmarks/random_model.py)

Each row trains the demo task (the bundled SmolLM2-135M-Instruct, its settings, held-out evaluation off
so that only training steps are timed) for `--steps` steps with the same seed, so every row trains on the
same questions in the same order. Rows:

- `bare-fp32`: benchmarks/bare_trl.py, TRL and PEFT alone in float32 (the workbench's CPU default precision);
- `bare-trl-defaults`: the same script with GRPOConfig's own precision default, bf16 autocast over float32
  weights wherever torch supports bf16, this CPU included: what a user who writes no precision gets;
- `workbench`: `python -m workbench train` sampling and scoring as bare TRL does (`merged_generation=no`,
  `shared_prompt_pass=no`; float32); the rows after it turn one lever on at a time;
- `bf16`: the workbench's `bf16=true`, which loads the weights in bfloat16 (PEFT keeps the LoRA weights
  and so AdamW in float32) and turns on TRL's bf16 autocast: the field's own meaning, not TRL's;
- `merged-fp32`, `merged-bf16`: `merged_generation`, each round sampled from a plain copy of the policy with
  the LoRA update merged in (workbench/trainer/generation_copy.py), in float32 or bfloat16;
- `merged-fp32-packed`: the float32 copy decoding through MKL's packed GEMM (`packed_decode`,
  workbench/trainer/packed_decode.py); `merged-fp32` has it off;
- `bf16+merged-bf16`: the two together;
- `shared-prompt`: `shared_prompt_pass`, each prompt run once per group in the reference pass and the
  policy's forward and backward, only completion tokens through the vocabulary
  (workbench/trainer/prompt_sharing.py);
- `defaults`: what a run gets with no options: the levers this machine's speed probe chose for the run's model
  and shape (workbench/tuning/; the run measures them at its start when none is kept, outside the timed steps);
  `defaults-plain-matmul` is that with `packed_decode=no`;
- `merged-bf16+shared`: a merged bfloat16 copy samples and the shared prompt pass scores.

`--device cuda` runs the GPU kit's settings (G = 8 completions of up to 64 tokens, bf16 weights, GPU 0) and,
unless `--rows` says otherwise, the rows `workbench`, `merged-bf16`, `shared-prompt`, `merged-bf16+shared`;
it adds each row's GPU peak (NVML, above the GPU's memory before the first run) and the trainer's peak
allocated memory, and waits for each run's GPU memory to come back before the next one starts.

For each row it prints the median `step_time` (TRL's, first step left out: it pays one-off costs), that
time as a multiple of the faster bare row, the peak RSS of the training process tree, and the mean reward
over the steps (same questions in every row, so rows compare; the spread between a row's runs is the
noise). Rows run in turn, round by round, so a change in the machine's load hits every row alike. Only a
quiet machine gives figures to quote: quote the load average with them.

The table is appended to benchmarks/results/bench_speed.jsonl (benchmarks/results_file.py: with the CPU, its kernel
flags, cores, library versions, load average, date and command; `table_figures` gives each row's fields). The speed
documentation quotes those records with the CPU each came from; the older records there were imported from figures
measured before this file existed (their note says so).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

import results_file  # noqa: E402  (same folder)
from bench_training import run_and_watch, run_bare_trl  # noqa: E402

from workbench.jobs import gpu_watch  # noqa: E402
from workbench.sources.gpus import cpu_threads  # noqa: E402
from workbench.spec.config import RunConfig  # noqa: E402

GB = 2**30
# row name -> (what it is, RunConfig changes); bare rows add the bare script's precision
ROWS = {
    "bare-fp32": ("bare TRL, float32", {}),
    "bare-trl-defaults": ("bare TRL, GRPOConfig's default precision (bf16 autocast)", {}),
    "workbench": (
        "workbench, TRL's sampling and scoring (both levers off)",
        {"merged_generation": "no", "shared_prompt_pass": "no"},
    ),
    "bf16": (
        "workbench, bf16=true (bf16 weights, fp32 LoRA)",
        {"bf16": True, "merged_generation": "no", "shared_prompt_pass": "no"},
    ),
    "merged-fp32": (
        "a merged float32 copy samples",
        {"merged_generation": "float32", "shared_prompt_pass": "no", "packed_decode": "no"},
    ),
    "merged-fp32-packed": (
        "a merged float32 copy samples through MKL's packed GEMM",
        {"merged_generation": "float32", "shared_prompt_pass": "no", "packed_decode": "yes"},
    ),
    "merged-bf16": ("a merged bfloat16 copy samples", {"merged_generation": "bfloat16", "shared_prompt_pass": "no"}),
    "bf16+merged-bf16": (
        "bf16 weights, merged bfloat16 copy",
        {"bf16": True, "merged_generation": "bfloat16", "shared_prompt_pass": "no"},
    ),
    "shared-prompt": ("each prompt scored once per group", {"merged_generation": "no", "shared_prompt_pass": "yes"}),
    "defaults-plain-matmul": (
        "workbench defaults but packed_decode=no",
        {"merged_generation": "auto", "shared_prompt_pass": "auto", "packed_decode": "no"},
    ),
    "defaults": (
        "workbench defaults (`auto`: what this machine's speed probe chose)",
        {"merged_generation": "auto", "shared_prompt_pass": "auto", "packed_decode": "auto"},
    ),
    "merged-bf16+shared": (
        "a merged bfloat16 copy samples, each prompt scored once",
        {"merged_generation": "bfloat16", "shared_prompt_pass": "yes"},
    ),
}
BARE_PRECISION = {"bare-fp32": False, "bare-trl-defaults": None}
CPU_ROWS = [row for row in ROWS if row != "merged-bf16+shared"]
GPU_ROWS = ["workbench", "merged-bf16", "shared-prompt", "merged-bf16+shared"]
# the GPU kit's run (tests/test_gpu.py): G = 8 completions of up to 64 tokens, bf16 weights, GPU 0
GPU_SETTINGS = dict(
    device="cuda", gpu_ids=[0], per_device_train_batch_size=8, num_generations=8, max_completion_length=64, bf16=True
)


def demo_config(steps: int, device: str = "cpu", model: str | None = None) -> RunConfig:
    """The demo as `python -m workbench train` starts it, for `steps` steps, no held-out evaluation."""
    settings = GPU_SETTINGS if device == "cuda" else dict(device="cpu")
    config = RunConfig.for_task("demo", max_steps=steps, save_steps=10_000, eval_strategy="no", **settings)
    return config.with_changes(model=model) if model else config


def run_bare(config: RunConfig, precision: bool | None, workdir: Path) -> dict:
    """bare_trl.py on `config`'s settings (bench_training's runner): step times, rewards and peak RSS."""
    result = run_bare_trl(config, workdir, trl_bf16=precision)
    return {
        "step_time": [m["step_time"] for m in result["log"]],
        "reward": [m["reward"] for m in result["log"]],
        "peak_rss": result["peak_rss"],
    }


def run_workbench(config: RunConfig, runs_dir: Path, idle_gpus: dict[int, int] | None = None) -> dict:
    """`python -m workbench train` in the background; on a GPU, its NVML peak above `idle_gpus` too."""
    if idle_gpus is None:
        result = run_and_watch(config, runs_dir, time_limit=3600)
    else:
        # the last run's process may still hold its memory: a watch begun now would take it for the baseline
        if not gpu_watch.wait_for_release(idle_gpus, timeout_s=120):
            print("# the last run's GPU memory did not come back in 120 s: this row's GPU peak is low", flush=True)
        with gpu_watch.GpuMemoryWatch() as watch:
            result = run_and_watch(config, runs_dir, time_limit=3600)
    if result["state"] != "finished":
        raise SystemExit(f"workbench run {result['state']}: {result['error']}")
    steps = [m for m in result["metrics"] if "step_time" in m]
    figures = {
        "step_time": [m["step_time"] for m in steps],
        "reward": [m["reward"] for m in steps],
        "peak_rss": result["peak_rss"],
    }
    if idle_gpus is not None:
        figures["gpu_peak"] = max(watch.peak_bytes().values(), default=0)
        figures["allocated_peak_gib"] = max((m.get("gpu/peak_allocated_gib") or 0 for m in steps), default=0)
    return figures


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--rows",
        nargs="+",
        choices=list(ROWS),
        help=f"rows to run (default: {' '.join(CPU_ROWS)}; with --device cuda: {' '.join(GPU_ROWS)})",
    )
    parser.add_argument("--steps", type=int, default=8, help="optimizer steps per run (default 8)")
    parser.add_argument("--runs", type=int, default=2, help="runs per row (default 2)")
    parser.add_argument(
        "--device",
        choices=["cpu", "cuda"],
        default="cpu",
        help="cpu (default), or cuda: the GPU kit's settings on GPU 0",
    )
    parser.add_argument("--model", help="another model than the bundled one (a name or a model folder)")
    args = parser.parse_args(argv)
    rows = args.rows or (GPU_ROWS if args.device == "cuda" else CPU_ROWS)
    idle_gpus = gpu_watch.used_bytes_per_gpu() if args.device == "cuda" else None

    results: dict[str, list[dict]] = {row: [] for row in rows}
    with tempfile.TemporaryDirectory(prefix="bench-speed-") as tmp:
        for round_index in range(args.runs):
            order = rows if round_index % 2 == 0 else list(reversed(rows))
            for row in order:
                config = demo_config(args.steps, args.device, args.model).with_changes(**ROWS[row][1])
                workdir = Path(tmp) / f"{row}-{round_index}"
                result = (
                    run_bare(config, BARE_PRECISION[row], workdir)
                    if row in BARE_PRECISION
                    else run_workbench(config, workdir, idle_gpus)
                )
                results[row].append(result)
                print(
                    f"# {row} run {round_index + 1}: median step {statistics.median(result['step_time'][1:]):.2f} s, "
                    f"mean reward {statistics.mean(result['reward']):.3f}",
                    flush=True,
                )

    figures = table_figures(
        results, args.steps, args.runs, describe_device(args.device), args.model or "smollm2-135m-instruct"
    )
    print(
        f"\nload average {os.getloadavg()[0]:.2f}; {args.steps} steps x {args.runs} runs per row; "
        f"{os.cpu_count()} CPUs, {os.environ.get('OMP_NUM_THREADS') or cpu_threads(1)} threads per run; "
        f"model {figures['model']}; {figures['device']}"
    )
    against = "x bare" if figures["baseline"] in BARE_PRECISION else "x row 1"
    gpu = " GPU peak  allocated" if args.device == "cuda" else ""
    print(f"{'row':<20} {'median step':>12} {against:>8} {'peak RSS':>9}{gpu}  mean reward per run   what")
    for line in figures["rows"]:
        rewards = ", ".join(f"{reward:.3f}" for reward in line["mean_reward_per_run"])
        memory = ""
        if args.device == "cuda":
            memory = f" {line['gpu_peak_gib']:>6.2f} GB {line['allocated_peak_gib']:>7.2f} GB"
        print(
            f"{line['row']:<20} {line['median_step_s']:>10.2f} s {line['x_baseline']:>8.2f} "
            f"{line['peak_rss_gib']:>7.2f} GB{memory}  {rewards:<20}  {line['what']}"
        )
    print(f"recorded in {results_file.record('bench_speed', figures)}")
    return 0


def table_figures(results: dict[str, list[dict]], steps: int, runs: int, device: str, model: str) -> dict:
    """The table as benchmarks/results/bench_speed.jsonl keeps it: per row its median step (over every run's steps
    but the first), that as a multiple of the faster bare row (of the first row when no bare row ran: `baseline`
    names it), the mean reward (over the runs, and per run), the peak RSS, and how many runs and steps."""
    medians = {
        row: statistics.median([t for r in row_runs for t in r["step_time"][1:]]) for row, row_runs in results.items()
    }
    bare = [row for row in BARE_PRECISION if row in medians]
    baseline = min(bare, key=medians.get) if bare else next(iter(results))
    lines = []
    for row, row_runs in results.items():
        rewards = [statistics.mean(r["reward"]) for r in row_runs]
        line = {
            "row": row,
            "what": ROWS[row][0],
            "settings": ROWS[row][1],
            "median_step_s": round(medians[row], 3),
            "median_step_per_run_s": [round(statistics.median(r["step_time"][1:]), 3) for r in row_runs],
            "x_baseline": round(medians[row] / medians[baseline], 3),
            "mean_reward": round(statistics.mean(rewards), 4),
            "mean_reward_per_run": [round(x, 4) for x in rewards],
            "peak_rss_gib": round(max(r["peak_rss"] for r in row_runs) / GB, 3),
            "runs": len(row_runs),
            "steps": steps,
        }
        if row in BARE_PRECISION:
            line["settings"] = {"trl_bf16": BARE_PRECISION[row]}
        if any("gpu_peak" in r for r in row_runs):
            line["gpu_peak_gib"] = round(max(r["gpu_peak"] for r in row_runs) / GB, 3)
            line["allocated_peak_gib"] = round(max(r["allocated_peak_gib"] for r in row_runs), 3)
        lines.append(line)
    return {"device": device, "model": model, "steps": steps, "runs": runs, "baseline": baseline, "rows": lines}


def describe_device(device: str) -> str:
    if device != "cuda":
        return "CPU"
    import torch

    return f"{torch.cuda.get_device_name(0)}, torch {torch.__version__}"


if __name__ == "__main__":
    sys.exit(main())
