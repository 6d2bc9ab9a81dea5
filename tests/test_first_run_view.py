"""What the first-run strip says after a launch and before a second demo (the page itself:
tests/test_ui_queue_browser.py)."""

import pytest

from workbench.spec.config import RunConfig
from workbench.ui.first_run_view import confirm_html, launched_html, live_demo_runs
from workbench.ui.launching import Launched

DEMO = RunConfig.for_task(RunConfig().task)


def entry(run_id, state, **fields):
    return {"run_id": run_id, "state": state, "task": DEMO.task, "model": DEMO.model, **fields}


def test_a_queued_launch_says_its_place_what_it_waits_for_and_how_to_cancel():
    text = launched_html(Launched("r<2>", queue_position=2, waits_for="the CPU (run r1)"))
    assert "Queued r&lt;2&gt;: #2 in the queue, waits for the CPU (run r1)." in text
    assert "Cancel on the Train tab takes it out of the queue" in text and "Launched" not in text
    assert "Launched r3: the Train tab shows it" in launched_html(Launched("r3"))


@pytest.mark.parametrize(
    "entries, expected",
    [
        ([entry("d2", "training"), entry("d1", "finished")], ["d2"]),
        ([entry("d2", "queued"), entry("d1", "tuning")], ["d2", "d1"]),
        ([entry("d1", "stopped"), entry("d0", "failed")], []),
        ([entry("s1", "training", smoke_test=True)], []),
        ([entry("o1", "training", task="arithmetic"), entry("o2", "queued", model="tiny")], []),
        ([entry("o3", "training", dataset_name="my/data")], []),
    ],
    ids=["running", "queued-and-tuning", "ended", "smoke-test", "other-task-or-model", "own-data"],
)
def test_the_demo_runs_that_make_a_second_launch_ask_first(entries, expected):
    assert [e["run_id"] for e in live_demo_runs(entries, DEMO)] == expected


@pytest.mark.parametrize("state, word", [("training", "running"), ("loading_model", "running"), ("queued", "queued")])
def test_the_question_names_the_demo_run_there_already_and_what_another_waits_for(state, word):
    text = confirm_html(entry("d<1>", state), "the CPU")
    assert f"A demo run is already {word}</b> (d&lt;1&gt;); launch another? It will wait for the CPU" in text
