"""Rewards for GRPO, with TRL's signature, looked up by name: one module a job.

- `reward_library`      the built-in reward functions (REWARDS), `get_reward`, `reward_columns`
- `trl_reward_library`  TRL's own reward library (`trl.rewards`) described, without importing TRL
- `reward_file`         a person's reward file: imported, or read from its source without running it
- `reward_time_limit`   the time limit of one reward call (a hang fails the run)
- `reward_guard`        a run's reward functions, each guarded so a failure names the function
- `reward_trial`        trying rewards on completions before training (`score`), as TRL calls them
- `reward_errors`       the errors, each saying how to fix it
- `answer_keys`         the answer each correctness reward reads from a completion: what maj@k votes on

The names below are re-exported so `from workbench.spec.rewards import REWARDS` (and the other names
notebooks, scripts and the workbench use) keep working.
"""

from workbench.spec.rewards.reward_errors import RewardError, RewardFileError, RewardFunctionError, RewardTimeoutError
from workbench.spec.rewards.reward_file import (
    MAX_REWARD_SOURCE_BYTES,
    RewardSource,
    load_reward_file,
    read_reward_file,
    read_reward_names,
)
from workbench.spec.rewards.reward_guard import (
    REWARD_ERROR_MODES,
    USELESS_CALLS,
    check_reward_output,
    error_column,
    failed_metric,
    guard_reward,
    resolve_rewards,
)
from workbench.spec.rewards.reward_library import (
    ANSWER_TAG,
    BOXED,
    NUMBER,
    REWARDS,
    TOKEN,
    TRL_ARGUMENTS,
    RewardFunc,
    answer_tokens,
    boxed_format,
    brevity,
    brief_if_correct,
    describe_rewards,
    describe_trl_rewards,
    exact_answer,
    extract_answer,
    format_tag,
    get_reward,
    keyword_presence,
    length_target,
    mentions,
    mentions_answer,
    normalise_answer,
    numeric_answer,
    parse_number,
    reward_columns,
)
from workbench.spec.rewards.reward_time_limit import TIMER_SIGNAL, time_limit
from workbench.spec.rewards.reward_trial import NOT_REWARD_COLUMNS, call_as_trl, score, weighted_total
from workbench.spec.rewards.trl_reward_library import TRL_REWARDS, TrlReward, describe, trl_reward

__all__ = [
    "ANSWER_TAG",
    "BOXED",
    "MAX_REWARD_SOURCE_BYTES",
    "NOT_REWARD_COLUMNS",
    "NUMBER",
    "REWARDS",
    "REWARD_ERROR_MODES",
    "TIMER_SIGNAL",
    "TOKEN",
    "TRL_ARGUMENTS",
    "TRL_REWARDS",
    "USELESS_CALLS",
    "RewardError",
    "RewardFileError",
    "RewardFunc",
    "RewardFunctionError",
    "RewardSource",
    "RewardTimeoutError",
    "TrlReward",
    "answer_tokens",
    "boxed_format",
    "brevity",
    "brief_if_correct",
    "call_as_trl",
    "check_reward_output",
    "describe",
    "describe_rewards",
    "describe_trl_rewards",
    "error_column",
    "exact_answer",
    "extract_answer",
    "failed_metric",
    "format_tag",
    "get_reward",
    "guard_reward",
    "keyword_presence",
    "length_target",
    "load_reward_file",
    "mentions",
    "mentions_answer",
    "normalise_answer",
    "numeric_answer",
    "parse_number",
    "read_reward_file",
    "read_reward_names",
    "resolve_rewards",
    "reward_columns",
    "score",
    "time_limit",
    "trl_reward",
    "weighted_total",
]
