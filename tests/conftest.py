"""Fixtures shared by the whole suite: a real tiny model and a real LoRA adapter of it.

The tiny model is a randomly initialised 2-layer Llama built from a config
(workbench.spec.models.tiny_model_dir), cached once per machine: a real model
that really trains, in seconds. Browser fixtures live in browser_fixtures.py.
"""

from __future__ import annotations

import json

import pytest

pytest_plugins = ["browser_fixtures"]


@pytest.fixture(scope="session")
def tiny_model() -> str:
    """Folder of the tiny random model (config, safetensors, tokenizer with a chat template)."""
    from workbench.spec.models import tiny_model_dir

    return str(tiny_model_dir())


@pytest.fixture(scope="session")
def tiny_adapter(tiny_model, tmp_path_factory):
    """A real LoRA adapter of the tiny model with random (non-zero) weights, so it changes the answers."""
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(tiny_model)
    peft_model = get_peft_model(model, LoraConfig(r=4, target_modules="all-linear", init_lora_weights=False))
    folder = tmp_path_factory.mktemp("adapter") / "adapter"
    peft_model.save_pretrained(folder)
    return folder


def write_checkpoint(run_dir, step):
    """A `checkpoint-<step>` folder with the files transformers' Trainer writes for a LoRA run, each whole."""
    import torch
    from safetensors.torch import save_file

    path = run_dir / f"checkpoint-{step}"
    path.mkdir(parents=True)
    save_file({"lora_A.weight": torch.ones(4, 16), "lora_B.weight": torch.zeros(16, 4)},
              str(path / "adapter_model.safetensors"))
    (path / "adapter_config.json").write_text(json.dumps({"r": 4, "peft_type": "LORA"}))
    torch.save({"state": {}, "param_groups": []}, path / "optimizer.pt")
    torch.save({"last_epoch": step}, path / "scheduler.pt")
    (path / "trainer_state.json").write_text(json.dumps({"global_step": step}))
    return path


@pytest.fixture
def make_checkpoint():
    """`make_checkpoint(run_dir, step)`: a complete checkpoint folder, as a resume needs it."""
    return write_checkpoint
