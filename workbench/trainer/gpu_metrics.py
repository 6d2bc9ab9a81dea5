"""What a run on a GPU adds to its metrics: the training process's peak memory, and TRL's weight sync time.

- `gpu/peak_allocated_gib` and `gpu/peak_reserved_gib`: torch's peak allocated and reserved memory on
  this (the main) process's GPU since the run began, read at each optimizer step. They leave out the
  CUDA context and any vLLM engine's pool (jobs/gpu_watch.py measures the whole card).
- `vllm/weight_sync_seconds` (TRL's `trl-colocate` and `trl-server`): how long TRL took to merge the
  adapter into the weights and hand every weight to vLLM before a generation round - the cost that
  `vllm-server`'s adapter hot-load (`vllm/adapter_sync_seconds`) replaces.

Ties to TRL's internals (TRL 1.16, pinned): `trainer.vllm_generation.sync_weights` (TRL calls it before
each generation round in its vLLM modes, under its own `profiling_context`, which reports only to
trackers) and TRL's metric lists of the step it logs next (`library_compat.step_metrics`, a private tie of the
registry there). On a CPU run nothing here is attached.
"""

from __future__ import annotations

import functools
import time

from workbench import library_compat

GIB = 2**30


def attach(trainer, generation: str) -> None:
    """Add the GPU metrics to a run on CUDA; the weight sync timer where TRL's vLLM modes sync."""
    import torch

    if not torch.cuda.is_available() or trainer.args.use_cpu:
        return
    trainer.add_callback(memory_callback(trainer))
    if generation.startswith("trl-"):
        time_weight_sync(trainer)


def memory_callback(trainer):
    """A TrainerCallback that puts the process's peak GPU memory into each step's metrics."""
    import torch
    from transformers import TrainerCallback

    class GpuMemory(TrainerCallback):
        def on_step_end(self, args, state, control, **kwargs):
            device = trainer.accelerator.device
            metrics = library_compat.step_metrics(trainer, "train")
            metrics["gpu/peak_allocated_gib"].append(torch.cuda.max_memory_allocated(device) / GIB)
            metrics["gpu/peak_reserved_gib"].append(torch.cuda.max_memory_reserved(device) / GIB)

    return GpuMemory()


def time_weight_sync(trainer) -> None:
    """Wrap TRL's `sync_weights` so each sync's seconds land in the step's metrics."""
    generation = getattr(trainer, "vllm_generation", None)
    if generation is None or not hasattr(generation, "sync_weights"):
        # TRL moved it: the run trains as before, without this one metric, and says so in train.log
        print("TRL's vllm_generation.sync_weights was not found: vllm/weight_sync_seconds is not recorded", flush=True)
        return
    # looked up at each call: TRL's log() clears its metric lists, leaving any list held before behind
    generation.sync_weights = timed(
        generation.sync_weights,
        lambda seconds: library_compat.step_metrics(trainer, "train")["vllm/weight_sync_seconds"].append(seconds),
    )


def timed(function, record):
    """`function`, handing `record` the seconds each call took."""

    @functools.wraps(function)
    def run(*args, **kwargs):
        started = time.perf_counter()
        try:
            return function(*args, **kwargs)
        finally:
            record(time.perf_counter() - started)

    return run
