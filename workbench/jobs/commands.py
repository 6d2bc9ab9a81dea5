"""The command line and environment a training run starts with.

One place builds them, so the UI's "Preview command", the launcher and the
GPU queue's dispatcher start exactly the same thing: `python -m workbench
train --run-dir DIR --config DIR/config.json` for one process, `accelerate
launch ... -m workbench train ...` for several (DDP, on GPUs or on CPU with
gloo; TRL's accelerate file for DeepSpeed / FSDP), and through the run's
bubblewrap sandbox (workbench/jobs/sandbox.py) when it has one.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from workbench.jobs import allocator, bundle, processes
from workbench.runstore import runfolder
from workbench.sources.gpus import cpu_threads, runs_on_cpu
from workbench.spec import cluster
from workbench.spec.config import RunConfig
from workbench.tuning import for_config

SANDBOX_MODULE = "workbench.jobs.sandbox"  # a sandboxed run's first process, which becomes its bwrap


def _accelerate_prefix() -> list[str]:
    script = Path(sys.executable).parent / "accelerate"
    return [str(script), "launch"] if script.is_file() else [sys.executable, "-m", "accelerate.commands.launch"]


def launch_env(config: RunConfig, base: dict | None = None) -> dict:
    """The environment a run's processes start with: GPU visibility, allocator, CPU threads.

    The allocator is $WORKBENCH_ALLOCATOR or the measured default (workbench.jobs.allocator);
    on a CPU run each process gets its share of the cores, unless the caller set OMP_NUM_THREADS.
    """
    on_cpu = runs_on_cpu(config.device, env=base)
    env = processes.training_env(config.gpu_ids, "cpu" if on_cpu else config.device, base)
    decision = allocator.decide(env.get(allocator.ALLOCATOR_ENV_VAR))
    env = allocator.allocator_env(decision.value, env, decision)
    if on_cpu and not env.get("OMP_NUM_THREADS"):
        env["OMP_NUM_THREADS"] = str(cpu_threads(cluster.processes_per_machine(config)))
    env.update(for_config.launcher_env(config))  # this machine's speed choice, which a sandboxed run cannot read
    return env


def build_command(config: RunConfig, run_dir: str | os.PathLike, resume: bool = False) -> list[str]:
    """The exact argument list that trains `config` into `run_dir` (the UI's "Preview command")."""
    run_dir = Path(run_dir)
    train = ["-m", "workbench", "train", "--run-dir", str(run_dir), "--config", str(run_dir / runfolder.CONFIG_FILE)]
    if resume:
        train.append("--resume")
    if config.num_processes <= 1:
        return [sys.executable, *train]
    if config.distributed_backend != "ddp":  # TRL's accelerate file for DeepSpeed / FSDP, written by _spawn
        return [
            *_accelerate_prefix(),
            "--config_file",
            str(run_dir / bundle.ACCELERATE_FILE),
            "--main_process_port",
            str(processes.free_port()),
            *train,
        ]
    launch = [
        *_accelerate_prefix(),
        "--num_processes",
        str(config.num_processes),
        "--num_machines",
        "1",
        "--mixed_precision",
        "bf16" if config.bf16 else "no",
        "--dynamo_backend",
        "no",
        "--main_process_port",
        str(processes.free_port()),
    ]
    # The torchrun path (--multi_gpu) serves CPU processes too: the trainer sets
    # use_cpu and torch.distributed picks gloo. accelerate's own --cpu flag
    # would start a single process unless MPI is installed.
    launch.append("--multi_gpu")
    return [*launch, *train]


def sandboxed_command(command: list[str], run_dir: Path) -> list[str]:
    """`command` started through the run's sandbox (workbench/jobs/sandbox.py), which becomes its first process."""
    return [sys.executable, "-m", SANDBOX_MODULE, "--run-dir", str(run_dir), "--", *command]
