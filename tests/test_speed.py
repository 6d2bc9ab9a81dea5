"""The speed settings a run gets on its machine (workbench/spec/speed.py); the speed benchmark's GPU rows."""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest

from workbench.spec.config import RunConfig
from workbench.spec.speed import (MEASURED, MEASURED_BF16, MEASURED_GPU, MEASURED_PACKED, copy_fits_gpu,
                                  resolve_merged_generation, resolve_packed_decode, resolve_shared_prompt_pass,
                                  speed_notes)


@pytest.mark.parametrize(
    ("setting", "generation", "on_cpu", "backend", "bf16", "value"),
    [("auto", "transformers", True, "ddp", False, "float32"),  # measured faster on a CPU, same completions
     ("auto", "transformers", False, "ddp", True, "bfloat16"),  # measured faster on an H100 with bf16 weights
     ("auto", "transformers", False, "ddp", False, "no"),  # a GPU in float32: not measured, bare TRL's way
     ("auto", "vllm-server", True, "ddp", False, "no"),  # the server samples
     ("bfloat16", "transformers", False, "ddp", False, "bfloat16"),  # the user's choice stands
     ("no", "transformers", False, "ddp", True, "no"),
     ("float32", "trl-colocate", False, "ddp", True, "no"),  # TRL's vLLM samples: nothing to copy into
     ("auto", "transformers", True, "fsdp", False, "no"),  # sharded weights: no whole model to copy
     ("auto", "transformers", False, "fsdp", True, "no")],
)
def test_merged_generation_resolves_by_machine_and_backend(setting, generation, on_cpu, backend, bf16, value):
    assert resolve_merged_generation(setting, generation, on_cpu, backend, bf16).value == value


def test_on_a_gpu_auto_takes_the_copy_only_when_it_needs_at_most_a_quarter_of_the_free_memory():
    gib = 2**30
    assert copy_fits_gpu(int(3.4 * gib), 70 * gib) is None  # the 1.7B model's copy on an H100
    assert copy_fits_gpu(20 * gib, 80 * gib) is None
    refusal = copy_fits_gpu(14 * gib, 24 * gib)  # a 7B model's bfloat16 copy on a 40 GB card
    assert "14.0 GiB of the 24.0 GiB free" in refusal and "merged_generation=bfloat16" in refusal


def test_auto_is_the_default_and_its_note_says_what_it_became_and_why():
    cfg = RunConfig()
    assert cfg.merged_generation == "auto"
    note = speed_notes(cfg.merged_generation, cfg.generation, cfg.bf16, on_cpu=True)[0]
    assert note.startswith("Speed: merged_generation=auto -> float32 (on a CPU")
    assert f"{MEASURED['workbench, merged float32 copy']:.2f} s" in note and "bench_speed.py" in note
    assert "merged_generation=float32 (set" in speed_notes("float32", "transformers", False, on_cpu=True)[0]
    assert "shared_prompt_pass=auto -> yes (on a CPU" in note


def test_bf16_on_a_cpu_is_called_slower_with_the_measured_figures():
    notes = speed_notes("auto", "transformers", bf16=True, on_cpu=True)
    assert len(notes) == 2 and f"{MEASURED_BF16['workbench, bf16 weights']:.2f} s" in notes[1]
    on_gpu = speed_notes("auto", "transformers", bf16=True, on_cpu=False)
    assert not any("bf16 on this CPU" in note for note in on_gpu)  # on a GPU bf16 is the usual


def test_on_a_gpu_the_note_gives_the_measured_figures_and_what_auto_chose():
    first, figures = speed_notes("auto", "transformers", bf16=True, on_cpu=False)
    assert "merged_generation=auto -> bfloat16 (on a GPU with bf16 weights" in first
    assert "shared_prompt_pass=auto -> no (on a GPU it slowed sampling from the merged copy" in first
    large = MEASURED_GPU["1.7B"]
    assert f"{large['merged bfloat16 copy'][0]:.2f}/{large['merged bfloat16 copy'][1]:.2f} s instead of " \
           f"{large['both off'][0]:.2f} s (1.7B)" in figures
    assert "merged_generation=auto -> no (on a GPU the copy was measured with bf16 weights only" in \
        speed_notes("auto", "transformers", bf16=False, on_cpu=False)[0]
    assert len(speed_notes("auto", "vllm-server", bf16=True, on_cpu=False)) == 1  # the server samples: no lever here


@pytest.mark.parametrize(
    ("setting", "on_cpu", "checkpointing", "processes", "value"),
    [("auto", True, False, 1, "yes"),  # measured faster on a CPU, same values
     ("auto", False, False, 1, "no"),  # a GPU: it slowed sampling from the merged copy there
     ("yes", False, False, 1, "yes"),  # the user's choice stands where it can run
     ("yes", True, True, 1, "no"),  # checkpointed layers drop the prompt's cache
     ("auto", True, False, 2, "no"),  # DDP: one forward per backward
     ("no", True, False, 1, "no")],
)
def test_shared_prompt_pass_resolves_by_machine_and_run(setting, on_cpu, checkpointing, processes, value):
    assert resolve_shared_prompt_pass(setting, on_cpu, checkpointing, processes).value == value


@pytest.mark.parametrize(
    ("setting", "merged", "on_cpu", "mkl_missing", "value", "why"),
    [("auto", "float32", True, None, "yes", "on a CPU, the float32 copy decodes through MKL's packed GEMM"),
     ("yes", "float32", True, None, "yes", "set in the config"),
     ("no", "float32", True, None, "no", "set in the config"),
     ("maybe", "float32", True, None, "no", "set in the config"),  # refused by check_config: nothing packed
     ("auto", "bfloat16", True, None, "no", "merged_generation is bfloat16: only a float32 merged copy"),
     ("yes", "no", True, None, "no", "merged_generation is no: only a float32 merged copy"),
     ("auto", "float32", False, None, "no", "MKL's packed GEMM is a CPU kernel"),
     ("yes", "float32", True, "this torch is built without MKL", "no", "this torch is built without MKL")],
)
def test_packed_decode_needs_a_float32_copy_on_a_cpu_and_mkl(setting, merged, on_cpu, mkl_missing, value, why):
    choice = resolve_packed_decode(setting, merged, on_cpu, mkl_missing)
    assert (choice.value, choice.why.startswith(why)) == (value, True)


def test_the_speed_note_names_packed_decode_only_where_a_float32_copy_samples_on_a_cpu():
    note = speed_notes("auto", "transformers", bf16=False, on_cpu=True)[0]
    assert "packed_decode=auto -> yes (on a CPU, the float32 copy decodes through MKL's packed GEMM" in note
    assert f"{MEASURED_PACKED['workbench, defaults, plain matmul']:.2f} s" in note
    assert "packed_decode=no (set in the config)" in speed_notes("auto", "transformers", False, True,
                                                                   packed_decode="no")[0]
    assert "packed_decode" not in speed_notes("no", "transformers", bf16=False, on_cpu=True)[0]
    assert "packed_decode" not in speed_notes("auto", "transformers", bf16=True, on_cpu=False)[0]


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
        ("no", "no"), ("bfloat16", "no"), ("no", "yes"), ("bfloat16", "yes")]
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
