"""The vLLM server of a run, as the Setup and Train tabs show it (pure: no gradio).

- `server_html(status, log_tail)`: the Train tab's line for a run that generates
  on a vLLM server: its state (starting / ready / failed, or stopped once the
  run is over), its address, whose it is, and the end of its log.
- `server_command_text(cfg)`: the server's command for the Setup tab's preview,
  next to the training command, with the variables it starts with.
- `split_text(cfg, gpus)`: which GPU trains and which serves, in one line.
"""

from __future__ import annotations

import shlex
from html import escape

from workbench.jobs import vllm_server
from workbench.runstore import runfolder
from workbench.sources.gpus import GpuInfo
from workbench.spec.config import RunConfig
from workbench.spec.generation import SERVER_GENERATIONS

# The server environment's variables the command preview shows, in this order.
SERVER_VARIABLES = (
    "CUDA_VISIBLE_DEVICES",
    "VLLM_ALLOW_RUNTIME_LORA_UPDATING",
    "VLLM_CPU_KVCACHE_SPACE",
    "VLLM_ENABLE_V1_MULTIPROCESSING",
    "TORCHDYNAMO_DISABLE",
    "VLLM_SERVER_DEV_MODE",
)
CPU_NOTE = (
    "On a CPU the vLLM server generates slower than transformers does inside the trainer (about 45 tokens/s "
    "on 2 cores): here it shows the LoRA hot-load path working; the speed comes on GPUs."
)

SERVER_CSS = """
.wb-server { font-size: 0.88rem; border-left: 4px solid #64748b; padding: 6px 10px; background: #f8fafc; }
.wb-server.ready { border-color: #16a34a; } .wb-server.failed { border-color: #dc2626; }
.wb-server.starting { border-color: #d97706; }
.wb-server pre { max-height: 14em; overflow: auto; font-size: 0.78rem; }
"""


def server_state(status: dict) -> str | None:
    """The server's state as a reader should see it: `stopped` once the run is over (its guard ended it)."""
    section = status.get("vllm")
    if not isinstance(section, dict):
        return None
    state = section.get("state") or "starting"
    if status.get("state") in runfolder.FINAL_STATES and state != "failed" and not section.get("external"):
        return "stopped"
    return state


def server_html(status: dict, log_tail: str = "") -> str:
    """One panel about the run's vLLM server; empty for a run that has none."""
    state = server_state(status)
    if state is None:
        return ""
    section = status["vllm"]
    whose = (
        "a server you run"
        if section.get("external")
        else ("started with the run, on the CPU" if section.get("on_cpu") else "started with the run, on its own GPUs")
    )
    ready = f", ready after {section['ready_after_s']:.0f} s" if section.get("ready_after_s") is not None else ""
    parts = [
        f'<div class="wb-server {escape(state)}"><b>vLLM server: {escape(state)}</b>{escape(ready)} at '
        f"<code>{escape(str(section.get('url') or '?'))}</code> ({escape(whose)}).",
        " The trainer hot-loads its LoRA adapter there after every optimizer step." if state == "ready" else "",
    ]
    if section.get("on_cpu"):
        parts.append(f"<div>{escape(CPU_NOTE)}</div>")
    if log_tail.strip():
        parts.append(
            f"<details{' open' if state == 'failed' else ''}><summary>End of "
            f"{escape(runfolder.VLLM_LOG_FILE)}</summary><pre>{escape(log_tail)}</pre></details>"
        )
    return "".join(parts) + "</div>"


def server_command_text(cfg: RunConfig) -> str:
    """The server the run starts, as a shell line (port chosen at launch unless vllm_port is set); '' for none."""
    if cfg.generation not in SERVER_GENERATIONS:
        return ""
    if not vllm_server.manages_server(cfg):
        return f"# generation on the vLLM server you run at {cfg.vllm_server_base_url.strip()}"
    port = str(cfg.vllm_port) if cfg.vllm_port else "PORT"
    command = vllm_server.server_command(cfg, port)
    where = "the CPU" if vllm_server.server_on_cpu(cfg) else f"GPU(s) {cfg.vllm_gpu_ids or 'of the run'}"
    note = "PORT: a free port chosen at launch; " if port == "PORT" else ""
    return (
        f"# vLLM server on {where}, started with the run and ended with it ({note}log: "
        f"{runfolder.VLLM_LOG_FILE})\n" + shell_line(command, vllm_server.server_env(cfg), SERVER_VARIABLES)
    )


def shell_line(command: list[str], env: dict, variables: tuple[str, ...]) -> str:
    """`command` as one shell line after the `variables` of `env` it starts with (those set)."""
    shown = [f"{name}={shlex.quote(env[name]) if env[name] else ''}" for name in variables if name in env]
    return " ".join([*shown, shlex.join(command)])


def split_text(cfg: RunConfig, gpus: list[GpuInfo]) -> str:
    """Which GPUs train and which serve vLLM, in words, for the Setup tab's hardware picker."""
    if not gpus:
        if cfg.generation == "vllm-server":
            return "No GPU: the vLLM server shares the CPU with the training process(es). " + CPU_NOTE
        return ""
    training = cfg.gpu_ids or [g.index for g in gpus if g.index not in cfg.vllm_gpu_ids]
    if cfg.generation == "trl-colocate":
        return f"Training and vLLM share GPU(s) {training} (trl-colocate)."
    if cfg.generation in SERVER_GENERATIONS and cfg.vllm_gpu_ids:
        return (
            f"{len(training)} GPU(s) train ({training}), {len(cfg.vllm_gpu_ids)} serve vLLM "
            f"({cfg.vllm_gpu_ids}): the batch plan counts {cfg.num_processes} training process(es)."
        )
    if cfg.generation in SERVER_GENERATIONS:
        return f"The vLLM server shares the training GPU {training[:1]}; give it GPUs of its own below for speed."
    return ""
