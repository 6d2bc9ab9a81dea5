"""The GPU queue's rules, as pure functions: devices, order, what a run waits for, the per-user limit."""

import pytest

from workbench.errors import WorkbenchError
from workbench.jobs import queue
from workbench.jobs.queue import CPU, Entry


def held(run_id, *devices, owner=None, state="training"):
    return Entry(run_id, frozenset(devices), owner, state)


def waiting(run_id, *devices, at, owner=None):
    return Entry(run_id, frozenset(devices), owner, queue.QUEUED, at)


# ---------------------------------------------------------------- devices


@pytest.mark.parametrize(
    "config, gpus, expected",
    [
        ({"device": "cpu", "gpu_ids": [0]}, [0, 1], {CPU}),
        ({"device": "auto"}, [], {CPU}),
        ({}, [], {CPU}),
        ({"device": "auto", "gpu_ids": [1]}, [0, 1], {"GPU 1"}),
        ({"device": "auto", "gpu_ids": []}, [0, 1], {"GPU 0", "GPU 1"}),
        ({"device": "cuda"}, [], {"GPU 0"}),
        (
            {"gpu_ids": [0], "generation": "vllm-server", "vllm_gpu_ids": [2, 3]},
            [0, 1, 2, 3],
            {"GPU 0", "GPU 2", "GPU 3"},
        ),
        (
            {
                "gpu_ids": [0],
                "generation": "vllm-server",
                "vllm_gpu_ids": [2],
                "vllm_server_base_url": "http://10.0.0.9:8000",
            },
            [0, 1, 2],
            {"GPU 0"},
        ),
        ({"gpu_ids": [0, 1], "generation": "trl-colocate"}, [0, 1], {"GPU 0", "GPU 1"}),
        ({"device": "cpu", "generation": "vllm-server"}, [], {CPU}),
    ],
    ids=[
        "cpu-setting",
        "auto-without-gpus",
        "empty-config",
        "chosen-gpu",
        "all-gpus",
        "cuda-unknown-gpus",
        "own-vllm-server",
        "external-vllm-server",
        "colocate",
        "vllm-on-cpu",
    ],
)
def test_devices_of_a_config(config, gpus, expected):
    assert queue.devices_of(config, gpus) == frozenset(expected)


def test_devices_are_named_in_order():
    assert queue.describe_devices({"GPU 10", "GPU 2", CPU}) == "the CPU, GPU 2 and GPU 10"
    assert queue.describe_devices({CPU}) == "the CPU"
    assert [queue.gpu_index(d) for d in ("GPU 3", CPU)] == [3, None]


# ---------------------------------------------------------------- order


def positions(places):
    return [(p.position, p.entry.run_id, p.may_start) for p in places]


def test_first_in_first_out_on_one_device():
    places = queue.plan([waiting("C", CPU, at=3), waiting("B", CPU, at=2)], [held("A", CPU)])
    assert positions(places) == [(1, "B", False), (2, "C", False)]
    assert queue.describe_wait(places[0].waits_for) == "the CPU (run A)"
    assert queue.describe_wait(places[1].waits_for) == "the CPU (run A)"  # the device's first taker is named


def test_the_first_queued_run_starts_when_its_device_is_free():
    places = queue.plan([waiting("C", CPU, at=3), waiting("B", CPU, at=2)], [])
    assert positions(places) == [(1, "B", True), (2, "C", False)]
    assert queue.describe_wait(places[1].waits_for) == "the CPU (run B, queued ahead)"


def test_a_later_run_on_free_devices_nobody_ahead_waits_for_starts_first():
    places = queue.plan([waiting("big", "GPU 0", at=1), waiting("small", "GPU 1", at=2)], [held("A", "GPU 0")])
    assert positions(places) == [(1, "big", False), (2, "small", True)]


def test_a_later_run_never_takes_a_device_an_earlier_one_waits_for():
    # GPU 1 is free, but "big" (queued first) waits for it too: "small" must not take it
    places = queue.plan([waiting("big", "GPU 0", "GPU 1", at=1), waiting("small", "GPU 1", at=2)], [held("A", "GPU 0")])
    assert positions(places) == [(1, "big", False), (2, "small", False)]
    assert queue.describe_wait(places[0].waits_for) == "GPU 0 (run A)"
    assert queue.describe_wait(places[1].waits_for) == "GPU 1 (run big, queued ahead)"


def test_small_runs_arriving_forever_do_not_starve_an_earlier_big_one():
    holding = [held("A", "GPU 0")]
    queued = [waiting("big", "GPU 0", "GPU 1", at=1)]
    for minute in range(2, 50):  # a small GPU-1 job arrives every minute; each finishes before the next
        queued.append(waiting(f"small-{minute}", "GPU 1", at=minute))
        assert [p.entry.run_id for p in queue.plan(queued, holding) if p.may_start] == []
    holding = []  # run A ends
    assert [p.entry.run_id for p in queue.plan(queued, holding) if p.may_start] == ["big"]


def test_a_new_launch_stands_behind_everything_queued_even_with_the_clock_set_back():
    queued = [waiting("B", "GPU 1", at=100.0)]
    new = queue.place_of_new(Entry("", frozenset({"GPU 1"}), queued_at=50.0), queued, [])
    assert new.position == 2 and new.entry.queued_at > 100.0 and not new.may_start
    free = queue.place_of_new(Entry("", frozenset({"GPU 2"}), queued_at=200.0), queued, [])
    assert free.position == 2 and free.may_start and free.entry.queued_at == 200.0


def test_an_ending_run_still_holds_its_devices():
    places = queue.plan(
        [waiting("B", "GPU 0", "GPU 1", at=1)], [held("A", "GPU 0", state=queue.ENDING), held("X", "GPU 1")]
    )
    assert queue.describe_wait(places[0].waits_for) == "GPU 0 (run A, ending), GPU 1 (run X)"


# ---------------------------------------------------------------- the per-user limit


@pytest.mark.parametrize(
    "value, expected", [(None, 2), ("", 2), (" 3 ", 3), ("0", 0)], ids=["unset", "blank", "three", "no-limit"]
)
def test_max_runs_per_user_from_the_environment(value, expected):
    env = {} if value is None else {queue.MAX_RUNS_ENV: value}
    assert queue.max_runs_per_user(env) == expected


@pytest.mark.parametrize("value", ["two", "-1", "1.5"])
def test_a_bad_limit_is_refused_naming_the_setting(value):
    with pytest.raises(WorkbenchError, match="is not a whole number") as info:
        queue.max_runs_per_user({queue.MAX_RUNS_ENV: value})
    assert info.value.field == queue.MAX_RUNS_ENV


LIVE = [
    held("a1", CPU, owner="alice"),
    waiting("a2", CPU, at=1, owner="alice"),
    held("b1", "GPU 0", owner="bob"),
    held("a0", "GPU 1", owner="alice", state=queue.ENDING),
]


def test_the_limit_counts_running_and_queued_runs_of_that_user():
    with pytest.raises(queue.UserLimitError) as info:
        queue.check_user_limit("alice", LIVE, 2)
    message = str(info.value)
    assert message.startswith(
        f"{queue.MAX_RUNS_ENV}: alice already has 2 runs running or queued (a1, a2); each user may have 2"
    )
    assert "stop one" in info.value.fix and "a0" not in message  # an ending run does not count


@pytest.mark.parametrize(
    "owner, limit",
    [("alice", 3), ("bob", 2), ("carol", 1), (None, 1), ("alice", 0)],
    ids=["under-the-limit", "other-user", "no-runs", "no-owner", "limit-off"],
)
def test_launches_within_the_limit_pass(owner, limit):
    queue.check_user_limit(owner, LIVE, limit)
