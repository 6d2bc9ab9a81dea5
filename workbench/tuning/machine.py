"""What decides which speed levers win on this machine: its CPU (name, the flags the kernels use), its cores, its
GPUs and the versions of the libraries that run a step. Read from /proc/cpuinfo, `os` and the installed packages."""

from __future__ import annotations

import os
import platform
from functools import lru_cache
from importlib import metadata

# the CPU flags that change which kernels torch and MKL run for a step's matmuls (others do not enter the key)
KERNEL_FLAGS = ("avx2", "avx512f", "avx512_bf16", "amx_bf16", "amx_tile", "avx512_vnni", "fma", "asimd", "sve", "bf16")
# a CPU with one of these multiplies bfloat16 natively: only there may `auto` sample from a bfloat16 copy
NATIVE_BF16_FLAGS = ("avx512_bf16", "amx_bf16", "bf16")
LIBRARIES = ("torch", "transformers", "trl", "peft")


def _cpuinfo_fields(text: str) -> tuple[str, set[str]]:
    """The CPU's name and flags from /proc/cpuinfo's text (x86 `model name`/`flags`, ARM `Features`)."""
    name, flags = "", set()
    for line in text.splitlines():
        key, _, value = line.partition(":")
        key = key.strip().lower()
        if key in ("model name", "hardware", "cpu model") and not name:
            name = value.strip()
        elif key in ("flags", "features") and not flags:
            flags = set(value.split())
    return name, flags


@lru_cache(maxsize=1)
def cpu_name_and_flags() -> tuple[str, frozenset[str]]:
    """This machine's CPU name and flags; the platform's processor name where /proc/cpuinfo is absent."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as handle:
            name, flags = _cpuinfo_fields(handle.read(1 << 20))
    except OSError:
        name, flags = "", set()
    return name or platform.processor() or platform.machine() or "unknown CPU", frozenset(flags)


def cpu_name() -> str:
    return cpu_name_and_flags()[0]


def native_bf16(flags: frozenset[str] | set[str] | None = None) -> bool:
    """Whether the CPU multiplies bfloat16 in hardware (AVX512-BF16, AMX, or ARM's BF16)."""
    flags = cpu_name_and_flags()[1] if flags is None else flags
    return any(flag in flags for flag in NATIVE_BF16_FLAGS)


@lru_cache(maxsize=1)
def library_versions() -> dict[str, str]:
    versions = {}
    for name in LIBRARIES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = "absent"
    return versions


def fingerprint() -> dict:
    """What a speed choice measured here depends on, beside the model and the run's shape: the tuning cache's key."""
    name, flags = cpu_name_and_flags()
    return {
        "cpu": name,
        "cpu_flags": sorted(flag for flag in KERNEL_FLAGS if flag in flags),
        "cores": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count(),
        "machine": platform.machine(),
        **library_versions(),
    }
