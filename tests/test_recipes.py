"""The GRPO variants as RunConfig fields and recipes: checks, what each recipe changes, TRL agreeing with the plan."""

from __future__ import annotations

import subprocess
import sys
import warnings

import pytest
from helpers import tiny_config

from workbench.spec import recipes
from workbench.spec.config import ConfigError, RunConfig
from workbench.spec.config_checks import check_config, plan_for, validate_config


@pytest.mark.parametrize(
    "changes, field, fix",
    [
        ({"epsilon_high": -0.1}, "epsilon_high", "0.28"),
        ({"importance_sampling_level": "word"}, "importance_sampling_level", "token, sequence"),
        ({"top_entropy_quantile": 1.5}, "top_entropy_quantile", "0.2"),
        ({"recipe": "ppo"}, "recipe", "dapo"),
    ],
    ids=["negative-epsilon-high", "unknown-level", "quantile-above-1", "unknown-recipe"],
)
def test_variant_fields_are_checked_with_field_rule_and_fix(changes, field, fix):
    problems = validate_config(RunConfig().with_changes(**changes))
    assert [p.field for p in problems] == [field]
    assert fix in problems[0].fix


def test_variant_fields_parse_from_the_command_line_form():
    cfg = RunConfig.from_dict({"epsilon_high": "", "mask_truncated_completions": "true", "top_entropy_quantile": "0.2"})
    assert (cfg.epsilon_high, cfg.mask_truncated_completions, cfg.top_entropy_quantile) == (None, True, 0.2)


def test_dapo_sets_clip_higher_and_goes_off_policy():
    before = RunConfig()
    after, changed = recipes.apply_recipe(before, "dapo")
    assert (after.loss_type, after.epsilon, after.epsilon_high, after.beta) == ("dapo", 0.2, 0.28, 0.0)
    assert after.mask_truncated_completions is True and after.recipe == "dapo"
    # on-policy defaults: the ratio would stay 1, so each round is split into 4 optimizer steps
    assert recipes.is_on_policy(before) and not recipes.is_on_policy(after)
    assert after.steps_per_generation == 4 * before.gradient_accumulation_steps
    assert changed == ["beta", "epsilon_high", "mask_truncated_completions", "steps_per_generation", "recipe"]


def test_gspo_is_sequence_level_with_the_papers_clip():
    after, changed = recipes.apply_recipe(RunConfig(gradient_accumulation_steps=2), "gspo")
    assert (after.importance_sampling_level, after.loss_type, after.epsilon, after.epsilon_high) == (
        "sequence",
        "grpo",
        3e-4,
        4e-4,
    )
    assert after.steps_per_generation == 8 and "importance_sampling_level" in changed


def test_an_off_policy_config_keeps_its_own_batch_split():
    before = RunConfig(num_iterations=2)
    after, changed = recipes.apply_recipe(before, "gspo")
    assert after.steps_per_generation is None and "steps_per_generation" not in changed


def test_recipes_set_every_variant_field_so_one_after_another_leaves_nothing_behind():
    dapo, _ = recipes.apply_recipe(RunConfig(), "dapo")
    dr, changed = recipes.apply_recipe(dapo, "dr_grpo")
    assert (dr.loss_type, dr.scale_rewards, dr.epsilon_high, dr.mask_truncated_completions) == (
        "dr_grpo",
        "none",
        None,
        False,
    )
    assert {"epsilon_high", "mask_truncated_completions", "loss_type", "scale_rewards"} <= set(changed)
    again, changed_again = recipes.apply_recipe(dr, "dr_grpo")
    assert again == dr and changed_again == []


def test_none_changes_no_setting():
    dapo, _ = recipes.apply_recipe(RunConfig(), "dapo")
    custom, changed = recipes.apply_recipe(dapo, "none")
    assert changed == ["recipe"] and custom == dapo.with_changes(recipe="")


def test_unknown_recipe_is_refused_by_name():
    with pytest.raises(ValueError, match="recipe: 'ppo' is not a recipe; choose one of none, grpo, dapo"):
        recipes.apply_recipe(RunConfig(), "ppo")


@pytest.fixture(scope="module")
def build_grpo_config():
    """The trainer's RunConfig -> GRPOConfig (importing TRL once for the module)."""
    from workbench.trainer.training import build_grpo_config

    return build_grpo_config


@pytest.mark.parametrize("name", list(recipes.RECIPES))
def test_recipe_reaches_trl_and_the_plan_agrees_with_it(name, tmp_path, build_grpo_config):
    """Each recipe on the tiny run: the trainer's GRPOConfig carries its fields, and TRL's batch equals the plan's."""
    cfg, _ = recipes.apply_recipe(tiny_config(max_steps=-1, num_train_epochs=1), name)
    check_config(cfg)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        trl_config = build_grpo_config(cfg, tmp_path)
    for field in recipes.VARIANT_FIELDS:
        assert getattr(trl_config, field) == getattr(cfg, field), field
    plan = plan_for(cfg, dataset_size=64)
    assert (plan.steps_per_generation, plan.generation_batch_size) == (
        trl_config.steps_per_generation,
        trl_config.generation_batch_size,
    )
    if recipes.RECIPES[name].needs_off_policy:  # more optimizer steps per round: the same prompts give more steps
        on_policy = plan_for(tiny_config(max_steps=-1, num_train_epochs=1), dataset_size=64)
        assert plan.total_steps == on_policy.total_steps
        assert plan.generation_batch_size == 4 * on_policy.generation_batch_size


def run_cli(*args):
    return subprocess.run(
        [sys.executable, "-m", "workbench", "train", *args], capture_output=True, text=True, timeout=60
    )


def test_cli_refuses_an_unknown_recipe_in_one_line():
    done = run_cli("--recipe", "ppo", "--model", "tiny")
    assert done.returncode == 2
    assert done.stderr.strip() == (
        "error: --recipe: 'ppo' is not a recipe; choose one of none, grpo, dapo, dr_grpo, gspo"
    )


def test_cli_prints_what_the_recipe_changed():
    # an impossible batch after the recipe: the changes are printed, then the run is refused before any model loads
    done = run_cli("--recipe", "gspo", "--model", "tiny", "--set", "num_generations=3")
    assert done.returncode == 2
    assert "recipe gspo changed 7 field(s)" in done.stderr
    assert "importance_sampling_level: 'token' -> 'sequence'" in done.stderr
    assert "steps_per_generation: empty -> 4" in done.stderr


def test_config_error_names_the_recipe_field():
    with pytest.raises(ConfigError, match="recipe"):
        check_config(RunConfig(recipe="ppo"))


@pytest.mark.slow
def test_a_dapo_run_trains_off_policy_and_records_its_recipe(tiny_model, tmp_path):
    """`train --recipe dapo` on the tiny model: 2 steps, each generation round split over 4 optimizer steps."""
    import json

    from helpers import TINY

    settings = [f"--set={name}={value}" for name, value in TINY.items() if name != "model"]
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "workbench",
            "train",
            "--model",
            "tiny",
            "--recipe",
            "dapo",
            "--max-steps",
            "2",
            "--run-dir",
            str(tmp_path / "run"),
            *settings,
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "recipe dapo changed" in done.stderr
    saved = json.loads((tmp_path / "run" / "config.json").read_text())
    assert (saved["recipe"], saved["epsilon_high"], saved["steps_per_generation"]) == ("dapo", 0.28, 4)
    metrics = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    steps = [m for m in metrics if "clip_ratio/high_mean" in m]
    assert [m["step"] for m in steps] == [1, 2]
