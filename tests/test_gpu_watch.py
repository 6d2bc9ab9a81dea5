"""The GPU kit's measuring parts, on any machine: the memory watch's peak, and the weight-sync timer."""

from __future__ import annotations

import itertools
import time

import pytest

from workbench.jobs.gpu_watch import RELEASE_SLACK_BYTES, GpuMemoryWatch, peak_above, used_bytes_per_gpu, wait_for_release
from workbench.spec.hardware import list_gpus
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
