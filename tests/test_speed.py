"""The speed settings a run gets (workbench/spec/speed.py): what can run, what auto becomes once this machine's
choice is known, the Setup tab's line; the speed benchmark's GPU rows."""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest

from workbench.spec.config import RunConfig
from workbench.spec.speed import (
    NOT_MEASURED,
    copy_fits_gpu,
    memory_merged_dtype,
    resolve_merged_generation,
    resolve_packed_decode,
    resolve_shared_prompt_pass,
    speed_notes,
)

TUNED = {"merged_generation": "float32", "shared_prompt_pass": "yes", "packed_decode": "no"}


@pytest.mark.parametrize(
    ("setting", "generation", "backend", "tuned", "value"),
    [
        ("auto", "transformers", "ddp", None, "auto"),  # not measured here yet: the run's probe decides
        ("auto", "transformers", "ddp", TUNED, "float32"),  # this machine's measured choice
        ("auto", "vllm-server", "ddp", TUNED, "no"),  # the server samples
        ("bfloat16", "transformers", "ddp", TUNED, "bfloat16"),  # the user's choice stands
        ("float32", "trl-colocate", "ddp", None, "no"),  # TRL's vLLM samples: nothing to copy into
        ("auto", "transformers", "fsdp", TUNED, "no"),
    ],  # sharded weights: no whole model to copy
)
def test_merged_generation_resolves_by_backend_and_this_machines_choice(setting, generation, backend, tuned, value):
    assert resolve_merged_generation(setting, generation, backend, tuned).value == value


def test_the_memory_estimate_counts_the_largest_copy_auto_may_take():
    assert memory_merged_dtype("auto", "transformers", True, "ddp", False) == "float32"
    assert memory_merged_dtype("auto", "transformers", False, "ddp", True) == "bfloat16"
    assert memory_merged_dtype("no", "transformers", True, "ddp", False) == "no"
    assert memory_merged_dtype("auto", "vllm-server", True, "ddp", False) == "no"


def test_on_a_gpu_auto_takes_the_copy_only_when_it_needs_at_most_a_quarter_of_the_free_memory():
    gib = 2**30
    assert copy_fits_gpu(int(3.4 * gib), 70 * gib) is None
    assert copy_fits_gpu(20 * gib, 80 * gib) is None
    refusal = copy_fits_gpu(14 * gib, 24 * gib)  # a 7B model's bfloat16 copy on a 40 GB card
    assert "14.0 GiB of the 24.0 GiB free" in refusal and "merged_generation=bfloat16" in refusal


def test_the_speed_note_says_auto_is_measured_here_or_what_it_chose_and_quotes_no_other_machine():
    cfg = RunConfig()
    assert cfg.merged_generation == cfg.shared_prompt_pass == cfg.packed_decode == "auto"
    (unmeasured,) = speed_notes(cfg, on_cpu=True)
    assert "merged_generation, shared_prompt_pass, packed_decode=auto: " + NOT_MEASURED in unmeasured
    (chosen,) = speed_notes(cfg, True, TUNED, "float32 copy + shared prompt pass (measured on this machine's X)")
    assert "auto chose float32 copy + shared prompt pass (measured on this machine's X)" in chosen
    assert "bench_speed" not in unmeasured + chosen and " s instead of " not in unmeasured + chosen
    (set_here,) = speed_notes(cfg.with_changes(merged_generation="no", packed_decode="no"), True, TUNED, "x")
    assert "merged_generation=no (set in the config)" in set_here and "auto chose x" in set_here
    (server,) = speed_notes(cfg.with_changes(generation="vllm-server"), on_cpu=False)
    assert "the vLLM server samples the rounds" in server


@pytest.mark.parametrize(
    ("setting", "checkpointing", "processes", "tuned", "value"),
    [
        ("auto", False, 1, TUNED, "yes"),
        ("auto", False, 1, None, "auto"),
        ("yes", False, 1, None, "yes"),  # the user's choice stands where it can run
        ("yes", True, 1, None, "no"),  # checkpointed layers drop the prompt's cache
        ("auto", False, 2, TUNED, "no"),  # DDP: one forward per backward
        ("no", False, 1, TUNED, "no"),
    ],
)
def test_shared_prompt_pass_resolves_by_run_and_this_machines_choice(setting, checkpointing, processes, tuned, value):
    assert resolve_shared_prompt_pass(setting, checkpointing, processes, tuned=tuned).value == value


@pytest.mark.parametrize(
    ("setting", "merged", "on_cpu", "mkl_missing", "value", "why"),
    [
        ("auto", "float32", True, None, "no", "measured fastest on this machine"),  # TUNED says no
        ("auto", "auto", True, None, "no", "measured fastest on this machine"),
        ("yes", "float32", True, None, "yes", "set in the config"),
        ("no", "float32", True, None, "no", "set in the config"),
        ("maybe", "float32", True, None, "no", "set in the config"),  # refused by check_config: nothing packed
        ("auto", "bfloat16", True, None, "no", "merged_generation is bfloat16: only a float32 merged copy"),
        ("yes", "no", True, None, "no", "merged_generation is no: only a float32 merged copy"),
        ("auto", "float32", False, None, "no", "MKL's packed GEMM is a CPU kernel"),
        ("yes", "float32", True, "this torch is built without MKL", "no", "this torch is built without MKL"),
    ],
)
def test_packed_decode_needs_a_float32_copy_on_a_cpu_and_mkl(setting, merged, on_cpu, mkl_missing, value, why):
    choice = resolve_packed_decode(setting, merged, on_cpu, mkl_missing, tuned=TUNED)
    assert (choice.value, choice.why.startswith(why)) == (value, True)


@pytest.fixture
def load_benchmark(monkeypatch):
    """Import a script of benchmarks/ by its name."""
    monkeypatch.syspath_prepend(str(Path(__file__).resolve().parents[1] / "benchmarks"))
    return importlib.import_module


def test_the_speed_benchmark_runs_each_lever_alone_with_the_gpu_kits_settings(load_benchmark):
    bench_speed = load_benchmark("bench_speed")
    config = bench_speed.demo_config(4, "cuda", "/models/bigger")
    assert (config.device, config.gpu_ids, config.bf16, config.model) == ("cuda", [0], True, "/models/bigger")
    assert (config.num_generations, config.max_completion_length, config.eval_strategy) == (8, 64, "no")
    rows = {row: config.with_changes(**bench_speed.ROWS[row][1]) for row in bench_speed.GPU_ROWS}
    assert [(c.merged_generation, c.shared_prompt_pass) for c in rows.values()] == [
        ("no", "no"),
        ("bfloat16", "no"),
        ("no", "yes"),
        ("bfloat16", "yes"),
    ]
    assert bench_speed.demo_config(4).device == "cpu" and "merged-bf16+shared" not in bench_speed.CPU_ROWS


@pytest.mark.slow
def test_the_random_models_have_smollm2s_published_sizes(load_benchmark):
    import torch
    from transformers import AutoModelForCausalLM

    random_model = load_benchmark("random_model")
    for size, billions in (("smollm2-360m", 0.36), ("smollm2-1.7b", 1.71)):
        with torch.device("meta"):
            model = AutoModelForCausalLM.from_config(random_model.random_config(size))
        assert round(sum(p.numel() for p in model.parameters()) / 1e9, 2) == billions
