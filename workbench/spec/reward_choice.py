"""What a run's rewards mean: which one pays for a right answer and which shape the answer, and each reward's weight
as a run folder's config.json gives it.

The rewards a run uses and their weights are `reward_names_for` and
`reward_weights_for` (spec/config.py); the health checks, the evaluation and
the dashboard's cards read the choices below. Pure: nothing is loaded or run.
"""

from __future__ import annotations

from workbench.spec.config import ConfigError, RunConfig, reward_names_for, reward_weights_for


def reward_weight_map(config: dict) -> dict[str, float]:
    """Each reward's weight in the total, from a run folder's config.json; empty when it does not read as a
    RunConfig (a folder written by another version, or damaged): the cards then show scores without weights."""
    try:
        cfg = RunConfig.from_dict(dict(config))
        names, weights = reward_names_for(cfg), reward_weights_for(cfg)
    except (ConfigError, TypeError, ValueError):
        return {}
    return dict(zip(names, weights)) if len(names) == len(weights) else {}


NO_CORRECTNESS = "none"


def correctness_reward_for(cfg: RunConfig) -> str:
    """The reward that means a right answer: the config's, else the task's when the run uses the task's rewards;
    "" when the run has none."""
    chosen = cfg.correctness_reward.strip()
    if chosen:
        return "" if chosen == NO_CORRECTNESS else chosen
    from workbench.spec import tasks

    task = tasks.TASKS.get(cfg.task)
    if task is None or not task.correctness_reward or task.correctness_reward not in reward_names_for(cfg):
        return ""
    return task.correctness_reward


def shaping_rewards_for(cfg: RunConfig) -> list[str]:
    """The run's other rewards: format, length and the like, which pay for something besides a right answer."""
    correct = correctness_reward_for(cfg)
    return [name for name in reward_names_for(cfg) if name != correct]
