"""What the suite builds once and shares (a pytest plugin loaded by conftest.py): the tiny model, a LoRA
adapter of it, and a finished tiny run.

Under pytest-xdist every worker is a session of its own. `build_once` builds a thing into a folder that
all workers of one run share (the parent of the workers' base temp folders), under a file lock: the
first worker to ask builds it, the others wait for it and then reuse it. Without xdist it is built once
into the session's base temp folder. What is shared is read-only: a test that writes into a run copies it
first (`shutil.copytree(tiny_trained_run, ...)`).

- `tiny_model`: the tiny random model (workbench.sources.model_files.tiny_model_dir, cached once per machine);
- `tiny_adapter`: a real LoRA adapter of it with random (non-zero) weights, so it changes the answers;
- `tiny_trained_run`: a finished 2-step run of the tiny model on the `reward_hacking` task (brevity: a
  reward the random tiny model's answers differ on, so its steps change the adapter), launched as the app
  launches one: `checkpoint-1`, `checkpoint-2`, the final adapter, metrics and completions;
- `tiny_eval_run`: a finished 2-step run of the tiny model on the bundled GSM8K sample with held-out
  evaluation at every step (eval.jsonl at steps 0, 1, 2; 4 test prompts, pass@2).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from helpers import file_lock, tiny_config, tiny_settings

TRAINED_RUN_TIMEOUT_S = 300


def shared_folder(tmp_path_factory) -> Path:
    """The folder every worker of this pytest run sees (the session's own base temp folder without xdist)."""
    base = tmp_path_factory.getbasetemp()
    return (base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base) / "shared"


def build_once(tmp_path_factory, name: str, build) -> Path:
    """`build(folder)` once per pytest run, whichever worker asks first; the path it returned, to every worker.

    `folder` is empty and named after `name`; a build that failed is tried again by the next worker to ask.
    """
    shared = shared_folder(tmp_path_factory)
    folder, done = shared / name, shared / f"{name}.done"
    with file_lock(shared / f"{name}.lock"):
        if not done.exists():
            shutil.rmtree(folder, ignore_errors=True)
            folder.mkdir(parents=True)
            done.write_text(str(build(folder)))
    return Path(done.read_text())


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory) -> str:
    """Folder of the tiny random model (config, safetensors, tokenizer with a chat template)."""
    from workbench.sources.model_files import tiny_model_dir

    # one worker builds it on a fresh machine; the others wait rather than build it alongside
    return str(build_once(tmp_path_factory, "tiny-model", lambda _: tiny_model_dir()))


@pytest.fixture(scope="session")
def tiny_adapter(tiny_model, tmp_path_factory) -> Path:
    """A real LoRA adapter of the tiny model with random (non-zero) weights, so it changes the answers."""

    def build(folder: Path) -> Path:
        from peft import LoraConfig, get_peft_model
        from transformers import AutoModelForCausalLM

        model = AutoModelForCausalLM.from_pretrained(tiny_model)
        peft_model = get_peft_model(model, LoraConfig(r=4, target_modules="all-linear", init_lora_weights=False))
        peft_model.save_pretrained(folder / "adapter")
        return folder / "adapter"

    return build_once(tmp_path_factory, "tiny-adapter", build)


@pytest.fixture(scope="session")
def tiny_trained_run(tiny_model, tmp_path_factory) -> Path:
    """A finished 2-step run of the tiny model (checkpoint per step, final adapter), to read, not to change."""

    def build(folder: Path) -> Path:
        from workbench.jobs import launcher, run_state
        from workbench.runstore import runfolder

        runs = folder / "runs"
        # brevity scores the tiny model's random answers apart; the demo's right-and-brief reward gives it all 0s
        config = tiny_config(task="reward_hacking", max_steps=2, save_steps=1, logging_steps=1, run_name="trained")
        run_id = launcher.start(config, runs)
        final = run_state.wait(run_id, runs, timeout=TRAINED_RUN_TIMEOUT_S)
        assert final["state"] == "finished", (final.get("error"), runfolder.read_log_tail(runs / run_id))
        return runs / run_id

    return build_once(tmp_path_factory, "tiny-trained-run", build)


@pytest.fixture(scope="session")
def tiny_eval_run(tiny_model, tmp_path_factory) -> Path:
    """A finished 2-step gsm8k run of the tiny model evaluating its test split at steps 0, 1 and 2, to read."""

    def build(folder: Path) -> Path:
        from workbench.jobs import launcher, run_state
        from workbench.runstore import runfolder
        from workbench.spec.config import RunConfig
        from workbench.spec.tasks import GSM8K_SAMPLE

        runs = folder / "runs"
        # the fewest steps that make a curve: step 0 (before any update), 1 and 2; a checkpoint each, to resume
        config = RunConfig.for_task(
            "gsm8k",
            **tiny_settings(
                dataset_name=str(GSM8K_SAMPLE),
                max_steps=2,
                save_steps=1,
                run_name="evaluated",
                eval_strategy="steps",
                eval_steps=1,
                eval_size=4,
                eval_pass_k=2,
            ),
        )
        run_id = launcher.start(config, runs)
        final = run_state.wait(run_id, runs, timeout=TRAINED_RUN_TIMEOUT_S)
        assert final["state"] == "finished", (final.get("error"), runfolder.read_log_tail(runs / run_id))
        return runs / run_id

    return build_once(tmp_path_factory, "tiny-eval-run", build)
