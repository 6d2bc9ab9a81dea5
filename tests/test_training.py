"""The training process: completions captured from TRL, metrics, status, LoRA adapter, failures.

Real runs use the tiny model (hidden 16, 2 layers) with 4 completions of at
most 8 tokens a step: small enough to train in seconds on a 2-core CPU, real
enough that TRL generates, scores, computes advantages and updates LoRA.
"""

import errno
import math
import os
import shutil
import statistics
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path

import pytest
from helpers import TINY, poll_until

from workbench.runstore import checkpoint_integrity, runfolder
from workbench.spec.chat import prompt_text
from workbench.spec.config import RunConfig
from workbench.spec.rewards import RewardFunctionError
from workbench.trainer.recorder import StatusWriter, completion_records, failure_hint

# ---------------------------------------------------------------- pure pieces


def test_completion_records_group_by_num_generations_and_weight_rewards():
    logs = {
        "prompt": [[{"role": "user", "content": "Q1"}]] * 2 + [[{"role": "user", "content": "Q2"}]] * 2,
        "completion": [[{"role": "assistant", "content": c}] for c in ("a", "bb", "ccc", "dddd")],
        "rewards": {"brevity": [1.0, 0.5, 0.2, float("nan")], "length_target": [0.0, 1.0, 0.4, 0.6]},
        "advantages": [0.7, -0.7, 0.1, -0.1],
    }
    records = completion_records(
        logs,
        step=5,
        num_generations=2,
        reward_weights=[1.0, 0.5],
        lengths=[1, 2, 3, 4],
        truncated=[False, False, True, False],
    )
    assert [r["group"] for r in records] == [0, 0, 1, 1]
    assert [r["prompt"] for r in records] == ["Q1", "Q1", "Q2", "Q2"]
    assert records[1]["completion"] == "bb" and records[1]["step"] == 5
    assert records[1]["reward"] == pytest.approx(0.5 + 0.5 * 1.0)
    assert records[3]["rewards"]["brevity"] is None  # TRL's NaN for "no reward" is kept as null
    assert records[3]["reward"] == pytest.approx(0.3)  # the None reward is skipped, as TRL's nansum does
    assert records[2]["truncated"] is True and records[2]["length"] == 3


@pytest.mark.parametrize(
    "prompt, text",
    [("plain", "plain"), ([{"role": "system", "content": "s"}, {"role": "user", "content": "u"}], "u")],
    ids=["text", "messages"],
)
def test_prompt_text(prompt, text):
    assert prompt_text(prompt) == text


@pytest.mark.parametrize(
    "exc, words",
    [
        (ValueError("generation_batch_size (8) must be divisible by num_generations (3)."), "calculator"),
        (RuntimeError("CUDA out of memory. Tried to allocate 2.00 GiB"), "per_device_train_batch_size"),
        (ValueError("Cannot use chat template functions because tokenizer.chat_template is not set"), "chat template"),
        (RewardFunctionError("my_reward", "raised ZeroDivisionError: division by zero"), "`my_reward`"),
        (OSError(errno.ENOSPC, "No space left on device"), "The disk is full: free space in"),
        (RuntimeError("PytorchStreamWriter failed writing file data/0: file write failed"), "The disk is full"),
    ],
    ids=["divisibility", "out-of-memory", "chat-template", "reward-function", "enospc", "torch-save-on-full-disk"],
)
def test_failure_hints_name_the_cause(exc, words):
    assert words in failure_hint(exc)


def test_status_heartbeat_keeps_updated_at_fresh(tmp_path):
    writer = StatusWriter(tmp_path, state="training", pid=1)
    first = runfolder.read_status(tmp_path)["updated_at"]
    writer.start_heartbeat(every=0.1)
    poll_until(lambda: runfolder.read_status(tmp_path)["updated_at"] > first, timeout=10, poll=0.05)
    writer.stop_heartbeat()
    status = runfolder.read_status(tmp_path)
    assert status["updated_at"] > first and status["state"] == "training"


# ---------------------------------------------------------------- a full disk


def test_on_a_full_disk_the_heartbeat_lives_and_the_final_status_lands(small_disk, fill):
    disk = small_disk("1m")
    writer = StatusWriter(disk, state="training", pid=1)
    writer.start_heartbeat(every=0.05)
    try:
        fill(disk)
        deadline = time.monotonic() + 10
        while writer.write_error is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert writer.write_error is not None and writer.write_error.errno == errno.ENOSPC
        assert writer._thread.is_alive()  # the heartbeat did not die of it
        with pytest.raises(OSError):
            writer.raise_write_error()
        error = OSError(errno.ENOSPC, "No space left on device")
        writer.set(state="failed", error={"hint": failure_hint(error, run_dir=disk)})  # lands in the reserve
    finally:
        writer.stop_heartbeat()
    status = runfolder.read_status(disk)
    assert status["state"] == "failed" and status["error"]["hint"].startswith(f"The disk is full: free space in {disk}")


def test_a_heartbeat_write_that_fails_is_kept_not_fatal(tmp_path, monkeypatch):
    writer = StatusWriter(tmp_path, state="training", pid=1)

    def no_space(path, data):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(runfolder, "write_json_atomic", no_space)
    writer.start_heartbeat(every=0.02)
    poll_until(lambda: writer.write_error is not None, timeout=10, poll=0.02)
    try:
        assert writer._thread.is_alive() and writer.write_error.errno == errno.ENOSPC
    finally:
        writer.stop_heartbeat()


# A save killed halfway: the weights file half-written, then SIGKILL, as `launcher.stop` used to do.
KILLED_SAVE = """
import os, shutil, signal, sys
from pathlib import Path
from workbench.trainer.training import save_final_adapter
run_dir, source = Path(sys.argv[1]), Path(sys.argv[2])
def save(folder):
    shutil.copytree(source, folder)
    weights = Path(folder) / "adapter_model.safetensors"
    weights.write_bytes(weights.read_bytes()[:100])
    os.kill(os.getpid(), signal.SIGKILL)
save_final_adapter(save, run_dir)
"""


@pytest.mark.slow
def test_a_save_killed_halfway_leaves_the_previous_adapter_whole(tmp_path, tiny_adapter):
    from safetensors import safe_open

    adapter = tmp_path / runfolder.ADAPTER_DIR
    shutil.copytree(tiny_adapter, adapter)
    before = (adapter / "adapter_model.safetensors").read_bytes()
    killed = subprocess.run(
        [sys.executable, "-c", KILLED_SAVE, str(tmp_path), str(tiny_adapter)],
        env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])},
    )
    assert killed.returncode == -9
    assert (adapter / "adapter_model.safetensors").read_bytes() == before
    with safe_open(str(adapter / "adapter_model.safetensors"), "pt") as weights:
        assert list(weights.keys())

    from workbench.trainer.training import save_final_adapter

    save_final_adapter(lambda folder: shutil.copytree(tiny_adapter, folder), tmp_path)  # the next save succeeds
    assert (adapter / "adapter_config.json").is_file()
    assert sorted(p.name for p in tmp_path.iterdir()) == [runfolder.ADAPTER_DIR]  # nothing half-written left


# ---------------------------------------------------------------- a real run


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory):
    from workbench.trainer.training import run_training

    run_dir = tmp_path_factory.mktemp("run")
    # two reward functions with unequal weights, so the weighted total is checked too
    # (0.25, not 0.5: with 0.5 brevity and length_target add up to a constant below 100 characters)
    cfg = RunConfig(
        **TINY, max_steps=3, save_steps=2, reward_names=["brevity", "length_target"], reward_weights=[1.0, 0.25]
    )
    code = run_training(cfg, run_dir)
    return code, run_dir, cfg


@pytest.mark.slow
def test_run_finishes_and_writes_status(finished_run):
    code, run_dir, _ = finished_run
    status = runfolder.read_status(run_dir)
    assert code == 0, status.get("error")
    assert status["state"] == "finished" and status["step"] == 3 and status["total_steps"] == 3
    assert status["pid"] > 0 and status["updated_at"] >= status["started_at"]
    assert (run_dir / runfolder.CONFIG_FILE).is_file()


@pytest.mark.slow
def test_metrics_carry_every_step_under_trls_names(finished_run):
    _, run_dir, _ = finished_run
    metrics = runfolder.read_jsonl(run_dir / runfolder.METRICS_FILE)
    assert [m["step"] for m in metrics] == [1, 2, 3]
    for name in (
        "loss",
        "reward",
        "reward_std",
        "kl",
        "entropy",
        "grad_norm",
        "learning_rate",
        "step_time",
        "frac_reward_zero_std",
        "completions/mean_length",
        "clip_ratio/region_mean",
        "rewards/brevity/mean",
        "rewards/length_target/mean",
    ):
        assert all(name in m for m in metrics), name
    assert all("train_runtime" not in m for m in metrics)


@pytest.mark.slow
def test_completions_carry_rewards_and_trls_advantages(finished_run):
    _, run_dir, cfg = finished_run
    records = runfolder.read_jsonl(run_dir / runfolder.COMPLETIONS_FILE)
    assert len(records) == 3 * cfg.per_device_train_batch_size
    groups = defaultdict(list)
    for record in records:
        assert set(record) >= {
            "step",
            "group",
            "prompt",
            "completion",
            "rewards",
            "reward",
            "advantage",
            "length",
            "truncated",
        }
        assert 0 <= record["length"] <= cfg.max_completion_length
        if record["truncated"]:  # cut off without an end token: it used the whole length budget
            assert record["length"] == cfg.max_completion_length
        assert record["reward"] == pytest.approx(
            record["rewards"]["brevity"] + 0.25 * record["rewards"]["length_target"]
        )
        groups[(record["step"], record["group"])].append(record)
    assert sorted({step for step, _ in groups}) == [1, 2, 3]
    for members in groups.values():
        assert len(members) == cfg.num_generations
        assert len({m["prompt"] for m in members}) == 1  # a group is G completions of one prompt
        rewards = [m["reward"] for m in members]
        mean, std = statistics.mean(rewards), statistics.stdev(rewards)  # TRL's std is Bessel-corrected
        for member in members:
            assert member["advantage"] == pytest.approx((member["reward"] - mean) / (std + 1e-4), abs=1e-4)


@pytest.mark.slow
def test_checkpoints_and_adapter_load_with_peft(finished_run):
    import torch
    from peft import PeftModel
    from safetensors.torch import load_file
    from transformers import AutoModelForCausalLM

    from workbench.sources.model_files import tiny_model_dir

    _, run_dir, _ = finished_run
    assert [p.name for p in checkpoint_integrity.checkpoint_dirs(run_dir)] == ["checkpoint-2", "checkpoint-3"]
    adapter = run_dir / runfolder.ADAPTER_DIR
    weights = load_file(str(adapter / "adapter_model.safetensors"))
    assert weights and all("lora_" in name for name in weights)  # only LoRA weights were trained and saved
    # LoRA B starts at zero: non-zero B means the adapter learned something
    assert any(t.abs().max() > 0 for name, t in weights.items() if "lora_B" in name)
    earlier = load_file(str(run_dir / "checkpoint-2" / "adapter_model.safetensors"))
    assert any(not torch.equal(earlier[k], weights[k]) for k in weights)

    base = AutoModelForCausalLM.from_pretrained(tiny_model_dir())
    reference = {k: v.clone() for k, v in base.state_dict().items()}
    model = PeftModel.from_pretrained(base, str(adapter))
    ids = torch.tensor([[1, 2, 3, 4, 5]])
    with torch.no_grad():
        tuned = model(ids).logits
        with model.disable_adapter():
            untouched = model(ids).logits
        plain = AutoModelForCausalLM.from_pretrained(tiny_model_dir())(ids).logits
    assert not torch.allclose(tuned, untouched)
    assert torch.allclose(untouched, plain)  # the base weights are unchanged
    base_now = model.get_base_model().state_dict()
    for name, value in reference.items():
        key = (
            name.replace(".weight", ".base_layer.weight")
            if f"{name.rsplit('.', 1)[0]}.base_layer.weight" in base_now
            else name
        )
        assert torch.equal(base_now[key], value), name


# ---------------------------------------------------------------- failures


@pytest.fixture
def reward_fails_on_second_call(tmp_path):
    path = tmp_path / "my_rewards.py"
    path.write_text(
        "calls = []\n"
        "def flaky_reward(prompts, completions, **kwargs):\n"
        "    calls.append(1)\n"
        "    if len(calls) > 1:\n"
        "        raise ZeroDivisionError('division by zero')\n"
        "    return [0.0 if i % 2 else 1.0 for i in range(len(completions))]\n"
    )
    return path


@pytest.mark.slow
def test_a_reward_that_raises_fails_the_run_naming_it(tmp_path, reward_fails_on_second_call):
    from workbench.trainer.training import run_training

    run_dir = tmp_path / "run"
    cfg = RunConfig(
        **TINY, max_steps=3, save_steps=10, reward_names=["flaky_reward"], reward_file=str(reward_fails_on_second_call)
    )
    assert run_training(cfg, run_dir) == 1
    status = runfolder.read_status(run_dir)
    assert status["state"] == "failed"
    error = status["error"]
    assert error["type"] == "RewardFunctionError" and "flaky_reward" in error["message"]
    assert "ZeroDivisionError" in error["message"] and "`flaky_reward`" in error["hint"]
    assert "Traceback" in error["traceback_tail"] or "Error" in error["traceback_tail"]
    # what was written before the crash stays readable
    assert [m["step"] for m in runfolder.read_jsonl(run_dir / runfolder.METRICS_FILE)] == [1]
    assert (run_dir / runfolder.REWARD_SOURCE_FILE).read_text() == reward_fails_on_second_call.read_text()
    assert not math.isnan(runfolder.read_jsonl(run_dir / runfolder.COMPLETIONS_FILE)[0]["advantage"])


@pytest.mark.slow
def test_a_hung_reward_is_stopped_and_fails_the_run_naming_it(tmp_path):
    from workbench.trainer.training import run_training

    path = tmp_path / "slow_rewards.py"
    path.write_text(
        "import time\ndef stuck_reward(prompts, completions, **kwargs):\n    while True:\n        time.sleep(0.1)\n"
    )
    run_dir = tmp_path / "run"
    cfg = RunConfig(
        **TINY, max_steps=2, save_steps=10, reward_names=["stuck_reward"], reward_file=str(path), reward_timeout_s=2
    )
    assert run_training(cfg, run_dir) == 1
    error = runfolder.read_status(run_dir)["error"]
    assert runfolder.read_status(run_dir)["state"] == "failed"
    assert error["type"] == "RewardTimeoutError"  # a RewardFunctionError: the hint names the function
    assert "'stuck_reward' did not return within 2 s (reward_timeout_s)" in error["message"]
