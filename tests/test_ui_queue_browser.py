"""A launch that waits in the GPU queue, as a newcomer meets it in a real headless Chromium.

The CPU is held by a "holder": a real sleeping process recorded as a run that trains on the CPU (as in
tests/test_dispatcher.py), so the demo that "Launch the demo" starts waits in the real queue (the launcher, the
dispatcher process) for as long as the test needs, at no cost. Beside it sits a finished tiny run with metrics.
The page must say the demo is queued (the banner and the Train tab: its place and what it waits for), ask before a
second demo, cancel a queued run for real with the Train tab's Cancel, and, reloaded once the queue is empty,
open the run that has data rather than the empty cancelled one.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import time

import pytest
from browser_fixtures import UI
from helpers import TINY
from helpers import poll_until as wait_for
from playwright.sync_api import expect

from workbench.jobs import launcher, run_list
from workbench.runstore import run_locks, runfolder
from workbench.spec.config import RunConfig

pytestmark = [pytest.mark.browser, pytest.mark.slow]

HOLDER = "20260101-000000-holder"


@pytest.fixture
def queue_room(tmp_path, tiny_trained_run):
    """A runs folder with a finished tiny run (metrics, checkpoints) and a live holder of the CPU; whatever the
    test leaves queued is taken out of the queue, then the holder ends, then the dispatcher."""
    runs = tmp_path / "runs"
    shutil.copytree(tiny_trained_run, runs / tiny_trained_run.name)
    process = subprocess.Popen(["sleep", "600"], start_new_session=True)
    RunConfig(**TINY).save(runs / HOLDER / runfolder.CONFIG_FILE)
    runfolder.update_status(
        runs / HOLDER, state="training", pid=process.pid, pgid=process.pid, step=1, started_at=time.time()
    )
    yield runs, process, tiny_trained_run.name
    for entry in run_list.list_runs(runs):  # the queued first: ending the holder must start nothing
        if entry["state"] == runfolder.QUEUED:
            launcher.stop(entry["run_id"], runs)
    process.kill()
    process.wait(timeout=10)
    wait_for(lambda: not run_locks.dispatcher_running(runs), timeout=30)


def demo_runs(runs) -> list[dict]:
    return [entry for entry in run_list.list_runs(runs) if "demo" in entry["run_id"]]


def test_a_queued_demo_says_where_it_waits_asks_before_another_and_cancels(page, app_factory, queue_room, tmp_path):
    runs, holder, finished = queue_room
    server = app_factory(runs)
    ui = UI(page, server, tmp_path)
    ui.open()
    strip, bar, train = page.locator("#wb-first-run"), page.locator("#wb-train-progress"), ui.panel("Train")
    launch = strip.get_by_role("button", name="Launch the demo")

    # the first press: the CPU is the holder's, so the demo queues, and the banner says where it stands
    launch.click()
    ui.expect_text(strip, rf"Queued \S+demo\S*: #1 in the queue, waits for the CPU \(run {HOLDER}\)")
    ui.expect_text(strip, r"Cancel on the Train tab takes it out of the queue")
    [first] = demo_runs(runs)
    assert first["state"] == runfolder.QUEUED and first["queue_position"] == 1
    # the Train tab follows the queued run, not the finished one it would show otherwise
    expect(page.get_by_role("tab", name="Train", exact=True)).to_have_attribute("aria-selected", "true")
    ui.expect_text(bar, re.escape(first["run_id"]))
    ui.expect_text(bar, r"Queued: #1 in the queue")
    ui.expect_text(bar, rf"waits for the CPU \(run {HOLDER}\)")
    cancel = train.get_by_role("button", name="Cancel", exact=True)
    expect(cancel).to_be_enabled()
    ui.settle()
    ui.screenshot("queued_train_tab.png")

    # the second press asks first, naming the demo run there already
    launch.click()
    confirm = page.locator("#wb-first-run-confirm")
    ui.expect_text(confirm, rf"A demo run is already queued \({re.escape(first['run_id'])}\); launch another\?")
    ui.expect_text(confirm, r"It will wait for the CPU")
    assert len(demo_runs(runs)) == 1  # nothing launched by asking
    ui.settle()
    ui.screenshot("second_demo_asks.png")
    ui.open_tab("Runs")
    confirm.get_by_role("button", name="Open the queued one").click()
    expect(confirm).to_be_hidden()
    expect(page.get_by_role("tab", name="Train", exact=True)).to_have_attribute("aria-selected", "true")
    ui.expect_text(bar, re.escape(first["run_id"]))
    assert len(demo_runs(runs)) == 1

    # "Launch anyway" launches a second one, behind the first
    launch.click()
    confirm.get_by_role("button", name="Launch anyway").click()
    ui.expect_text(strip, r"Queued \S+: #2 in the queue, waits for the CPU")
    wait_for(lambda: len(demo_runs(runs)) == 2, timeout=30)
    second = next(entry for entry in demo_runs(runs) if entry["run_id"] != first["run_id"])
    ui.expect_text(bar, re.escape(second["run_id"]))
    ui.expect_text(bar, r"Queued: #2 in the queue")
    ui.expect_text(bar, rf"waits for the CPU \(run {HOLDER}\)")  # the CPU's holder, the first one ahead of it

    # Cancel takes the shown one out of the queue, for real: it never starts
    cancel.click()
    ui.expect_text(page.locator("#wb-tab-train"), rf"Cancelled {re.escape(second['run_id'])}: it left the queue")
    assert runfolder.read_run_status(runs / second["run_id"]).state == "stopped"
    launcher.stop(first["run_id"], runs)  # the other as the CLI would: nothing is queued now
    holder.kill()
    holder.wait(timeout=10)
    time.sleep(3)  # past a dispatcher's look: nothing it could start
    for run_id in (first["run_id"], second["run_id"]):
        status = runfolder.read_run_status(runs / run_id)
        assert (status.state, status.started_at) == ("stopped", None), run_id

    # reloaded, the page opens the run with data, not the empty cancelled one it showed last
    ui.open("Train")
    ui.expect_text(bar, re.escape(finished), timeout=90_000)
    ui.expect_text(bar, r"finished")
    expect(train.get_by_label("Run shown")).to_have_value(finished)
    ui.settle()
    ui.screenshot("reload_opens_the_run_with_data.png")
