"""TRL's own rewards (`trl.rewards`), built for a run from their description in
`workbench/spec/rewards/trl_reward_library.py`.

Here, in the training process, because importing TRL imports torch. A
factory reward (`get_cosine_scaled_reward`, ...) is called with the run's
parameters; a plain one is TRL's function with its parameters bound as
keywords. TRL's text rewards read `completion[0]["content"]`, so they take
conversational completions only: a plain-text completion (a dataset of
text prompts) is handed to them as one assistant message.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

from workbench.spec.config import RunConfig
from workbench.spec.rewards.trl_reward_library import TrlReward, resolved_params


def _as_messages(completions):
    return [[{"role": "assistant", "content": c}] if isinstance(c, str) else c for c in completions or []]


def build_trl_reward(cfg: RunConfig, name: str, reward: TrlReward) -> Callable:
    """The function TRL's reward `reward` is for `cfg`, under the name the config gives it (`name`)."""
    import trl.rewards

    params = resolved_params(reward, cfg.reward_params.get(name), cfg.max_completion_length)
    trl_function = getattr(trl.rewards, reward.trl_name)
    func = trl_function(**params) if reward.factory else functools.partial(trl_function, **params)

    def call(prompts=None, completions=None, completion_ids=None, **kwargs):
        if reward.text_completions:
            completions = _as_messages(completions)
        return func(prompts=prompts, completions=completions, completion_ids=completion_ids, **kwargs)

    call.__name__ = call.__qualname__ = name
    call.__doc__ = reward.summary
    return call
