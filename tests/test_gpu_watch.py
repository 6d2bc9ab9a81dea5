"""The GPU kit's measuring parts, on any machine: the memory watch's peak, and the weight-sync timer."""

from __future__ import annotations

import itertools
import time
import types
from pathlib import Path

import pytest

from workbench.jobs.gpu_watch import (
    RELEASE_SLACK_BYTES,
    GpuMemoryWatch,
    peak_above,
    used_bytes_per_gpu,
    wait_for_release,
)
from workbench.sources.gpus import list_gpus
from workbench.trainer.gpu_metrics import timed

GIB = 2**30


def test_the_peak_is_the_highest_sample_above_the_baseline_per_gpu():
    baseline = {0: 1 * GIB, 1: 2 * GIB}
    samples = [{0: 3 * GIB, 1: 2 * GIB}, {0: 5 * GIB, 1: 1 * GIB}, {0: 4 * GIB, 1: 2 * GIB + 10}]
    assert peak_above(baseline, samples) == {0: 4 * GIB, 1: 10}
    assert peak_above(baseline, []) == {0: 0, 1: 0}


def test_the_watch_samples_until_the_block_ends():
    readings = itertools.chain([{0: 100}], ({0: 100 + 50 * n} for n in itertools.count(1)))
    with GpuMemoryWatch(every_s=0.01, read=lambda: next(readings)) as watch:
        time.sleep(0.1)
    assert watch.peak_bytes()[0] >= 50 * 5  # several samples, the last one after the block counted too


class FakeClock:
    """Time that moves only when the code under test sleeps."""

    def __init__(self):
        self.now = 0.0

    def sleep(self, seconds: float) -> None:
        self.now += seconds


def test_the_next_watch_waits_until_the_last_runs_memory_is_handed_back():
    # the last run's process exits and the driver frees its 1.9 GiB a second later, one GPU at a time
    idle = {0: 500 * 2**20, 1: 0}
    clock = FakeClock()

    def read():
        freed = clock.now >= 1.0
        return {0: idle[0] + (10 * 2**20 if freed else int(1.9 * GIB)), 1: 0 if clock.now >= 1.5 else GIB}

    assert wait_for_release(idle, timeout_s=10, read=read, sleep=clock.sleep, clock=lambda: clock.now)
    assert 1.5 <= clock.now < 2.0  # as soon as both were back within the slack, no later


def test_a_gpu_that_stays_busy_is_reported_after_the_timeout():
    clock = FakeClock()
    busy = lambda: {0: GIB + RELEASE_SLACK_BYTES + 1}  # noqa: E731 - someone else's process holds it
    assert not wait_for_release({0: GIB}, timeout_s=3, read=busy, sleep=clock.sleep, clock=lambda: clock.now)
    assert 3.0 <= clock.now < 3.5


class FakeCudaCounters:
    """torch.cuda's allocation counters as a CPU can keep them: what is allocated, and the peak since a reset."""

    def __init__(self, monkeypatch):
        import torch

        self.allocated = self.peak = 0
        monkeypatch.setattr(torch.cuda, "synchronize", lambda: None)
        monkeypatch.setattr(torch.cuda, "memory_allocated", lambda: self.allocated)
        monkeypatch.setattr(torch.cuda, "max_memory_allocated", lambda: self.peak)
        monkeypatch.setattr(torch.cuda, "reset_peak_memory_stats", self.reset)

    def reset(self) -> None:
        self.peak = self.allocated

    def alloc(self, size: int) -> None:
        self.allocated += size
        self.peak = max(self.peak, self.allocated)


def test_the_memory_benchmark_keeps_each_phases_highest_call_and_the_runs_peak_across_nested_resets(monkeypatch):
    monkeypatch.syspath_prepend(str(Path(__file__).resolve().parents[1] / "benchmarks"))
    import bench_memory
    import torch

    cuda = FakeCudaCounters(monkeypatch)

    class Trainer:
        """The five phases of a GRPO micro-batch step, nested as TRL nests them, each allocating a known amount."""

        def __init__(self):
            self.accelerator = types.SimpleNamespace(backward=lambda loss: (cuda.alloc(50), cuda.alloc(-50)))

        def _get_per_token_logps_and_entropies(self):
            cuda.alloc(30)
            cuda.alloc(-30)

        def _generate(self):
            cuda.alloc(100 + self.extra)
            cuda.alloc(-100 - self.extra)

        def compute_loss(self):
            cuda.alloc(200)  # the saved activations stay until the backward frees them

        def training_step(self):
            self._generate()
            with torch.no_grad():
                self._get_per_token_logps_and_entropies()
            self.compute_loss()
            self.accelerator.backward(None)
            cuda.alloc(-200)

    trainer = Trainer()
    cuda.alloc(1000)  # the weights
    phases, run_peak = bench_memory.watch_cuda_phases(trainer)
    for extra in (0, 500, 0):  # the second step's rollout is the highest; later resets must not hide it
        trainer.extra = extra
        trainer.training_step()
    assert run_peak() == 1600
    assert phases["generation"] == {"held": 1000, "rise": 600}
    assert phases["scoring"] == {"held": 1000, "rise": 30}
    assert phases["backward"] == {"held": 1200, "rise": 50}  # held and rise of one call, not two maxima
    assert phases["training"] == {"held": 1000, "rise": 600}


def test_a_machine_without_gpus_watches_nothing():
    if list_gpus():
        return  # a GPU machine: tests/test_gpu.py measures for real
    assert used_bytes_per_gpu() == {}
    with GpuMemoryWatch(every_s=0.01) as watch:
        pass
    assert watch.peak_bytes() == {}


def test_the_sync_timer_records_each_call_and_keeps_its_result_and_errors():
    recorded: list[float] = []

    def sync(delay: float) -> str:
        time.sleep(delay)
        if delay > 0.02:
            raise RuntimeError("NCCL timeout")
        return "synced"

    timed_sync = timed(sync, recorded.append)
    assert timed_sync(0.01) == "synced" and timed_sync.__name__ == "sync"
    with pytest.raises(RuntimeError, match="NCCL"):
        timed_sync(0.03)
    assert len(recorded) == 2 and recorded[0] >= 0.01 and recorded[1] >= 0.03
