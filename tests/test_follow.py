"""Following a run (workbench/insight/follow.py): looks that read only new bytes, what changed, the
signature a page asks for, and the follower a terminal or a notebook uses."""

import json

import pytest

from workbench.insight import follow
from workbench.runstore import runfolder


@pytest.fixture
def run_dir(tmp_path):
    """An empty run folder `runs/r1` that has started training."""
    path = tmp_path / "r1"
    path.mkdir()
    (path / runfolder.CONFIG_FILE).write_text(json.dumps({"model": "tiny"}))
    runfolder.update_status(path, state="training", step=0, total_steps=10, started_at=1000.0, pid=1)
    return path


@pytest.fixture
def make_run(tmp_path):
    """Write a run folder `tmp_path/<run_id>` with a config and metric records."""

    def _make(run_id, metrics=()):
        path = tmp_path / run_id
        path.mkdir()
        (path / runfolder.CONFIG_FILE).write_text(json.dumps({"model": "tiny", "task": "demo"}))
        runfolder.append_jsonl(path / runfolder.METRICS_FILE, metrics)
        return path

    return _make


def completion(step, group=0, reward=0.5):
    return {"step": step, "group": group, "prompt": "p", "completion": "c", "reward": reward}


def test_merge_completions_tracks_steps_and_newest_group():
    steps, newest = follow.merge_completions([], [], [completion(1), completion(1, 1), completion(2)])
    assert steps == [1, 2] and newest == [completion(2)]
    steps, newest = follow.merge_completions(steps, newest, [completion(2, 1)])
    assert steps == [1, 2] and len(newest) == 2
    steps, newest = follow.merge_completions(steps, newest, [completion(1, 0, 0.9)])  # resumed
    assert steps == [1] and newest == [completion(1, 0, 0.9)]


def test_poll_reads_only_new_bytes_and_reports_changes(run_dir):
    watch = follow.Seen()
    watch, changes = follow.look(watch, run_dir)
    assert changes.status and not changes.metrics and watch.status["state"] == "training"

    runfolder.append_jsonl(run_dir / runfolder.METRICS_FILE, [{"step": 1, "reward": 0.1}])
    runfolder.append_jsonl(run_dir / runfolder.COMPLETIONS_FILE, [completion(1), completion(1, 1)])
    watch, changes = follow.look(watch, run_dir)
    assert changes.metrics and changes.completions
    assert watch.metrics == [{"step": 1, "reward": 0.1}] and watch.completion_steps == [1]
    assert watch.metrics_offset == (run_dir / runfolder.METRICS_FILE).stat().st_size

    same, changes = follow.look(watch, run_dir)
    assert not changes.anything and same is watch

    with open(run_dir / runfolder.METRICS_FILE, "a") as handle:
        handle.write('{"step": 2, "rew')  # the trainer is mid-line
    same, changes = follow.look(watch, run_dir)
    assert not changes.anything
    with open(run_dir / runfolder.METRICS_FILE, "a") as handle:
        handle.write('ard": 0.3}\n')
    watch, changes = follow.look(watch, run_dir)
    assert changes.metrics and [r["reward"] for r in watch.metrics] == [0.1, 0.3]


def test_heartbeat_alone_is_no_change(run_dir):
    watch, _ = follow.look(follow.Seen(), run_dir)
    runfolder.update_status(run_dir)  # only updated_at moves
    _, changes = follow.look(watch, run_dir)
    assert not changes.anything


def test_poll_uses_the_given_status_reader(run_dir):
    watch, _ = follow.look(
        follow.Seen(), run_dir, read_status=lambda d: {**runfolder.read_status(d), "state": "failed"}
    )
    assert watch.status["state"] == "failed"


def test_completions_of_an_earlier_step_come_from_the_file(run_dir):
    runfolder.append_jsonl(
        run_dir / runfolder.COMPLETIONS_FILE,
        [completion(1), completion(1, 1), completion(2), completion(3), completion(2, 0, 0.9)],
    )
    assert len(follow.completions_of_step(run_dir, 1)) == 2
    assert follow.completions_of_step(run_dir, 2) == [completion(2, 0, 0.9)]
    assert follow.completions_of_step(run_dir, 7) == []


def test_poll_starts_again_when_a_resume_cut_the_files_back(run_dir):
    runfolder.append_jsonl(run_dir / runfolder.METRICS_FILE, [{"step": s, "reward": s / 10} for s in (1, 2, 3)])
    runfolder.append_jsonl(run_dir / runfolder.COMPLETIONS_FILE, [completion(s) for s in (1, 2, 3)])
    watch, _ = follow.look(follow.Seen(), run_dir)
    assert [r["step"] for r in watch.metrics] == [1, 2, 3]
    # resumed from checkpoint-1: the trainer cuts both files back to step 1, then logs step 2 again
    for name in (runfolder.METRICS_FILE, runfolder.COMPLETIONS_FILE):
        runfolder.keep_steps_up_to(run_dir / name, 1)
    runfolder.append_jsonl(run_dir / runfolder.METRICS_FILE, [{"step": 2, "reward": 0.9}])
    runfolder.append_jsonl(run_dir / runfolder.COMPLETIONS_FILE, [completion(2, 0, 0.9)])
    watch, changes = follow.look(watch, run_dir)
    assert changes.metrics and changes.completions
    assert watch.metrics == [{"step": 1, "reward": 0.1}, {"step": 2, "reward": 0.9}]
    assert watch.completion_steps == [1, 2] and watch.newest_completions == [completion(2, 0, 0.9)]


def test_the_newest_step_written_twice_in_a_row_keeps_its_last_round(run_dir):
    runfolder.append_jsonl(
        run_dir / runfolder.COMPLETIONS_FILE,
        [completion(1), completion(1, 1), completion(1, 0, 0.9), completion(1, 1, 0.8)],
    )
    watch, _ = follow.look(follow.Seen(), run_dir)
    assert [c["reward"] for c in watch.newest_completions] == [0.9, 0.8]
    assert [c["reward"] for c in follow.completions_of_step(run_dir, 1)] == [0.9, 0.8]


def test_change_signature_moves_with_new_lines_status_and_new_runs(run_dir):
    runs = run_dir.parent
    sign = lambda: follow.change_signature(runs, "r1")  # noqa: E731
    first = sign()
    assert sign() == first, "nothing written: the same signature"
    with open(run_dir / runfolder.METRICS_FILE, "a", encoding="utf-8") as handle:
        handle.write(json.dumps({"step": 9, "reward": 0.5}) + "\n")
    after_metrics = sign()
    assert after_metrics != first
    with open(run_dir / runfolder.COMPLETIONS_FILE, "a", encoding="utf-8") as handle:
        handle.write(json.dumps({"step": 9, "completion": "x"}) + "\n")
    after_completions = sign()
    assert after_completions != after_metrics
    runfolder.update_status(run_dir, updated_at=123.0)  # a heartbeat only
    assert sign() == after_completions, "a heartbeat alone does not ask for a redraw"
    runfolder.update_status(run_dir, step=9)
    after_step = sign()
    assert after_step != after_completions
    newer = runs / "r2"
    newer.mkdir()
    (newer / runfolder.CONFIG_FILE).write_text("{}", encoding="utf-8")
    assert sign() != after_step, "a run started elsewhere changes what the page may follow"


def test_change_signature_of_a_missing_or_odd_run_id_is_gone_not_a_path(run_dir):
    runs = run_dir.parent
    gone = follow.change_signature(runs, "no-such-run")
    assert gone == follow.change_signature(runs, "../r1") == follow.change_signature(runs, "/etc")
    assert gone != follow.change_signature(runs, "r1") != follow.change_signature(runs, None)


def test_overlay_of_a_resumed_run_keeps_no_stale_point(make_run):
    from workbench.insight import overlay_figures

    # steps 1-3, a crash, a resume from checkpoint-1 that has logged step 2 again so far
    run_dir = make_run(
        "20261122-010203-resumed",
        metrics=[
            {"step": 1, "reward": 0.1},
            {"step": 2, "reward": 0.2},
            {"step": 3, "reward": 0.3},
            {"step": 2, "reward": 0.9},
        ],
    )
    assert follow.read_metrics(run_dir).records == [{"step": 1, "reward": 0.1}, {"step": 2, "reward": 0.9}]
    (line,) = overlay_figures.overlay_runs({"resumed": follow.read_metrics(run_dir).records}, "reward").data
    assert list(line.x) == [1, 2] and list(line.y) == [0.1, 0.9]


def test_an_overlaid_run_is_read_as_it_grows(make_run):
    import pandas as pd

    from workbench.insight import figures

    run_dir = make_run("20261122-010203-live", metrics=[{"step": s, "reward": s / 10} for s in (1, 2)])
    first = follow.read_metrics(run_dir)
    assert follow.read_metrics(run_dir, first) is first, "nothing new: nothing read, nothing built"
    runfolder.append_jsonl(run_dir / runfolder.METRICS_FILE, [{"step": 3, "reward": 0.3}])
    grown = follow.read_metrics(run_dir, first)
    assert [r["step"] for r in grown.records] == [1, 2, 3]
    assert grown.records[0] is first.records[0], "the records read before are kept, not parsed again"
    pd.testing.assert_frame_equal(grown.frame, figures.metrics_frame(grown.records))
    # a resume rewrites the file: the page's read starts over
    runfolder.keep_steps_up_to(run_dir / runfolder.METRICS_FILE, 1)
    runfolder.append_jsonl(run_dir / runfolder.METRICS_FILE, [{"step": 2, "reward": 0.9}])
    resumed = follow.read_metrics(run_dir, grown)
    assert resumed.records == [{"step": 1, "reward": 0.1}, {"step": 2, "reward": 0.9}]


def test_a_run_s_completions_are_read_one_step_at_a_time(tmp_path):
    run_dir = tmp_path / "r"
    run_dir.mkdir()
    rows = [{"step": s, "group": g, "completion": f"{s}.{g}"} for s in (1, 2, 3) for g in (0, 0, 1, 1)]
    runfolder.append_jsonl(run_dir / runfolder.COMPLETIONS_FILE, rows)
    assert follow.completion_steps(run_dir) == [1, 2, 3]
    assert follow.records_of_step(run_dir, 2) == [r for r in rows if r["step"] == 2]
    assert follow.records_of_step(run_dir, 9) == []


def step(number, reward=0.5, **more):
    return {"step": number, "reward": reward, "reward_std": 0.0, "kl": 0.0, "loss": 0.01 * number, **more}


def test_a_follower_reports_each_step_once_and_again_when_a_resume_trains_it_anew(run_dir):
    follower = follow.RunFollower(run_dir)
    first = follower.look()
    assert (first.steps, first.state) == ([], "training") and not follower.over
    runfolder.append_jsonl(run_dir / runfolder.METRICS_FILE, [step(1), step(2)])
    assert [r["step"] for r in follower.look().steps] == [1, 2]
    assert not follower.look().anything, "nothing new: no news"
    # TRL's end-of-run summary shares the last step: it is merged into that record, not a new step
    runfolder.append_jsonl(run_dir / runfolder.METRICS_FILE, [step(3), {"step": 3, "train_runtime": 9.0}])
    assert [r["step"] for r in follower.look().steps] == [3]
    assert not follower.look().steps
    # resumed from checkpoint-1: steps 2 and 3 are trained again, with other values
    runfolder.keep_steps_up_to(run_dir / runfolder.METRICS_FILE, 1)
    runfolder.append_jsonl(run_dir / runfolder.METRICS_FILE, [step(2, reward=0.9)])
    assert [(r["step"], r["reward"]) for r in follower.look().steps] == [(2, 0.9)]
    runfolder.update_status(run_dir, state="finished", step=3)
    news = follower.look()
    assert news.state == "finished" and follower.over and news.seen.status["step"] == 3


def test_a_follower_reports_an_alarm_when_it_appears(run_dir):
    follower = follow.RunFollower(run_dir)
    runfolder.append_jsonl(
        run_dir / runfolder.METRICS_FILE, [step(s, frac_reward_zero_std=0.0, reward_std=0.3) for s in (1, 2, 3)]
    )
    assert follower.look().alarms == []
    # every group of the next steps gives its completions the same reward: no learning signal
    runfolder.append_jsonl(run_dir / runfolder.METRICS_FILE, [step(s, frac_reward_zero_std=1.0) for s in (4, 5, 6)])
    alarms = follower.look().alarms
    assert "no_signal" in [alarm.kind for alarm in alarms]
    runfolder.append_jsonl(run_dir / runfolder.METRICS_FILE, [step(7, frac_reward_zero_std=1.0)])
    assert "no_signal" not in [alarm.kind for alarm in follower.look().alarms], "still raised: not new"


def test_a_follower_reports_held_out_accuracy_falling_as_the_reward_rises(run_dir):
    follower = follow.RunFollower(run_dir)
    runfolder.append_jsonl(run_dir / runfolder.METRICS_FILE, [step(s, reward=0.1 * s) for s in range(1, 9)])
    runfolder.append_jsonl(run_dir / runfolder.EVAL_FILE, [{"step": 0, "accuracy": 0.5, "n": 8, "rewards": {}}])
    assert "held_out_falls" not in [alarm.kind for alarm in follower.look().alarms]
    # the next evaluation answers 2 of the 8 held-out prompts fewer right (`workbench watch` prints the alarm)
    runfolder.append_jsonl(run_dir / runfolder.EVAL_FILE, [{"step": 8, "accuracy": 0.25, "n": 8, "rewards": {}}])
    runfolder.append_jsonl(run_dir / runfolder.METRICS_FILE, [step(9, reward=0.9)])
    assert "held_out_falls" in [alarm.kind for alarm in follower.look().alarms]


def test_follow_yields_until_the_run_ends_and_reads_what_came_just_before(run_dir):
    runfolder.append_jsonl(run_dir / runfolder.METRICS_FILE, [step(1)])
    looks = []

    def sleep(seconds):  # the trainer writes between two looks: a step, then its last step and the end
        looks.append(seconds)
        runfolder.append_jsonl(run_dir / runfolder.METRICS_FILE, [step(len(looks) + 1)])
        if len(looks) == 2:
            runfolder.update_status(run_dir, state="finished", step=3)

    news = list(follow.follow(run_dir, interval=0.25, sleep=sleep))
    assert looks == [0.25, 0.25]
    assert [r["step"] for n in news for r in n.steps] == [1, 2, 3]
    assert news[-1].state == "finished" and news[0].state == "training"
