"""The GPUs' used memory, sampled while a run goes: its peak per GPU, for the GPU tests and benchmarks.

A run's memory on a GPU is more than what torch allocates: the CUDA context, the caching allocator's
reserve, and a vLLM server's or TRL's colocated engine's own pool all count against the card. NVML's
used memory per device sees all of them, whichever process holds it, so the peak a `GpuMemoryWatch`
reports is what the user's card had to hold, less what was already in use when the watch began.

    with GpuMemoryWatch() as watch:
        ...  # the run
    watch.peak_bytes()   # {gpu index: peak used bytes above the baseline}

Between runs, `wait_for_release(idle)` waits for the last one's memory to come back first.

Without NVML or a GPU it watches nothing and reports {}.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

# NVML's memory counters change as the allocator grows; a quarter second catches a generation
# round's KV cache and a backward pass's activations, which each last seconds on a GPU run.
SAMPLE_EVERY_S = 0.25


def used_bytes_per_gpu() -> dict[int, int]:
    """Used memory of every GPU NVML sees, by NVML index; {} without a driver or a GPU."""
    try:
        import pynvml
    except ImportError:
        return {}
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError:
        return {}
    try:
        return {
            index: int(pynvml.nvmlDeviceGetMemoryInfo(pynvml.nvmlDeviceGetHandleByIndex(index)).used)
            for index in range(pynvml.nvmlDeviceGetCount())
        }
    finally:
        pynvml.nvmlShutdown()


def peak_above(baseline: dict[int, int], samples: list[dict[int, int]]) -> dict[int, int]:
    """Each GPU's highest sample less its baseline (never below 0)."""
    return (
        {index: max(0, max(sample.get(index, 0) for sample in samples) - used) for index, used in baseline.items()}
        if samples
        else {index: 0 for index in baseline}
    )


# How far above its idle reference a GPU may stay and still count as released: the driver's own
# bookkeeping moves by a few MiB between reads.
RELEASE_SLACK_BYTES = 64 * 2**20


def wait_for_release(
    reference: dict[int, int],
    timeout_s: float = 60.0,
    slack: int = RELEASE_SLACK_BYTES,
    read: Callable[[], dict[int, int]] = used_bytes_per_gpu,
    poll_s: float = 0.25,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
) -> bool:
    """Wait until every GPU's used memory is back within `slack` of `reference`; False if `timeout_s` passed first.

    A process that has exited can still hold its CUDA memory for a moment while the driver tears its
    context down, and a run's status says "finished" before its process exits at all. A watch begun in
    that moment takes the last run's memory for its baseline and reports the next run's peak as almost
    nothing (seen on an H100: a small fraction of what the run allocated).
    """
    deadline = clock() + timeout_s
    while True:
        used = read()
        if all(used.get(index, 0) <= before + slack for index, before in reference.items()):
            return True
        if clock() >= deadline:
            return False
        sleep(poll_s)


class GpuMemoryWatch:
    """Samples every GPU's used memory on a thread of its own until the `with` block ends."""

    def __init__(self, every_s: float = SAMPLE_EVERY_S, read: Callable[[], dict[int, int]] = used_bytes_per_gpu):
        self.every_s = every_s
        self._read = read
        self._samples: list[dict[int, int]] = []
        self._baseline: dict[int, int] = {}
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def __enter__(self) -> GpuMemoryWatch:
        self._baseline = self._read()
        if self._baseline:
            self._thread = threading.Thread(target=self._sample, name="gpu-memory-watch", daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._samples.append(self._read())  # the last moment counts too

    def _sample(self) -> None:
        while not self._stop.wait(self.every_s):
            self._samples.append(self._read())

    def peak_bytes(self) -> dict[int, int]:
        """{gpu index: peak used bytes above what was in use when the watch began}."""
        return peak_above(self._baseline, self._samples)
