"""A run on a hub dataset through the CLI: a GSM8K-like folder laid out as the hub lays it out, its columns mapped
with `--set`, one real step of the tiny model; and a hub id that cannot be fetched offline, refused in one line."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import gsm8k_like_rows, write_hub_dataset

from workbench.runstore import runfolder

ROOT = Path(__file__).resolve().parent.parent
# A reward that records what TRL handed it: the prompts, `solution` and the original `answer` column.
RECORDING_REWARD = """
import json, os

def seen(prompts, completions, solution, answer, **kwargs):
    with open(os.environ["SEEN_FILE"], "a") as handle:
        for prompt, gold, raw in zip(prompts, solution, answer):
            handle.write(json.dumps({"prompt": prompt, "solution": gold, "answer": raw}) + "\\n")
    return [0.0] * len(completions)
"""


def workbench(*args, cwd, env=None):
    env = {**os.environ, "PYTHONPATH": str(ROOT), **(env or {})}
    return subprocess.run(
        [sys.executable, "-m", "workbench", *args], capture_output=True, text=True, timeout=300, cwd=cwd, env=env
    )


@pytest.mark.slow  # a fresh interpreter imports datasets and huggingface_hub
def test_an_uncached_hub_id_offline_exits_2_in_one_line(tmp_path):
    result = workbench(
        "train",
        "--model",
        "tiny",
        "--set",
        "dataset_name=openai/gsm8k",
        "--set",
        "dataset_config=main",
        "--runs-dir",
        str(tmp_path / "runs"),
        cwd=tmp_path,
        env={"HF_HUB_OFFLINE": "1", "HF_HUB_CACHE": str(tmp_path / "empty-cache")},
    )
    assert result.returncode == 2, result.stderr
    assert "dataset_name: 'openai/gsm8k' is not in the hub cache and this process is offline" in result.stderr
    assert "hf download --repo-type dataset openai/gsm8k --local-dir DIR" in result.stderr
    assert "Traceback" not in result.stderr and not list(tmp_path.glob("runs/*"))


@pytest.mark.slow  # trains the tiny model for one step
def test_one_step_on_a_mapped_hub_layout_folder(tmp_path):
    folder = write_hub_dataset(
        tmp_path / "gsm8k", {"main": {"train": gsm8k_like_rows(40), "test": gsm8k_like_rows(4, start=900)}}
    )
    reward = tmp_path / "rewards.py"
    reward.write_text(RECORDING_REWARD)
    seen_file = tmp_path / "seen.jsonl"
    run_dir = tmp_path / "runs" / "gsm"
    settings = {
        "dataset_name": folder,
        "dataset_config": "main",
        "dataset_train_split": "train[:8]",
        "prompt_column": "question",
        "solution_column": "answer",
        "solution_transform": "after_hashes",
        "system_prompt": "Reason, then give the final number.",
        "reward_file": reward,
        "reward_names": "seen",
        "max_completion_length": 8,
        "per_device_train_batch_size": 4,
        "num_generations": 4,
        "device": "cpu",
        "eval_strategy": "no",
    }  # the default task's held-out evaluation needs its correctness reward
    sets = [arg for name, value in settings.items() for arg in ("--set", f"{name}={value}")]
    result = workbench(
        "train",
        "--model",
        "tiny",
        "--max-steps",
        "1",
        "--run-dir",
        str(run_dir),
        *sets,
        cwd=tmp_path,
        env={"SEEN_FILE": str(seen_file)},
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert runfolder.read_status(run_dir)["state"] == "finished"
    seen = [json.loads(line) for line in seen_file.read_text().splitlines()]
    expected = {row["question"]: row for row in gsm8k_like_rows(8)}  # only the slice's 8 rows
    assert len(seen) == 4
    for record in seen:
        system, user = record["prompt"]
        assert system == {"role": "system", "content": "Reason, then give the final number."}
        row = expected[user["content"]]
        assert record["answer"] == row["answer"], "the original column reaches rewards under its own name"
        assert record["solution"] == row["answer"].rpartition("####")[2].strip().replace(",", "")
    saved = json.loads((run_dir / runfolder.CONFIG_FILE).read_text())
    assert (saved["dataset_name"], saved["prompt_column"]) == (str(folder), "question")
