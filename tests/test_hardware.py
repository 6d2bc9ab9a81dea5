"""GPU listing without torch, and the environment a training process gets."""

import pytest

from workbench.hardware import GpuInfo, busy_gpu_ids, list_gpus, training_env, visible_devices


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


def test_busy_gpu_ids_of_an_empty_runs_folder(tmp_path):
    assert busy_gpu_ids(tmp_path) == set()
