"""Fixtures shared by the whole suite: a real tiny model and a real LoRA adapter of it.

The tiny model is a randomly initialised 2-layer Llama built from a config
(workbench.spec.models.tiny_model_dir), cached once per machine: a real model
that really trains, in seconds. Browser fixtures live in browser_fixtures.py.
"""

from __future__ import annotations

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
