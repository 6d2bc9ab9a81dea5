"""A run's setup exported as one plain script (insight/script_export.py, `export-script`): it runs without the workbench."""

from __future__ import annotations

import ast
import json
import runpy
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from helpers import gsm8k_like_rows, tiny_config, write_hub_dataset

from workbench.insight import script_export
from workbench.spec import rewards
from workbench.spec.config import RunConfig
from workbench.spec.trl_settings import grpo_settings

ALL_BUILTINS = list(rewards.REWARDS)
USER_REWARDS = textwrap.dedent('''
    import math


    def says_paris(prompts, completions, **kwargs):
        """1.0 when the answer names Paris."""
        texts = [c[0]["content"] if isinstance(c, list) else c for c in completions]
        return [1.0 if "paris" in t.lower() else math.floor(0.5) for t in texts]
''')
# Python runs the script with `workbench` made unimportable: the script must stand on TRL, PEFT and datasets.
WITHOUT_WORKBENCH = (
    "import runpy, sys; sys.modules['workbench'] = None; script = sys.argv[1]; "
    "sys.argv = sys.argv[1:]; runpy.run_path(script, run_name='__main__')"
)


def imported_modules(text: str) -> set[str]:
    tree = ast.parse(text)
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0:
            names.add(node.module.split(".")[0])
    return names


def arithmetic_config(tmp_path: Path) -> RunConfig:
    reward_file = tmp_path / "my_rewards.py"
    reward_file.write_text(USER_REWARDS)
    return RunConfig(
        task="arithmetic",
        reward_names=[*ALL_BUILTINS, "says_paris"],
        reward_weights=[1.0] * len(ALL_BUILTINS) + [2.0],
        reward_file=str(reward_file),
        recipe="dapo",
        epsilon_high=0.28,
        mask_truncated_completions=True,
        steps_per_generation=4,
    )


def test_script_imports_only_trl_peft_datasets_and_the_standard_library(tmp_path):
    text = script_export.build_script(script_export.script_inputs(arithmetic_config(tmp_path), title="cfg"))
    compile(text, "exported.py", "exec")
    outside = imported_modules(text) - set(sys.stdlib_module_names) - {"__future__"}
    assert outside == set(script_export.ALLOWED_IMPORTS)
    assert "workbench" not in imported_modules(text)


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    """The arithmetic run's script, run as a module (no training) with `workbench` unimportable."""
    folder = tmp_path_factory.mktemp("script")
    cfg = arithmetic_config(folder)
    path = folder / "train.py"
    path.write_text(script_export.build_script(script_export.script_inputs(cfg, title="cfg")))
    saved = sys.modules.get("workbench")
    sys.modules["workbench"] = None  # any `import workbench...` in the script fails
    try:
        namespace = runpy.run_path(str(path), run_name="exported")
    finally:
        sys.modules["workbench"] = saved
    return cfg, namespace


def test_script_holds_every_grpo_setting_of_the_run(exported):
    cfg, namespace = exported
    args = namespace["args"]
    for name, value in grpo_settings(cfg).items():
        assert getattr(args, name) == value, name
    assert (args.epsilon_high, args.mask_truncated_completions, args.steps_per_generation) == (0.28, True, 4)


def test_script_trains_on_the_rows_the_run_trains_on(exported):
    from workbench.spec.tasks import load_task_dataset

    cfg, namespace = exported
    assert namespace["dataset"].to_list() == load_task_dataset(cfg.task, seed=cfg.seed).to_list()


def test_scripts_rewards_score_as_the_workbenchs_own(exported):
    _, namespace = exported
    completions = [
        [{"role": "assistant", "content": text}]
        for text in ("<answer>47</answer>", "It is 47, in Paris. It is 47, in Paris.", "<answer> forty </answer>", "")
    ]
    columns = {"answer": ["47"] * 4, "keywords": [["paris", "47"]] * 4, "answers": [["47", "forty"]] * 4}
    funcs = namespace["REWARD_FUNCS"]
    assert [f.__name__ for f in funcs] == [*ALL_BUILTINS, "says_paris"]
    for func in funcs[:-1]:
        expected = rewards.REWARDS[func.__name__](prompts=["q"] * 4, completions=completions, **columns)
        assert func(prompts=["q"] * 4, completions=completions, **columns) == expected, func.__name__
    assert funcs[-1](prompts=["q"] * 4, completions=completions) == [0.0, 1.0, 0.0, 0.0]


def test_workbench_vllm_server_generation_is_refused_by_field():
    with pytest.raises(script_export.ScriptExportError, match="generation: .* export with generation=transformers"):
        script_export.script_inputs(RunConfig(generation="vllm-server"))


def test_cli_refuses_what_is_neither_a_run_nor_a_config(tmp_path):
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "workbench",
            "export-script",
            "no-such-run",
            "--out",
            str(tmp_path / "x.py"),
            "--runs-dir",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1
    assert "neither a config file nor a run" in done.stderr


@pytest.mark.slow
def test_exported_script_of_a_tiny_run_trains_one_step_on_its_own(tiny_model, tmp_path):
    (tmp_path / "rewards.py").write_text(USER_REWARDS)
    cfg = tiny_config(
        task="demo",
        reward_names=["brevity", "says_paris"],
        reward_weights=[1.0, 0.5],
        reward_file=str(tmp_path / "rewards.py"),
        recipe="gspo",
        importance_sampling_level="sequence",
        steps_per_generation=2,
        loss_type="grpo",
        max_steps=5,
    )
    config_file = cfg.save(tmp_path / "config.json")
    script = tmp_path / "out" / "train_tiny.py"
    done = subprocess.run(
        [sys.executable, "-m", "workbench", "export-script", str(config_file), "--out", str(script)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert f"Wrote {script}" in done.stdout
    run = subprocess.run(
        [sys.executable, "-c", WITHOUT_WORKBENCH, str(script), "--max_steps", "1"],
        cwd=script.parent,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    state = json.loads(next((script.parent / "grpo-output").glob("checkpoint-*/trainer_state.json")).read_text())
    assert state["global_step"] == 1
    logged = state["log_history"][0]
    assert "rewards/brevity/mean" in logged and "rewards/says_paris/mean" in logged
    assert (script.parent / "grpo-output" / "adapter" / "adapter_config.json").is_file()


@pytest.mark.slow  # the script imports TRL at its top
def test_scripts_data_is_the_runs_own_for_a_mapped_hub_layout_folder(tmp_path):
    from workbench.trainer.training import load_dataset_for

    folder = write_hub_dataset(tmp_path / "gsm8k", {"main": {"train": gsm8k_like_rows(12)}})
    cfg = tiny_config(
        dataset_name=str(folder),
        dataset_config="main",
        dataset_train_split="train[2:7]",
        prompt_column="question",
        solution_column="answer",
        solution_transform="after_hashes",
        system_prompt="Think first.",
        reward_names=["brevity"],
    )
    script = tmp_path / "train.py"
    script.write_text(script_export.build_script(script_export.script_inputs(cfg)))
    namespace = runpy.run_path(str(script), run_name="exported")  # not __main__: builds everything, trains nothing
    assert namespace["dataset"].to_list() == load_dataset_for(cfg).to_list()
    assert namespace["dataset"][0]["solution"] == "1006"  # row 2 of the slice: "#### 1,006"


def test_trls_rewards_and_a_reward_model_are_exported_as_trl_takes_them(tmp_path):
    folder = tmp_path / "reward-model"
    folder.mkdir()
    cfg = RunConfig(
        task="arithmetic",
        reward_names=[
            "exact_answer",
            "get_repetition_penalty_reward",
            "think_format_reward",
            "reasoning_accuracy_reward",
        ],
        reward_params={"get_repetition_penalty_reward": {"ngram_size": 4}},
        reward_model=str(folder),
        reward_model_weight=0.5,
        reward_errors="record",
    )
    text = script_export.build_script(script_export.script_inputs(cfg))
    assert "import trl.rewards" in text and "import functools" in text
    assert (
        "REWARD_FUNCS = [exact_answer(), trl.rewards.get_repetition_penalty_reward(ngram_size=4, "
        "max_penalty=-1.0), trl.rewards.think_format_reward, functools.partial(trl.rewards."
        f"reasoning_accuracy_reward, reasoning_delimiters=['</think>']), {str(folder.resolve())!r}]"
    ) in text
    assert "reward_weights=[1.0, 1.0, 1.0, 1.0, 0.5]," in text
    assert "# reward_errors=record is the workbench's own" in text
    ast.parse(text)
