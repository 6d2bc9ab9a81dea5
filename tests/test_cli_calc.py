"""The `calc` command as a real subprocess: reports, JSON, exit codes, one-line errors."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[1]


def calc(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "workbench", "calc", *args], cwd=REPO, capture_output=True, text=True, timeout=60
    )


def test_seed_000_single_gpu_failure():
    out = calc("--per-device-train-batch-size", "1", "--num-processes", "1", "--num-generations", "8")
    assert out.returncode == 1
    assert "generation_batch_size (1) must be divisible by num_generations (8)." in out.stdout
    assert "per_device_train_batch_size 1 -> 8" in out.stdout


def test_valid_plan_exits_0_with_numbers():
    out = calc("--per-device-train-batch-size", "8", "--num-generations", "8", "--dataset-size", "100")
    assert out.returncode == 0, out.stderr
    assert "VALID" in out.stdout and "total steps 100" in out.stdout


def test_json_carries_suggestions_under_trl_names():
    out = calc("--per-device-train-batch-size", "1", "--num-processes", "3", "--num-generations", "8", "--json")
    assert out.returncode == 1
    data = json.loads(out.stdout)
    assert data["valid"] is False
    assert data["errors"] == ["generation_batch_size (3) must be divisible by num_generations (8)."]
    assert data["suggestions"][0]["changes"] == {"num_generations": 3}
    assert all(s["plan"]["valid"] for s in data["suggestions"])


def test_open_r1_seed_001():
    out = calc(
        "--framework",
        "open-r1",
        "--gpus",
        "4",
        "--vllm-gpus",
        "1",
        "--per-device-train-batch-size",
        "1",
        "--num-generations",
        "8",
        "--json",
    )
    assert out.returncode == 1
    data = json.loads(out.stdout)
    assert (data["training_processes"], data["vllm_gpus"]) == (3, 1)
    assert data["message"] == "generation_batch_size (3) must be divisible by num_generations (8)."
    assert any("vllm_gpus" in s["changes"] for s in data["suggestions"])


def test_ms_swift_seed_004_gives_1320():
    out = calc(
        "--framework",
        "ms-swift",
        "--dataset-size",
        "8000",
        "--num-generations",
        "8",
        "--per-device-train-batch-size",
        "8",
        "--num-processes",
        "6",
        "--train-data-ratio",
        "0.99",
        "--gradient-accumulation-steps",
        "2",
        "--num-iterations",
        "2",
        "--json",
    )
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["total_steps"] == 1320


def test_framework_all_prints_each():
    out = calc("--framework", "all", "--per-device-train-batch-size", "4", "--num-generations", "4", "--json")
    assert out.returncode == 0
    assert [r["framework"] for r in json.loads(out.stdout)["frameworks"]] == ["trl", "open-r1", "ms-swift"]


@pytest.mark.parametrize(
    "text, code, fragment",
    [
        ("generation_batch_size (4) must be divisible by num_generations (8).", 0, "num_generations 8 -> 4"),
        (
            "The global train batch size (3 x 1) must be evenly divisible by the number of generations per prompt (8)",
            0,
            "older TRL",
        ),
        ("Segmentation fault", 1, "Not recognised"),
    ],
    ids=["trl-1.16", "old-trl", "unrecognised"],
)
def test_explain(text, code, fragment):
    out = calc("--explain", text)
    assert out.returncode == code
    assert fragment in out.stdout


def test_explain_json():
    out = calc("--explain", "generation_batch_size (4) must be divisible by num_generations (8).", "--json")
    data = json.loads(out.stdout)
    assert data["recognised"] and data["values"] == {"generation_batch_size": 4, "num_generations": 8}
    assert data["plan"]["valid"] is False and data["fixes"][0]["plan"]["valid"]


@pytest.mark.parametrize(
    "args, flag",
    [
        (["--num-generations", "0"], "--num-generations"),
        (["--per-device-train-batch-size", "-4"], "--per-device-train-batch-size"),
        (["--gradient-accumulation-steps", "1.5"], "--gradient-accumulation-steps"),
        (["--num-processes", "two"], "--num-processes"),
        (["--dataset-size", "5000000000"], "--dataset-size"),
        (["--gpus", "2", "--vllm-gpus", "2"], "--vllm-gpus"),
        (["--gpus", "4", "--vllm-gpus", "1", "--num-processes", "2"], "--num-processes"),
        (["--framework", "ms-swift", "--train-data-ratio", "1.5"], "--train-data-ratio"),
        (["--framework", "axolotl"], "--framework"),
    ],
    ids=["zero", "negative", "fraction", "word", "huge", "all-gpus-vllm", "gpus-conflict", "ratio", "framework"],
)
def test_bad_arguments_exit_2_with_one_line(args, flag):
    out = calc(*args)
    assert out.returncode == 2
    assert out.stdout == ""
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in out.stderr
    assert flag in lines[0]
