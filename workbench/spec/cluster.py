"""The shape of a run over several machines, and the rules that say whether it can work.

A run's `num_processes` is the total number of training processes, on every
machine together: accelerate's `--num_processes`, TRL's world size, the `n`
of the batch rules. `num_machines` splits them evenly, so each machine starts
`num_processes / num_machines` of them (`processes_per_machine`). Machine rank
0 hosts the rendezvous at `main_process_ip:main_process_port`.

`distributed_backend` says how the processes share the model on GPUs: `ddp`
(a full copy each, the default), DeepSpeed ZeRO-2 or ZeRO-3, or FSDP. It is
written as an accelerate config file (workbench/jobs/cluster.py), never
re-implemented here.

With `vllm_node` a vLLM server gets a machine of its own beside the
`num_machines` training machines (Open-R1's layout); it is never counted as
a training machine.

`problems(cfg)` returns (field, rule, fix) triples as `spec.generation` does;
`spec.config_checks` turns them into ConfigProblems. Pure: standard library only.
"""

from __future__ import annotations

import importlib.util
import ipaddress
import re

from workbench.spec.generation import SERVER_GENERATIONS

DISTRIBUTED_BACKENDS = ("ddp", "deepspeed-zero2", "deepspeed-zero3", "fsdp")
# Backends that split the model's weights (and so the adapter's) over the processes.
SHARDED_BACKENDS = ("deepspeed-zero3", "fsdp")
DEEPSPEED_STAGES = {"deepspeed-zero2": 2, "deepspeed-zero3": 3}
DEFAULT_PORT = 29500  # torch.distributed's usual rendezvous port

_HOST_NAME = re.compile(
    r"^(?=.{1,253}$)[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
    r"(\.[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*$"
)


def processes_per_machine(cfg) -> int:
    """Training processes each machine starts (accelerate's num_processes // num_machines)."""
    return cfg.num_processes // max(cfg.num_machines, 1)


def machines_in_job(cfg) -> int:
    """Machines a cluster job asks for: the training machines, plus one when the vLLM server has its own."""
    return cfg.num_machines + (1 if cfg.vllm_node else 0)


def is_multi_machine(cfg) -> bool:
    return cfg.num_machines > 1 or cfg.vllm_node


def valid_host(text: str) -> bool:
    """An IPv4/IPv6 address or a DNS host name."""
    try:
        ipaddress.ip_address(text)
        return True
    except ValueError:  # digits and dots only would be a mistyped IPv4 address, not a name
        return bool(_HOST_NAME.match(text)) and not re.fullmatch(r"[\d.]+", text)


def problems(cfg, on_cpu: bool, here: bool = False) -> list[tuple[str, str, str]]:
    """Every reason `cfg`'s cluster shape cannot run.

    `on_cpu`: its processes would train on the CPU; `here`: it runs on this
    machine, so the packages its backend needs must be installed in this Python.
    """
    found: list[tuple[str, str, str]] = []
    if cfg.num_machines < 1:
        return [("num_machines", f"must be >= 1, got {cfg.num_machines}", "use 1, or the number of training machines")]
    found += _split_problems(cfg)
    found += _address_problems(cfg)
    found += _backend_problems(cfg, on_cpu, here)
    found += _vllm_node_problems(cfg)
    return found


def _split_problems(cfg) -> list[tuple[str, str, str]]:
    machines, total = cfg.num_machines, cfg.num_processes
    if total < 1 or total % machines == 0:
        return []
    lower, upper = (total // machines) * machines, (total // machines + 1) * machines
    nearby = " or ".join(str(n) for n in (lower, upper) if n >= machines)
    return [
        (
            "num_processes",
            f"{total} processes do not split evenly over {machines} machines (each machine "
            "starts num_processes / num_machines; num_processes counts every machine's processes)",
            f"use {nearby} (a multiple of num_machines), or change num_machines",
        )
    ]


def _address_problems(cfg) -> list[tuple[str, str, str]]:
    found = []
    port = cfg.main_process_port
    if not 1024 <= port <= 65535:
        found.append(
            (
                "main_process_port",
                f"must be a port from 1024 to 65535, got {port} (ports below 1024 need root)",
                f"use {DEFAULT_PORT}, or another port open between the machines",
            )
        )
    elif cfg.generation in SERVER_GENERATIONS and cfg.vllm_port == port:
        found.append(
            (
                "main_process_port",
                f"{port} is also the vLLM server's port (vllm_port)",
                f"use {DEFAULT_PORT} here and another port for vllm_port (or 0 for any free one)",
            )
        )
    host = cfg.main_process_ip.strip()
    if host and not valid_host(host):
        found.append(
            (
                "main_process_ip",
                f"{host!r} is neither an IP address nor a host name",
                "give machine rank 0's address, e.g. 10.0.0.1 or node01, or leave it empty for the cluster "
                "bundle to fill in (Slurm's first node)",
            )
        )
    elif host in ("0.0.0.0", "::") and cfg.num_machines > 1:
        found.append(
            (
                "main_process_ip",
                f"{host} means 'every address' to a server; the other machines cannot connect to it",
                "give machine rank 0's own address, e.g. 10.0.0.1",
            )
        )
    return found


def _backend_problems(cfg, on_cpu: bool, here: bool) -> list[tuple[str, str, str]]:
    backend = cfg.distributed_backend
    if backend not in DISTRIBUTED_BACKENDS:
        return [
            (
                "distributed_backend",
                f"{backend!r} is not one of {', '.join(DISTRIBUTED_BACKENDS)}",
                f"choose one of {', '.join(DISTRIBUTED_BACKENDS)}",
            )
        ]
    if backend == "ddp":
        return []
    found = []
    if cfg.device == "cpu" or on_cpu:
        found.append(
            (
                "distributed_backend",
                f"{backend} shards the model over CUDA GPUs, and this run trains on the CPU",
                "use distributed_backend=ddp on CPU, or device=cuda on GPU machines",
            )
        )
    if here and backend in DEEPSPEED_STAGES and importlib.util.find_spec("deepspeed") is None:
        found.append(
            (
                "distributed_backend",
                f"{backend} needs the deepspeed package, which this Python cannot import",
                "pip install deepspeed in this venv, or use ddp or fsdp (built into torch)",
            )
        )
    if backend in SHARDED_BACKENDS and cfg.generation == "vllm-server":
        found.append(
            (
                "distributed_backend",
                f"with {backend} the LoRA weights are split over the processes, but "
                "generation=vllm-server has the main process save the adapter for the server alone",
                "use deepspeed-zero2 or ddp (the adapter is small: sharding it saves nothing), or "
                "generation=trl-server, where TRL gathers the weights before each sync",
            )
        )
    return found


def _vllm_node_problems(cfg) -> list[tuple[str, str, str]]:
    if not cfg.vllm_node:
        return []
    found = []
    if cfg.generation not in SERVER_GENERATIONS:
        found.append(
            (
                "vllm_node",
                f"a machine for the vLLM server, but generation={cfg.generation} uses no server",
                "set generation=vllm-server or trl-server, or switch vllm_node off",
            )
        )
    if cfg.vllm_server_base_url.strip():
        found.append(
            (
                "vllm_node",
                f"a machine for the vLLM server, and also an existing server at {cfg.vllm_server_base_url.strip()}",
                "switch vllm_node off to use that server, or clear vllm_server_base_url to serve on the vLLM machine",
            )
        )
    if cfg.vllm_gpu_ids:
        found.append(
            (
                "vllm_gpu_ids",
                f"{cfg.vllm_gpu_ids} take GPUs from a training machine for vLLM, but "
                "vllm_node gives the server a machine of its own (it is not one of the num_machines)",
                "clear vllm_gpu_ids: the server uses its machine's GPUs (vllm_tensor_parallel_size of them)",
            )
        )
    return found
