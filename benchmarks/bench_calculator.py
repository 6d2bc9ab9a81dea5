"""Time one full calculator update, as the Calculator tab recomputes it on each input change.

One update = plan() with suggestions + grid() for the heatmap + compare_frameworks().
Run: .venv/bin/python benchmarks/bench_calculator.py [--updates 300] [--seed 0] [--ui]
Prints the median and 95th-percentile milliseconds over random inputs (target < 50 ms).
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from pathlib import Path

# Run as a script from anywhere: the repository root holds the workbench package.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from workbench.calc import grid, plan  # noqa: E402
from workbench.calc.frameworks import compare_frameworks  # noqa: E402


def random_inputs(rng: random.Random) -> dict:
    """Inputs a person might type: mostly default generation settings, often invalid."""
    inputs = dict(
        per_device_train_batch_size=rng.choice([1, 2, 3, 4, 6, 8, 12, 16, 32]),
        gradient_accumulation_steps=rng.choice([1, 2, 3, 4, 8, 16]),
        num_generations=rng.choice([1, 2, 3, 4, 5, 6, 7, 8, 12, 16, 32, 64]),
        num_processes=rng.randint(1, 8),
        num_iterations=rng.choice([1, 1, 2, 4]),
        dataset_size=rng.choice([None, 7, 100, 8000, 120_000]),
        max_steps=rng.choice([-1, -1, 10, 500]),
        do_eval=rng.random() < 0.2,
        per_device_eval_batch_size=rng.choice([1, 4, 8]),
        vllm_gpus=rng.choice([0, 0, 1, 2]),
    )
    mode = rng.random()
    if mode < 0.15:
        inputs["steps_per_generation"] = rng.choice([1, 2, 4, 8])
    elif mode < 0.3:
        inputs["generation_batch_size"] = rng.choice([8, 12, 16, 48, 64, 100, 256])
    return inputs


def one_update(inputs: dict) -> None:
    plan(**inputs)
    grid(
        num_processes=inputs["num_processes"],
        gradient_accumulation_steps=inputs["gradient_accumulation_steps"],
        steps_per_generation=inputs.get("steps_per_generation"),
        generation_batch_size=inputs.get("generation_batch_size"),
        do_eval=inputs["do_eval"],
        per_device_eval_batch_size=inputs["per_device_eval_batch_size"],
    )
    compare_frameworks(train_data_ratio=0.99, **inputs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--updates", type=int, default=300)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--ui", action="store_true", help="also time the Calculator tab's handler (imports gradio)")
    args = parser.parse_args()
    rng = random.Random(args.seed)
    samples = [random_inputs(rng) for _ in range(args.updates)]
    one_update(samples[0])  # warm-up: first-call imports
    times_ms = []
    for inputs in samples:
        start = time.perf_counter()
        one_update(inputs)
        times_ms.append((time.perf_counter() - start) * 1000)
    invalid = sum(not plan(**s, with_suggestions=False).valid for s in samples)
    print(
        f"calculator update (plan + suggestions + grid + frameworks), {len(samples)} random inputs "
        f"({invalid} invalid): {summarise(times_ms)}"
    )
    if args.ui:
        time_ui_update(samples)


def summarise(times_ms: list[float]) -> str:
    times_ms = sorted(times_ms)
    p95 = times_ms[min(len(times_ms) - 1, int(0.95 * len(times_ms)))]
    return f"median {statistics.median(times_ms):.2f} ms, p95 {p95:.2f} ms, max {times_ms[-1]:.2f} ms"


def time_ui_update(samples: list[dict]) -> None:
    """The Calculator tab's own handler: the calculator plus its HTML and plotly heatmap."""
    from workbench.calc import PLAN_DEFAULTS
    from workbench.ui.calculator_tab import FIELDS, update_calculator

    def handler_args(inputs: dict) -> list:
        return [{**PLAN_DEFAULTS, **inputs}[name] for name in FIELDS] + [0.99]

    update_calculator(*handler_args(samples[0]))
    times_ms = []
    for inputs in samples:
        start = time.perf_counter()
        update_calculator(*handler_args(inputs))
        times_ms.append((time.perf_counter() - start) * 1000)
    print(f"Calculator tab handler update_calculator (adds HTML and the plotly heatmap): {summarise(times_ms)}")


if __name__ == "__main__":
    main()
