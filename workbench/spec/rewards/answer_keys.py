"""The answer a correctness reward reads from a completion, as a key to vote on: maj@k's extractors.

maj@k (workbench/spec/eval_at_k.py) needs to know which sampled answers are the same answer. Each
correctness reward the workbench provides reads its answer its own way, and its key here is what it compares:

- `accuracy_reward` (the gsm8k task's): the answer math_verify's `parse` reads with the extraction settings
  TRL's accuracy_reward uses (\\boxed{} first, LaTeX only), written as sympy writes it (so 18 and 18.0,
  which verify as equal, vote apart);
- `exact_answer`: the normalised content of the last <answer> tag (what it compares with the `answer` column);
- `numeric_answer`: the last number of that answer;
- `mentions_answer` (the demo task's): the normalised accepted answer the completion mentions, else the
  normalised completion itself (so wrong answers vote among themselves).

A reward from a user's reward file has an extractor when its function carries one as `answer_key`: a function
of the completion's text that returns the answer as a string, or None when it reads none. Without one, maj@k
is unavailable and `majority_note` says why. Pure apart from math_verify, imported when first used.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from workbench.spec.rewards.reward_errors import RewardError
from workbench.spec.rewards.reward_library import (
    _accepted,
    answer_tokens,
    extract_answer,
    normalise_answer,
    parse_number,
)

AnswerKey = Callable[[str, Mapping[str, Any]], "str | None"]


def _math_key(text: str) -> str | None:
    import threading

    from math_verify import LatexExtractionConfig, parse
    from math_verify.parser import NormalizationConfig

    # math_verify times out with signal.alarm, which only the main thread may set: elsewhere (an evaluation the
    # dashboard runs in a thread) no time limit, as TRL's accuracy_reward does
    timeout = 10 if threading.current_thread() is threading.main_thread() else None
    # TRL's accuracy_reward parses the completion with exactly these settings (trl/rewards/accuracy_rewards.py)
    found = parse(
        text,
        extraction_config=[
            LatexExtractionConfig(
                normalization_config=NormalizationConfig(units=True),
                boxed_match_priority=0,
                try_extract_without_anchor=False,
            )
        ],
        extraction_mode="first_match",
        parsing_timeout=timeout,
    )
    return str(found[0]) if found else None


def _mentioned_key(text: str, row: Mapping[str, Any]) -> str | None:
    for accepted in _accepted(row.get("answers")):
        if answer_tokens(accepted) and f" {answer_tokens(accepted)} " in f" {answer_tokens(text)} ":
            return answer_tokens(accepted)
    return answer_tokens(text) or None


def _number_key(text: str) -> str | None:
    number = parse_number(extract_answer(text))
    return None if number is None else repr(number)


BUILT_IN_KEYS: dict[str, AnswerKey] = {
    "accuracy_reward": lambda text, row: _math_key(text),
    "exact_answer": lambda text, row: normalise_answer(extract_answer(text)) or None,
    "numeric_answer": lambda text, row: _number_key(text),
    "mentions_answer": _mentioned_key,
}


def answer_key_for(name: str, function: Any = None) -> AnswerKey | None:
    """The extractor of the correctness reward `name` (its function `function`, for a reward file's own
    `answer_key`), or None when it has none."""
    own = getattr(function, "answer_key", None)
    if callable(own):
        return lambda text, row: _own_key(name, own, text)
    return BUILT_IN_KEYS.get(name)


def _own_key(name: str, own: Callable, text: str) -> str | None:
    """A reward file's `answer_key` on one completion; a failure names the reward, as a failing reward does."""
    try:
        value = own(text)
    except Exception as exc:  # a user's code: any failure, said with the reward's name instead of a traceback
        raise RewardError(
            f"reward '{name}': its answer_key failed on a held-out completion ({type(exc).__name__}: {exc}); "
            "fix it to return the answer as a string (None when there is none), or remove it"
        ) from None
    return None if value is None else str(value)


def majority_note(name: str, function: Any = None) -> str:
    """Why maj@k cannot be had for the correctness reward `name` ("" when it can)."""
    if answer_key_for(name, function) is not None:
        return ""
    return (
        f"maj@k unavailable: the correctness reward {name} has no answer extractor to compare answers by "
        "(a reward file's function can give one as its `answer_key`)"
    )
