"""What hardware a run can use, asked through NVML without importing torch (`runs_on_cpu_here` asks torch).

The UI process must stay light, so GPUs are listed through NVML (nvidia-ml-py),
which answers in milliseconds and needs no CUDA context. A machine without an
NVIDIA driver simply has no GPUs: `list_gpus()` returns [].
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass


@dataclass(frozen=True)
class GpuInfo:
    index: int
    name: str
    total_mb: int
    free_mb: int
    utilization: int  # percent, over the driver's last sample period

    def to_dict(self) -> dict:
        return asdict(self)


def list_gpus() -> list[GpuInfo]:
    """The NVIDIA GPUs NVML sees, in NVML order; [] without a driver or a GPU."""
    try:
        import pynvml
    except ImportError:
        return []
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError:
        return []  # no driver, or no GPU: a CPU machine
    try:
        gpus = []
        for index in range(pynvml.nvmlDeviceGetCount()):
            handle = pynvml.nvmlDeviceGetHandleByIndex(index)
            name = pynvml.nvmlDeviceGetName(handle)
            memory = pynvml.nvmlDeviceGetMemoryInfo(handle)
            try:
                utilization = pynvml.nvmlDeviceGetUtilizationRates(handle).gpu
            except pynvml.NVMLError:
                utilization = 0  # some virtualised GPUs do not report it
            gpus.append(
                GpuInfo(
                    index=index,
                    name=name.decode() if isinstance(name, bytes) else str(name),
                    total_mb=int(memory.total // 2**20),
                    free_mb=int(memory.free // 2**20),
                    utilization=int(utilization),
                )
            )
        return gpus
    finally:
        pynvml.nvmlShutdown()


def visible_devices(gpu_ids: list[int] | tuple[int, ...]) -> str:
    """The CUDA_VISIBLE_DEVICES value for the chosen GPUs ("" hides every GPU)."""
    return ",".join(str(int(i)) for i in gpu_ids)


def runs_on_cpu(device: str, gpus_present: bool | None = None, env: dict | None = None) -> bool:
    """Whether a run with this `device` setting ("auto", "cpu", "cuda") trains on the CPU.

    "auto" means the GPUs this process may use: none when CUDA_VISIBLE_DEVICES
    hides them all (the launcher does that for CPU runs); else `gpus_present`
    when the caller knows (the training process asks torch), else what NVML lists.
    """
    if device == "cpu":
        return True
    if device == "cuda":
        return False
    visible = (os.environ if env is None else env).get("CUDA_VISIBLE_DEVICES")
    if visible is not None and visible.strip() in ("", "-1"):
        return True
    if gpus_present is None:
        gpus_present = bool(list_gpus())
    return not gpus_present


def runs_on_cpu_here(device: str) -> bool:
    """Whether a run with this `device` setting trains on the CPU in this process, asking torch whether CUDA
    sees a GPU (the training process has torch loaded; NVML may list a GPU that torch cannot use)."""
    import torch

    return runs_on_cpu(device, gpus_present=torch.cuda.is_available())


def cpu_threads(num_processes: int, cores: int | None = None) -> int:
    """Compute threads per training process on a CPU run: the cores shared out, at least one.

    torch would otherwise give every process all the cores, and processes that
    oversubscribe the CPU each run slower than their share.
    """
    cores = cores or os.cpu_count() or 1
    return max(1, cores // max(1, num_processes))
