"""The speed settings a run gets on its machine (workbench/spec/speed.py): merged_generation=auto's rules."""

from __future__ import annotations

import pytest

from workbench.spec.config import RunConfig
from workbench.spec.speed import (MEASURED, MEASURED_BF16, MEASURED_GPU, resolve_merged_generation,
                                  resolve_shared_prompt_pass, speed_notes)


@pytest.mark.parametrize(
    ("setting", "generation", "on_cpu", "backend", "value"),
    [("auto", "transformers", True, "ddp", "float32"),  # measured faster on a CPU, same completions
     ("auto", "transformers", False, "ddp", "no"),  # a GPU: not measured, bare TRL's way
     ("auto", "vllm-server", True, "ddp", "no"),  # the server samples
     ("bfloat16", "transformers", False, "ddp", "bfloat16"),  # the user's choice stands
     ("no", "transformers", True, "ddp", "no"),
     ("float32", "trl-colocate", False, "ddp", "no"),  # TRL's vLLM samples: nothing to copy into
     ("auto", "transformers", True, "fsdp", "no")],  # sharded weights: no whole model to copy
)
def test_merged_generation_resolves_by_machine_and_backend(setting, generation, on_cpu, backend, value):
    assert resolve_merged_generation(setting, generation, on_cpu, backend).value == value


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
    assert not any("bf16" in note for note in on_gpu)  # on a GPU bf16 is the usual


def test_on_a_gpu_the_note_gives_the_measured_figures_and_why_auto_stays_off():
    first, figures = speed_notes("auto", "transformers", bf16=True, on_cpu=False)
    assert "merged_generation=auto -> no (on a GPU" in first and "shared_prompt_pass=auto -> no (on a GPU" in first
    h100 = MEASURED_GPU["H100"]
    both = h100["shared prompt pass and a merged bfloat16 copy"]
    assert f"{both:.2f} s instead of {h100['both off']:.2f} s" in figures
    assert "neither was measured alone" in figures
    assert len(speed_notes("auto", "vllm-server", bf16=True, on_cpu=False)) == 1  # the server samples: no lever here


@pytest.mark.parametrize(
    ("setting", "on_cpu", "checkpointing", "processes", "value"),
    [("auto", True, False, 1, "yes"),  # measured faster on a CPU, same values
     ("auto", False, False, 1, "no"),  # a GPU: measured only with the merged copy, on one small model
     ("yes", False, False, 1, "yes"),  # the user's choice stands where it can run
     ("yes", True, True, 1, "no"),  # checkpointed layers drop the prompt's cache
     ("auto", True, False, 2, "no"),  # DDP: one forward per backward
     ("no", True, False, 1, "no")],
)
def test_shared_prompt_pass_resolves_by_machine_and_run(setting, on_cpu, checkpointing, processes, value):
    assert resolve_shared_prompt_pass(setting, on_cpu, checkpointing, processes).value == value
