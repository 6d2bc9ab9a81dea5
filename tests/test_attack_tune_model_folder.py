"""Attack: a model folder written by the student's own earlier run, loaded by the speed probe that runs outside the
sandbox, as root, before their next run starts (jobs/tune_job.py, issue 43). All held; kept as regression tests.

The path rule lets a student name as `model` a folder their earlier sandboxed run wrote (its `merged/`), so its
code chose every byte there. The probe (`python -m workbench tune`, trainer/training.load_model_and_tokenizer)
loads it with transformers outside the sandbox. Tried on the real `tune` through the starter's own call:

- custom code: config.json's `auto_map` naming a module in the folder (held: trust_remote_code is not given, so
  transformers keeps its own Llama class; a tokenizer `auto_map` is refused, stdin is /dev/null), and weights as
  a pickle, pytorch_model.bin with a `__reduce__` payload and no safetensors (held: transformers 5 loads it with
  torch.load(weights_only=True), which refuses the global). Neither payload ran.
- CPU: a chat template (rendered by the probe: `chat_template` of the config is not, the model's own is) whose
  nested loops would run for hours (held: the probe is ended at its timeout, TUNE_TIMEOUT_S, 900 s, shortened
  here, and leaves no process; the run then measures in its sandbox). Memory: each probe is held to the run's
  memory limit (RLIMIT_DATA), and the probe is part of the run (state `tuning`): it holds the run's devices and
  counts against the user's cap, so parallel launches probe no more than parallel runs train.
- links in the folder (to the server's files, to another student's model): tests/test_attack_tune_model_links.py.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import time

import psutil
import pytest

from workbench.jobs import tune_job
from workbench.runstore import launch_records, runfolder
from workbench.spec.config import RunConfig
from workbench.tuning import for_config

pytestmark = pytest.mark.slow  # loads the tiny model outside a sandbox, as the starter does

CUSTOM_CODE = """
import os
os.mkdir({marker!r})  # runs if transformers imports this module
from transformers import LlamaForCausalLM
class EvilModel(LlamaForCausalLM):
    pass
"""


class Payload:
    """Unpickling it makes a folder outside (torch.load without weights_only would run it)."""

    def __init__(self, marker: str):
        self.marker = marker

    def __reduce__(self):
        return (os.mkdir, (self.marker,))


@pytest.fixture
def earlier_run(tmp_path, tiny_model, monkeypatch):
    """alice's finished run whose code wrote a `merged/` model folder (the tiny model, to be altered)."""
    monkeypatch.setenv("WORKBENCH_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv(for_config.PROBE_ENV, raising=False)
    runs = tmp_path / "runs"
    run_dir = runs / "20260101-000001-alice"
    run_dir.mkdir(parents=True)
    launch_records.write_record(
        run_dir, launch_records.LaunchRecord(owner="alice", sandboxed=True, policy={}, config={})
    )
    runfolder.update_status(run_dir, state="finished", owner="alice")
    shutil.copytree(tiny_model, run_dir / "merged")
    return run_dir / "merged"


def probe_before_the_sandbox(model, runs) -> tuple[dict, str, float]:
    """The starter's call for alice's next run naming `model`: what it hands over, the run's log, its seconds."""
    config = RunConfig.for_task(
        "demo",
        model=str(model),
        device="cpu",
        max_completion_length=8,
        per_device_train_batch_size=4,
        num_generations=4,
        max_steps=1,
        eval_strategy="no",
        merged_generation="no",
        packed_decode="no",
    )
    run_dir = runs / "20260101-000002-alice"
    config.save(run_dir / runfolder.CONFIG_FILE)
    launch_records.write_record(
        run_dir, launch_records.LaunchRecord(owner="alice", sandboxed=True, policy={}, config=config.to_dict())
    )
    log = run_dir / runfolder.LOG_FILE  # the starter's stdout and stderr
    started = time.monotonic()
    with open(log, "w") as handle, contextlib.redirect_stdout(handle), contextlib.redirect_stderr(handle):
        handed = tune_job.choice_env(
            run_dir, launch_records.read_record(run_dir).config, dict(os.environ), memory_limit=4 * 2**30
        )
    return handed, log.read_text(), time.monotonic() - started


def test_custom_code_and_a_pickled_payload_in_the_model_folder_never_run(earlier_run, tmp_path):
    import torch
    from safetensors.torch import load_file

    markers = [tmp_path / "outside-code", tmp_path / "outside-pickle"]
    (earlier_run / "evil.py").write_text(CUSTOM_CODE.format(marker=str(markers[0])))
    config = json.loads((earlier_run / "config.json").read_text())
    config["auto_map"] = {"AutoModelForCausalLM": "evil.EvilModel"}
    (earlier_run / "config.json").write_text(json.dumps(config))
    weights = load_file(earlier_run / "model.safetensors")
    (earlier_run / "model.safetensors").unlink()
    torch.save({**weights, "payload": Payload(str(markers[1]))}, earlier_run / "pytorch_model.bin")

    handed, log, _ = probe_before_the_sandbox(earlier_run, earlier_run.parent.parent)

    assert not any(marker.exists() for marker in markers), "the model folder's code ran outside the sandbox"
    assert "Weights only load failed" in log, log[-2000:]  # the pickle was refused, not skipped
    assert handed == {}  # no choice: the run measures inside its sandbox


def test_a_chat_template_that_never_ends_is_ended_with_its_probe(earlier_run, monkeypatch):
    monkeypatch.setattr(tune_job, "TUNE_TIMEOUT_S", 40)
    (earlier_run / "chat_template.jinja").write_text(
        "{% for a in range(100000) %}{% for b in range(100000) %}{% endfor %}{% endfor %}"
    )
    handed, log, seconds = probe_before_the_sandbox(earlier_run, earlier_run.parent.parent)
    assert handed == {} and "the speed probe took over 40 s and was ended" in log, log[-2000:]
    assert "timing 1/" not in log  # ended in its first round, the one that renders the template
    assert seconds < 40 + 20
    assert not [child for child in psutil.Process().children(recursive=True) if "tune" in " ".join(child.cmdline())]
