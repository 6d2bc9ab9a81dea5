"""The published GRPO variants as recipes: each sets the RunConfig fields its paper sets.

`apply_recipe(config, name) -> (new_config, changed)` is pure: it returns a new
RunConfig and the names of the fields whose value it changed, so the CLI and
the Setup tab can say what a recipe did.

Each recipe sets every field that tells the variants apart (`VARIANT_FIELDS`),
so choosing one recipe after another never leaves a field of the first behind.
Values follow the papers as TRL 1.16's paper index (docs/source/paper_index.md)
writes them as GRPOConfig settings:

- grpo: DeepSeekMath (arXiv 2402.03300, section 4.1): per-sequence loss
  (loss_type grpo), KL coefficient 0.04, clip 0.2, one update per generation
  round, rewards scaled by the group's std.
- dapo: DAPO (arXiv 2503.14476, section 4.1; TRL's DAPO entry): token-level loss
  (dapo), clip-higher (epsilon 0.2, epsilon_high 0.28), overlong filtering
  (mask_truncated_completions), no KL term. Its soft overlong punishment is a
  reward, and its dynamic sampling is not in TRL.
- dr_grpo: Dr. GRPO (arXiv 2503.20783; TRL's Dr. GRPO entry and the
  scale_rewards help): a constant denominator (dr_grpo), no std scaling, no KL.
- gspo: GSPO (arXiv 2507.18071 v2, section 5.1; TRL's GSPO entry): one ratio per
  sequence (importance_sampling_level sequence) with loss_type grpo, clip
  3e-4 / 4e-4, no KL, the generation round split into 4 mini-batches.
- none: changes nothing (custom settings); it only clears `recipe`.

On the workbench's defaults a run is on-policy: one optimizer step per
generation round, so TRL computes no old log-probabilities and the policy
ratio is exactly 1. Clipping, epsilon_high and the sequence-level ratio then
change nothing. A recipe whose point is one of those (`needs_off_policy`) also
splits each generation round into `OFF_POLICY_MINI_BATCHES` optimizer steps
(steps_per_generation = 4 x gradient_accumulation_steps, GSPO's 4 mini-batches;
DAPO's paper takes 16, which on a CPU run would make each round 16 times
larger), unless the config is already off-policy. The batch calculator shows
the step count that follows.
"""

from __future__ import annotations

from dataclasses import dataclass

from workbench.spec.config import RunConfig

# The fields a recipe sets, in the order they are reported.
VARIANT_FIELDS = (
    "loss_type",
    "scale_rewards",
    "beta",
    "epsilon",
    "epsilon_high",
    "importance_sampling_level",
    "mask_truncated_completions",
    "top_entropy_quantile",
)
# Optimizer steps each generation round is split into when a recipe needs the ratio to move off 1.
OFF_POLICY_MINI_BATCHES = 4
NONE = "none"


@dataclass(frozen=True)
class Recipe:
    """One published variant: its settings, where they come from, and whether it needs off-policy steps."""

    name: str
    title: str
    source: str
    settings: dict
    needs_off_policy: bool
    summary: str


RECIPES: dict[str, Recipe] = {
    r.name: r
    for r in (
        Recipe(
            "grpo",
            "GRPO (DeepSeekMath)",
            "arXiv 2402.03300, section 4.1",
            dict(
                loss_type="grpo",
                scale_rewards="group",
                beta=0.04,
                epsilon=0.2,
                epsilon_high=None,
                importance_sampling_level="token",
                mask_truncated_completions=False,
                top_entropy_quantile=1.0,
            ),
            False,
            "per-sequence loss mean, KL 0.04 to the base model, clip 0.2, advantages scaled by the group std",
        ),
        Recipe(
            "dapo",
            "DAPO",
            "arXiv 2503.14476, section 4.1",
            dict(
                loss_type="dapo",
                scale_rewards="group",
                beta=0.0,
                epsilon=0.2,
                epsilon_high=0.28,
                importance_sampling_level="token",
                mask_truncated_completions=True,
                top_entropy_quantile=1.0,
            ),
            True,
            "token-level loss, clip-higher (0.2 below, 0.28 above), truncated completions left out, no KL",
        ),
        Recipe(
            "dr_grpo",
            "Dr. GRPO",
            "arXiv 2503.20783",
            dict(
                loss_type="dr_grpo",
                scale_rewards="none",
                beta=0.0,
                epsilon=0.2,
                epsilon_high=None,
                importance_sampling_level="token",
                mask_truncated_completions=False,
                top_entropy_quantile=1.0,
            ),
            False,
            "constant loss denominator (no length bias), advantages not divided by the std, no KL",
        ),
        Recipe(
            "gspo",
            "GSPO",
            "arXiv 2507.18071 v2, section 5.1",
            dict(
                loss_type="grpo",
                scale_rewards="group",
                beta=0.0,
                epsilon=3e-4,
                epsilon_high=4e-4,
                importance_sampling_level="sequence",
                mask_truncated_completions=False,
                top_entropy_quantile=1.0,
            ),
            True,
            "one policy ratio per completion (sequence level), clip 3e-4 / 4e-4, no KL",
        ),
    )
}
RECIPE_NAMES = (NONE, *RECIPES)


def recipe_problem(name: str) -> tuple[str, str, str] | None:
    """(field, rule, fix) when `name` is not a recipe ('' and 'none' mean no recipe), else None."""
    if name in ("", NONE) or name in RECIPES:
        return None
    return ("recipe", f"{name!r} is not a recipe", f"choose one of {', '.join(RECIPE_NAMES)}")


def is_on_policy(cfg: RunConfig) -> bool:
    """True when the policy ratio is exactly 1: one optimizer pass over each round, as large as one step."""
    spg = cfg.steps_per_generation or cfg.gradient_accumulation_steps
    return cfg.num_iterations == 1 and spg <= cfg.gradient_accumulation_steps


def apply_recipe(cfg: RunConfig, name: str) -> tuple[RunConfig, list[str]]:
    """`cfg` with recipe `name`'s settings, and the fields whose value changed (in a stable order).

    Raises ValueError naming the recipes for an unknown name (`recipe_problem` gives the field message).
    """
    problem = recipe_problem(name)
    if problem:
        raise ValueError(f"{problem[0]}: {problem[1]}; {problem[2]}")
    if name in ("", NONE):
        new = cfg.with_changes(recipe="")
    else:
        recipe = RECIPES[name]
        changes = dict(recipe.settings, recipe=name)
        if recipe.needs_off_policy and is_on_policy(cfg):
            changes["steps_per_generation"] = OFF_POLICY_MINI_BATCHES * cfg.gradient_accumulation_steps
        new = cfg.with_changes(**changes)
    order = (*VARIANT_FIELDS, "steps_per_generation", "recipe")
    changed = [f for f in order if getattr(new, f) != getattr(cfg, f)]
    return new, changed


def describe_changes(before: RunConfig, after: RunConfig, changed: list[str]) -> list[str]:
    """One line per changed field: `name: old -> new`."""

    def shown(value):
        return "empty" if value is None or value == "" else repr(value)

    return [f"{name}: {shown(getattr(before, name))} -> {shown(getattr(after, name))}" for name in changed]
