"""What a process's start costs, with the garbage collector paused while it imports and without.

    python benchmarks/bench_startup.py             # 3 of each, alternating
    python benchmarks/bench_startup.py --repeats 5

Two rows, each measured as the CPU time (user + system) of fresh processes, the two ways taking turns:

- `import the training stack`: `import torch, transformers, peft, datasets; from trl import GRPOTrainer`
  with the collector on, and with `gc.disable()` first;
- `one tiny training run`: a 1-step run of the tiny model (4 completions of 8 tokens), as the launcher
  starts one (`python -m workbench train --run-dir ... --config ...`, which pauses the collector until the
  trainer is built: workbench/startup.py), against the same command run through `workbench.cli.main`
  without that pause.

Every training run, sampler, signal check and dashboard start pays the first row's cost.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from workbench.jobs.commands import launch_env  # noqa: E402
from workbench.spec.config import RunConfig  # noqa: E402

IMPORTS = "import torch, transformers, peft, datasets; from trl import GRPOTrainer, GRPOConfig"
TINY_RUN = RunConfig(
    model="tiny",
    task="demo",
    device="cpu",
    per_device_train_batch_size=4,
    num_generations=4,
    max_completion_length=8,
    max_steps=1,
    save_steps=1000,
    eval_strategy="no",
)


def cpu_seconds(command: list[str], env: dict) -> float:
    """User + system CPU time of `command` and everything it waited for."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    done = subprocess.run(command, env=env, cwd=ROOT, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(command[:4])} ... failed:\n{done.stderr[-2000:]}")
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def tiny_run_commands(workdir: Path) -> dict[str, list[str]]:
    """The launcher's command for a tiny run into a fresh folder, paused and not."""

    def run_dir(name: str) -> Path:
        folder = workdir / name
        folder.mkdir(parents=True)
        return TINY_RUN.save(folder / "config.json").parent

    paused, plain = run_dir("paused"), run_dir("plain")
    args = ["train", "--run-dir", str(plain), "--config", str(plain / "config.json")]
    return {
        "paused": [
            sys.executable,
            "-m",
            "workbench",
            "train",
            "--run-dir",
            str(paused),
            "--config",
            str(paused / "config.json"),
        ],
        "collector on": [sys.executable, "-c", f"import sys; from workbench.cli import main; sys.exit(main({args!r}))"],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)
    env = {**launch_env(TINY_RUN), "PYTHONPATH": str(ROOT)}  # the launcher's: no re-execution for an allocator
    rows: dict[str, dict[str, list[float]]] = {
        "import the training stack": {"collector on": [], "paused": []},
        "one tiny training run": {"collector on": [], "paused": []},
    }
    with tempfile.TemporaryDirectory(prefix="bench-startup-") as tmp:
        for index in range(args.repeats):
            for way in ("collector on", "paused") if index % 2 == 0 else ("paused", "collector on"):
                prefix = "import gc; gc.disable(); " if way == "paused" else ""
                rows["import the training stack"][way].append(
                    cpu_seconds([sys.executable, "-c", prefix + IMPORTS], env)
                )
                command = tiny_run_commands(Path(tmp) / f"{index}-{way.replace(' ', '-')}")[way]
                rows["one tiny training run"][way].append(cpu_seconds(command, env))
    print(f"{args.repeats} processes each; CPU seconds (user + system), median; {os.cpu_count()} CPUs")
    print(f"{'':<28} {'collector on':>13} {'paused':>8} {'saved':>7}")
    for name, ways in rows.items():
        on, paused = statistics.median(ways["collector on"]), statistics.median(ways["paused"])
        print(f"{name:<28} {on:>11.2f} s {paused:>6.2f} s {on - paused:>5.2f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
