"""The speed settings a run gets on its machine (workbench/spec/speed.py): merged_generation=auto's rules."""

from __future__ import annotations

import pytest

from workbench.spec.config import RunConfig
from workbench.spec.speed import MEASURED, MEASURED_BF16, resolve_merged_generation, resolve_shared_prompt_pass, speed_notes


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
    assert len(speed_notes("auto", "transformers", bf16=True, on_cpu=False)) == 1  # on a GPU bf16 is the usual


@pytest.mark.parametrize(
    ("setting", "on_cpu", "checkpointing", "processes", "value"),
    [("auto", True, False, 1, "yes"),  # measured faster on a CPU, same values
     ("auto", False, False, 1, "no"),  # a GPU: not measured, bare TRL's way
     ("yes", False, False, 1, "yes"),  # the user's choice stands where it can run
     ("yes", True, True, 1, "no"),  # checkpointed layers drop the prompt's cache
     ("auto", True, False, 2, "no"),  # DDP: one forward per backward
     ("no", True, False, 1, "no")],
)
def test_shared_prompt_pass_resolves_by_machine_and_run(setting, on_cpu, checkpointing, processes, value):
    assert resolve_shared_prompt_pass(setting, on_cpu, checkpointing, processes).value == value
