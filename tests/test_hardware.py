"""GPU listing without torch, where a run trains, and the environment a training process gets."""

import pytest

from workbench.jobs.gpu_queue import busy_gpu_ids
from workbench.jobs.processes import PROJECT_ROOT, training_env
from workbench.sources.gpus import GpuInfo, list_gpus, runs_on_cpu, runs_on_cpu_here, visible_devices


def test_list_gpus_returns_gpu_infos_or_nothing():
    gpus = list_gpus()
    assert isinstance(gpus, list)
    assert all(isinstance(g, GpuInfo) and g.total_mb > 0 for g in gpus)
    assert [g.index for g in gpus] == list(range(len(gpus)))


@pytest.mark.parametrize("ids, expected", [([], ""), ([0], "0"), ([2, 0], "2,0")], ids=["none", "one", "several"])
def test_visible_devices(ids, expected):
    assert visible_devices(ids) == expected


@pytest.mark.parametrize(
    "gpu_ids, device, expected",
    [([], "cpu", ""), ([1, 3], "auto", "1,3"), ([], "auto", "untouched")],
    ids=["cpu-hides-gpus", "chosen-gpus", "all-visible"],
)
def test_training_env(gpu_ids, device, expected):
    env = training_env(gpu_ids, device, base={"CUDA_VISIBLE_DEVICES": "untouched", "PATH": "/bin"})
    assert env["CUDA_VISIBLE_DEVICES"] == expected and env["PATH"] == "/bin"
    assert env["PYTHONPATH"].split(":")[0] == str(PROJECT_ROOT)
    assert (PROJECT_ROOT / "workbench" / "__main__.py").is_file()


@pytest.mark.parametrize(
    "device, gpus_present, visible, expected",
    [
        ("cpu", True, None, True),
        ("cuda", False, None, False),
        ("auto", True, None, False),
        ("auto", False, None, True),
        ("auto", True, "", True),
        ("auto", True, "0", False),
    ],
    ids=["cpu", "cuda", "auto-gpu", "auto-none", "auto-hidden", "auto-visible"],
)
def test_runs_on_cpu(device, gpus_present, visible, expected):
    env = {} if visible is None else {"CUDA_VISIBLE_DEVICES": visible}
    assert runs_on_cpu(device, gpus_present=gpus_present, env=env) is expected


@pytest.mark.parametrize("device", ["cpu", "cuda", "auto"])
def test_runs_on_cpu_here_asks_torch_whether_a_gpu_is_there(device):
    import torch

    assert runs_on_cpu_here(device) is runs_on_cpu(device, gpus_present=torch.cuda.is_available())


def test_busy_gpu_ids_of_an_empty_runs_folder(tmp_path):
    assert busy_gpu_ids(tmp_path) == set()
