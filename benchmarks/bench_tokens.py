"""What recording tokens (tokens.jsonl, record_tokens) costs a training step.

    python benchmarks/bench_tokens.py                          # demo task on the bundled model, 6 steps, 2 rounds
    python benchmarks/bench_tokens.py --model tiny --steps 4

Runs the demo as the Setup tab starts it (logging every step, the default: every step records) with
record_tokens on and off, alternating, in one process each (the training process's own code path:
`trainer.training.run_training`). Two figures:
- the seconds recording itself took per step, timed inside the run (matching rows to the round, reading
  the loss's tensors to lists, decoding the tokens, writing tokens.jsonl), over the median step_time
  of the runs without it: the cost, free of the noise of a shared machine;
- the median `step_time` and `train_runtime` / steps with recording on and off, for what a user sees.
Target: under 5% of step time. The first step of each run pays one-off costs and is left out of medians.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from workbench.runstore import runfolder  # noqa: E402  (after the path fix above)
from workbench.spec.config import RunConfig  # noqa: E402


def timed_run(config: RunConfig, run_dir: Path) -> dict:
    """Train `config` here, timing every call that records tokens; step times and recording seconds."""
    from workbench.trainer import token_capture, training

    spent = [0.0]

    def timing(function):
        def timed(*args, **kwargs):
            start = time.perf_counter()
            try:
                return function(*args, **kwargs)
            finally:
                spent[0] += time.perf_counter() - start

        return timed

    capture = token_capture.TokenCapture
    capture.capture, capture.remember_round, capture.take = (
        timing(capture.capture),
        timing(capture.remember_round),
        timing(capture.take),
    )
    append = runfolder.append_jsonl

    def append_timed(path, records):
        if Path(path).name == runfolder.TOKENS_FILE:
            return timing(append)(path, records)
        return append(path, records)

    runfolder.append_jsonl = append_timed
    assert training.run_training(config, run_dir) == 0, runfolder.read_status(run_dir).get("error")
    metrics = [m for m in runfolder.read_jsonl(run_dir / runfolder.METRICS_FILE) if "step_time" in m]
    summary = runfolder.read_status(run_dir).get("summary") or {}
    return {
        "step_time": [m["step_time"] for m in metrics][1:],
        "recording_s": spent[0],
        "steps": len(metrics),
        "wall_per_step": summary.get("train_runtime", 0) / max(1, len(metrics)),
    }


def one_run(args) -> None:
    """In a fresh process (`--one`): train once and print the result as one line of Python literals."""
    config = RunConfig.for_task(
        "demo", model=args.model, device="cpu", save_steps=1000, max_steps=args.steps, record_tokens=args.record == "on"
    )
    print(repr(timed_run(config, Path(args.run_dir))))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="smollm2-135m-instruct")
    parser.add_argument("--steps", type=int, default=6)
    parser.add_argument("--rounds", type=int, default=2, help="alternating pairs of runs (default 2)")
    parser.add_argument("--one", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--record", choices=("on", "off"), help=argparse.SUPPRESS)
    parser.add_argument("--run-dir", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.one:
        one_run(args)
        return 0
    import ast

    results: dict[str, list[dict]] = {"on": [], "off": []}
    with tempfile.TemporaryDirectory(prefix="bench-tokens-") as tmp:
        for index in range(args.rounds):
            for record in ("on", "off") if index % 2 == 0 else ("off", "on"):
                out = subprocess.run(
                    [
                        sys.executable,
                        __file__,
                        "--one",
                        "--record",
                        record,
                        "--model",
                        args.model,
                        "--steps",
                        str(args.steps),
                        "--run-dir",
                        str(Path(tmp) / f"{record}-{index}"),
                    ],
                    check=True,
                    capture_output=True,
                    text=True,
                    cwd=ROOT,
                ).stdout
                results[record].append(ast.literal_eval(out.strip().splitlines()[-1]))
                result = results[record][-1]
                print(
                    f"run {index} record_tokens {record}: median step_time {statistics.median(result['step_time']):.2f} s, "
                    f"recording {result['recording_s'] / result['steps'] * 1000:.1f} ms per step",
                    flush=True,
                )
    on = statistics.median(t for r in results["on"] for t in r["step_time"])
    off = statistics.median(t for r in results["off"] for t in r["step_time"])
    recording = sum(r["recording_s"] for r in results["on"]) / sum(r["steps"] for r in results["on"])
    walls = {k: statistics.mean(r["wall_per_step"] for r in v) for k, v in results.items()}
    print(
        f"recording tokens: {recording * 1000:.1f} ms per step timed inside the run = {recording / off:.2%} of the "
        f"median step_time without it ({off:.2f} s); target < 5%"
    )
    print(
        f"median step_time: on {on:.2f} s, off {off:.2f} s (ratio {on / off:.3f}); train_runtime / steps: "
        f"on {walls['on']:.2f} s, off {walls['off']:.2f} s"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
