"""Does sampling from a bfloat16 copy learn as well as the exact float32 copy? The demo, several seeds each.

    python benchmarks/bench_precision_learning.py                         # seeds 1 2 3, 50 steps (the demo's)
    python benchmarks/bench_precision_learning.py --seeds 1 2 3 4 --steps 30
    python benchmarks/bench_precision_learning.py --variants bfloat16 --seeds 4   # one variant only: no verdict

Variants (each with `shared_prompt_pass=yes`, `packed_decode=no`; training itself is float32 in both):

- `float32`: `merged_generation=float32`, each round sampled from a float32 copy of the policy with the LoRA update
  merged in (workbench/trainer/generation_copy.py): exactly the policy's completions;
- `bfloat16`: `merged_generation=bfloat16`, the same copy in bfloat16: faster where the CPU multiplies bfloat16
  natively, but the completions are drawn from a rounded policy (off-policy by rounding).

Each run is the demo task (`RunConfig.for_task("demo", device="cpu", seed=S)`: the bundled SmolLM2-135M-Instruct, its
settings, held-out evaluation at step 0 and every 10 steps on the same 16 questions never trained on), started in the
background as `python -m workbench train` (benchmarks/bench_training.py's run_and_watch). Runs alternate variants
(seed 1 float32, seed 1 bfloat16, seed 2 float32, ...) so a change in the machine's load hits both alike.

Per run and per variant (mean and range across seeds) it prints: the training reward's mean over the last 10 steps
(and the first 10), the held-out accuracy of the greedy answers at step 0 and at the last step, their total reward
(the task's weighted sum of eval.jsonl's per-reward means, as the training reward is) at step 0 and the last step, and
the median step time (TRL's step_time, first step left out). The step times are only comparable on a quiet machine:
quote the load average with them.

Verdict, bfloat16 against float32 (the spread between seeds is the noise; range = max - min over a variant's seeds):

    "no loss"  when, for both the last-10-step training reward and the held-out accuracy at the last step,
               mean(bfloat16) >= mean(float32) - max(range(float32), range(bfloat16));
    "loss"     otherwise (and the figure that failed is named).

A run in which a lever did not take effect (status.json's speed_choice.not_taking_effect) stops the benchmark: it
would be float32 against float32. The result (every run's figures, the summaries and the verdict) is appended to
benchmarks/results/bench_precision_learning.jsonl with the CPU, cores, date, command and library versions
(benchmarks/results_file.py). The speed probe lets `auto` take the bfloat16 copy only on a CPU with native bfloat16
and only while these recorded results say "no loss" (workbench/tuning/choice.py BF16_COPY_LEARNS_AS_WELL).
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

from bench_demo import held_out_total  # noqa: E402  (same folder)
from bench_training import run_and_watch  # noqa: E402
from results_file import record  # noqa: E402

from workbench.runstore import runfolder  # noqa: E402
from workbench.spec.config import RunConfig, reward_names_for, reward_weights_for  # noqa: E402

VARIANTS = {"float32": {"merged_generation": "float32"}, "bfloat16": {"merged_generation": "bfloat16"}}
COMMON = {"shared_prompt_pass": "yes", "packed_decode": "no"}
WINDOW = 10
GB = 2**30
# the figures the verdict compares, and how the table names them
JUDGED = {"reward_last10": "training reward, last 10 steps", "accuracy_end": "held-out accuracy, last step"}


def config_for(variant: str, seed: int, steps: int) -> RunConfig:
    return RunConfig.for_task("demo", device="cpu", seed=seed, max_steps=steps, **COMMON, **VARIANTS[variant])


def run_figures(result: dict) -> dict:
    """A finished run's figures (run_and_watch's result)."""
    run_dir = result["run_dir"]
    metrics = [m for m in result["metrics"] if m.get("reward") is not None]
    evals = runfolder.read_jsonl(run_dir / runfolder.EVAL_FILE)
    if len(metrics) < WINDOW or len(evals) < 2:
        raise SystemExit(f"{run_dir}: {len(metrics)} steps and {len(evals)} evaluations logged; too few to judge")
    cfg = RunConfig.from_dict(runfolder.read_json(run_dir / runfolder.CONFIG_FILE, default={}))
    weights = dict(zip(reward_names_for(cfg), reward_weights_for(cfg)))
    rewards = [m["reward"] for m in metrics]
    step_times = [m["step_time"] for m in metrics if "step_time" in m]
    return {
        "steps": len(metrics),
        "reward_first10": statistics.mean(rewards[:WINDOW]),
        "reward_last10": statistics.mean(rewards[-WINDOW:]),
        "accuracy_start": evals[0]["accuracy"],
        "accuracy_end": evals[-1]["accuracy"],
        "eval_step_start": evals[0]["step"],
        "eval_step_end": evals[-1]["step"],
        "held_out_reward_start": held_out_total(evals[0], weights),
        "held_out_reward_end": held_out_total(evals[-1], weights),
        "accuracy_curve": [[e["step"], e["accuracy"]] for e in evals],
        "median_step": statistics.median(step_times[1:] or step_times),
        "minutes": result["elapsed"] / 60,
        "peak_rss_gib": result["peak_rss"] / GB,
    }


def train(variant: str, seed: int, steps: int, runs_dir: Path) -> dict:
    result = run_and_watch(config_for(variant, seed, steps), runs_dir, time_limit=4 * 3600)
    if result["state"] != "finished":
        raise SystemExit(f"{variant} seed {seed}: run {result['state']}: {result['error']}")
    idle = (runfolder.read_status(result["run_dir"]).get("speed_choice") or {}).get("not_taking_effect")
    if idle:
        raise SystemExit(f"{variant} seed {seed}: a lever did not take effect ({'; '.join(idle)}): no comparison")
    return {"seed": seed, **run_figures(result)}


def spread(values: list[float]) -> tuple[float, float]:
    """Mean and range (max - min)."""
    return statistics.mean(values), max(values) - min(values)


def verdict(runs: dict[str, list[dict]]) -> tuple[str, list[str]]:
    """("no loss" or "loss", one line per judged figure) by the rule in the module's docstring."""
    found, lines = "no loss", []
    for name, label in JUDGED.items():
        (f_mean, f_range), (b_mean, b_range) = (spread([r[name] for r in runs[v]]) for v in ("float32", "bfloat16"))
        floor = f_mean - max(f_range, b_range)
        ok = b_mean >= floor - 1e-9  # equal figures are no loss, whatever the rounding
        found = found if ok else "loss"
        lines.append(
            f"{label}: bfloat16 {b_mean:.3f} against float32 {f_mean:.3f}, floor {floor:.3f} "
            f"(float32's mean - max seed range {max(f_range, b_range):.3f}): {'no loss' if ok else 'LOSS'}"
        )
    return found, lines


COLUMNS = [
    ("reward_first10", "rew first10", "{:.3f}"),
    ("reward_last10", "rew last10", "{:.3f}"),
    ("accuracy_start", "acc step0", "{:.3f}"),
    ("accuracy_end", "acc end", "{:.3f}"),
    ("held_out_reward_start", "heldrew 0", "{:.3f}"),
    ("held_out_reward_end", "heldrew end", "{:.3f}"),
    ("median_step", "med step s", "{:.2f}"),
    ("minutes", "minutes", "{:.1f}"),
]


def table(runs: dict[str, list[dict]]) -> list[str]:
    head = f"{'variant':9} {'seed':>9} " + " ".join(f"{title:>11}" for _, title, _ in COLUMNS)
    lines = [head]
    for variant, rows in runs.items():
        for row in rows:
            lines.append(
                f"{variant:9} {row['seed']:>9} " + " ".join(f"{fmt.format(row[key]):>11}" for key, _, fmt in COLUMNS)
            )
        for label, pick in (("mean", 0), ("range", 1)):
            lines.append(
                f"{variant:9} {label:>9} "
                + " ".join(f"{fmt.format(spread([r[key] for r in rows])[pick]):>11}" for key, _, fmt in COLUMNS)
            )
    return lines


def summary(rows: list[dict]) -> dict:
    return {
        key: {"mean": spread([r[key] for r in rows])[0], "range": spread([r[key] for r in rows])[1]}
        for key, _, _ in COLUMNS
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3], help="seeds, one run each per variant")
    parser.add_argument("--steps", type=int, default=50, help="optimizer steps per run (default 50, the demo's)")
    parser.add_argument("--variants", nargs="+", choices=list(VARIANTS), default=list(VARIANTS))
    args = parser.parse_args(argv)
    if args.steps < WINDOW:
        parser.error(f"--steps must be at least {WINDOW}")
    runs: dict[str, list[dict]] = {variant: [] for variant in args.variants}
    with tempfile.TemporaryDirectory(prefix="bench-precision-") as tmp:
        for seed in args.seeds:
            for variant in args.variants:
                runs[variant].append(train(variant, seed, args.steps, Path(tmp) / f"{variant}-{seed}"))
                found = runs[variant][-1]
                print(
                    f"# {variant} seed {seed}: reward last 10 {found['reward_last10']:.3f}, held-out accuracy "
                    f"{found['accuracy_start']:.3f} -> {found['accuracy_end']:.3f}, median step "
                    f"{found['median_step']:.2f} s, {found['minutes']:.1f} min (load {os.getloadavg()[0]:.2f})",
                    flush=True,
                )
    print(
        f"\n{args.steps} steps per run, seeds {' '.join(map(str, args.seeds))}; {COMMON}; "
        f"{os.cpu_count()} CPUs; load average {os.getloadavg()[0]:.2f}"
    )
    for line in table(runs):
        print(line)
    figures = {
        "steps": args.steps,
        "seeds": args.seeds,
        "common": COMMON,
        "variants": {v: VARIANTS[v] for v in args.variants},
        "runs": runs,
        "summary": {variant: summary(rows) for variant, rows in runs.items()},
    }
    if set(VARIANTS) <= set(runs):
        found, lines = verdict(runs)
        for line in lines:
            print(line)
        print(
            f"verdict: {found} (bfloat16 against float32, seeds {' '.join(map(str, args.seeds))}, {args.steps} steps)"
        )
        figures["verdict"], figures["verdict_lines"] = found, lines
        speedup = (
            figures["summary"]["bfloat16"]["median_step"]["mean"] / figures["summary"]["float32"]["median_step"]["mean"]
        )
        print(f"median step, bfloat16 / float32: {speedup:.2f}x (the same load on both only if the machine was quiet)")
        figures["step_ratio_bf16_over_fp32"] = speedup
    print(f"recorded in {record('bench_precision_learning', figures)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
