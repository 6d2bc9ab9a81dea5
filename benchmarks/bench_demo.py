"""Does the default demo learn something true? The default run, measured against the demo's three goals.

    python benchmarks/bench_demo.py                        # trains `python -m workbench train` (no options) once
    python benchmarks/bench_demo.py --task reward_hacking  # the lesson task, for contrast
    python benchmarks/bench_demo.py --read RUN_DIR         # measure a run already made
    python benchmarks/bench_demo.py --set learning_rate=2e-3 --keep runs/try  # a variant, kept
    python benchmarks/bench_demo.py --read RUN_DIR --screenshot   # and the docs' picture of it (Chromium)

It starts `python -m workbench train` with nothing but a run folder of its own (the demo task's defaults: the
bundled SmolLM2-135M-Instruct, its settings and its held-out evaluation) and, when it ends, reads the run
folder and prints:

- the total reward (goal: +0.3 or more) of the held-out questions' greedy answers (eval.jsonl, the task's
  weighted sum) at step 0 and at the end: the same 16 questions at every evaluation, so the gain is the
  model's, not the draw's; and, beside it, the training reward's mean over the first and the last 10 steps;
- the mean completion length in tokens (TRL's completions/mean_length), first 10 steps and last 10
  (goal: the last at most half the first), and the held-out answers' mean length at step 0 and at the end;
- the held-out accuracy (greedy answers to the questions never trained on) at step 0 and at the end
  (goal: no lower at the end), with the evaluations between;
- the minutes from launch to the end of the run, and a few held-out answers at step 0 and at the end.

Training figures are means over 10 steps because a step trains on two questions (batch 8 of 4
completions each), so one step's reward says as much about the questions drawn as about the model (a
question the model does not know scores 0 whatever the length). Timings depend on what else the
machine runs: quote them with the machine's load.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from workbench.runstore import runfolder  # noqa: E402
from workbench.spec.config import RunConfig, reward_names_for, reward_weights_for  # noqa: E402

WINDOW = 10


def train(run_dir: Path, task: str | None, assignments: list[str]) -> float:
    """The default run (or `task`'s, with `--set` assignments) in the foreground; returns its minutes."""
    command = [sys.executable, "-m", "workbench", "train", "--run-dir", str(run_dir)]
    command += ["--task", task] if task else []
    command += [arg for assignment in assignments for arg in ("--set", assignment)]
    started = time.perf_counter()
    subprocess.run(command, check=True, cwd=ROOT, stdout=subprocess.DEVNULL)
    return (time.perf_counter() - started) / 60


def window_means(values: list[float]) -> tuple[float, float]:
    """Mean of the first and of the last WINDOW values."""
    return statistics.mean(values[:WINDOW]), statistics.mean(values[-WINDOW:])


def measure(run_dir: Path) -> dict:
    """The three figures of a finished run folder: reward, completion length, held-out accuracy."""
    metrics = [m for m in runfolder.read_jsonl(run_dir / runfolder.METRICS_FILE) if m.get("reward") is not None]
    evals = runfolder.read_jsonl(run_dir / "eval.jsonl")
    if len(metrics) < 2 * WINDOW or len(evals) < 2:
        raise SystemExit(f"{run_dir}: {len(metrics)} steps and {len(evals)} evaluations; too few to measure")
    reward = window_means([m["reward"] for m in metrics])
    length = window_means([m["completions/mean_length"] for m in metrics])
    cfg = RunConfig.from_dict(runfolder.read_json(run_dir / runfolder.CONFIG_FILE, default={}))
    weights = dict(zip(reward_names_for(cfg), reward_weights_for(cfg)))
    return {
        "steps": len(metrics),
        "reward": reward,
        "length": length,
        "accuracy": [(e["step"], e["accuracy"], held_out_total(e, weights)) for e in evals],
        "first_eval": evals[0],
        "last_eval": evals[-1],
    }


def held_out_total(record: dict, weights: dict[str, float]) -> float:
    """The total reward (weighted sum of each reward's mean) of one evaluation's greedy answers."""
    return sum(weight * (record["rewards"].get(name) or 0.0) for name, weight in weights.items())


def report(found: dict, minutes: float | None) -> bool:
    """Print the figures and whether each goal is met; True when all three are."""
    (r0, r1), (l0, l1) = found["reward"], found["length"]
    curve = found["accuracy"]
    first, last = found["first_eval"], found["last_eval"]
    gain = curve[-1][2] - curve[0][2]
    goals = {"reward": gain >= 0.3, "length": l1 <= l0 / 2, "held-out": curve[-1][1] >= curve[0][1]}
    print(
        f"steps: {found['steps']}"
        + (f", {minutes:.1f} minutes from launch to exit" if minutes else "")
        + f" (load average {os.getloadavg()[0]:.1f})"
    )
    print(
        "held-out total reward (same questions each time): "
        + ", ".join(f"step {s} {t:.3f}" for s, _, t in curve)
        + f", gain {gain:+.3f} ({'meets' if goals['reward'] else 'misses'} +0.3)"
    )
    print(f"training reward (mean of {WINDOW} steps): first {r0:.3f}, last {r1:.3f}, gain {r1 - r0:+.3f}")
    print(
        f"mean completion length (tokens, {WINDOW} steps): first {l0:.1f}, last {l1:.1f}, x{l1 / l0:.2f} "
        f"({'meets' if goals['length'] else 'misses'} <= half); held-out answers {first['completion_length']:.1f} "
        f"-> {last['completion_length']:.1f}"
    )
    print(
        "held-out accuracy: "
        + ", ".join(f"step {s} {a:.2f}" for s, a, _ in curve)
        + f" ({'meets' if goals['held-out'] else 'misses'} ends no lower than at step 0)"
    )
    for label, record in (("step 0", found["first_eval"]), (f"step {found['last_eval']['step']}", found["last_eval"])):
        print(f"held-out answers at {label}:")
        for answer in record["prompts"][:6]:
            print(
                f"  {'right' if answer['correct'] else 'wrong'}  {answer['prompt'].strip()[:60]!r} -> "
                f"{answer['completion'].strip()[:70]!r}"
            )
    return all(goals.values())


def screenshot(run_dir: Path, name: str = "demo_run.png") -> Path:
    """The Train tab showing `run_dir` (the dashboard on a runs folder holding only a copy of it), saved in assets/."""
    import shutil

    sys.path.insert(0, str(ROOT / "tests"))  # the browser tests' app server and Chromium settings
    from browser_fixtures import ASSETS, CHROMIUM, CHROMIUM_ARGS, FIRST_LOAD_TIMEOUT_MS, UI, start_app
    from playwright.sync_api import sync_playwright

    with tempfile.TemporaryDirectory(prefix="bench-demo-shot-") as folder:
        runs = Path(folder) / "runs"
        shutil.copytree(run_dir, runs / run_dir.name)
        server = start_app(runs, log_dir=Path(folder))
        try:
            with sync_playwright() as playwright:
                browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS, headless=True)
                page = browser.new_context(viewport={"width": 1280, "height": 1500}).new_page()
                page.set_default_timeout(FIRST_LOAD_TIMEOUT_MS)
                ui = UI(page, server, ASSETS)
                ui.open("Train")
                page.wait_for_function("() => document.querySelector('#wb-plot-held-out .js-plotly-plot')")
                ui.settle()
                path = ui.screenshot(name)
                browser.close()
        finally:
            server.stop()
    return path


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--read", type=Path, help="measure this finished run folder instead of training")
    parser.add_argument("--task", help="train this task instead of the default (e.g. reward_hacking)")
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="FIELD=VALUE",
        help="change a setting of the run, as `workbench train --set` (to try a variant)",
    )
    parser.add_argument("--keep", type=Path, help="write the run to this new folder and keep it")
    parser.add_argument(
        "--screenshot",
        action="store_true",
        help="then save the Train tab showing the run as assets/demo_run.png (needs Chromium)",
    )
    args = parser.parse_args()
    if args.read:
        met = report(measure(args.read), None)
        print(f"screenshot: {screenshot(args.read)}" if args.screenshot else "", end="")
        return 0 if met else 1
    with tempfile.TemporaryDirectory(prefix="bench-demo-") as folder:
        run_dir = args.keep or Path(folder) / "run"
        minutes = train(run_dir, args.task, args.set)
        met = report(measure(run_dir), minutes)
        print(f"screenshot: {screenshot(run_dir)}" if args.screenshot else "", end="")
        return 0 if met else 1


if __name__ == "__main__":
    sys.exit(main())
