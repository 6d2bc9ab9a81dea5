"""The live dashboard in a real headless Chromium: Train, Compare and Runs tabs on real tiny runs.

Every run here is a real training process of the tiny model (2 layers, hidden
16) started by the launcher, on CPU, with 4 completions of at most 8 tokens a
step so a step takes seconds. The full path is driven as a person does it:
choose model and CPU in Setup, launch, watch the reward plot and a group of
completions, kill and restart the app under the live run, stop, find the run
in the Runs tab. It takes screenshots of the Train, Compare and Runs tabs (the README's pictures when
tools/screenshots.py runs it).
"""

from __future__ import annotations

import json
import re
import shutil
import time

import helpers
import pytest
from browser_fixtures import UI
from playwright.sync_api import expect

from workbench.jobs import launcher, run_state
from workbench.runstore import runfolder
from workbench.spec.config import RunConfig

pytestmark = [pytest.mark.browser, pytest.mark.slow]

# Loading the tiny model and the first step take ~20 s here when the machine is
# quiet; other tests sharing the 2 cores can triple that.
FIRST_POINTS_TIMEOUT_MS = 240_000
SAMPLING_TIMEOUT_MS = 240_000
# Enough steps that a run is still training when the test stops it.
LONG_RUN_STEPS = 400


def tiny_config(**changes) -> RunConfig:
    """The smallest real run (helpers.TINY) on the demo task, long enough to be stopped while it trains."""
    return helpers.tiny_config(
        **{"task": "demo", "max_steps": LONG_RUN_STEPS, "save_steps": 2, "logging_steps": 1, **changes}
    )


# Steps drawn on a dashboard plot: the distinct x values over its traces (a std band
# repeats the steps, so counting one trace's points would count a step twice).
STEPS_DRAWN_JS = """(id) => {
    const div = document.querySelector(`#${id} .js-plotly-plot`);
    if (!div || !div.data) return 0;
    return new Set(div.data.flatMap(t => Array.from(t.x || []))).size;
}"""


def plotted_points(page, plot: str = "reward") -> int:
    """Steps drawn on a dashboard plot (0 before it is drawn)."""
    return page.evaluate(STEPS_DRAWN_JS, f"wb-plot-{plot}")


def wait_for_points(page, at_least: int, plot: str = "reward", timeout_ms: int = FIRST_POINTS_TIMEOUT_MS) -> int:
    page.wait_for_function(
        f"([id, n]) => ({STEPS_DRAWN_JS})(id) >= n", arg=[f"wb-plot-{plot}", at_least], timeout=timeout_ms
    )
    return plotted_points(page, plot)


def sampling_processes(run_dir, prompt_text: str) -> list[str]:
    """Command lines of live `python -m workbench sample` processes answering prompts that contain `prompt_text`."""
    import psutil

    prompt_files = [
        str(path) for path in (run_dir / "probes").glob("*.prompts.json") if prompt_text in path.read_text()
    ]
    found = []
    for process in psutil.process_iter(["cmdline", "status"]):
        cmdline = " ".join(process.info["cmdline"] or [])
        if (
            "workbench sample" in cmdline
            and any(f in cmdline for f in prompt_files)
            and process.info["status"] != psutil.STATUS_ZOMBIE
        ):
            found.append(cmdline)
    return found


def logged_steps(run_dir) -> int:
    return len([r for r in runfolder.read_jsonl(run_dir / runfolder.METRICS_FILE) if "reward" in r])


@pytest.fixture
def server(app_factory, tmp_path):
    """An app server of its own, on an empty runs folder."""
    return app_factory(tmp_path / "runs")


@pytest.fixture
def stop_runs(server):
    """Run ids to stop after the test, whatever happens in it."""
    started: list[str] = []
    yield started
    for run_id in started:
        launcher.stop(run_id, server.runs_dir, timeout=20)


@pytest.fixture(scope="module")
def trained_run(tmp_path_factory, tiny_trained_run):
    """The session's finished 2-step tiny run (checkpoints and final adapter), copied into a runs folder of its own."""
    run_dir = tmp_path_factory.mktemp("trained") / "runs" / tiny_trained_run.name
    shutil.copytree(tiny_trained_run, run_dir)
    return run_dir


def run_to_the_end(config: RunConfig, runs_dir, timeout_s: float):
    """Launch `config` in `runs_dir`, wait for it to finish, and return its run folder."""
    run_id = launcher.start(config, runs_dir)
    final = run_state.wait(run_id, runs_dir, timeout=timeout_s)
    assert final["state"] == "finished", runfolder.read_log_tail(runs_dir / run_id)
    return runs_dir / run_id


def test_full_path_setup_launch_watch_stop_and_find_the_run(server, app_factory, page, stop_runs):
    ui = UI(page, server)
    ui.open("Setup")
    setup = ui.panel("Setup")
    ui.choose("model", "tiny", setup)
    setup.get_by_role("radio", name="1", exact=True).check()  # one CPU process
    for field, value in (
        ("per_device_train_batch_size", 4),
        ("num_generations", 3),
        ("max_completion_length", 8),
        ("max_steps", LONG_RUN_STEPS),
    ):
        ui.reveal(field, setup)  # its closed group of settings, opened as a person does
        ui.set_number(field, value, setup)

    ui.open_tab("Train")
    train = ui.panel("Train")
    launch = train.get_by_role("button", name="Launch", exact=True)
    expect(launch).to_be_disabled()  # 4 completions cannot hold whole groups of 3
    ui.open_tab("Setup")
    ui.reveal("num_generations", setup)
    ui.set_number("num_generations", 4, setup)
    ui.open_tab("Train")
    expect(launch).to_be_enabled()
    launch.click()

    progress = page.locator("#wb-train-progress")
    ui.expect_text(progress, r"(starting|loading the model|training)")
    run_ids = [path.name for path in runfolder.list_run_dirs(server.runs_dir)]
    assert len(run_ids) == 1
    stop_runs.append(run_ids[0])
    helpers.in_background(server.runs_dir, run_ids[0])
    assert json.loads((server.runs_dir / run_ids[0] / runfolder.CONFIG_FILE).read_text())["model"] == "tiny"
    ui.expect_text(progress, rf"{run_ids[0]}.*training.*step \d+ / {LONG_RUN_STEPS}", timeout=FIRST_POINTS_TIMEOUT_MS)

    wait_for_points(page, 2)
    completions = page.locator("#wb-train-completions")
    expect(page.locator("#wb-train-failure")).to_be_hidden()
    ui.expect_text(completions, r"Prompt 1 of 1.*group mean")
    expect(completions.locator(".wb-card")).to_have_count(4)
    ui.expect_text(completions, r"mentions_answer.*brief_if_correct")  # the demo's two scores on each card
    ui.expect_text(completions, r"advantage [+-]\d")
    # the teaching line; the random tiny model never answers right, so its groups may have no spread:
    # "(0.00 - 0.00) / (0 + 1e-4) = +0.00"
    ui.expect_text(completions, r"\(\d\.\d+ - \d\.\d+\) / (\d\.\d+|\(0 \+ 1e-4\)) = [+-]\d")
    wait_for_points(page, 3)  # a curve, not a dot, for the README
    ui.settle()
    page.evaluate("window.scrollTo(0, 0)")
    ui.screenshot("train.png")

    # An earlier step stays on screen while newer ones arrive.
    step_box = train.get_by_label("number input for Step", exact=True)
    step_box.fill("1")
    step_box.press("Tab")
    ui.expect_text(completions, r"Step 1 of \d+")
    # The keyboard moves the slider too, and the step it lands on stays pinned.
    train.get_by_label("range slider for Step", exact=True).press("ArrowRight")
    ui.expect_text(completions, r"Step 2 of \d+")
    newest = logged_steps(server.runs_dir / run_ids[0])
    wait_for_points(page, newest + 1)
    ui.expect_text(completions, r"Step 2 of \d+")

    # The app process dies (SIGKILL, as an OOM kill or a crash would) while the run it launched trains on.
    run_dir = server.runs_dir / run_ids[0]
    trainer_pid = runfolder.read_status(run_dir)["pid"]
    server.process.kill()
    server.process.wait(timeout=10)
    at_kill = logged_steps(run_dir)
    deadline = time.monotonic() + FIRST_POINTS_TIMEOUT_MS / 1000
    while logged_steps(run_dir) < at_kill + 1 and time.monotonic() < deadline:
        time.sleep(0.5)
    assert logged_steps(run_dir) > at_kill, "the run stopped training when the app died"
    # alive and going: between steps or writing one of its every-2-steps checkpoints
    assert run_state.status(run_ids[0], server.runs_dir)["state"] in ("training", "saving")
    # A new app on the same runs folder re-attaches: the same live run, the same process, still controllable.
    server = app_factory(server.runs_dir)
    ui = UI(page, server)
    ui.open("Train")
    train = ui.panel("Train")
    ui.expect_text(progress, rf"{run_ids[0]}.*training")
    wait_for_points(page, logged_steps(run_dir) + 1)
    assert runfolder.read_status(run_dir)["pid"] == trainer_pid

    stop = train.get_by_role("button", name="Stop", exact=True)
    stop.click()
    ui.expect_text(progress, r"stopped", timeout=90_000)
    expect(stop).to_be_disabled()
    assert (server.runs_dir / run_ids[0] / runfolder.ADAPTER_DIR / "adapter_config.json").is_file()

    # Resume continues from the checkpoint the stop saved, with the same step numbers, then stops again.
    stopped_at = logged_steps(server.runs_dir / run_ids[0])
    resume = train.get_by_role("button", name="Resume", exact=True)
    expect(resume).to_be_enabled()
    resume.click()
    ui.expect_text(progress, r"training", timeout=FIRST_POINTS_TIMEOUT_MS)
    wait_for_points(page, stopped_at + 1)
    stop.click()
    ui.expect_text(progress, r"stopped", timeout=90_000)

    ui.open_tab("Runs")
    ui.expect_text(page.locator("#wb-runs-table"), rf"{run_ids[0]}.*stopped.*tiny.*demo")


def test_reload_during_a_run_reattaches_and_a_frozen_tab_catches_up(server, page, stop_runs):
    run_id = launcher.start(tiny_config(run_name="reload"), server.runs_dir)
    stop_runs.append(run_id)
    helpers.in_background(server.runs_dir, run_id)
    run_dir = server.runs_dir / run_id
    ui = UI(page, server)
    ui.open("Train")
    progress = page.locator("#wb-train-progress")
    ui.expect_text(progress, run_id)
    wait_for_points(page, 1)

    on_disk = logged_steps(run_dir)
    page.reload()
    ui.open("Train")
    ui.expect_text(progress, rf"{run_id}.*training")
    # The whole history is read back from the run folder at once, not only what comes next ...
    before = wait_for_points(page, on_disk, timeout_ms=15_000)
    wait_for_points(page, before + 1)  # ... and the page goes on following the live run

    # A second tab on the same app sees the same run.
    other = page.context.new_page()
    other_ui = UI(other, server)
    other_ui.open("Runs")
    other_ui.expect_text(other_ui.panel("Runs").locator("#wb-runs-table"), rf"{run_id}.*training")
    other.close()

    # The first tab goes to the background the hard way: frozen, as Chrome freezes hidden tabs, so
    # its timer stops. Once active again its next tick reads every step written meanwhile.
    cdp = page.context.new_cdp_session(page)
    cdp.send("Page.setWebLifecycleState", {"state": "frozen"})
    frozen_at = logged_steps(run_dir)
    deadline = time.monotonic() + FIRST_POINTS_TIMEOUT_MS / 1000
    while logged_steps(run_dir) < frozen_at + 2 and time.monotonic() < deadline:
        time.sleep(0.5)
    cdp.send("Page.setWebLifecycleState", {"state": "active"})
    caught_up = logged_steps(run_dir)
    assert caught_up >= frozen_at + 2
    wait_for_points(page, caught_up, timeout_ms=30_000)


def test_a_failed_run_shows_its_hint_error_and_log(server, page, tmp_path):
    reward_file = tmp_path / "broken_reward.py"
    reward_file.write_text(
        "def broken(prompts, completions, **kwargs):\n    raise RuntimeError('this reward always fails')\n"
    )
    run_id = launcher.start(
        tiny_config(
            max_steps=2, reward_file=str(reward_file), reward_names=["broken"], reward_weights=[1.0], run_name="broken"
        ),
        server.runs_dir,
    )
    assert run_state.wait(run_id, server.runs_dir, timeout=FIRST_POINTS_TIMEOUT_MS / 1000)["state"] == "failed"
    ui = UI(page, server)
    ui.open("Train")
    failure = page.locator("#wb-train-failure")
    ui.expect_text(failure, "The run failed")
    ui.expect_text(failure, "broken")
    ui.expect_text(failure, "this reward always fails")
    ui.expect_text(failure, "End of train.log")
    expect(ui.panel("Train").get_by_role("button", name="Stop")).to_be_disabled()


def test_compare_answers_base_and_checkpoint_side_by_side_then_cancel(app_factory, trained_run, page):
    server = app_factory(trained_run.parent)
    ui = UI(page, server)
    ui.open("Compare")
    compare = ui.panel("Compare")
    expect(compare.get_by_label("Run", exact=True)).to_have_value(trained_run.name)
    expect(compare.get_by_label("Checkpoint", exact=True)).to_have_value("final adapter")
    prompts = compare.get_by_label("Probe prompts, one per line")
    expect(prompts).to_have_value(re.compile(r"\?"))  # the demo task's probe questions
    probe_prompts = prompts.input_value().splitlines()

    compare.get_by_role("button", name="Answer side by side").click()
    status = page.locator("#wb-compare-progress")
    ui.expect_text(status, "base model: done · final adapter: done", timeout=SAMPLING_TIMEOUT_MS)
    table = page.locator("#wb-compare-table table")
    expect(table.locator("thead th")).to_have_text(["prompt", "base model", "final adapter"])
    expect(table.locator("tbody tr")).to_have_count(len(probe_prompts))
    expect(table.locator(".wb-pending", has_text="…")).to_have_count(0)

    # A longer job on new prompts (nothing cached), cancelled while the base model is still at it.
    prompts.fill("\n".join(f"Tell me story number {i} about the sea." for i in range(12)))
    compare.get_by_role("button", name="Answer side by side").click()
    ui.expect_text(status, "base model: (loading the model|\\d+ / 12 answered)")
    compare.get_by_role("button", name="Cancel").click()
    ui.expect_text(status, "Cancelled\\.")
    expect(compare.get_by_role("button", name="Answer side by side")).to_be_enabled()
    assert not sampling_processes(trained_run, "story number"), "Cancel left the sampling process running"


def test_runs_tab_overlays_runs_and_deletes_after_confirmation(app_factory, trained_run, page, tmp_path):
    runs_dir = tmp_path / "runs"
    shutil.copytree(trained_run, runs_dir / trained_run.name)
    copy = runs_dir / "20000101-000000-copy"
    shutil.copytree(trained_run, copy)
    config = json.loads((copy / runfolder.CONFIG_FILE).read_text())
    (copy / runfolder.CONFIG_FILE).write_text(json.dumps({**config, "beta": 0.0}))
    server = app_factory(runs_dir)
    ui = UI(page, server)
    ui.open("Runs")
    runs = ui.panel("Runs")
    table = page.locator("#wb-runs-table")
    ui.expect_text(table, rf"{trained_run.name}.*finished.*tiny.*reward_hacking.*2 / 2")

    for run_id in (trained_run.name, copy.name):
        runs.get_by_label(run_id, exact=True).check()
    ui.expect_text(page.locator("#wb-runs-diff"), r"beta.*0\.04.*0\.0")
    page.locator("#wb-runs-overlay .js-plotly-plot .scatterlayer .trace").nth(1).wait_for()

    picker = runs.get_by_label("Run", exact=True)
    picker.click()
    page.get_by_role("option", name=trained_run.name).click()
    ui.expect_text(page.locator("#wb-runs-completions"), r"advantage")
    ui.settle()
    page.evaluate("window.scrollTo(0, 0)")
    ui.screenshot("runs.png")

    picker.click()
    page.get_by_role("option", name=copy.name).click()
    runs.get_by_role("button", name="Delete run…").click()
    ui.expect_text(page.locator("#wb-runs-confirm"), copy.name)
    runs.get_by_role("button", name="Cancel").click()
    assert copy.exists()
    runs.get_by_role("button", name="Delete run…").click()
    runs.get_by_role("button", name="Yes, delete it").click()
    ui.expect_text(runs, f"Deleted {copy.name}")
    expect(table).not_to_contain_text(copy.name)
    assert not copy.exists() and (runs_dir / trained_run.name).exists()


@pytest.fixture(scope="module")
def bundled_run(tmp_path_factory):
    """One real GRPO step of the bundled SmolLM2-135M-Instruct, so Compare has real text to show."""
    config = RunConfig(
        task="demo",
        device="cpu",
        per_device_train_batch_size=2,
        num_generations=2,
        max_completion_length=16,
        max_steps=1,
        save_steps=1,
        logging_steps=1,
        run_name="demo-smollm2",
    )
    return run_to_the_end(config, tmp_path_factory.mktemp("bundled") / "runs", 300)


def test_compare_on_the_bundled_model_shows_real_answers(app_factory, bundled_run, page):
    ui = UI(page, app_factory(bundled_run.parent))
    ui.open("Compare")
    compare = ui.panel("Compare")
    expect(compare.get_by_label("Run", exact=True)).to_have_value(bundled_run.name)
    prompts = compare.get_by_label("Probe prompts, one per line")
    expect(prompts).to_have_value(re.compile(r"capital of France"))
    ui.set_number("number input for Longest answer (tokens)", 24, compare)
    compare.get_by_role("button", name="Answer side by side").click()
    ui.expect_text(
        page.locator("#wb-compare-progress"), "base model: done · final adapter: done", timeout=SAMPLING_TIMEOUT_MS
    )
    table = page.locator("#wb-compare-table table")
    france = table.locator("tbody tr", has_text="capital of France")
    # Greedy answers of the real model: the base one knows the capital, and neither column is blank.
    expect(france.locator("td").nth(1)).to_contain_text("Paris")
    expect(table.get_by_text("(no visible text)")).to_have_count(0)
    ui.settle()
    ui.screenshot("compare.png")
