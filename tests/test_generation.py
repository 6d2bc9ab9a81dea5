"""Generation backends: the config fields, the rules check_config applies to them, and TRL's vLLM settings."""

import pytest

from workbench.sources.gpus import GpuInfo
from workbench.spec import generation
from workbench.spec.config import ConfigError, RunConfig
from workbench.spec.config_checks import check_config, validate_config
from workbench.spec.trl_settings import trl_vllm_settings

FOUR_GPUS = [GpuInfo(index=i, name="H100", total_mb=81_559, free_mb=80_000, utilization=0) for i in range(4)]


@pytest.fixture
def with_vllm(monkeypatch):
    """A machine where `make vllm` has run: the server's Python is found."""
    monkeypatch.setattr(generation, "find_vllm_python", lambda configured="": "/opt/vllm/bin/python")


def problem_fields(cfg, gpus=()):
    return {field: (rule, fix) for field, rule, fix in generation.problems(cfg, list(gpus))}


def test_default_generates_with_transformers_and_passes():
    cfg = RunConfig()
    assert cfg.generation == "transformers"
    assert generation.problems(cfg, []) == []
    assert trl_vllm_settings(cfg) == {"use_vllm": False}


@pytest.mark.parametrize(
    "changes, gpus, field, words",
    [
        ({"generation": "trl-colocate"}, [], "generation", ["CUDA", "vllm-server"]),
        ({"generation": "trl-server"}, [], "generation", ["no visible CUDA GPU", "vllm-server"]),
        (
            {"generation": "vllm-server", "vllm_server_base_url": "localhost:8000"},
            [],
            "vllm_server_base_url",
            ["http://", "http://127.0.0.1:8000"],
        ),
        ({"generation": "vllm-server", "vllm_server_base_url": "http://h:99999"}, [], "vllm_server_base_url", ["port"]),
        (
            {"generation": "vllm-server", "vllm_server_base_url": "http://h:8000/v1"},
            [],
            "vllm_server_base_url",
            ["without /v1"],
        ),
        (
            {"generation": "vllm-server", "lora_r": 32, "vllm_max_lora_rank": 16},
            [],
            "vllm_max_lora_rank",
            ["above the server's --max-lora-rank 16", "32"],
        ),
        (
            {"generation": "vllm-server", "vllm_max_lora_rank": 12},
            [],
            "vllm_max_lora_rank",
            ["not a rank vLLM accepts"],
        ),
        (
            {"generation": "vllm-server", "vllm_max_model_len": 48},
            [],
            "vllm_max_model_len",
            ["no room for a prompt", "560"],
        ),
        ({"generation": "vllm-server", "vllm_gpu_ids": [0]}, [], "vllm_gpu_ids", ["shares the CPU"]),
        (
            {"generation": "vllm-server", "vllm_gpu_ids": [1], "gpu_ids": [1, 2]},
            FOUR_GPUS,
            "vllm_gpu_ids",
            ["both to training and to vLLM"],
        ),
        ({"generation": "vllm-server", "vllm_gpu_ids": [9]}, FOUR_GPUS, "vllm_gpu_ids", ["GPU 9 does not exist"]),
        (
            {"generation": "vllm-server", "vllm_gpu_ids": [0, 1]},
            FOUR_GPUS,
            "vllm_tensor_parallel_size",
            ["2 GPU(s) but tensor parallel size 1", "vllm_tensor_parallel_size=2"],
        ),
        (
            {"generation": "vllm-server", "vllm_gpu_ids": [3], "num_processes": 4},
            FOUR_GPUS,
            "num_processes",
            ["only 3 GPU(s) left", "move a GPU"],
        ),
        ({"generation": "trl-server"}, FOUR_GPUS, "vllm_gpu_ids", ["GPUs of its own"]),
        ({"generation": "trl-colocate", "vllm_gpu_ids": [3]}, FOUR_GPUS, "vllm_gpu_ids", ["training GPUs themselves"]),
        (
            {"generation": "trl-colocate", "num_processes": 3, "vllm_tensor_parallel_size": 2},
            FOUR_GPUS,
            "vllm_tensor_parallel_size",
            ["does not divide num_processes 3"],
        ),
        (
            {"generation": "transformers", "vllm_gpu_ids": [3]},
            FOUR_GPUS,
            "vllm_gpu_ids",
            ["generation is transformers"],
        ),
        (
            {"generation": "vllm-server", "vllm_server_base_url": "http://10.0.0.2:8000", "vllm_gpu_ids": [3]},
            FOUR_GPUS,
            "vllm_gpu_ids",
            ["already running"],
        ),
    ],
    ids=[
        "colocate-on-cpu",
        "trl-server-on-cpu",
        "url-no-scheme",
        "url-bad-port",
        "url-with-path",
        "rank-above-max",
        "rank-not-accepted",
        "model-len-too-short",
        "vllm-gpu-on-cpu",
        "gpu-in-both",
        "missing-vllm-gpu",
        "tp-vs-gpus",
        "counts-do-not-add-up",
        "trl-server-needs-gpus",
        "colocate-with-vllm-gpus",
        "colocate-tp",
        "vllm-gpus-unused",
        "url-and-gpus",
    ],
)
def test_generation_rules_name_field_rule_and_fix(with_vllm, changes, gpus, field, words):
    found = problem_fields(RunConfig(**changes), gpus)
    assert field in found, found
    text = " ".join(found[field])
    for word in words:
        assert word in text, text


def test_open_r1_split_passes(with_vllm):
    # 4 GPUs, 1 serves vLLM, 3 train: the layout the batch story is about
    cfg = RunConfig(generation="vllm-server", vllm_gpu_ids=[3], gpu_ids=[0, 1, 2], num_processes=3)
    assert generation.problems(cfg, FOUR_GPUS) == []


def test_no_vllm_installed_is_refused_with_the_fix(monkeypatch):
    monkeypatch.setattr(generation, "VLLM_VENV", generation.PROJECT_ROOT / "no-such-venv")
    monkeypatch.setattr(generation.importlib.util, "find_spec", lambda name: None)
    with pytest.raises(ConfigError) as caught:
        check_config(RunConfig(generation="vllm-server"))
    assert caught.value.field == "generation"
    assert "make vllm" in str(caught.value) and "vllm_server_base_url" in str(caught.value)
    # a running server needs nothing installed here
    assert not [
        p
        for p in validate_config(RunConfig(generation="vllm-server", vllm_server_base_url="http://127.0.0.1:8000"))
        if p.field == "generation"
    ]


def test_vllm_python_that_has_no_vllm_is_refused(tmp_path):
    python = tmp_path / "bin" / "python"
    python.parent.mkdir()
    python.write_text("")
    found = problem_fields(RunConfig(generation="vllm-server", vllm_python=str(python)))
    assert "not a Python with vLLM installed" in found["vllm_python"][0]


def test_trl_modes_on_this_cpu_machine_are_refused_pointing_to_vllm_server():
    with pytest.raises(ConfigError) as caught:
        check_config(RunConfig(generation="trl-colocate"))
    assert caught.value.field == "generation" and "vllm-server" in caught.value.fix


@pytest.mark.parametrize("rank, served", [(1, 1), (4, 8), (16, 16), (17, 32), (300, 320)], ids=str)
def test_served_lora_rank_is_the_smallest_vllm_accepts(rank, served):
    assert generation.served_lora_rank(rank) == served
    assert generation.served_lora_rank(rank, configured=64) == 64


@pytest.mark.parametrize(
    "changes, expected",
    [
        (
            {"generation": "trl-colocate", "vllm_gpu_memory_utilization": 0.4, "vllm_tensor_parallel_size": 2},
            {
                "use_vllm": True,
                "vllm_mode": "colocate",
                "vllm_gpu_memory_utilization": 0.4,
                "vllm_tensor_parallel_size": 2,
                "vllm_max_model_length": 1024,
            },
        ),
        (
            {"generation": "trl-server", "vllm_server_base_url": "http://10.0.0.2:8000", "vllm_server_timeout": 60},
            {
                "use_vllm": True,
                "vllm_mode": "server",
                "vllm_server_base_url": "http://10.0.0.2:8000",
                "vllm_server_timeout": 60.0,
            },
        ),
        ({"generation": "vllm-server"}, {"use_vllm": False}),
    ],
    ids=["colocate", "server", "lora-server"],
)
def test_trl_settings_are_grpo_config_fields(changes, expected):
    from trl import GRPOConfig

    settings = trl_vllm_settings(RunConfig(**changes))
    assert expected.items() <= settings.items()
    assert set(settings) <= set(GRPOConfig.__dataclass_fields__)


def test_server_url_the_run_started_goes_to_trl():
    settings = trl_vllm_settings(RunConfig(generation="trl-server"), server_url="http://127.0.0.1:41234")
    assert settings["vllm_server_base_url"] == "http://127.0.0.1:41234"


def test_old_configs_with_use_vllm_still_load():
    old = {**RunConfig().to_dict(), "use_vllm": True, "vllm_mode": "server"}
    del old["generation"]
    assert RunConfig.from_dict(old).generation == "trl-server"
    assert RunConfig.from_dict({"use_vllm": False, "vllm_mode": "colocate"}).generation == "transformers"


def test_port_in_use_is_seen():
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        assert generation.port_in_use("127.0.0.1", sock.getsockname()[1])
