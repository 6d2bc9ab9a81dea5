"""Reward functions: each on plain and conversational completions, the registry, user files, score()."""

import math

import pytest

from workbench.spec import rewards
from workbench.spec.rewards import RewardError, RewardFileError, RewardFunctionError
from workbench.spec.rewards import reward_file as reward_file_module


def as_chat(text):
    return [{"role": "assistant", "content": text}]


@pytest.fixture(params=["plain", "conversational"])
def shape(request):
    """Turns texts into completions of one shape, as TRL passes them."""
    if request.param == "plain":
        return lambda texts: list(texts)
    return lambda texts: [as_chat(t) for t in texts]


CASES = [
    # (reward name, completions, columns, expected scores)
    (
        "format_answer_tag",
        ["<answer>42</answer>", "42", "<answer> </answer>", "x <ANSWER>a\nb</ANSWER>"],
        {},
        [1.0, 0.0, 0.0, 1.0],
    ),
    (
        "exact_answer",
        ["<answer> Paris. </answer>", "paris", "<answer>Lyon</answer>", "The answer is Paris"],
        {"answer": ["Paris"] * 4},
        [1.0, 1.0, 0.0, 0.0],
    ),
    (
        "numeric_answer",
        ["<answer>1,200</answer>", "so 3.0", "about 7", "no number"],
        {"answer": ["1200", "3", "8", "5"]},
        [1.0, 1.0, 0.0, 0.0],
    ),
    ("brevity", ["", "x" * 50, "x" * 200, "x" * 900], {}, [1.0, 0.75, 0.0, 0.0]),
    (
        "mentions_answer",
        ["It is H\u2082O.", "Brasília!", "-18.0 °C", "Twenty-four hours", "no idea", "Paris"],
        {"answers": [["H2O"], ["Brasilia"], "0|zero", "24|twenty-four", ["Paris"], []]},
        [1.0, 1.0, 0.0, 1.0, 0.0, None],
    ),
    ("brief_if_correct", ["Paris.", "x" * 90 + " Paris", "Lyon.", ""], {"answers": "Paris"}, [0.94, 0.04, 0.0, 0.0]),
    ("length_target", ["x" * 100, "x" * 50, "x" * 150, "x" * 300], {}, [1.0, 0.5, 0.5, 0.0]),
    (
        "keyword_presence",
        ["A cat and a dog.", "Cats only", "DOG", "nothing"],
        {"keywords": [["cat", "dog"], ["cat"], "cat, dog", ["fish"]]},
        [1.0, 0.0, 0.5, 0.0],
    ),
]


@pytest.mark.parametrize("name,texts,columns,expected", CASES, ids=[c[0] for c in CASES])
def test_each_reward_scores_plain_and_conversational(shape, name, texts, columns, expected):
    func = rewards.get_reward(name)
    got = func(prompts=["q"] * len(texts), completions=shape(texts), completion_ids=None, **columns)
    assert got == pytest.approx(expected)


@pytest.mark.parametrize("name", list(rewards.REWARDS), ids=list(rewards.REWARDS))
def test_registry_key_is_the_metric_name(name):
    # TRL logs rewards/<__name__>/mean, so the registry key must be that name
    assert rewards.REWARDS[name].__name__ == name
    assert rewards.describe_rewards()[name]


def test_factories_keep_settings_and_names():
    short = rewards.brevity(max_chars=10)
    assert short.__name__ == "brevity"
    assert short(completions=["12345"]) == [0.5]
    assert rewards.format_tag("think").__name__ == "format_think_tag"
    assert rewards.numeric_answer(tolerance=0.5)(completions=["3.4"], answer=["3"]) == [1.0]
    assert rewards.keyword_presence(["sun"])(completions=["The Sun", "moon"]) == [1.0, 0.0]


def test_length_target_column_overrides_the_target():
    func = rewards.get_reward("length_target")
    assert func(completions=["x" * 10, "x" * 10], target_chars=[10, 20]) == [1.0, 0.5]


def test_keyword_reward_without_keywords_is_none():
    # None means "not applicable": TRL leaves it out of the weighted sum
    assert rewards.get_reward("keyword_presence")(completions=["a"], keywords=[[]]) == [None]


def test_reward_needing_a_missing_column_says_which():
    with pytest.raises(RewardError, match=r"needs an? `answer` column"):
        rewards.get_reward("exact_answer")(completions=["1"])


@pytest.mark.parametrize(
    "factory,kwargs",
    [
        (rewards.brevity, {"max_chars": 0}),
        (rewards.length_target, {"target_chars": -1}),
        (rewards.numeric_answer, {"tolerance": -1}),
    ],
    ids=["brevity", "length_target", "numeric_answer"],
)
def test_factories_refuse_bad_settings(factory, kwargs):
    with pytest.raises(RewardError, match=factory.__name__):
        factory(**kwargs)


def test_unknown_reward_lists_valid_names():
    with pytest.raises(RewardError) as info:
        rewards.get_reward("bervity")
    message = str(info.value)
    assert "'bervity'" in message and all(name in message for name in rewards.REWARDS)


# ---------------------------------------------------------------- user reward files

GOOD_FILE = """
import re

def helper(text):  # not a reward: no `completions` parameter
    return len(text)

def says_yes(prompts, completions, **kwargs):
    return [1.0 if "yes" in c.lower() else 0.0 for c in completions]

def _private(prompts, completions, **kwargs):
    return [0.0 for _ in completions]
"""


@pytest.fixture
def reward_file(tmp_path):
    path = tmp_path / "my_rewards.py"
    path.write_text(GOOD_FILE)
    return path


def test_load_reward_file_returns_public_reward_functions(reward_file):
    loaded = rewards.load_reward_file(reward_file)
    assert list(loaded) == ["says_yes"]
    assert loaded["says_yes"](prompts=["q"], completions=["Yes!", "no"]) == [1.0, 0.0]


BAD_FILES = {
    "missing": (None, r"no file at .*nope\.py"),
    "syntax": ("def f(:\n", r"syntax error on line 1"),
    "import": ("import not_a_real_package_xyz\n", r"ModuleNotFoundError.*not_a_real_package_xyz"),
    "raises": ("x = 1\nraise RuntimeError('boom')\n", r"RuntimeError: boom \(line 2\)"),
    "no_rewards": ("def helper(x):\n    return x\n", r"defines no reward function"),
}


@pytest.mark.parametrize("case", list(BAD_FILES), ids=list(BAD_FILES))
def test_bad_reward_file_names_the_file_and_cause(tmp_path, case):
    source, pattern = BAD_FILES[case]
    path = tmp_path / "nope.py"
    if source is not None:
        path.write_text(source)
    with pytest.raises(RewardFileError, match=pattern) as info:
        rewards.load_reward_file(path)
    assert str(path) in str(info.value)
    assert info.value.__cause__ is None  # the person sees one line, not a chained traceback


def test_reward_file_that_is_not_python_is_refused(tmp_path):
    path = tmp_path / "rewards.txt"
    path.write_text("x")
    with pytest.raises(RewardFileError, match=r"not a \.py file"):
        rewards.load_reward_file(path)


def test_reward_names_are_read_from_the_source_without_running_it(tmp_path, reward_file):
    assert rewards.read_reward_names(reward_file) == ["says_yes"] == list(rewards.load_reward_file(reward_file))
    marker = tmp_path / "ran"
    path = tmp_path / "side_effects.py"
    path.write_text(
        f"open({str(marker)!r}, 'w').write('ran')\nimport not_a_real_package_xyz\n\n"
        "async def graded(prompts, completions, answer=None, **kwargs):\n    return []\n\n"
        "def by_keyword(*, completions):\n    return []\n\n"
        "def inner_only():\n    def nested(completions):\n        return []\n"
    )
    assert rewards.read_reward_names(path) == ["graded", "by_keyword"]
    assert not marker.exists(), "reading the names runs none of the file"


def test_the_columns_a_read_reward_asks_for_are_those_its_loaded_twin_asks_for(tmp_path):
    path = tmp_path / "graded.py"
    path.write_text(
        "def graded(prompts, completions, answer, completion_ids=None, *, tolerance=0.1, "
        "topic=None, **kwargs):\n    return [0.0 for _ in completions]\n"
    )
    read = rewards.read_reward_file(path)["graded"]
    assert (read.needs_columns, read.optional_columns) == (("answer",), ("tolerance", "topic"))
    assert rewards.reward_columns(read) == rewards.reward_columns(rewards.load_reward_file(path)["graded"])


@pytest.mark.parametrize("case", ["missing", "syntax", "no_rewards"], ids=str)
def test_reading_names_refuses_what_importing_refuses(tmp_path, case):
    source, pattern = BAD_FILES[case]
    path = tmp_path / "nope.py"
    if source is not None:
        path.write_text(source)
    with pytest.raises(RewardFileError, match=pattern):
        rewards.read_reward_names(path)


def test_reading_names_refuses_what_is_not_python_source(tmp_path, monkeypatch):
    path = tmp_path / "nul.py"
    path.write_bytes(b"def f(completions):\n    return [0\x00]\n")
    with pytest.raises(RewardFileError, match="nul.py"):
        rewards.read_reward_names(path)
    monkeypatch.setattr(reward_file_module, "MAX_REWARD_SOURCE_BYTES", 10)
    with pytest.raises(RewardFileError, match=r"a reward file is code, at most"):
        rewards.read_reward_names(path)


# ---------------------------------------------------------------- checking outputs


@pytest.mark.parametrize(
    "values,pattern",
    [
        ([1.0], r"returned 1 rewards for 2"),
        ("ab", r"returned str"),
        ([1.0, "high"], r"'high' at position 1"),
        ([1.0, math.inf], r"must be finite"),
        (None, r"returned NoneType"),
    ],
    ids=["count", "string", "not_a_number", "infinite", "none"],
)
def test_check_reward_output_names_the_function(values, pattern):
    with pytest.raises(RewardFunctionError, match=r"^reward function 'mine' .*" + pattern) as info:
        rewards.check_reward_output("mine", values, 2)
    assert info.value.function_name == "mine"


def test_check_reward_output_converts_numbers_and_keeps_none():
    assert rewards.check_reward_output("mine", [1, None, float("nan"), True], 4) == [1.0, None, None, 1.0]


def test_guard_reward_names_a_function_that_raises():
    def fragile(prompts, completions, **kwargs):
        raise KeyError("answer")

    guarded = rewards.guard_reward(fragile)
    assert guarded.__name__ == "fragile"
    with pytest.raises(RewardFunctionError, match=r"'fragile' raised KeyError"):
        guarded(prompts=["q"], completions=["a"])


def test_guard_reward_names_a_function_returning_the_wrong_count():
    def short(prompts, completions, **kwargs):
        return [1.0]

    with pytest.raises(RewardFunctionError, match=r"'short' returned 1 rewards for 3"):
        rewards.guard_reward(short)(prompts=["q"] * 3, completions=["a", "b", "c"])


def test_resolve_rewards_prefers_the_file_and_refuses_nothing(reward_file):
    funcs = rewards.resolve_rewards(["says_yes", "brevity"], reward_file)
    assert [f.__name__ for f in funcs] == ["says_yes", "brevity"]
    with pytest.raises(RewardError, match="at least one reward"):
        rewards.resolve_rewards([])


# ---------------------------------------------------------------- score()


def test_score_gives_each_function_and_the_weighted_total():
    results = rewards.score(
        ["exact_answer", "format_answer_tag"],
        "What is 2 + 2?",
        ["<answer>4</answer>", "5", as_chat("<answer>5</answer>")],
        weights=[1.0, 0.5],
        answer="4",
    )
    assert [r["rewards"] for r in results] == [
        {"exact_answer": 1.0, "format_answer_tag": 1.0},
        {"exact_answer": 0.0, "format_answer_tag": 0.0},
        {"exact_answer": 0.0, "format_answer_tag": 1.0},
    ]
    assert [r["reward"] for r in results] == [1.5, 0.0, 0.5]
    assert results[0]["prompt"] == "What is 2 + 2?"


def test_score_total_skips_none_like_trl(reward_file):
    results = rewards.score(["keyword_presence", "brevity"], ["q", "q"], ["", ""], keywords=[[], []])
    assert results[0]["rewards"] == {"keyword_presence": None, "brevity": 1.0} and results[0]["reward"] == 1.0
    only_none = rewards.score(["keyword_presence"], "q", ["a"], keywords=[[]])
    assert only_none[0]["reward"] is None


def test_the_weighted_total_skips_none_and_nan_as_trls_nansum_does():
    assert rewards.weighted_total([1.0, None, 0.5], [1.0, 3.0, 2.0]) == 2.0
    assert rewards.weighted_total([float("nan"), 0.25], [1.0, 4.0]) == 1.0
    assert rewards.weighted_total([None, float("nan")], [1.0, 1.0]) is None


def test_score_uses_a_reward_file(reward_file):
    results = rewards.score(["says_yes"], "q", ["yes", "no"], reward_file=reward_file)
    assert [r["reward"] for r in results] == [1.0, 0.0]


@pytest.mark.parametrize(
    "kwargs,pattern",
    [
        ({"weights": [1.0, 2.0]}, r"reward_weights: 2 weights for 1 rewards"),
        ({"prompts": ["a", "b", "c"]}, r"prompts: 3 prompts for 2 completions"),
        ({"reward_names": ["nope"]}, r"unknown reward 'nope'"),
    ],
    ids=["weights", "prompts", "unknown"],
)
def test_score_refuses_mismatched_input(kwargs, pattern):
    args = {"reward_names": ["brevity"], "prompts": "q", "completions": ["a", "b"], **kwargs}
    with pytest.raises(RewardError, match=pattern):
        rewards.score(**args)


def test_a_hung_reward_is_stopped_after_its_time_limit_with_its_name():
    import signal
    import time

    def stuck(prompts=None, completions=None, **kwargs):
        while True:
            time.sleep(0.05)

    guarded = rewards.guard_reward(stuck, "stuck", timeout_s=0.3)
    started = time.monotonic()
    with pytest.raises(rewards.RewardFunctionError, match=r"'stuck' did not return within 0.3 s \(reward_timeout_s\)"):
        guarded(prompts=["q"], completions=["a"])
    assert time.monotonic() - started < 5
    # the timer is gone afterwards: a later slow-ish call is not interrupted
    assert rewards.guard_reward(lambda completions=None, **kw: [1.0] * len(completions), "quick", timeout_s=0.3)(
        completions=["a"]
    ) == [1.0]
    assert signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)  # no alarm left to go off later


def test_the_time_limit_survives_a_reward_that_uses_math_verify():
    # math_verify times its parsing with signal.alarm and cancels any alarm set before it: the guard's timer
    # must not be that alarm, or a reward that parses with it first and then hangs would never be stopped
    import time

    from math_verify import parse

    def parses_then_hangs(prompts=None, completions=None, **kwargs):
        parse("$1$", parsing_timeout=5)
        while True:
            time.sleep(0.05)

    started = time.monotonic()
    with pytest.raises(rewards.RewardFunctionError, match=r"'parses_then_hangs' did not return within 0.5 s"):
        rewards.guard_reward(parses_then_hangs, timeout_s=0.5)(prompts=["q"], completions=["a"])
    assert time.monotonic() - started < 3
    # and math_verify's own timeouts still work under the guard: a parse inside it returns normally
    checked = rewards.guard_reward(
        lambda completions=None, **kw: [float(bool(parse("$2$")))] * len(completions), "parses", timeout_s=5
    )
    assert checked(completions=["a", "b"]) == [1.0, 1.0]


def test_a_reward_with_nothing_usable_batch_after_batch_fails_in_training_only():
    def never(prompts=None, completions=None, **kwargs):
        return [float("nan")] * len(completions)

    training = rewards.guard_reward(never, "never", useless_calls=rewards.USELESS_CALLS)
    for _ in range(rewards.USELESS_CALLS - 1):
        assert training(completions=["a", "b"]) == [None, None]
    with pytest.raises(rewards.RewardFunctionError, match=r"'never' returned no usable reward .* 3 batches in a row"):
        training(completions=["a", "b"])
    # one usable value resets the count; outside training None everywhere is allowed ("not applicable")
    sometimes = iter([[None, None], [None, None], [None, 0.5], [None, None], [None, None]])
    patient = rewards.guard_reward(lambda completions=None, **kw: next(sometimes), "sometimes", useless_calls=3)
    assert [patient(completions=["a", "b"]) for _ in range(5)][-1] == [None, None]
    assert rewards.guard_reward(never, "never")(completions=["a"]) == [None]


# ---------------------------------------------------------------- reward_errors: record and go on


def _odd_hater(prompts=None, completions=None, log_extra=None, **kwargs):
    # raises on any batch holding the text "odd"; logs a column of its own, as TRL's accuracy rewards do
    if any("odd" in c for c in completions):
        raise ValueError("cannot parse 'odd'")
    if log_extra:
        log_extra("parsed", [c.upper() for c in completions])
    return [float(len(c)) for c in completions]


class _TrlLogs:
    """What TRL hands a reward besides the data: log_extra (columns) and log_metric (scalars)."""

    def __init__(self):
        self.extra, self.metrics = {}, {}

    def kwargs(self):
        return {
            "log_extra": lambda column, values: self.extra.setdefault(column, []).extend(values),
            "log_metric": lambda name, value: self.metrics.setdefault(name, []).append(value),
        }


def test_recording_a_failure_scores_that_completion_and_keeps_the_error_aligned():
    logs = _TrlLogs()
    guarded = rewards.guard_reward(_odd_hater, errors="record", failure_score=-1.0)
    got = guarded(prompts=["q"] * 3, completions=["ab", "odd", "abc"], **logs.kwargs())
    assert got == [2.0, -1.0, 3.0]
    assert logs.extra[rewards.error_column("_odd_hater")] == [None, "ValueError: cannot parse 'odd'", None]
    assert logs.extra["parsed"] == ["AB", None, "ABC"]  # the function's own column, one value per completion
    assert logs.metrics[rewards.failed_metric("_odd_hater")] == [pytest.approx(1 / 3)]
    # a batch without failures logs an empty error column and a share of 0, so TRL's columns stay aligned
    assert guarded(completions=["x"], **logs.kwargs()) == [1.0]
    assert logs.extra[rewards.error_column("_odd_hater")][-1] is None
    assert logs.metrics[rewards.failed_metric("_odd_hater")][-1] == 0.0


def test_failing_fast_stays_the_default_and_failing_everywhere_still_ends_the_run():
    with pytest.raises(rewards.RewardFunctionError, match="'_odd_hater' raised ValueError"):
        rewards.guard_reward(_odd_hater)(completions=["ab", "odd"])
    with pytest.raises(
        rewards.RewardFunctionError,
        match=r"'_odd_hater' raised on every one of the 2 completions of this batch .*cannot parse",
    ):
        rewards.guard_reward(_odd_hater, errors="record")(completions=["odd", "odd too"])


def test_recording_failures_never_hides_a_hang():
    import time

    def hangs_on_odd(prompts=None, completions=None, **kwargs):
        if any("odd" in c for c in completions):
            raise ValueError("odd")
        while True:
            time.sleep(0.05)

    with pytest.raises(rewards.RewardTimeoutError, match="did not return within 0.3 s"):
        rewards.guard_reward(hangs_on_odd, timeout_s=0.3, errors="record")(completions=["odd", "even"])
