"""The GPU kit (`make gpu-test`): real LoRA GRPO runs on CUDA, one per generation path, each printing its figures.

Every test here is marked `gpu` and skips, saying why, on a machine without a CUDA GPU - this project's
own CI machine. `make gpu-test` runs them on a GPU machine, in `.venv-gpu` (the project's packages with
vLLM beside them, which TRL's vLLM modes need inside the training process). The README's GPU kit section
says which have run, on which card, and what they printed.

- `transformers`: generate on one GPU, with the speed settings `auto` gives there (a merged bfloat16 copy
  samples); and with the speed levers (`shared_prompt_pass`, a merged bfloat16 copy) both off and both on
  (each alone: `benchmarks/bench_speed.py --device cuda`);
- `trl-colocate`: TRL's vLLM inside the training process, sharing its GPU;
- `vllm-server`: the workbench's LoRA hot-load server, on a GPU of its own when there are two, else on a
  share of the first;
- `trl-server`: TRL's server mode, the server on a GPU of its own (2+ GPUs);
- the memory estimate against the card's measured peak (`benchmarks/bench_memory.py --device cuda`);
- the batch calculator's split of 2 GPUs, one serving vLLM and one training, on the GPUs NVML lists.

Each run is launched as the app launches one (jobs/launcher.py) while jobs/gpu_watch.py samples every
GPU's used memory; the test prints one `GPU figures [...]` line (run with `-s`, as `make gpu-test` does).
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
from pathlib import Path

import pytest

from workbench.calc import plan
from workbench.jobs import launcher, run_state
from workbench.jobs.gpu_watch import GpuMemoryWatch, used_bytes_per_gpu, wait_for_release
from workbench.runstore import runfolder
from workbench.sources.gpus import list_gpus
from workbench.spec.config import RunConfig
from workbench.spec.config_checks import validate_config
from workbench.spec.generation import find_vllm_python, vllm_importable_here

ROOT = Path(__file__).resolve().parents[1]
GPUS = [gpu.index for gpu in list_gpus()]
GIB = 2**30
STEPS = 4
RUN_TIMEOUT_S = 1200
# The issue's bound for the memory estimate on a GPU.
MEMORY_TOLERANCE = 0.15

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.slow,
    pytest.mark.skipif(not GPUS, reason="no CUDA GPU (NVML lists none): run `make gpu-test` on a GPU machine"),
]


@pytest.fixture(scope="session")
def idle_used() -> dict[int, int]:
    """Each GPU's used memory before the first GPU test here ran (read when that test starts)."""
    return used_bytes_per_gpu()


def wait_for_the_gpus(idle: dict[int, int]) -> None:
    """Wait for the last run's GPU memory to come back (jobs/gpu_watch.wait_for_release says why), and say so
    when it does not: the next watch then counts that memory out of its figures."""
    if not wait_for_release(idle, timeout_s=120):
        print(
            f"\nGPU memory is still above what it was before the GPU tests began ({used_bytes_per_gpu()} "
            f"against {idle}): the next figures count that memory out",
            flush=True,
        )


@pytest.fixture(autouse=True)
def gpus_released_by_the_last_test(idle_used):
    """Every test's watch begins on GPUs the test before has handed back."""
    wait_for_the_gpus(idle_used)


needs_vllm_here = pytest.mark.skipif(
    not vllm_importable_here(),
    reason=f"vLLM is not importable in {sys.prefix}: TRL's vLLM modes run it inside the training process; "
    "`make gpu-test` runs these tests in .venv-gpu, which has it",
)
needs_two_gpus = pytest.mark.skipif(len(GPUS) < 2, reason="needs 2 GPUs: one serves vLLM, one trains")


def gpu_config(generation: str, **changes) -> RunConfig:
    """The demo task on the bundled model, G = 8 completions of up to 64 tokens, bf16, on the first GPU."""
    settings = dict(
        generation=generation,
        device="cuda",
        max_steps=STEPS,
        save_steps=STEPS,
        logging_steps=1,
        per_device_train_batch_size=8,
        num_generations=8,
        max_completion_length=64,
        bf16=True,
        vllm_max_model_len=1024,
        gpu_ids=GPUS[:1],
        run_name=f"gpu-{generation}",
    )
    return RunConfig.for_task("demo", **{**settings, **changes})


def run_on_gpu(config: RunConfig, runs_dir: Path) -> tuple[dict, list[dict], dict]:
    """Launch `config`, watch the GPUs until it ends: (final status, step metrics, figures to print)."""
    problems = validate_config(config)
    assert not problems, [str(p) for p in problems]
    with GpuMemoryWatch() as watch:
        run_id = launcher.start(config, runs_dir)
        try:
            final = run_state.wait(run_id, runs_dir, timeout=RUN_TIMEOUT_S)
        finally:
            launcher.stop(run_id, runs_dir, timeout=30)
    run_dir = run_state.run_dir_of(run_id, runs_dir)
    steps = [m for m in runfolder.read_jsonl(run_dir / runfolder.METRICS_FILE) if "step_time" in m]
    figures = {
        "state": final["state"],
        "steps": len(steps),
        "median_step_s": median(steps[1:] or steps, "step_time"),
        "completions_per_s": config.per_device_train_batch_size / (median(steps[1:] or steps, "step_time") or 1),
        "peak_gib_per_gpu": {index: round(used / GIB, 2) for index, used in watch.peak_bytes().items()},
        "trainer_peak_allocated_gib": median(steps[-1:], "gpu/peak_allocated_gib"),
        "adapter_sync_s": median(steps[1:], "vllm/adapter_sync_seconds"),
        "weight_sync_s": median(steps[1:], "vllm/weight_sync_seconds"),
    }
    if final["state"] != "finished":
        figures["error"] = (final.get("error") or {}).get("message", "")[:500]
    print(f"\nGPU figures [{config.generation}]: {json.dumps(figures)}", flush=True)
    return final, steps, figures


def median(records: list[dict], name: str) -> float | None:
    values = [r[name] for r in records if r.get(name) is not None]
    return round(statistics.median(values), 3) if values else None


def assert_trained(final: dict, steps: list[dict], figures: dict) -> None:
    assert final["state"] == "finished", figures.get("error")
    assert [m["step"] for m in steps] == list(range(1, STEPS + 1))
    assert all(m["reward"] is not None for m in steps)
    assert figures["trainer_peak_allocated_gib"] > 0  # the run really ran on the GPU
    assert figures["peak_gib_per_gpu"][GPUS[0]] > 0


def test_transformers_generation_on_one_gpu(tmp_path):
    final, steps, figures = run_on_gpu(gpu_config("transformers"), tmp_path / "runs")
    assert_trained(final, steps, figures)


def test_the_cpu_speed_levers_measured_on_a_gpu(tmp_path, idle_used):
    """shared_prompt_pass and a merged bfloat16 copy for sampling, both off and both on; each alone and on a
    larger model: benchmarks/bench_speed.py --device cuda, whose figures set `auto` (workbench/spec/speed.py)."""
    medians = {}
    for name, changes in (
        ("off", dict(shared_prompt_pass="no", merged_generation="no")),
        ("on", dict(shared_prompt_pass="yes", merged_generation="bfloat16")),
    ):
        wait_for_the_gpus(idle_used)  # the "off" run's memory back before "on" is watched
        final, steps, figures = run_on_gpu(gpu_config("transformers", **changes), tmp_path / name)
        assert_trained(final, steps, figures)
        medians[name] = figures["median_step_s"]
    print(
        f"\nGPU figures [speed levers]: median step {medians['off']} s with both off, {medians['on']} s with both on",
        flush=True,
    )


@needs_vllm_here
def test_trl_colocate_shares_the_training_gpu(tmp_path):
    final, steps, figures = run_on_gpu(gpu_config("trl-colocate", vllm_gpu_memory_utilization=0.3), tmp_path / "runs")
    assert_trained(final, steps, figures)
    assert figures["weight_sync_s"] is not None and figures["weight_sync_s"] > 0  # TRL merged and copied weights


@pytest.mark.skipif(find_vllm_python() is None, reason="no vLLM server Python: `make vllm` (make gpu-test runs it)")
def test_vllm_server_hot_loads_the_adapter_on_a_gpu(tmp_path):
    # a GPU of its own when there are two; else the server takes a share of the training GPU
    changes = dict(vllm_gpu_ids=GPUS[1:2]) if len(GPUS) > 1 else dict(vllm_gpu_memory_utilization=0.3)
    config = gpu_config("vllm-server", **changes)
    final, steps, figures = run_on_gpu(config, tmp_path / "runs")
    assert_trained(final, steps, figures)
    assert figures["adapter_sync_s"] is not None
    assert all(m["vllm/completions_per_second"] > 0 for m in steps)
    if len(GPUS) > 1:
        assert figures["peak_gib_per_gpu"][GPUS[1]] > 0  # the server's own GPU held its weights and cache


@needs_vllm_here
@needs_two_gpus
def test_trl_server_broadcasts_weights_to_its_own_gpu(tmp_path):
    config = gpu_config("trl-server", vllm_gpu_ids=GPUS[1:2], vllm_gpu_memory_utilization=0.5)
    final, steps, figures = run_on_gpu(config, tmp_path / "runs")
    assert_trained(final, steps, figures)
    assert figures["weight_sync_s"] is not None and figures["weight_sync_s"] > 0
    assert figures["peak_gib_per_gpu"][GPUS[1]] > 0


def test_the_memory_estimate_meets_the_cards_measured_peak():
    result = subprocess.run(
        [sys.executable, "benchmarks/bench_memory.py", "--device", "cuda", "--only", "g8-len128", "--json"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT_S,
    )
    assert result.stdout.strip(), result.stderr[-3000:]
    row = json.loads(result.stdout.strip().splitlines()[-1])
    print(
        f"\nGPU figures [memory estimate]: estimate {row['estimate_bytes'] / GIB:.2f} GiB, measured "
        f"{row['measured_bytes'] / GIB:.2f} GiB, error {row['relative_error']:+.1%}",
        flush=True,
    )
    assert abs(row["relative_error"]) <= MEMORY_TOLERANCE, row["breakdown"]


@needs_two_gpus
def test_the_calculator_splits_two_gpus_one_serving_one_training():
    split = plan(per_device_train_batch_size=8, num_generations=8, num_processes=1, vllm_gpus=1)
    assert split.valid, split.errors
    config = gpu_config("vllm-server", vllm_gpu_ids=GPUS[1:2], gpu_ids=GPUS[:1])
    assert not validate_config(config)  # checked against the GPUs this machine has
    crowded = gpu_config("vllm-server", vllm_gpu_ids=GPUS[:1], gpu_ids=GPUS[:1])
    assert any(p.field == "vllm_gpu_ids" for p in validate_config(crowded))  # one GPU given to both
    print(
        f"\nGPU figures [calculator]: 2 GPUs, 1 serves vLLM, 1 trains: generation batch "
        f"{split.generation_batch_size}, {split.prompts_per_step:g} prompt(s) a step",
        flush=True,
    )
