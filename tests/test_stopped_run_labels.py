"""What the pages say of a real run that was stopped and resumed: elapsed without the time it stood stopped, a
checkpoint save_total_limit removed never offered by Compare, and its adapter called final only once it finished.

The run is a real `python -m workbench train` process of the tiny model, started, stopped and resumed by the
launcher; the Compare tab's handlers run in the real app (no browser).
"""

import re
import time

import gradio as gr
import pytest
from helpers import TINY, app_handler
from helpers import poll_until as wait_for

from workbench.cli.watch import final_line
from workbench.jobs import launcher, run_list, run_state
from workbench.runstore import checkpoint_integrity, runfolder
from workbench.spec.config import RunConfig
from workbench.spec.numbers import format_duration
from workbench.ui import runs_view, train_view
from workbench.ui.app import build_app

STEPS = 6
# How long the test leaves the run stopped before resuming it: the elapsed time must not count it.
STOPPED_S = 8.0


def choices_of(dropdown: gr.Dropdown) -> list[str]:
    return [choice[0] if isinstance(choice, tuple) else choice for choice in dropdown.choices]


@pytest.mark.slow
def test_a_stopped_then_resumed_run_is_labelled_by_what_it_did(tmp_path):
    runs = tmp_path / "runs"
    run_id = launcher.start(RunConfig(**TINY, max_steps=STEPS, save_steps=1, save_total_limit=1), runs)
    run_dir = runs / run_id
    wait_for(lambda: run_state.status(run_id, runs).get("step", 0) >= 2, timeout=240)
    stopped = launcher.stop(run_id, runs, timeout=120)
    assert stopped["state"] == "stopped", (stopped.get("error"), runfolder.read_log_tail(run_dir))
    at = stopped["step"]
    assert 2 <= at < STEPS and checkpoint_integrity.checkpoint_steps(run_dir) == [at]  # the others pruned

    # Compare offers what the folder holds, and calls the adapter what it is: the one saved at the stop
    app = build_app(runs)
    on_pick, on_answer = app_handler(app, "compare_tab", "on_pick"), app_handler(app, "compare_tab", "on_answer")
    request = gr.Request()
    picked = on_pick(request, run_id)
    checkpoints = next(value for value in picked.values() if isinstance(value, gr.Dropdown))
    assert choices_of(checkpoints) == [f"step {at} (checkpoint-{at})", f"adapter at stop, step {at}"]
    # a page that listed checkpoint-1 before it was removed: the answer says so, and the list is made anew
    answered = on_answer(request, run_id, "step 1 (checkpoint-1)", "What is 2+2?", 8, None)
    said = " ".join(str(value) for value in answered.values() if isinstance(value, str))
    assert "checkpoint-1 is no longer in run" in said and "save_total_limit=1 keeps the newest 1" in said, said
    refreshed = [value for value in answered.values() if isinstance(value, gr.Dropdown)]
    assert refreshed and choices_of(refreshed[0]) == choices_of(checkpoints)

    time.sleep(STOPPED_S)
    launcher.resume(run_id, runs)
    final = run_state.wait(run_id, runs, timeout=240)
    assert final["state"] == "finished", (final.get("error"), runfolder.read_log_tail(run_dir))
    assert choices_of(next(v for v in on_pick(request, run_id).values() if isinstance(v, gr.Dropdown)))[-1] == (
        "final adapter"
    )

    # elapsed: the two stretches it ran, not the time it stood stopped in between
    stood = final["resumed_at"] - stopped["updated_at"]
    assert stood >= STOPPED_S
    wall = final["updated_at"] - final["started_at"]
    elapsed = train_view.measure_progress(final, []).elapsed_s
    assert elapsed == pytest.approx(wall - stood, abs=1.0), (elapsed, wall, stood)
    entry = next(e for e in run_list.list_runs(runs) if e["run_id"] == run_id)
    assert runs_view.summarise_run(entry)["duration"] == format_duration(elapsed)
    assert re.search(rf"after {re.escape(format_duration(elapsed))}\.", final_line(run_id, final))
