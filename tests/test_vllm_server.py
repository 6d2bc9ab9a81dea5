"""The run's vLLM server: its command and environment per backend, the checks before launch, and its guard.

The guard tests use a stand-in server (Python's http.server) so they prove the
lifecycle in seconds; tests/test_vllm_rollout.py runs the real vLLM server.
"""

import json
import os
import signal
import socket
import subprocess
import sys
import time

import psutil
import pytest

from workbench.jobs import processes, vllm_server
from workbench.runstore import runfolder
from workbench.sources.model_files import model_location
from workbench.spec import generation
from workbench.spec.config import RunConfig


def flag(command, name):
    return command[command.index(name) + 1]


def test_lora_server_command_on_cpu():
    cfg = RunConfig(generation="vllm-server", lora_r=16, vllm_max_model_len=512)
    command = vllm_server.server_command(cfg, 41234, python="/v/bin/python", on_cpu=True)
    assert command[:3] == ["/v/bin/python", "-m", "vllm.entrypoints.openai.api_server"]
    assert flag(command, "--model") == model_location("smollm2-135m-instruct")
    assert (flag(command, "--host"), flag(command, "--port"), flag(command, "--max-model-len")) == (
        "127.0.0.1",
        "41234",
        "512",
    )
    assert (
        "--enable-lora" in command and flag(command, "--max-lora-rank") == "16" and flag(command, "--max-loras") == "2"
    )
    assert flag(command, "--served-model-name") == vllm_server.SERVED_MODEL_NAME
    assert flag(command, "--dtype") == "float32" and flag(command, "--logprobs-mode") == "processed_logprobs"
    assert "--gpu-memory-utilization" not in command  # a CPU server sizes its KV cache by VLLM_CPU_KVCACHE_SPACE
    env = vllm_server.server_env(cfg, base={"PYTHONPATH": "/x", "PATH": "/bin"}, on_cpu=True)
    assert env["VLLM_ALLOW_RUNTIME_LORA_UPDATING"] == "True" and env["CUDA_VISIBLE_DEVICES"] == ""
    assert env["VLLM_CPU_KVCACHE_SPACE"] == "1" and "PYTHONPATH" not in env
    # no worker process: the model runs in the engine's process (each spawned process re-imports vLLM)
    assert flag(command, "--distributed-executor-backend") == "uni" and env["VLLM_ENABLE_V1_MULTIPROCESSING"] == "0"
    # no inductor compile at the first request (16 s of g++ on a cold cache); a value the user set stays
    assert env["TORCHDYNAMO_DISABLE"] == "1"
    assert vllm_server.server_env(cfg, base={"TORCHDYNAMO_DISABLE": "0"}, on_cpu=True)["TORCHDYNAMO_DISABLE"] == "0"


def test_lora_server_on_its_gpus():
    cfg = RunConfig(
        generation="vllm-server",
        vllm_gpu_ids=[3],
        gpu_ids=[0, 1, 2],
        num_processes=3,
        lora_r=20,
        bf16=True,
        vllm_gpu_memory_utilization=0.9,
    )
    command = vllm_server.server_command(cfg, 8000, python="py", on_cpu=False)
    assert flag(command, "--max-lora-rank") == "32" and flag(command, "--dtype") == "bfloat16"
    assert flag(command, "--gpu-memory-utilization") == "0.9" and flag(command, "--tensor-parallel-size") == "1"
    assert vllm_server.server_env(cfg, base={}, on_cpu=False)["CUDA_VISIBLE_DEVICES"] == "3"
    # a GPU server keeps vLLM's own processes (the engine beside the API server, a worker per GPU)
    assert "--distributed-executor-backend" not in command
    assert not {"VLLM_ENABLE_V1_MULTIPROCESSING", "TORCHDYNAMO_DISABLE"} & set(
        vllm_server.server_env(cfg, base={}, on_cpu=False)
    )


def test_trl_server_command_has_the_flags_trl_documents():
    cfg = RunConfig(generation="trl-server", vllm_gpu_ids=[2, 3], vllm_tensor_parallel_size=2)
    command = vllm_server.server_command(cfg, 8000, python="py", on_cpu=False)
    assert json.loads(flag(command, "--weight-transfer-config")) == {"backend": "nccl"}
    assert flag(command, "--logprobs-mode") == "processed_logprobs" and flag(command, "--max-logprobs") == "-1"
    assert flag(command, "--tensor-parallel-size") == "2" and "--enable-lora" not in command
    env = vllm_server.server_env(cfg, base={}, on_cpu=False)
    assert env["VLLM_SERVER_DEV_MODE"] == "1" and env["CUDA_VISIBLE_DEVICES"] == "2,3"


@pytest.mark.parametrize(
    "changes, manages",
    [
        ({"generation": "vllm-server"}, True),
        ({"generation": "trl-server"}, True),
        ({"generation": "vllm-server", "vllm_server_base_url": "http://127.0.0.1:9"}, False),
        ({"generation": "trl-colocate"}, False),
        ({}, False),
    ],
    ids=["lora-server", "trl-server", "users-server", "colocate", "transformers"],
)
def test_which_runs_start_a_server(changes, manages):
    assert vllm_server.manages_server(RunConfig(**changes)) is manages


def test_an_address_where_no_server_answers_is_refused():
    port = processes.free_port()
    cfg = RunConfig(generation="vllm-server", vllm_server_base_url=f"http://127.0.0.1:{port}")
    with pytest.raises(vllm_server.VLLMServerError) as caught:
        vllm_server.preflight(cfg)
    assert caught.value.field == "vllm_server_base_url"
    assert f"no vLLM server answers at http://127.0.0.1:{port}" in str(caught.value) and "start the server" in str(
        caught.value
    )


def test_a_port_in_use_is_refused():
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(vllm_server.VLLMServerError) as caught:
            vllm_server.preflight(RunConfig(generation="vllm-server", vllm_port=port))
    assert caught.value.field == "vllm_port" and f"port {port}" in str(caught.value) and "0 to let" in str(caught.value)


# ---------------------------------------------------------------- the guard, with a stand-in server


@pytest.fixture
def stand_in(tmp_path, monkeypatch):
    """Start a guarded stand-in server for a run folder whose 'trainer' is a sleeping process; yields both."""
    started = []

    def start():
        trainer = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"], start_new_session=True)
        runfolder.update_status(tmp_path, state="training", pid=trainer.pid, pgid=trainer.pid)
        port = processes.free_port()
        monkeypatch.setattr(
            vllm_server,
            "server_command",
            lambda cfg, port_: [sys.executable, "-m", "http.server", str(port_), "--bind", "127.0.0.1"],
        )
        cfg = RunConfig(generation="vllm-server", vllm_port=port, model="tiny")
        section = vllm_server.start_for_run(cfg, tmp_path)
        runfolder.update_status(tmp_path, vllm=section)
        server = wait_for_child(section["pid"])
        started.append(trainer)
        return trainer, section, server

    yield start
    for trainer in started:
        processes.end_tree(trainer.pid, grace=1)


def wait_for_child(pid, timeout=60):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        children = psutil.Process(pid).children()
        if children:
            return children[0]
        time.sleep(0.1)
    raise AssertionError("the guard started no server")


def gone(process, timeout=30):
    try:
        process.wait(timeout=timeout)
    except psutil.TimeoutExpired:
        return False
    except psutil.NoSuchProcess:
        pass
    return True


@pytest.mark.slow
def test_sigkill_of_the_trainer_leaves_no_server(stand_in, tmp_path):
    trainer, section, server = stand_in()
    guard = psutil.Process(section["pid"])
    os.kill(trainer.pid, signal.SIGKILL)
    trainer.wait()
    assert gone(server) and gone(guard)
    assert "the run is over: stopping the vLLM server" in (tmp_path / runfolder.VLLM_LOG_FILE).read_text()


@pytest.mark.slow
def test_a_final_state_ends_the_server(stand_in, tmp_path):
    _, section, server = stand_in()
    guard = psutil.Process(section["pid"])
    runfolder.update_status(tmp_path, state="finished")
    assert gone(server) and gone(guard)


@pytest.mark.slow
def test_stop_for_run_ends_it_at_once(stand_in, tmp_path):
    _, section, server = stand_in()
    guard = psutil.Process(section["pid"])
    vllm_server.stop_for_run(tmp_path)
    assert gone(server, timeout=0.5) and gone(guard, timeout=0.5)
    assert "SIGTERM: stopping the vLLM server" in (tmp_path / runfolder.VLLM_LOG_FILE).read_text()


@pytest.mark.slow
def test_a_run_folder_deleted_under_the_guard_ends_the_server(stand_in, tmp_path):
    """A finished run deleted (Runs tab, a benchmark's temporary folder) before the guard's next look:
    nothing is left to read or log to, and the server must still end."""
    _, section, server = stand_in()
    guard = psutil.Process(section["pid"])
    moved = tmp_path.parent / f"{tmp_path.name}-gone"
    tmp_path.rename(moved)  # what rmtree does to the guard's view of the folder, without losing the log
    try:
        assert gone(server) and gone(guard)
    finally:
        moved.rename(tmp_path)


@pytest.mark.slow
def test_a_dying_server_is_written_in_its_log(stand_in, tmp_path):
    _, section, server = stand_in()
    guard = psutil.Process(section["pid"])
    server.kill()
    assert gone(guard)
    assert "vLLM server exited with code -9" in (tmp_path / runfolder.VLLM_LOG_FILE).read_text()


def test_vllm_is_found_where_make_vllm_puts_it():
    python = generation.find_vllm_python()
    if python is None:
        assert not (generation.VLLM_VENV / "bin" / "python").exists()
    else:
        assert python.startswith(str(generation.VLLM_VENV)) or python == sys.executable
