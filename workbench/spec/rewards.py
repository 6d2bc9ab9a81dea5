"""Reward functions for GRPO, with TRL's signature, looked up by name.

Every reward here is called the way TRL's GRPOTrainer calls one:

    f(prompts=..., completions=..., completion_ids=..., **columns) -> list[float | None]

`completions` are plain strings, or, for a conversational dataset, lists of
messages such as `[{"role": "assistant", "content": "..."}]`; every other
dataset column (e.g. `answer`, `keywords`) arrives as a per-completion list.
TRL names each function's metric `rewards/<__name__>/mean`, so factories give
the functions they build a meaningful `__name__`.

Also here: `load_reward_file` (a person's own reward functions from a Python
file; `read_reward_file` reads them from its source without running it),
`score` (try rewards on hand-written completions before training) and
`check_reward_output` / `guard_reward` (a reward that raises, returns the
wrong count, returns nothing usable call after call, or hangs past its time
limit fails with the function's name). Pure standard library.
"""

from __future__ import annotations

import ast
import functools
import importlib.util
import inspect
import math
import re
import signal
import sys
import threading
import traceback
import unicodedata
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable

from workbench.errors import WorkbenchError
from workbench.spec.chat import completion_text
from workbench.spec.trl_rewards import TRL_REWARDS, TrlReward, describe, trl_reward

RewardFunc = Callable[..., list]

ANSWER_TAG = re.compile(r"<answer>(.*?)</answer>", re.DOTALL | re.IGNORECASE)
NUMBER = re.compile(r"[-+]?\d[\d,]*(?:\.\d+)?|[-+]?\.\d+")


class RewardError(WorkbenchError):
    """A reward cannot be found, loaded, or used; the message says how to fix it."""


class RewardFunctionError(RewardError):
    """A reward function raised or returned something TRL cannot use."""

    def __init__(self, function_name: str, message: str):
        super().__init__(f"reward function '{function_name}' {message}")
        self.function_name = function_name


class RewardTimeoutError(RewardFunctionError):
    """A reward function outlasted reward_timeout_s: a hang, which ends the run whatever reward_errors says."""


class RewardFileError(RewardError):
    """A reward file is missing, does not import, or defines no reward function."""


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


def _named(func: Callable, name: str, doc: str | None = None, needs: tuple[str, ...] = (),
           optional: tuple[str, ...] = ()) -> Callable:
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

    return _named(reward, f"format_{tag}_tag", f"1.0 when the completion holds a non-empty <{tag}>...</{tag}>, else 0.0.")


BOXED = re.compile(r"\\boxed\{\s*[^{}\s][^{}]*\}")


def boxed_format() -> RewardFunc:
    """1.0 when the completion gives an answer in `\\boxed{...}` (the form accuracy_reward parses), else 0.0."""

    def reward(prompts=None, completions=None, completion_ids=None, **kwargs):
        return [1.0 if BOXED.search(t) else 0.0 for t in _texts(completions)]

    return _named(reward, "boxed_format",
                  "1.0 when the completion gives an answer in \\boxed{...} (the form accuracy_reward parses), else 0.0.")


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

    return _named(reward, "keyword_presence", keyword_presence.__doc__, needs=() if fixed is not None else ("keywords",))


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

    return _named(reward, "mentions_answer",
                  "1.0 when an accepted answer (the `answers` column: a list, or one string split by '|') appears in "
                  "the completion as a word or number (case, accents and punctuation ignored), else 0.0.",
                  needs=("answers",))


def brief_if_correct(max_chars: int = 100) -> RewardFunc:
    """1 - characters / max_chars (clipped to [0, 1]) when mentions_answer gives 1.0, else 0.0: brevity if right.

    Brevity is paid only on a right answer, so neither an empty nor a short wrong answer can earn it:
    beside `mentions_answer` (weights w and 1 - w) the total is correct x (w + (1 - w) x brevity), in [0, 1].
    """
    if max_chars <= 0:
        raise RewardError(f"brief_if_correct: max_chars must be > 0, got {max_chars}; use e.g. 100")

    def reward(prompts=None, completions=None, completion_ids=None, answers=None, **kwargs):
        right = _mentions_scores("brief_if_correct", completions, answers)
        return [None if r is None else r * min(1.0, max(0.0, 1.0 - len(t) / max_chars))
                for r, t in zip(right, _texts(completions))]

    return _named(reward, "brief_if_correct",
                  f"1 - characters / {max_chars} (clipped to [0, 1]) when mentions_answer gives 1.0, else 0.0: "
                  f"brevity paid only for a right answer.", needs=("answers",))


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


# ---------------------------------------------------------------- user reward files


def _reward_path(path: str | Path) -> Path:
    path = Path(path).expanduser()
    if not path.is_file():
        raise RewardFileError(
            f"reward_file: no file at '{path}'; give the path of a .py file defining functions "
            f"f(prompts, completions, **kwargs) -> list[float]"
        )
    if path.suffix != ".py":
        raise RewardFileError(f"reward_file: '{path}' is not a .py file; reward functions must live in a Python file")
    return path


def _syntax_error(path: Path, exc: SyntaxError) -> RewardFileError:
    return RewardFileError(
        f"reward_file '{path}' does not import: syntax error on line {exc.lineno}: {exc.msg}; fix that line"
    )


def _no_function_error(path: Path) -> RewardFileError:
    return RewardFileError(
        f"reward_file '{path}' defines no reward function; define e.g. "
        f"`def my_reward(prompts, completions, **kwargs): return [1.0 for _ in completions]`"
    )


def load_reward_file(path: str | Path) -> dict[str, RewardFunc]:
    """Import a Python file and return its public reward functions by name.

    A public reward function is a function defined in that file, whose name does
    not start with "_", and that accepts `completions` as a keyword (by name or
    through **kwargs) - so helper functions with other signatures are left out.
    Importing runs the file's code: a process that must not run it (the
    dashboard of a shared server) reads the names with `read_reward_names`.
    """
    path = _reward_path(path)
    module_name = f"workbench_user_rewards_{abs(hash(str(path.resolve())))}"
    spec = importlib.util.spec_from_file_location(module_name, path)
    module = importlib.util.module_from_spec(spec)
    try:
        sys.modules[module_name] = module  # so dataclasses/pickle inside the file can find it
        spec.loader.exec_module(module)
    except SyntaxError as exc:
        sys.modules.pop(module_name, None)
        raise _syntax_error(path, exc) from None
    except BaseException as exc:  # any error while the user's code runs, reported without a traceback
        sys.modules.pop(module_name, None)
        if isinstance(exc, KeyboardInterrupt):
            raise
        line = _user_line(exc, path)
        raise RewardFileError(
            f"reward_file '{path}' does not import: {type(exc).__name__}: {exc}{line}; "
            f"fix the file (or install the package it needs)"
        ) from None
    functions = {
        name: func
        for name, func in vars(module).items()
        if inspect.isfunction(func)
        and not name.startswith("_")
        and func.__module__ == module_name
        and _accepts_completions(func)
    }
    if not functions:
        raise _no_function_error(path)
    return functions


# Longest reward file read without running it: code, not data (the parse runs on every Setup keystroke).
MAX_REWARD_SOURCE_BYTES = 1_000_000


@dataclass(frozen=True)
class RewardSource:
    """A reward function as its file's source states it, never run: its name and the columns it asks for.

    `needs_columns` / `optional_columns` are what `reward_columns` reads, so
    the column checks treat it as they treat a loaded function.
    """

    name: str
    needs_columns: tuple[str, ...] = ()
    optional_columns: tuple[str, ...] = ()


def read_reward_file(path: str | Path) -> dict[str, RewardSource]:
    """The reward functions a Python file defines, read from its source without running any of it.

    The same rule as `load_reward_file`, applied to the file's top-level
    `def`s (`ast`, nothing imported or executed): public names whose
    parameters include `completions` or `**kwargs`; the columns each needs
    come from its signature as `reward_columns` reads them. A file that does
    not parse is refused as one that does not import; what only running it
    would show (a missing package, an error at import, `needs_columns` set in
    code) surfaces in the training process, where the file runs.
    """
    path = _reward_path(path)
    info = path.stat()
    if info.st_size > MAX_REWARD_SOURCE_BYTES:
        raise RewardFileError(f"reward_file '{path}' is {info.st_size / 1e6:.1f} MB; a reward file is code, at most "
                              f"{MAX_REWARD_SOURCE_BYTES / 1e6:.0f} MB: move data it reads into the dataset")
    return {found.name: found for found in _rewards_in_source(str(path), info.st_mtime_ns, info.st_size)}


def read_reward_names(path: str | Path) -> list[str]:
    """The names of the reward functions a file defines, read without running it (see read_reward_file)."""
    return list(read_reward_file(path))


@functools.lru_cache(maxsize=32)
def _rewards_in_source(path: str, mtime_ns: int, size: int) -> tuple[RewardSource, ...]:
    """The reward functions in the file as it is at (`mtime_ns`, `size`): parsed once per version."""
    try:
        tree = ast.parse(Path(path).read_bytes(), filename=path)
    except SyntaxError as exc:
        raise _syntax_error(Path(path), exc) from None
    except (OSError, ValueError, RecursionError, MemoryError) as exc:  # unreadable, NUL bytes, absurdly nested
        raise RewardFileError(f"reward_file '{path}' cannot be read as Python ({type(exc).__name__}); "
                              "save it as a plain UTF-8 .py file") from None
    found = tuple(_reward_source(node) for node in tree.body
                  if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and not node.name.startswith("_"))
    found = tuple(reward for reward in found if reward is not None)
    if not found:
        raise _no_function_error(Path(path))
    return found


def _reward_source(node: ast.FunctionDef | ast.AsyncFunctionDef) -> RewardSource | None:
    """The reward a top-level `def` defines (None when it takes no `completions`): its columns from its signature."""
    args = node.args
    positional = [*args.posonlyargs, *args.args]
    # defaults belong to the last positional parameters; kw_defaults holds None for a keyword without one
    defaulted = {arg.arg for arg in positional[len(positional) - len(args.defaults):]} | \
        {arg.arg for arg, default in zip(args.kwonlyargs, args.kw_defaults) if default is not None}
    names = [arg.arg for arg in (*positional, *args.kwonlyargs)]
    if args.kwarg is None and "completions" not in names:
        return None
    columns = [name for name in names if name not in TRL_ARGUMENTS]
    return RewardSource(node.name, tuple(c for c in columns if c not in defaulted),
                        tuple(c for c in columns if c in defaulted))


def _accepts_completions(func: Callable) -> bool:
    params = inspect.signature(func).parameters.values()
    return any(p.name == "completions" or p.kind is p.VAR_KEYWORD for p in params)


def _user_line(exc: BaseException, path: Path) -> str:
    # the deepest frame inside the user's file, so the message points at their line
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if Path(f.filename) == path]
    return f" (line {frames[-1].lineno})" if frames else ""


def resolve_rewards(names: Iterable[str], reward_file: str | Path | None = None,
                    timeout_s: float | None = None, training: bool = False,
                    build_trl: Callable[[str, TrlReward], RewardFunc] | None = None,
                    errors: str = "fail", failure_score: float = 0.0) -> list[RewardFunc]:
    """Reward functions for `names`, each guarded so a failure names the function.

    `training`: also fail a function that gave no usable reward for a whole
    batch, USELESS_CALLS calls in a row, and one call that outlasts `timeout_s`.
    `build_trl(name, reward)` makes a TRL reward's function (the training
    process has it; without it a TRL reward is refused: TRL loads torch).
    `errors`, `failure_score`: see guard_reward.
    """
    extra = load_reward_file(reward_file) if reward_file else {}
    names = list(names)
    if not names:
        raise RewardError(f"reward_names: choose at least one reward; built-in ones: {', '.join(REWARDS)}")
    functions = []
    for name in names:
        found = get_reward(name, extra)
        if isinstance(found, TrlReward):
            if build_trl is None:
                raise RewardError(f"reward_names: {name} is TRL's own reward (trl.rewards), which loads TRL and torch, "
                                  "so it runs only in the training process; try it with a Smoke test (1 step)")
            found = build_trl(name, found)
        functions.append(guard_reward(found, name, timeout_s=timeout_s, useless_calls=USELESS_CALLS if training else None,
                                      errors=errors, failure_score=failure_score))
    return functions


# ---------------------------------------------------------------- checking outputs


def check_reward_output(name: str, values: Any, n: int) -> list[float | None]:
    """The output of reward `name` as floats (None kept), or a RewardFunctionError saying what is wrong."""
    if isinstance(values, (str, bytes, dict)) or not hasattr(values, "__len__"):
        raise RewardFunctionError(
            name, f"returned {type(values).__name__}; it must return a list with one float (or None) per completion"
        )
    if len(values) != n:
        raise RewardFunctionError(
            name, f"returned {len(values)} rewards for {n} completions; it must return exactly one per completion"
        )
    result: list[float | None] = []
    for i, value in enumerate(values):
        if value is None:
            result.append(None)
            continue
        try:
            number = float(value)
        except (TypeError, ValueError):
            raise RewardFunctionError(name, f"returned {value!r} at position {i}; each reward must be a number or None") from None
        if math.isnan(number):
            result.append(None)  # TRL turns None into NaN anyway
        elif math.isinf(number):
            raise RewardFunctionError(name, f"returned {number} at position {i}; rewards must be finite")
        else:
            result.append(number)
    return result


# A reward may answer None ("not applicable") for some rows; one that answers nothing usable for every
# completion of this many batches in a row is broken, and the run would train on no signal from it.
USELESS_CALLS = 3


# The guard's timer signal. Not SIGALRM: math_verify (TRL's accuracy rewards) times its own parsing with
# signal.alarm and cancels any alarm already set when it returns, so an ITIMER_REAL timer around a reward
# that uses it would be gone after its first parse.
TIMER_SIGNAL = getattr(signal, "SIGUSR2", None)


class _Deadline:
    """One guarded block's timer: a watcher thread that signals the main thread if the block outlasts it."""

    def __init__(self, seconds: float, name: str):
        self.seconds, self.name = seconds, name
        self.armed = True
        self.lock = threading.Lock()
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._watch, name=f"reward-timer-{name}", daemon=True)

    def _watch(self) -> None:
        if not self.done.wait(self.seconds):
            with self.lock:
                if self.armed:
                    signal.pthread_kill(threading.main_thread().ident, TIMER_SIGNAL)

    def expired(self, signum, frame) -> None:
        # a signal that arrives after the block ended (sent as it returned) is ignored
        if self.armed:
            self.armed = False
            raise RewardTimeoutError(self.name, f"did not return within {self.seconds:g} s (reward_timeout_s); "
                                                 "make it faster, or raise reward_timeout_s if it is slow by design")

    def disarm(self) -> None:
        with self.lock:
            self.armed = False
        self.done.set()
        self.thread.join()


@contextmanager
def time_limit(seconds: float | None, name: str):
    """Raise RewardFunctionError in the block after `seconds` of wall time (main thread, POSIX; elsewhere no limit).

    A watcher thread sends TIMER_SIGNAL to the main thread when time is up: it
    interrupts pure-Python loops and blocking calls (a sleep, a socket read),
    which is what a hung reward usually is, and it survives what a reward
    does with SIGALRM (math_verify's own timeouts).
    """
    if (not seconds or TIMER_SIGNAL is None or threading.current_thread() is not threading.main_thread()
            or not hasattr(signal, "pthread_kill")):
        yield
        return
    deadline = _Deadline(seconds, name)
    previous = signal.signal(TIMER_SIGNAL, deadline.expired)
    deadline.thread.start()
    try:
        yield
    finally:
        deadline.disarm()
        signal.signal(TIMER_SIGNAL, previous)


# What a reward that raises does to a run (RunConfig.reward_errors).
REWARD_ERROR_MODES = ("fail", "record")


def error_column(name: str) -> str:
    """The column (TRL's log_extra) where function `name` says, per completion, why it could not score it."""
    return f"reward_error/{name}"


def failed_metric(name: str) -> str:
    """The metric (TRL's log_metric): the share of a batch's completions function `name` could not score."""
    return f"rewards/{name}/failed"


def guard_reward(func: RewardFunc, name: str | None = None, timeout_s: float | None = None,
                 useless_calls: int | None = None, errors: str = "fail", failure_score: float = 0.0) -> RewardFunc:
    """Wrap `func` so an exception or a bad output raises RewardFunctionError naming it; keeps __name__.

    `timeout_s`: a call that takes longer fails. `useless_calls`: that many
    calls in a row with no usable reward (None or NaN for every completion)
    fail. `errors` "record": a call that raises is tried again completion by
    completion; each completion it raises on gets `failure_score`, and the
    error goes to TRL's `log_extra` column `error_column(name)` (None where it
    scored) and the share of failures to `log_metric` `failed_metric(name)`.
    A function that raises on every completion of the batch, or outlasts its
    time, still fails.
    """
    name = name or getattr(func, "__name__", type(func).__name__)
    useless_in_a_row = 0

    @functools.wraps(func)
    def guarded(prompts=None, completions=None, completion_ids=None, **kwargs):
        nonlocal useless_in_a_row
        count = len(completions or [])
        failures: list[str | None] = [None] * count
        try:
            with time_limit(timeout_s, name):
                values = func(prompts=prompts, completions=completions, completion_ids=completion_ids, **kwargs)
        except RewardFunctionError:
            raise
        except Exception as exc:
            if errors != "record":
                raise RewardFunctionError(name, f"raised {type(exc).__name__}: {exc}") from exc
            values, failures = _one_by_one(func, name, timeout_s, failure_score,
                                           dict(kwargs, prompts=prompts, completions=completions,
                                                completion_ids=completion_ids), count)
        checked = check_reward_output(name, values, count)
        if errors == "record":
            _log_failures(name, failures, kwargs)
        useless_in_a_row = useless_in_a_row + 1 if checked and all(v is None for v in checked) else 0
        if useless_calls and useless_in_a_row >= useless_calls:
            raise RewardFunctionError(
                name, f"returned no usable reward (None or NaN for every completion) in {useless_in_a_row} batches "
                      "in a row, so the run learns nothing from it; return a number for each completion it can judge")
        return checked

    guarded.__name__ = name
    return guarded


def _one_by_one(func: RewardFunc, name: str, timeout_s: float | None, failure_score: float, arguments: dict,
                count: int) -> tuple[list, list[str | None]]:
    """Score each completion alone: (rewards, the error per completion or None); RewardFunctionError when all fail.

    Every per-completion argument (a list with one value per completion) is cut
    to that completion's value; `log_extra` calls are gathered and handed on
    once, with None for the completions that failed, so TRL's columns stay aligned.
    """
    log_extra = arguments.get("log_extra")
    gathered: dict[str, list] = {}
    values: list = [failure_score] * count
    failures: list[str | None] = [None] * count
    for i in range(count):
        one = {key: [value[i]] if isinstance(value, (list, tuple)) and len(value) == count else value
               for key, value in arguments.items()}
        if callable(log_extra):
            one["log_extra"] = lambda column, logged, i=i: gathered.setdefault(column, [None] * count).__setitem__(
                i, logged[0] if logged else None)
        try:
            with time_limit(timeout_s, name):
                result = check_reward_output(name, func(**one), 1)
            values[i] = result[0]
        except RewardTimeoutError:
            raise
        except RewardFunctionError as exc:
            failures[i] = str(exc).removeprefix(f"reward function '{name}' ")
        except Exception as exc:
            failures[i] = f"{type(exc).__name__}: {exc}"
    if count and all(failures):
        raise RewardFunctionError(name, f"raised on every one of the {count} completions of this batch (the first: "
                                        f"{failures[0]}), so no completion was scored; fix it, or choose another reward")
    for column, logged in gathered.items():
        log_extra(column, logged)
    return values, failures


def _log_failures(name: str, failures: list[str | None], kwargs: dict) -> None:
    """Hand the errors and the share of failures to TRL (`log_extra`, `log_metric`), when TRL is the caller."""
    if callable(kwargs.get("log_extra")):
        kwargs["log_extra"](error_column(name), list(failures))
    if callable(kwargs.get("log_metric")) and failures:
        kwargs["log_metric"](failed_metric(name), sum(1 for f in failures if f) / len(failures))


# ---------------------------------------------------------------- try the rewards


# Row keys TRL keeps from the reward functions' keyword columns (GRPOTrainer._calculate_rewards).
NOT_REWARD_COLUMNS = ("prompt", "completion", "completion_ids")


def call_as_trl(named: Iterable[tuple[str, RewardFunc]], rows: list[dict], texts: list[str],
                completion_ids: list[list[int]] | None, **extra: Any) -> dict[str, list]:
    """Each reward function's values for completions of `rows`' prompts, called as TRL calls one: the completions
    as assistant messages when the prompts are conversations, every other column of the rows beside, and
    `extra` (trainer_state, TRL's logging hooks)."""
    prompts = [row["prompt"] for row in rows]
    conversational = bool(prompts) and isinstance(prompts[0], list)
    completions = [[{"role": "assistant", "content": t}] for t in texts] if conversational else texts
    columns = {key: [row[key] for row in rows] for key in rows[0] if key not in NOT_REWARD_COLUMNS} if rows else {}
    return {name: list(func(prompts=prompts, completions=completions, completion_ids=completion_ids, **columns,
                            **extra))
            for name, func in named}


def weighted_total(scores: Iterable[float | None], weights: Iterable[float]) -> float | None:
    """TRL's total reward of one completion: the weighted sum of the scores it got, a None or NaN score (a
    function that could not score it) skipped as TRL's nansum skips it; None when no function scored it."""
    scored = [(value, weight) for value, weight in zip(scores, weights)
              if value is not None and not (isinstance(value, float) and math.isnan(value))]
    return sum(value * weight for value, weight in scored) if scored else None


def score(
    reward_names: Iterable[str],
    prompts: Any,
    completions: list,
    weights: Iterable[float] | None = None,
    reward_file: str | Path | None = None,
    **columns: Any,
) -> list[dict]:
    """Score completions with named rewards, as the trainer would, before training.

    `prompts` is one prompt (text or messages) for all completions or a list with
    one per completion; each column is a list with one value per completion or a
    single value for all. Returns per completion `{"prompt", "completion",
    "rewards": {name: float | None}, "reward": weighted total}` - the total is
    TRL's (`weighted_total`): a weighted sum that skips None and NaN, and None when no reward scored it.
    """
    names = list(reward_names)
    functions = resolve_rewards(names, reward_file)
    weights = [1.0] * len(names) if weights is None else [float(w) for w in weights]
    if len(weights) != len(names):
        raise RewardError(
            f"reward_weights: {len(weights)} weights for {len(names)} rewards ({', '.join(names)}); give one weight per reward"
        )
    completions = list(completions)
    n = len(completions)
    if _is_single_prompt(prompts):
        prompts = [prompts] * n
    prompts = list(prompts)
    if len(prompts) != n:
        raise RewardError(f"prompts: {len(prompts)} prompts for {n} completions; give one prompt, or one per completion")
    kwargs = {key: _column(key, "score", value, n) for key, value in columns.items()}
    per_function = {
        name: func(prompts=prompts, completions=completions, completion_ids=None, **kwargs)
        for name, func in zip(names, functions)
    }
    results = []
    for i in range(n):
        rewards = {name: per_function[name][i] for name in names}
        results.append({"prompt": prompts[i], "completion": completions[i], "rewards": rewards,
                        "reward": weighted_total(rewards.values(), weights)})
    return results


def _is_single_prompt(prompts: Any) -> bool:
    # a string, or one conversation (a list of message dicts)
    return isinstance(prompts, str) or (
        isinstance(prompts, (list, tuple)) and bool(prompts) and all(isinstance(p, dict) for p in prompts)
    )
