"""The vLLM server on the pages: Train tab panel, Setup tab command preview and GPU split, Runs table column."""

import pytest

from workbench.sources.gpus import GpuInfo
from workbench.spec.config import RunConfig
from workbench.spec.config_checks import plan_for
from workbench.ui import runs_view, server_view
from workbench.ui.setup_view import command_text, config_from_form, hardware_choice

FOUR_GPUS = [GpuInfo(index=i, name="H100", total_mb=81_559, free_mb=80_000, utilization=0) for i in range(4)]


def status_with(run_state="training", **vllm):
    return {
        "state": run_state,
        "vllm": {"state": "ready", "url": "http://127.0.0.1:41234", "on_cpu": True, "ready_after_s": 48.2, **vllm},
    }


@pytest.mark.parametrize(
    "status, words",
    [
        (
            status_with(),
            [
                "vLLM server: ready",
                "after 48 s",
                "http://127.0.0.1:41234",
                "on the CPU",
                "hot-loads",
                "slower than transformers",
            ],
        ),
        (status_with(run_state="finished"), ["vLLM server: stopped"]),
        (status_with(run_state="failed"), ["vLLM server: stopped"]),
        (status_with(run_state="failed", state="failed"), ["vLLM server: failed", "<details open>"]),
        (status_with(external=True, on_cpu=False, state="starting"), ["starting", "a server you run"]),
    ],
    ids=["ready", "run-over", "run-failed-server-fine", "server-failed", "users-server"],
)
def test_server_panel(status, words):
    html = server_view.server_html(status, "INFO: Uvicorn running")
    for word in words:
        assert word in html, html


def test_no_server_no_panel():
    assert server_view.server_html({"state": "training"}) == ""


def test_command_preview_shows_the_server_beside_training():
    cfg = RunConfig(generation="vllm-server", device="cpu")
    server = server_view.server_command_text(cfg)
    assert "vllm.entrypoints.openai.api_server" in server and "--port PORT" in server and "--enable-lora" in server
    assert "VLLM_ALLOW_RUNTIME_LORA_UPDATING=True" in server and "CUDA_VISIBLE_DEVICES=" in server
    # what keeps a copied command as fast as the run's own server: no worker process, no compile at the first request
    assert "VLLM_ENABLE_V1_MULTIPROCESSING=0" in server and "TORCHDYNAMO_DISABLE=1" in server
    text = command_text(["python", "-m", "workbench", "train"], {"OMP_NUM_THREADS": "2"}, server)
    assert text.startswith("# training\nOMP_NUM_THREADS=2 python -m workbench train\n\n# vLLM server on the CPU")
    assert server_view.server_command_text(RunConfig()) == ""
    users = server_view.server_command_text(RunConfig(generation="vllm-server", vllm_server_base_url="http://h:1"))
    assert users == "# generation on the vLLM server you run at http://h:1"


def test_hardware_picker_splits_gpus_and_feeds_the_calculator():
    form = {"gpu_ids": ["0", "1", "2"], "vllm_gpu_ids": ["3"]}
    choice = hardware_choice(form, gpus_present=True, all_gpu_ids=(0, 1, 2, 3))
    assert choice == {"device": "auto", "gpu_ids": [0, 1, 2], "vllm_gpu_ids": [3], "num_processes": 3}
    # seed 001: 4 GPUs, 1 serves vLLM, 3 train, batch 1, G 8 -> TRL's divisibility error and fixes, moving a GPU too
    cfg = RunConfig(generation="vllm-server", per_device_train_batch_size=1, num_generations=8, **choice)
    plan = plan_for(cfg)
    assert not plan.valid and "divisible by num_generations (8)" in plan.errors[0]
    assert any("vllm_gpus" in s.changes for s in plan.suggestions)
    assert "3 GPU(s) train ([0, 1, 2]), 1 serve vLLM ([3])" in server_view.split_text(cfg, FOUR_GPUS)


def test_only_vllm_gpus_ticked_trains_on_the_first_gpu_left():
    choice = hardware_choice({"gpu_ids": [], "vllm_gpu_ids": [0]}, gpus_present=True, all_gpu_ids=(0, 1))
    assert (choice["gpu_ids"], choice["vllm_gpu_ids"], choice["num_processes"]) == ([1], [0], 1)


def test_on_cpu_the_server_shares_the_cpu():
    cfg = config_from_form({"generation": "vllm-server", "cpu_processes": 1, "vllm_gpu_ids": [2]}, gpus_present=False)
    assert cfg.vllm_gpu_ids == [] and cfg.device == "cpu"
    assert "shares the CPU" in server_view.split_text(cfg, [])


def test_runs_table_shows_the_generation_backend(tmp_path):
    row = runs_view.summarise_run({"run_id": "a", "state": "finished", "generation": "vllm-server"})
    assert row["generation"] == "vllm-server" and "generation" in runs_view.COLUMNS
    assert runs_view.summarise_run({"run_id": "old", "state": "finished"})["generation"] == "transformers"
