"""A run's own vLLM server: its command, its process, its health check, its end.

With `generation = "vllm-server"` (or `"trl-server"`) and no
`vllm_server_base_url`, the launcher starts a vLLM OpenAI-compatible server
with the run (`start_for_run`) and the trainer talks to it over HTTP.

How the server is tied to the run, so it never outlives it:

    launcher ──spawn──► guard (python -m workbench.jobs.vllm_server, own session)
                            └──spawn──► vLLM server (own session, its engine processes below it)

The guard polls the run's status.json once a second and ends the server's
whole process tree as soon as the run is over: a final state (finished,
failed, stopped), or a training process that is gone without saying so (a
SIGKILL, an out-of-memory kill). It also ends it on SIGTERM (`stop_for_run`,
which the launcher's stop calls). When the server dies first, the guard writes
its exit code into the server's log, where the trainer's failure message
finds it.

The server's output goes to `vllm_server.log` in the run folder; its address,
state (starting / ready / failed), command and guard pid sit in status.json
under `vllm` (the trainer turns `starting` into `ready` or `failed`).
The command is an argument list: `python -m vllm.entrypoints.openai.api_server`
(the `vllm` console script of the CPU build has no package metadata), run by
the Python of `.venv-vllm` (`make vllm`), whose pins differ from the project's.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

from workbench.errors import WorkbenchError
from workbench.jobs import processes
from workbench.runstore import runfolder, safe_files
from workbench.sources.gpus import runs_on_cpu, visible_devices
from workbench.sources.model_files import model_location
from workbench.spec import generation
from workbench.spec.config import RunConfig

SERVED_MODEL_NAME = "base"  # the base model's name on the server; adapters get names of their own
MAX_LORAS = 2  # the adapter being replaced and its successor
CPU_KV_CACHE_GIB = 1  # VLLM_CPU_KVCACHE_SPACE: enough for SmolLM2's groups; vLLM's default is 4 GiB
GUARD_POLL_SECONDS = 1.0
PID_WAIT_SECONDS = 120.0  # a guard whose run never records a training process gives up after this
HEALTH_TIMEOUT_SECONDS = 3.0


class VLLMServerError(WorkbenchError):
    """A vLLM server that cannot be used for a run (address unreachable, port taken); says what to do."""


def manages_server(cfg: RunConfig) -> bool:
    """Whether a run of `cfg` starts (and ends) a vLLM server of its own."""
    return cfg.generation in generation.SERVER_GENERATIONS and not cfg.vllm_server_base_url.strip()


def server_on_cpu(cfg: RunConfig, env: dict | None = None) -> bool:
    """A server without GPUs of its own on a run that trains on the CPU runs on the CPU."""
    return not cfg.vllm_gpu_ids and runs_on_cpu(cfg.device, env=env)


def server_command(cfg: RunConfig, port: int | str, python: str | None = None, on_cpu: bool | None = None) -> list[str]:
    """The argument list that serves `cfg.model` for this run's generation backend (`port` may be a placeholder)."""
    python = python or generation.find_vllm_python(cfg.vllm_python) or "python"
    on_cpu = server_on_cpu(cfg) if on_cpu is None else on_cpu
    command = [
        python,
        "-m",
        "vllm.entrypoints.openai.api_server",
        "--model",
        model_location(cfg.model),
        "--host",
        cfg.vllm_host,
        "--port",
        str(port),
        "--max-model-len",
        str(cfg.vllm_max_model_len),
        # the trainer's precision, so the server samples from the same numbers it trains
        "--dtype",
        "bfloat16" if cfg.bf16 else "float32",
        "--seed",
        str(cfg.seed),
        # logprobs after temperature and penalties: what TRL's importance-sampling correction compares
        "--logprobs-mode",
        "processed_logprobs",
    ]
    if on_cpu:
        # No worker process of its own on a CPU: the model runs in the engine's process (server_env keeps vLLM's
        # CPU platform from turning `uni` back into `mp`). The OpenAI server always starts its engine in a
        # process of its own, and each process vLLM spawns re-imports torch and vLLM (seconds each on a small
        # CPU machine).
        command += ["--distributed-executor-backend", "uni"]
    else:
        command += [
            "--gpu-memory-utilization",
            str(cfg.vllm_gpu_memory_utilization),
            "--tensor-parallel-size",
            str(cfg.vllm_tensor_parallel_size),
        ]
    if cfg.generation == "trl-server":
        # the flags TRL 1.16 documents for its server mode: weights arrive over NCCL each step
        return command + ["--weight-transfer-config", json.dumps({"backend": "nccl"}), "--max-logprobs", "-1"]
    return command + [
        "--served-model-name",
        SERVED_MODEL_NAME,
        "--enable-lora",
        "--max-lora-rank",
        str(generation.served_lora_rank(cfg.lora_r, cfg.vllm_max_lora_rank)),
        "--max-loras",
        str(MAX_LORAS),
    ]


def server_env(cfg: RunConfig, base: dict | None = None, on_cpu: bool | None = None) -> dict:
    """The server's environment: its GPUs (or none), runtime LoRA loading, TRL's dev endpoints."""
    env = dict(os.environ if base is None else base)
    env.pop("PYTHONPATH", None)  # the server runs in its own venv; nothing of this one belongs on its path
    on_cpu = server_on_cpu(cfg, env) if on_cpu is None else on_cpu
    if on_cpu:
        env["CUDA_VISIBLE_DEVICES"] = ""
        env.setdefault("VLLM_CPU_KVCACHE_SPACE", str(CPU_KV_CACHE_GIB))
        env.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")  # keeps the `uni` executor (see server_command)
        # vLLM compiles two small sampler helpers with inductor (`batched_count_greater_than` for the logprobs
        # TRL asks for, `compiled_random_sample`) at the first request: seconds of g++ on a small CPU machine
        # wherever the inductor cache is cold, which a sandbox's private /tmp always is. Eager, they cost nothing
        # measurable here (benchmarks/bench_sandbox.py --generation vllm-server). The model itself is not compiled on a
        # CPU server with LoRA (--enable-lora, always set here: vLLM's CPU platform then turns compilation off),
        # so this switches off nothing else.
        env.setdefault("TORCHDYNAMO_DISABLE", "1")
    elif cfg.vllm_gpu_ids:
        env["CUDA_VISIBLE_DEVICES"] = visible_devices(cfg.vllm_gpu_ids)
    if cfg.generation == "trl-server":
        env["VLLM_SERVER_DEV_MODE"] = "1"  # /server_info and the weight-transfer endpoints TRL calls
    else:
        env["VLLM_ALLOW_RUNTIME_LORA_UPDATING"] = "True"  # /v1/load_lora_adapter and /v1/unload_lora_adapter
    env["PYTHONUNBUFFERED"] = "1"
    return env


def base_url(host: str, port: int) -> str:
    return f"http://{'127.0.0.1' if host in ('0.0.0.0', '') else host}:{port}"


def is_healthy(url: str, timeout: float = HEALTH_TIMEOUT_SECONDS) -> bool:
    """Whether the server at `url` answers GET /health with 200."""
    try:
        with urllib.request.urlopen(f"{url.rstrip('/')}/health", timeout=timeout) as response:
            return response.status == 200
    except (urllib.error.URLError, OSError, ValueError):
        return False


def preflight(cfg: RunConfig) -> None:
    """Refuse, before anything starts, a server address that does not answer or a port already taken."""
    url = cfg.vllm_server_base_url.strip()
    if cfg.generation not in generation.SERVER_GENERATIONS:
        return
    if url:
        if not is_healthy(url):
            raise VLLMServerError(
                field="vllm_server_base_url",
                rule=f"no vLLM server answers at {url} (GET {url.rstrip('/')}/health failed)",
                fix="start the server first (see the command preview), correct the address, "
                "or leave it empty so the run starts its own server",
            )
        return
    if cfg.vllm_port and generation.port_in_use(cfg.vllm_host, cfg.vllm_port):
        raise VLLMServerError(
            field="vllm_port",
            rule=f"port {cfg.vllm_port} on {cfg.vllm_host} is already in use",
            fix="choose another port, or 0 to let the run pick a free one",
        )


def start_for_run(cfg: RunConfig, run_dir: str | os.PathLike) -> dict:
    """Start the run's server under its guard; returns the `vllm` section for status.json (state `starting`).

    The training process must be recorded in status.json (pid/pgid) within
    PID_WAIT_SECONDS, else the guard takes the run for dead and ends the server.
    """
    run_dir = Path(run_dir)
    port = cfg.vllm_port or processes.free_port(cfg.vllm_host)
    command = server_command(cfg, port)
    guard = [
        sys.executable,
        "-m",
        "workbench.jobs.vllm_server",
        "--run-dir",
        str(run_dir),
        "--model",
        cfg.model,
        "--",
        *command,
    ]
    env = processes.job_env(server_env(cfg))  # the guard imports this package; it strips PYTHONPATH for the server
    process = processes.spawn(guard, run_dir / runfolder.VLLM_LOG_FILE, env, cwd=run_dir, append=True, reap=True)
    return {
        "state": "starting",
        "url": base_url(cfg.vllm_host, port),
        "pid": process.pid,
        "command": command,
        "log": runfolder.VLLM_LOG_FILE,
        "started_at": time.time(),
        "on_cpu": server_on_cpu(cfg),
        "in_sandbox": runfolder.inside_sandbox(),
    }


def ensure_for_run(cfg: RunConfig, run_dir: str | os.PathLike) -> None:
    """For a run started in the foreground (not by the launcher): start its server unless one is already recorded.

    The launcher's own child finds the server the launcher started (a live
    guard in status.json) and starts nothing.
    """
    if not manages_server(cfg):
        return
    status = runfolder.read_run_status(run_dir)
    guard_pid = runfolder.server_pid_here(status)
    if guard_pid and processes.alive(guard_pid, (status.vllm or {}).get("started_at")):
        return
    preflight(cfg)
    Path(run_dir).mkdir(parents=True, exist_ok=True)
    runfolder.update_status(run_dir, state="starting", **runfolder.own_pid_fields(), vllm=start_for_run(cfg, run_dir))


def server_section(cfg: RunConfig) -> dict | None:
    """The `vllm` section a run that uses a server records: its own server's (see start_for_run) or the user's."""
    if cfg.generation not in generation.SERVER_GENERATIONS:
        return None
    url = cfg.vllm_server_base_url.strip()
    return (
        {"state": "starting", "url": url, "pid": None, "command": None, "log": None, "external": True} if url else None
    )


def stop_for_run(run_dir: str | os.PathLike, grace: float = 10.0) -> None:
    """End the run's server (through its guard) now, and wait until it is gone."""
    status = runfolder.read_run_status(run_dir)
    pid = runfolder.server_pid_here(status)  # a sandboxed run's server ends with its sandbox
    if pid and processes.alive(pid, (status.vllm or {}).get("started_at")):
        processes.end_tree(pid, grace=grace)


# ---------------------------------------------------------------- the guard process


def _run_is_over(run_dir: Path, since: float) -> bool:
    """A final state, no live training process (once one has been recorded, or after PID_WAIT_SECONDS), or
    no run folder any more (a finished run deleted before the guard's next look)."""
    if not run_dir.is_dir():
        return True
    status = runfolder.read_run_status(run_dir)
    if status.state in runfolder.FINAL_STATES:
        return True
    pids = runfolder.pids_here(status)
    if not pids:
        return time.time() - since > PID_WAIT_SECONDS
    return not any(processes.alive(pid) for pid in pids)


def _log(path: Path, text: str) -> None:
    try:
        with safe_files.open_for_writing(path) as handle:  # never through a link planted in the run folder
            handle.write(f"[workbench] {text}\n".encode())
    except OSError:  # the run folder is gone (deleted) or full: the server must still be ended
        pass


def guard(run_dir: Path, model: str, command: list[str]) -> int:
    """Run `command` (the server) until the run is over, the server dies, or SIGTERM; then end its tree."""
    from workbench.sources.model_files import resolve_model

    log = run_dir / runfolder.VLLM_LOG_FILE
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append("SIGTERM"))
    signal.signal(signal.SIGINT, lambda *_: stop.append("SIGINT"))
    started = time.time()
    resolve_model(model)  # the bundled model's one-time conversion, if the trainer has not done it yet
    env = dict(os.environ)
    env.pop("PYTHONPATH", None)
    server = processes.spawn(command, log, env, cwd=run_dir, append=True)
    _log(log, f"vLLM server started (pid {server.pid}); this guard (pid {os.getpid()}) ends it with the run")
    try:
        while not stop:
            code = server.poll()
            if code is not None:
                _log(log, f"vLLM server exited with code {code}")
                return 1  # its engine processes, if any are left in its process group, end below
            if _run_is_over(run_dir, started):
                _log(log, "the run is over: stopping the vLLM server")
                break
            time.sleep(GUARD_POLL_SECONDS)
        if stop:
            _log(log, f"{stop[0]}: stopping the vLLM server")
    finally:  # whatever ends the watch (an error reading the run folder too), the server's tree ends with it
        processes.end_tree(server.pid, grace=10.0)
        server.wait()
    _log(log, "vLLM server stopped")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Run a vLLM server for as long as a training run lasts.")
    parser.add_argument("--run-dir", required=True, type=Path)
    parser.add_argument("--model", required=True, help="the run's model name, built here if it is the bundled one")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="-- then the server's argument list")
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    return guard(args.run_dir, args.model, command)


if __name__ == "__main__":
    sys.exit(main())
