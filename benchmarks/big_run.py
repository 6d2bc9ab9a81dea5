"""A large, format-exact run folder for the load benchmarks: 10,000 steps and 640,000 completions.

    python benchmarks/big_run.py /tmp/big-runs                 # writes /tmp/big-runs/big-run (a few minutes)
    python benchmarks/big_run.py /tmp/big-runs --steps 200     # a small one

The rows come from the trainer's own writers: `recorder.completion_records`
turns one generation round shaped like TRL's `_logs` into completion records,
`runfolder.append_jsonl` appends them (and the metric rows, `{"step": ..., **logs}`
under the names TRL 1.16 logs), `RunConfig.save` writes config.json and
`runfolder.update_status` status.json. Only the model's words are made up:
completions of 2 to 256 tokens (most short, a long tail cut at
`max_completion_length`), scored by two reward functions, with TRL's group
advantages `(r - mean) / (std + 1e-4)`.

`write_run` is deterministic for a seed, so a folder written once can be
reused (`ensure_run` checks its size and step count before writing again).
"""

from __future__ import annotations

import argparse
import math
import os
import random
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from workbench.runstore import runfolder  # noqa: E402
from workbench.spec.config import RunConfig  # noqa: E402
from workbench.trainer.recorder import completion_records  # noqa: E402

RUN_ID = "big-run"
STEPS = 10_000
PROMPTS_PER_STEP = 8
NUM_GENERATIONS = 8  # 8 prompts x G 8 = 64 completions a step, 640,000 in 10,000 steps
MAX_TOKENS = 256
CHARS_PER_TOKEN = 4.2
REWARD_NAMES = ("brevity", "format_answer_tag")
REWARD_WEIGHTS = (1.0, 0.5)

WORDS = (
    "the answer is a of to in that it with as for was on are be by this from or have an they which one "
    "you were all we when there can more if no out so said what up its about into than them only other new "
    "some could time these two may then first any my now such like our over man me even most made after "
    "also did many before must through back years where much your way well down should because each just "
    "those people how too little state good very make world still own see men work long get here between "
    "both life being under never day same another know while last might us great old year off come since "
    "against go came right used take three water oxygen photosynthesis carbon dioxide molecule energy "
    "planet sun moon earth capital city river mountain number seven twelve hundred percent Paris Tokyo "
    "because however therefore although sentence briefly answer: <answer>42</answer> 3 + 4 = 7"
).split()
QUESTIONS = (
    "What gas do humans need to breathe?",
    "What is the capital of France?",
    "How many legs has a spider?",
    "Which planet is closest to the sun?",
    "What is 17 + 25?",
    "Name a primary colour.",
    "What do bees make?",
    "How many days are in a leap year?",
    "What is the boiling point of water?",
    "Who wrote Hamlet?",
    "What is the largest ocean?",
    "What is 6 * 7?",
)


def completion_pool(rng: random.Random, size: int = 4096) -> list[str]:
    """Made-up completions of varied lengths: most a few words, a long tail up to the token cut."""
    pool = []
    for _ in range(size):
        tokens = min(MAX_TOKENS, max(2, int(rng.lognormvariate(math.log(40), 0.9))))
        words = []
        chars = 0
        while chars < tokens * CHARS_PER_TOKEN:
            word = rng.choice(WORDS)
            words.append(word)
            chars += len(word) + 1
        text = " ".join(words)
        if rng.random() < 0.3:
            text = text.capitalize() + "."
        pool.append(text)
    return pool


def _advantages(rewards: list[float]) -> list[float]:
    """TRL's group advantages: (r - group mean) / (group std + 1e-4), Bessel-corrected std."""
    out = []
    for start in range(0, len(rewards), NUM_GENERATIONS):
        group = rewards[start : start + NUM_GENERATIONS]
        mean, std = statistics.fmean(group), statistics.stdev(group)
        out += [(r - mean) / (std + 1e-4) for r in group]
    return out


def round_logs(rng: random.Random, pool: list[str], step: int) -> tuple[dict, list[int], list[bool]]:
    """One generation round shaped like TRL's `_logs` (prompt, completion, rewards, advantages), lengths, cuts."""
    prompts, completions = [], []
    for _ in range(PROMPTS_PER_STEP):
        question = rng.choice(QUESTIONS)
        prompts += [[{"role": "user", "content": question}]] * NUM_GENERATIONS
        completions += [[{"role": "assistant", "content": rng.choice(pool)}] for _ in range(NUM_GENERATIONS)]
    texts = [c[0]["content"] for c in completions]
    lengths = [min(MAX_TOKENS, max(1, round(len(t) / CHARS_PER_TOKEN))) for t in texts]
    brevity = [max(0.0, 1 - len(t) / 200) for t in texts]
    tagged = [1.0 if "<answer>" in t else 0.0 for t in texts]
    totals = [b * REWARD_WEIGHTS[0] + f * REWARD_WEIGHTS[1] for b, f in zip(brevity, tagged)]
    logs = {
        "prompt": prompts,
        "completion": completions,
        "advantages": _advantages(totals),
        "rewards": {REWARD_NAMES[0]: brevity, REWARD_NAMES[1]: tagged},
    }
    return logs, lengths, [n >= MAX_TOKENS for n in lengths]


def metrics_row(rng: random.Random, step: int, steps: int, records: list[dict]) -> dict:
    """A metric row under the names TRL 1.16 logs for this run's settings, from the round's records."""
    lengths = [r["length"] for r in records]
    rewards = [r["reward"] for r in records]
    groups = [rewards[i : i + NUM_GENERATIONS] for i in range(0, len(rewards), NUM_GENERATIONS)]
    row = {
        "loss": rng.gauss(0.0, 0.02),
        "grad_norm": abs(rng.gauss(0.6, 0.2)),
        "learning_rate": 1e-3 * (1 - step / steps),
        "num_tokens": float(step * sum(lengths)),
        "completions/mean_length": statistics.fmean(lengths),
        "completions/min_length": float(min(lengths)),
        "completions/max_length": float(max(lengths)),
        "completions/clipped_ratio": sum(r["truncated"] for r in records) / len(records),
        "completions/mean_terminated_length": statistics.fmean(lengths),
        "completions/min_terminated_length": float(min(lengths)),
        "completions/max_terminated_length": float(max(lengths)),
    }
    for name in REWARD_NAMES:
        values = [r["rewards"][name] for r in records]
        row[f"rewards/{name}/mean"] = statistics.fmean(values)
        row[f"rewards/{name}/std"] = statistics.stdev(values)
    row.update(
        {
            "reward": statistics.fmean(rewards),
            "reward_std": statistics.stdev(rewards),
            "frac_reward_zero_std": sum(statistics.pstdev(g) == 0 for g in groups) / len(groups),
            "kl": abs(rng.gauss(0.05 + step / steps, 0.02)),
            "entropy": abs(rng.gauss(1.2, 0.3)),
            "clip_ratio/low_mean": 0.0,
            "clip_ratio/high_mean": 0.0,
            "clip_ratio/region_mean": 0.0,
            "clip_ratio/low_min": 0.0,
            "clip_ratio/high_max": 0.0,
            "step_time": abs(rng.gauss(6.5, 0.4)),
            "epoch": step / steps,
        }
    )
    return {"step": step, **row}


def run_config(steps: int) -> RunConfig:
    return RunConfig.for_task(
        "demo",
        max_steps=steps,
        per_device_train_batch_size=PROMPTS_PER_STEP * NUM_GENERATIONS,
        num_generations=NUM_GENERATIONS,
        max_completion_length=MAX_TOKENS,
    )


def append_step(run_dir: Path, rng: random.Random, pool: list[str], step: int, steps: int) -> None:
    """One training step's rows, as the trainer appends them: the round's completions, then the metric row."""
    logs, lengths, truncated = round_logs(rng, pool, step)
    records = completion_records(logs, step, NUM_GENERATIONS, list(REWARD_WEIGHTS), lengths, truncated)
    runfolder.append_jsonl(run_dir / runfolder.COMPLETIONS_FILE, records)
    runfolder.append_jsonl(run_dir / runfolder.METRICS_FILE, [metrics_row(rng, step, steps, records)])


def write_run(runs_dir: Path, steps: int = STEPS, seed: int = 0, run_id: str = RUN_ID) -> Path:
    """Write `runs_dir/run_id` anew: config, `steps` steps of completions and metrics, a live status."""
    run_dir = Path(runs_dir) / run_id
    run_dir.mkdir(parents=True, exist_ok=True)
    for name in (runfolder.METRICS_FILE, runfolder.COMPLETIONS_FILE):
        (run_dir / name).unlink(missing_ok=True)
    run_config(steps).save(run_dir / runfolder.CONFIG_FILE)
    rng = random.Random(seed)
    pool = completion_pool(rng)
    for step in range(1, steps + 1):
        append_step(run_dir, rng, pool, step, steps)
    mark_live(run_dir, steps, steps + 1)
    return run_dir


def mark_live(run_dir: Path, step: int, total_steps: int) -> None:
    """status.json of a run still training, owned by this process (so readers see it live)."""
    runfolder.update_status(
        run_dir,
        state="training",
        step=step,
        total_steps=total_steps,
        started_at=time.time() - 6.5 * step,
        pid=os.getpid(),
    )


def ensure_run(runs_dir: Path, steps: int = STEPS, seed: int = 0) -> Path:
    """The run folder of `steps` steps, written only when the one there is not it (a few minutes for 10,000)."""
    run_dir = Path(runs_dir) / RUN_ID
    metrics = runfolder.read_jsonl_tail(run_dir / runfolder.METRICS_FILE)
    config = runfolder.read_config(run_dir)
    if not (metrics and metrics[-1].get("step") == steps and config.get("max_steps") == steps):
        write_run(runs_dir, steps, seed)
    return run_dir


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("runs_dir", type=Path)
    parser.add_argument("--steps", type=int, default=STEPS)
    args = parser.parse_args(argv)
    started = time.perf_counter()
    run_dir = write_run(args.runs_dir, args.steps)
    sizes = {name: (run_dir / name).stat().st_size for name in (runfolder.METRICS_FILE, runfolder.COMPLETIONS_FILE)}
    print(
        f"{run_dir}: {args.steps} steps, {args.steps * PROMPTS_PER_STEP * NUM_GENERATIONS} completions, "
        + ", ".join(f"{name} {size / 2**20:.0f} MiB" for name, size in sizes.items())
        + f" in {time.perf_counter() - started:.0f} s"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
