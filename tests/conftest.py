"""Fixtures shared by the whole suite: a real tiny model and a real LoRA adapter of it.

The tiny model is a randomly initialised 2-layer Llama built from a config
(workbench.spec.models.tiny_model_dir), cached once per machine: a real model
that really trains, in seconds. Browser fixtures live in browser_fixtures.py.
"""

from __future__ import annotations

import json
import os
import subprocess
import time

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


@pytest.fixture
def small_disk(tmp_path):
    """`small_disk(size)`: a real tmpfs of `size` (e.g. "4m") to fill up; needs root and mount (else skipped)."""
    mounted = []

    def mount(size: str = "4m"):
        point = tmp_path / f"disk{len(mounted)}"
        point.mkdir()
        if os.geteuid() != 0:
            pytest.skip("mounting a small tmpfs needs root")
        result = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(point)],
                                capture_output=True, text=True)
        if result.returncode != 0:
            pytest.skip(f"cannot mount a tmpfs here: {result.stderr.strip()}")
        mounted.append(point)
        return point

    yield mount
    for point in mounted:
        if subprocess.run(["umount", str(point)], capture_output=True).returncode != 0:
            subprocess.run(["umount", "-l", str(point)], capture_output=True)  # a process still holds a file


def fill_disk(folder) -> None:
    """Write into `folder` until the disk is full (ENOSPC), as a filling disk would."""
    import errno

    with open(os.path.join(folder, "filler"), "wb", buffering=0) as handle:  # nothing left in a buffer
        try:
            while True:
                handle.write(b"x" * 65536)
        except OSError as exc:
            if exc.errno != errno.ENOSPC:
                raise


@pytest.fixture
def fill():
    """`fill(folder)`: write into `folder` until its disk is full."""
    return fill_disk


def poll_until(predicate, timeout: float = 180.0, poll: float = 0.2):
    """The first true value of `predicate()`, asked every `poll` seconds; AssertionError after `timeout`.

    For what a background process does; test files import it (`from conftest import poll_until`).
    """
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(poll)
    raise AssertionError(f"condition not met within {timeout} s")
