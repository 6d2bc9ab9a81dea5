"""Real runs of the tiny model with TRL's rewards, rewards that fail on some completions, and a reward model."""

from __future__ import annotations

import json
import time

import pytest
from helpers import TINY

from workbench.runstore import runfolder
from workbench.spec.config import RunConfig

pytestmark = pytest.mark.slow  # each test trains the tiny model


def _solution_data(tmp_path):
    path = tmp_path / "sums.jsonl"
    rows = [
        {"prompt": [{"role": "user", "content": f"What is {a} + {a}? Answer in \\boxed{{}}."}], "solution": str(2 * a)}
        for a in range(1, 9)
    ]
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


def test_a_hung_reward_beside_accuracy_reward_still_ends_the_run_naming_it_in_time(tmp_path):
    # accuracy_reward runs math_verify, whose signal.alarm timeouts cancel any alarm already set: the run's
    # reward_timeout_s must still stop the reward that hangs after it
    from workbench.trainer.training import run_training

    path = tmp_path / "slow_rewards.py"
    path.write_text(
        "import time\nfrom math_verify import parse\n\n"
        "def stuck_reward(prompts, completions, **kwargs):\n"
        "    parse('$1$')\n"
        "    while True:\n"
        "        time.sleep(0.1)\n"
    )
    cfg = RunConfig(
        **TINY,
        max_steps=2,
        save_steps=10,
        dataset_path=str(_solution_data(tmp_path)),
        reward_names=["accuracy_reward", "stuck_reward"],
        reward_file=str(path),
        reward_timeout_s=2,
    )
    started = time.monotonic()
    assert run_training(cfg, tmp_path / "run") == 1
    status = runfolder.read_status(tmp_path / "run")
    assert status["state"] == "failed" and status["error"]["type"] == "RewardTimeoutError"
    assert "'stuck_reward' did not return within 2 s (reward_timeout_s)" in status["error"]["message"]
    assert time.monotonic() - started < 60


def test_recorded_reward_errors_land_with_their_completions_and_the_run_goes_on(tmp_path):
    from workbench.trainer.training import run_training

    path = tmp_path / "picky_rewards.py"
    # raises on a whole batch, and on every other completion when scored alone: half the completions fail
    path.write_text(
        "calls = [0]\n\n"
        "def picky_reward(prompts, completions, **kwargs):\n"
        "    calls[0] += 1\n"
        "    if len(completions) > 1 or calls[0] % 2:\n"
        "        raise ValueError('cannot read this one')\n"
        "    return [1.0]\n"
    )
    cfg = RunConfig(
        **TINY,
        max_steps=2,
        save_steps=10,
        dataset_path=str(_solution_data(tmp_path)),
        reward_names=["accuracy_reward", "picky_reward"],
        reward_file=str(path),
        reward_errors="record",
        reward_failure_score=-2.0,
    )
    run_dir = tmp_path / "run"
    assert run_training(cfg, run_dir) == 0, runfolder.read_status(run_dir).get("error")
    records = runfolder.read_jsonl(run_dir / runfolder.COMPLETIONS_FILE)
    failed = [r for r in records if "reward_errors" in r]
    assert len(failed) == len(records) // 2
    assert all(r["reward_errors"] == {"picky_reward": "ValueError: cannot read this one"} for r in failed)
    assert all(r["rewards"]["picky_reward"] == -2.0 for r in failed)
    assert "accuracy_reward" in records[0]["rewards"]
    metrics = runfolder.read_jsonl(run_dir / runfolder.METRICS_FILE)
    assert [m["rewards/picky_reward/failed"] for m in metrics if "rewards/picky_reward/failed" in m] == [0.5, 0.5]


def test_a_reward_model_folder_scores_completions_as_one_more_reward(tmp_path):
    import torch
    from transformers import AutoConfig, AutoModelForSequenceClassification, AutoTokenizer

    from workbench.sources.model_files import tiny_model_dir
    from workbench.trainer.training import run_training

    # a tiny randomly initialised classifier with one label, saved as a reward model's folder
    folder = tmp_path / "tiny-reward-model"
    config = AutoConfig.from_pretrained(tiny_model_dir(), num_labels=1)
    torch.manual_seed(0)
    AutoModelForSequenceClassification.from_config(config).save_pretrained(folder)
    AutoTokenizer.from_pretrained(tiny_model_dir()).save_pretrained(folder)

    cfg = RunConfig(
        **TINY, max_steps=1, save_steps=10, reward_names=["brevity"], reward_model=str(folder), reward_model_weight=0.5
    )
    run_dir = tmp_path / "run"
    assert run_training(cfg, run_dir) == 0, runfolder.read_status(run_dir).get("error")
    metrics = runfolder.read_jsonl(run_dir / runfolder.METRICS_FILE)[0]
    assert "rewards/tiny-reward-model/mean" in metrics
    record = runfolder.read_jsonl(run_dir / runfolder.COMPLETIONS_FILE)[0]
    scores = record["rewards"]
    assert record["reward"] == pytest.approx(scores["brevity"] + 0.5 * scores["tiny-reward-model"], abs=1e-5)
