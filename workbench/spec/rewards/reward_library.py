"""The workbench's built-in reward functions (REWARDS), with TRL's signature, looked up by name.

Every reward here is called the way TRL's GRPOTrainer calls one:

    f(prompts=..., completions=..., completion_ids=..., **columns) -> list[float | None]

`completions` are plain strings, or, for a conversational dataset, lists of
messages such as `[{"role": "assistant", "content": "..."}]`; every other
dataset column (e.g. `answer`, `keywords`) arrives as a per-completion list.
TRL names each function's metric `rewards/<__name__>/mean`, so factories give
the functions they build a meaningful `__name__`. `get_reward` finds a reward
by name (a user's file first, then these, then TRL's library, described in
`trl_reward_library`); `reward_columns` says which dataset columns one reads.
Pure standard library: the run's export copies these factories' source into its script.
"""

from __future__ import annotations

import inspect
import re
import unicodedata
from collections.abc import Callable, Iterable
from typing import Any

from workbench.spec.chat import completion_text
from workbench.spec.rewards.reward_errors import RewardError
from workbench.spec.rewards.trl_reward_library import TRL_REWARDS, TrlReward, describe, trl_reward

RewardFunc = Callable[..., list]

ANSWER_TAG = re.compile(r"<answer>(.*?)</answer>", re.DOTALL | re.IGNORECASE)
NUMBER = re.compile(r"[-+]?\d[\d,]*(?:\.\d+)?|[-+]?\.\d+")

# ---------------------------------------------------------------- text helpers


def extract_answer(text: str) -> str:
    """The content of the last `<answer>...</answer>` tag, else the whole text, stripped."""
    tagged = ANSWER_TAG.findall(text)
    return (tagged[-1] if tagged else text).strip()


def normalise_answer(text: str) -> str:
    """Lower case, single spaces, no surrounding quotes or final full stop."""
    text = " ".join(str(text).split()).lower()
    return text.strip().strip("\"'`").rstrip(".").strip()


def parse_number(text: str) -> float | None:
    """The last number written in `text` (commas as thousands separators), or None."""
    found = NUMBER.findall(text)
    if not found:
        return None
    try:
        return float(found[-1].replace(",", ""))
    except ValueError:
        return None


def _texts(completions: Iterable[Any] | None) -> list[str]:
    return [completion_text(c) for c in (completions or [])]


def _column(name: str, function_name: str, values: Any, n: int) -> list:
    """A dataset column as a per-completion list, with a clear error when it is missing."""
    if values is None:
        raise RewardError(
            f"reward '{function_name}' needs a `{name}` column in the dataset (one value per prompt); "
            f"add that column, or choose a reward that does not need it"
        )
    if isinstance(values, (str, bytes)) or not isinstance(values, (list, tuple)):
        return [values] * n
    if len(values) != n:
        raise RewardError(f"reward '{function_name}': column `{name}` has {len(values)} values for {n} completions")
    return list(values)


def _named(
    func: Callable, name: str, doc: str | None = None, needs: tuple[str, ...] = (), optional: tuple[str, ...] = ()
) -> Callable:
    """Name a built reward (TRL's metric key) and declare the dataset columns it needs and those it reads if present."""
    func.__name__ = name
    func.__qualname__ = name
    if doc:
        func.__doc__ = doc
    func.needs_columns = needs
    func.optional_columns = optional
    return func


# ---------------------------------------------------------------- reward factories


def format_tag(tag: str = "answer") -> RewardFunc:
    """1.0 when the completion holds a non-empty `<tag>...</tag>`, else 0.0."""
    pattern = re.compile(rf"<{re.escape(tag)}>\s*\S.*?</{re.escape(tag)}>", re.DOTALL | re.IGNORECASE)

    def reward(prompts=None, completions=None, completion_ids=None, **kwargs):
        return [1.0 if pattern.search(t) else 0.0 for t in _texts(completions)]

    return _named(
        reward, f"format_{tag}_tag", f"1.0 when the completion holds a non-empty <{tag}>...</{tag}>, else 0.0."
    )


BOXED = re.compile(r"\\boxed\{\s*[^{}\s][^{}]*\}")


def boxed_format() -> RewardFunc:
    """1.0 when the completion gives an answer in `\\boxed{...}` (the form accuracy_reward parses), else 0.0."""

    def reward(prompts=None, completions=None, completion_ids=None, **kwargs):
        return [1.0 if BOXED.search(t) else 0.0 for t in _texts(completions)]

    return _named(
        reward,
        "boxed_format",
        "1.0 when the completion gives an answer in \\boxed{...} (the form accuracy_reward parses), else 0.0.",
    )


def exact_answer() -> RewardFunc:
    """1.0 when the answer (inside <answer> tags if present) equals the `answer` column, ignoring case and spaces."""

    def reward(prompts=None, completions=None, completion_ids=None, answer=None, **kwargs):
        texts = _texts(completions)
        answers = _column("answer", "exact_answer", answer, len(texts))
        return [
            1.0 if normalise_answer(extract_answer(t)) == normalise_answer(a) else 0.0 for t, a in zip(texts, answers)
        ]

    return _named(reward, "exact_answer", exact_answer.__doc__, needs=("answer",))


def numeric_answer(tolerance: float = 1e-6) -> RewardFunc:
    """1.0 when the last number of the answer is within `tolerance` of the `answer` column, else 0.0."""
    if tolerance < 0:
        raise RewardError(f"numeric_answer: tolerance must be >= 0, got {tolerance}; use e.g. 0.01")

    def reward(prompts=None, completions=None, completion_ids=None, answer=None, **kwargs):
        texts = _texts(completions)
        answers = _column("answer", "numeric_answer", answer, len(texts))
        scores = []
        for text, expected in zip(texts, answers):
            got, want = parse_number(extract_answer(text)), parse_number(str(expected))
            if want is None:
                raise RewardError(f"reward 'numeric_answer': the `answer` value {expected!r} holds no number")
            scores.append(1.0 if got is not None and abs(got - want) <= tolerance else 0.0)
        return scores

    return _named(reward, "numeric_answer", numeric_answer.__doc__, needs=("answer",))


def brevity(max_chars: int = 200) -> RewardFunc:
    """1 - characters / max_chars, clipped to [0, 1]: shorter answers score higher."""
    if max_chars <= 0:
        raise RewardError(f"brevity: max_chars must be > 0, got {max_chars}; use e.g. 200")

    def reward(prompts=None, completions=None, completion_ids=None, **kwargs):
        return [min(1.0, max(0.0, 1.0 - len(t) / max_chars)) for t in _texts(completions)]

    return _named(reward, "brevity", f"1 - characters / {max_chars}, clipped to [0, 1]: shorter answers score higher.")


def length_target(target_chars: int = 100) -> RewardFunc:
    """1 - |characters - target| / target, clipped at 0; a `target_chars` column overrides the target per prompt."""
    if target_chars <= 0:
        raise RewardError(f"length_target: target_chars must be > 0, got {target_chars}; use e.g. 100")

    default_target = target_chars

    def reward(prompts=None, completions=None, completion_ids=None, target_chars=None, **kwargs):
        texts = _texts(completions)
        if target_chars is None:
            targets = [default_target] * len(texts)
        else:
            targets = [float(g) for g in _column("target_chars", "length_target", target_chars, len(texts))]
            if any(g <= 0 for g in targets):
                raise RewardError("reward 'length_target': every `target_chars` value must be > 0")
        return [max(0.0, 1.0 - abs(len(t) - g) / g) for t, g in zip(texts, targets)]

    return _named(
        reward,
        "length_target",
        f"1 - |characters - {target_chars}| / {target_chars}, clipped at 0 (a `target_chars` column overrides it).",
        optional=("target_chars",),
    )


def keyword_presence(keywords: Iterable[str] | None = None) -> RewardFunc:
    """Fraction of the keywords (fixed, else the `keywords` column) that appear as whole words, any case."""
    fixed = _keyword_list(keywords) if keywords is not None else None

    def reward(prompts=None, completions=None, completion_ids=None, keywords=None, **kwargs):
        texts = _texts(completions)
        if fixed is not None:
            wanted = [fixed] * len(texts)
        else:
            wanted = _column("keywords", "keyword_presence", keywords, len(texts))
        scores = []
        for text, words in zip(texts, wanted):
            words = _keyword_list(words)
            if not words:
                scores.append(None)  # nothing to look for: TRL leaves this reward out of the sum
                continue
            hits = sum(1 for w in words if re.search(rf"(?<!\w){re.escape(w)}(?!\w)", text, re.IGNORECASE))
            scores.append(hits / len(words))
        return scores

    return _named(
        reward, "keyword_presence", keyword_presence.__doc__, needs=() if fixed is not None else ("keywords",)
    )


# A decimal number is one token ("18.0" holds no "0"); any other run of letters and digits is a word ("h2o").
TOKEN = re.compile(r"\d+(?:[.,]\d+)+|[^\W_]+")


def answer_tokens(text: str) -> str:
    """Text as a comparable string of words: NFKC (H₂O is H2O), accents and case dropped, punctuation gone."""
    text = unicodedata.normalize("NFKD", unicodedata.normalize("NFKC", str(text)))
    text = "".join(ch for ch in text if not unicodedata.combining(ch)).casefold()
    return " ".join(TOKEN.findall(text))


def mentions(text: str, accepted: Iterable[str]) -> bool:
    """Whether one of the accepted answers appears in `text` as whole words or a whole number (see answer_tokens)."""
    words = f" {answer_tokens(text)} "
    return any(f" {answer_tokens(a)} " in words for a in accepted if answer_tokens(a))


def _accepted(value: Any) -> list[str]:
    # a list of accepted answers, or one string with them separated by "|" (what a CSV cell can hold)
    if isinstance(value, str):
        value = value.split("|")
    return [str(a).strip() for a in (value or []) if str(a).strip()]


def _mentions_scores(function_name: str, completions, answers) -> list[float | None]:
    texts = _texts(completions)
    accepted = [_accepted(a) for a in _column("answers", function_name, answers, len(texts))]
    # a prompt with no accepted answer has no right answer: None, which TRL leaves out of the sum
    return [None if not ok else 1.0 if mentions(t, ok) else 0.0 for t, ok in zip(texts, accepted)]


def mentions_answer() -> RewardFunc:
    """1.0 when an accepted answer (the `answers` column) appears in the completion as a word or number, else 0.0."""

    def reward(prompts=None, completions=None, completion_ids=None, answers=None, **kwargs):
        return _mentions_scores("mentions_answer", completions, answers)

    return _named(
        reward,
        "mentions_answer",
        "1.0 when an accepted answer (the `answers` column: a list, or one string split by '|') appears in "
        "the completion as a word or number (case, accents and punctuation ignored), else 0.0.",
        needs=("answers",),
    )


def brief_if_correct(max_chars: int = 100) -> RewardFunc:
    """1 - characters / max_chars (clipped to [0, 1]) when mentions_answer gives 1.0, else 0.0: brevity if right.

    Brevity is paid only on a right answer, so neither an empty nor a short wrong answer can earn it:
    beside `mentions_answer` (weights w and 1 - w) the total is correct x (w + (1 - w) x brevity), in [0, 1].
    """
    if max_chars <= 0:
        raise RewardError(f"brief_if_correct: max_chars must be > 0, got {max_chars}; use e.g. 100")

    def reward(prompts=None, completions=None, completion_ids=None, answers=None, **kwargs):
        right = _mentions_scores("brief_if_correct", completions, answers)
        return [
            None if r is None else r * min(1.0, max(0.0, 1.0 - len(t) / max_chars))
            for r, t in zip(right, _texts(completions))
        ]

    return _named(
        reward,
        "brief_if_correct",
        f"1 - characters / {max_chars} (clipped to [0, 1]) when mentions_answer gives 1.0, else 0.0: "
        f"brevity paid only for a right answer.",
        needs=("answers",),
    )


def _keyword_list(value: Any) -> list[str]:
    # a list, or one comma-separated string (what a CSV cell can hold)
    if value is None:
        return []
    if isinstance(value, str):
        value = value.split(",")
    return [str(w).strip() for w in value if str(w).strip()]


# The registry: name -> reward function with default settings. The key equals
# each function's __name__, so the UI, the config and TRL's metrics agree.
REWARDS: dict[str, RewardFunc] = {
    f.__name__: f
    for f in (
        format_tag("answer"),
        boxed_format(),
        exact_answer(),
        numeric_answer(),
        brevity(),
        mentions_answer(),
        brief_if_correct(),
        length_target(),
        keyword_presence(),
    )
}


def describe_rewards(rewards: dict[str, RewardFunc] | None = None) -> dict[str, str]:
    """Name -> one line saying what the reward gives (the first line of its docstring)."""
    return {name: ((inspect.getdoc(f) or "").splitlines() or [""])[0] for name, f in (rewards or REWARDS).items()}


def describe_trl_rewards() -> dict[str, str]:
    """TRL's rewards: name -> what it gives and its parameters with their defaults."""
    return {name: describe(reward) for name, reward in TRL_REWARDS.items()}


# What TRL passes every reward besides the dataset's columns.
TRL_ARGUMENTS = ("prompts", "completions", "completion_ids", "trainer_state", "log_extra", "log_metric")


def reward_columns(func: Callable) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(columns the reward needs, columns it reads when present).

    Built-in rewards declare them (`needs_columns`, `optional_columns`); a
    function of a reward file may declare them the same way, else its
    signature tells: a parameter beyond TRL's own is a column, needed when it
    has no default.
    """
    if hasattr(func, "needs_columns"):
        return tuple(func.needs_columns), tuple(getattr(func, "optional_columns", ()))
    needs, optional = [], []
    for param in inspect.signature(func).parameters.values():
        if param.name in TRL_ARGUMENTS or param.kind in (param.VAR_KEYWORD, param.VAR_POSITIONAL):
            continue
        (needs if param.default is param.empty else optional).append(param.name)
    return tuple(needs), tuple(optional)


def get_reward(name: str, extra: dict[str, RewardFunc] | None = None) -> RewardFunc | TrlReward:
    """The reward called `name`: from `extra` (a user's file) first, then the built-ins, then TRL's library.

    A TRL reward comes back as its `TrlReward` description (it declares its
    columns as the built-ins do); the training process builds the function.
    """
    available = {**REWARDS, **(extra or {})}
    if name in available:
        return available[name]
    found = trl_reward(name)
    if found is None:
        raise RewardError(
            f"reward_names: unknown reward {name!r}; choose from {', '.join(sorted([*available, *TRL_REWARDS]))}, "
            f"or define it in a reward file (reward_file)"
        )
    return found
