"""What hardware a run can use, asked without importing torch.

The UI process must stay light, so GPUs are listed through NVML (nvidia-ml-py),
which answers in milliseconds and needs no CUDA context. A machine without an
NVIDIA driver simply has no GPUs: `list_gpus()` returns [].
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass
from pathlib import Path


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
            gpus.append(GpuInfo(
                index=index,
                name=name.decode() if isinstance(name, bytes) else str(name),
                total_mb=int(memory.total // 2**20),
                free_mb=int(memory.free // 2**20),
                utilization=int(utilization),
            ))
        return gpus
    finally:
        pynvml.nvmlShutdown()


def visible_devices(gpu_ids: list[int] | tuple[int, ...]) -> str:
    """The CUDA_VISIBLE_DEVICES value for the chosen GPUs ("" hides every GPU)."""
    return ",".join(str(int(i)) for i in gpu_ids)


def training_env(gpu_ids: list[int], device: str, base: dict | None = None) -> dict:
    """Environment for a training process: CUDA_VISIBLE_DEVICES from the choice.

    device "cpu" hides all GPUs so nothing lands on one by accident; no gpu_ids
    on a GPU machine leaves the caller's visibility as it is.
    """
    env = dict(os.environ if base is None else base)
    if device == "cpu":
        env["CUDA_VISIBLE_DEVICES"] = ""
    elif gpu_ids:
        env["CUDA_VISIBLE_DEVICES"] = visible_devices(gpu_ids)
    return env


def busy_gpu_ids(runs_dir: str | os.PathLike | None = None) -> set[int]:
    """GPUs held by runs that are still going, read from their run folders."""
    from workbench import launcher, runfolder

    busy: set[int] = set()
    for run_dir in runfolder.list_run_dirs(runs_dir):
        status = launcher.status_of_dir(run_dir)
        if status.get("state") in runfolder.FINAL_STATES or not status:
            continue
        config = runfolder.read_json(Path(run_dir) / runfolder.CONFIG_FILE, default={}) or {}
        if config.get("device") == "cpu":
            continue
        ids = config.get("gpu_ids") or [g.index for g in list_gpus()]
        busy.update(int(i) for i in ids)
    return busy
