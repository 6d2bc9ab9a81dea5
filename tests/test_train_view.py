"""The Train tab's pure steps: which run a page shows, progress, failure (its polls: tests/test_follow.py)."""

import json

import pytest

from workbench.insight import follow
from workbench.insight.resumed import merge_metrics
from workbench.runstore import runfolder
from workbench.trainer import training
from workbench.ui import train_tab, train_view


@pytest.mark.parametrize(
    "runs, remembered, expected",
    [
        ([], None, None),
        ([("b", {"state": "finished"}), ("a", {"state": "finished"})], None, "b"),
        ([("b", {"state": "finished"}), ("a", {"state": "training"})], None, "a"),
        ([("b", {"state": "finished"}), ("a", {"state": "finished"})], "a", "a"),
        ([("b", {"state": "training"}), ("a", {"state": "finished"})], "a", "b"),
        ([("b", {"state": "training"}), ("a", {"state": "training"})], "a", "a"),
        ([("b", {"state": "finished"})], "deleted", "b"),
    ],
    ids=[
        "no-runs",
        "newest",
        "live-beats-newer-finished",
        "remembered",
        "newer-live-beats-remembered-ended",
        "remembered-still-live",
        "remembered-gone",
    ],
)
def test_choose_run(runs, remembered, expected):
    assert train_view.choose_run(runs, remembered) == expected


@pytest.mark.parametrize(
    "runs, remembered, with_data, expected",
    [
        # the demo's reload: the run shown last was cancelled in the queue, empty; the finished one has data
        ([("c", {"state": "stopped"}), ("a", {"state": "finished"})], "c", {"a"}, "a"),
        ([("c", {"state": "queued"}), ("b", {"state": "training"}), ("a", {"state": "finished"})], "c", {"a"}, "b"),
        ([("c", {"state": "queued"}), ("a", {"state": "finished"})], "c", {"a"}, "a"),
        ([("c", {"state": "queued"}), ("a", {"state": "finished"})], None, {"a"}, "a"),
        ([("b", {"state": "finished"}), ("a", {"state": "training"})], "b", {"b"}, "b"),
        ([("c", {"state": "stopped"}), ("b", {"state": "queued"})], "c", set(), "b"),
        ([("c", {"state": "stopped"}), ("b", {"state": "stopped"})], None, set(), "c"),
    ],
    ids=[
        "cancelled-remembered-gives-way-to-data",
        "running-beats-a-queued-remembered",
        "data-beats-a-queued-remembered",
        "data-beats-a-newer-queued",
        "remembered-with-data-beats-an-older-running",
        "nothing-has-data-the-queued",
        "nothing-at-all-the-newest",
    ],
)
def test_a_reload_opens_a_running_run_or_one_with_data_never_an_empty_one(runs, remembered, with_data, expected):
    assert train_view.choose_run(runs, remembered, with_data.__contains__) == expected


@pytest.mark.parametrize(
    "old, new, expected_steps",
    [
        ([], [{"step": 1}, {"step": 2}], [1, 2]),
        ([{"step": 1}, {"step": 2}], [{"step": 3}], [1, 2, 3]),
        ([{"step": 1}, {"step": 2}, {"step": 3}], [{"step": 2, "reward": 9}], [1, 2]),
    ],
    ids=["append", "continue", "resumed-earlier-replaces-later"],
)
def test_merge_metrics_keeps_one_record_per_step(old, new, expected_steps):
    assert [r["step"] for r in merge_metrics(old, new)] == expected_steps


def test_summary_record_on_last_step_is_merged():
    merged = merge_metrics([{"step": 5, "reward": 0.4}], [{"step": 5, "train_runtime": 12.0}])
    assert merged == [{"step": 5, "reward": 0.4, "train_runtime": 12.0}]


def test_poll_without_a_run_does_nothing(tmp_path):
    watch = train_view.RunWatch()
    assert train_tab.poll_run(watch, tmp_path) == (watch, follow.Changes())


@pytest.mark.parametrize(
    "steps, wanted, expected",
    [([], 3, None), ([2, 4, 6], None, 6), ([2, 4, 6], 4, 4), ([2, 4, 6], 5, 4), ([2, 4, 6], 99, 6)],
    ids=["none", "newest", "exact", "tie-earlier", "beyond"],
)
def test_nearest_step(steps, wanted, expected):
    assert train_view.nearest_step(steps, wanted) == expected


@pytest.mark.parametrize(
    "status, metrics, now, expected",
    [
        ({"state": "training", "step": 4, "total_steps": 10, "started_at": 100.0}, [], 180.0, (80.0, 120.0)),
        (
            {"state": "training", "step": 4, "total_steps": 10, "started_at": 100.0},
            [{"step": s, "step_time": 3.0} for s in range(1, 5)],
            180.0,
            (80.0, 18.0),
        ),
        (
            {"state": "finished", "step": 10, "total_steps": 10, "started_at": 100.0, "updated_at": 150.0},
            [],
            999.0,
            (50.0, None),
        ),
        ({"state": "loading_model", "step": 0, "total_steps": 10, "started_at": 100.0}, [], 105.0, (5.0, None)),
        ({}, [], 5.0, (None, None)),
    ],
    ids=["rate-from-elapsed", "rate-from-step-time", "finished-stops-clock", "no-step-yet", "no-status"],
)
def test_measure_progress(status, metrics, now, expected):
    progress = train_view.measure_progress(status, metrics, now)
    assert (progress.elapsed_s, progress.remaining_s) == pytest.approx(expected)


@pytest.mark.parametrize(
    "seconds, text",
    [(None, "—"), (4.4, "4 s"), (65, "1 min 05 s"), (3725, "1 h 02 min")],
    ids=["unknown", "seconds", "minutes", "hours"],
)
def test_format_duration(seconds, text):
    assert train_view.format_duration(seconds) == text


def test_progress_html_shows_numbers_and_escapes_the_name():
    progress = train_view.Progress("training", 3, 12, 30.0, 90.0)
    text = train_view.progress_html("<run>", progress, "abc", 2.5)
    assert "step 3 / 12" in text and "width:25.0%" in text
    assert 'about <span class="wb-progress-left">1 min 30 s</span> left' in text
    assert 'elapsed <span class="wb-progress-elapsed">30 s</span>' in text
    assert "&lt;run&gt;" in text and "<run>" not in text
    # what the page's script reads: the run to ask about, the drawing's signature, the pace, the clock
    assert 'data-run="&lt;run&gt;" data-signature="abc" data-poll="2.5"' in text
    assert 'data-elapsed="30.0" data-remaining="90.0"' in text
    assert "Launch" in train_view.progress_html(None, None)


def test_a_cpu_run_is_redrawn_less_often_than_a_gpu_run_and_an_ended_one_at_once():
    cpu = train_view.redraw_seconds("training", {"device": "cpu"})
    assert cpu == train_view.CPU_RUN_REDRAW_SECONDS > train_view.redraw_seconds("training", {"device": "cuda"}) > 0
    assert train_view.redraw_seconds("finished", {"device": "cpu"}) == 0
    assert train_view.redraw_seconds("training", {"device": ["not", "a", "name"]}) > 0  # a run's own config file
    live = train_view.progress_html("r1", train_view.Progress("training", 3, 8, 30.0, 50.0), redraw=cpu)
    assert f'data-redraw="{cpu}"' in live and f"follow every {cpu} s" in live
    ended = train_view.progress_html("r1", train_view.Progress("finished", 8, 8, 80.0, None), redraw=cpu)
    assert 'data-redraw="0"' in ended and "title=" not in ended


def test_an_ended_run_has_no_moving_clock():
    text = train_view.progress_html("r1", train_view.Progress("finished", 12, 12, 300.0, None))
    assert "data-elapsed" not in text and "wb-progress-left" not in text and "elapsed" in text


def test_a_queued_run_shows_its_position_and_what_it_waits_for():
    status = {"state": "queued", "step": 0, "queued_at": 100.0, "queue_position": 2, "waits_for": "the CPU (run <a>)"}
    progress = train_view.measure_progress(status, [], now=160.0)
    assert (progress.queue_position, progress.waits_for, progress.elapsed_s) == (2, "the CPU (run <a>)", None)
    text = train_view.progress_html("r2", progress)
    assert ">Queued: #2 in the queue<" in text
    assert "waits for the CPU (run &lt;a&gt;); starts by itself when that is free (Cancel takes it out" in text
    assert "data-elapsed" not in text and "step 0" not in text
    moved = follow.status_signature({**status, "queue_position": 1})
    assert moved != follow.status_signature(status)  # the bar is redrawn when the queue moves


def test_a_tuning_run_shows_what_the_speed_probe_times_now(tmp_path):
    status = training.StatusWriter(tmp_path, state="tuning", step=0, total_steps=8)
    training.probe_progress(status, "timing 2/5: float32 copy <shared>")
    written = runfolder.read_status(tmp_path)
    progress = train_view.measure_progress(written, [])
    assert progress.speed_probe == "timing 2/5: float32 copy <shared>"
    assert ": timing 2/5: float32 copy &lt;shared&gt;</span>" in train_view.progress_html("r3", progress)
    moved = follow.status_signature({**written, "speed_probe": "timing 3/5: TRL's sampling"})
    assert moved != follow.status_signature(written)  # each new line redraws the bar
    # once the probe is done the line is gone: a later state shows no stale probe text
    assert train_view.measure_progress({**written, "state": "training"}, []).speed_probe == ""


def test_failure_panel_shows_hint_error_and_log_tail():
    status = {
        "state": "failed",
        "error": {"type": "ValueError", "message": "bad <thing>", "hint": "Lower num_generations."},
    }
    text = train_view.failure_html(status, "Traceback ...\nValueError: bad")
    assert text.index("Lower num_generations.") < text.index("ValueError: bad &lt;thing&gt;")
    assert "End of train.log" in text and "Traceback ..." in text
    assert train_view.failure_html({"state": "training"}, "log") == ""
    assert "without saying why" in train_view.failure_html({"state": "failed"}, "")


def test_start_watching_reads_the_config(tmp_path):
    run_dir = tmp_path / "r1"
    run_dir.mkdir()
    (run_dir / runfolder.CONFIG_FILE).write_text(json.dumps({"model": "tiny"}))
    watch = train_tab.start_watching(run_dir.parent, "r1", newest_known="r0")
    assert watch.config == {"model": "tiny"} and watch.newest_known == "r1" and watch.metrics_offset == 0
    assert train_tab.start_watching(run_dir.parent, None, "r0") == train_view.RunWatch(newest_known="r0")


@pytest.mark.parametrize(
    "run_ids, watch, expected",
    [
        ([], train_view.RunWatch(), (None, None)),
        (["b", "a"], train_view.RunWatch(run_id="a", status={"state": "finished"}, newest_known="a"), ("b", "b")),
        (["b", "a"], train_view.RunWatch(run_id="a", status={"state": "training"}, newest_known="a"), (None, "b")),
        (["b", "a"], train_view.RunWatch(run_id="a", status={"state": "finished"}, newest_known="b"), (None, "b")),
        (["a"], train_view.RunWatch(), ("a", "a")),
    ],
    ids=["no-runs", "new-run-while-idle", "new-run-while-watching-live", "already-seen", "first-run"],
)
def test_new_run_to_follow(run_ids, watch, expected):
    assert train_view.new_run_to_follow(run_ids, watch) == expected


def test_alarms_are_shown_in_plain_words():
    from workbench.insight.health import Alarm

    alarm = Alarm("warning", "No learning signal", "Most groups <all equal>.", 4, "no_signal")
    text = train_view.alarms_html([alarm], has_metrics=True)
    assert "wb-alarm-warning" in text and "No learning signal" in text and "(step 4)" in text
    assert "&lt;all equal&gt;" in text
    assert "No alarms" in train_view.alarms_html([], has_metrics=True)
    assert "first logged step" in train_view.alarms_html([], has_metrics=False)


@pytest.mark.parametrize(
    "state, step_times, expected",
    [
        ("training", [], 2.0),
        ("training", [12.0, 10.0], 2.8),
        ("training", [2.0], 1.0),
        ("training", [60.0], 5.0),
        ("finished", [10.0], 5.0),
    ],
    ids=["loading", "ten-second-steps", "fast-steps-floor", "slow-steps-ceiling", "finished"],
)
def test_polling_pace_follows_the_step_time(state, step_times, expected):
    status = {"state": state, "pid": 1}
    metrics = [{"step": i + 1, "step_time": t} for i, t in enumerate(step_times)]
    assert train_view.poll_seconds(status, metrics) == expected


def test_what_one_page_drew_is_taken_by_the_others():
    drawn = train_view.Drawn(size=2)
    calls = []
    draw = lambda: calls.append(1) or len(calls)  # noqa: E731
    assert drawn.get(("figures", "r1", (1, 2), 100), draw) == 1
    assert drawn.get(("figures", "r1", (1, 2), 100), draw) == 1, "the same read: drawn once"
    assert drawn.get(("figures", "r1", (1, 2), 200), draw) == 2, "more read: drawn again"
    drawn.get(("other",), draw)
    assert drawn.get(("figures", "r1", (1, 2), 100), draw) == 4, "only the newest drawings are kept"
