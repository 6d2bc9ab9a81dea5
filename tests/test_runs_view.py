"""The Runs tab's pure parts: summary rows from run entries and metric tails, config diffs."""

import json

import pytest

from workbench.runstore import runfolder
from workbench.ui import runs_view
from workbench.ui.runs_tab import with_final_reward


@pytest.fixture
def make_run(tmp_path):
    """Write a run folder `tmp_path/<run_id>` with a config, a status and metric records."""

    def _make(run_id, config=None, status=None, metrics=()):
        run_dir = tmp_path / run_id
        run_dir.mkdir()
        (run_dir / runfolder.CONFIG_FILE).write_text(json.dumps(config or {"model": "tiny", "task": "demo"}))
        if status:
            runfolder.write_json_atomic(run_dir / runfolder.STATUS_FILE, status)
        runfolder.append_jsonl(run_dir / runfolder.METRICS_FILE, metrics)
        return run_dir

    return _make


FINISHED = {
    "state": "finished",
    "step": 10,
    "total_steps": 10,
    "started_at": 1_700_000_000.0,
    "updated_at": 1_700_000_125.0,
}


def entry(run_dir, status, **config):
    """What the Runs tab summarises for a run: `run_list.list_runs()`'s status plus config fields, and the
    final reward the tab reads (runs_tab.with_final_reward)."""
    return with_final_reward({**status, "run_id": run_dir.name, "run_dir": str(run_dir), **config})


def test_summary_row_of_a_finished_run(make_run):
    metrics = [{"step": s, "reward": s / 10} for s in range(1, 11)] + [{"step": 10, "train_runtime": 120.0}]
    run_dir = make_run("20261122-010203-demo", status=FINISHED, metrics=metrics)
    row = runs_view.summarise_run(entry(run_dir, FINISHED, model="tiny", task="demo"))
    assert row["run"] == "20261122-010203-demo" and row["state"] == "finished"
    assert (row["model"], row["task"], row["steps"]) == ("tiny", "demo", "10 / 10")
    assert row["reward"] == "1.000 final" and row["duration"] == "2 min 05 s"
    assert runs_view.runs_rows([row])[0] == [row[c] for c in runs_view.COLUMNS]


def test_summary_of_a_run_that_has_not_started(make_run):
    run_dir = make_run("r")
    row = runs_view.summarise_run(entry(run_dir, {}, model="tiny", dataset_path="/d/mine.jsonl"))
    assert (row["state"], row["steps"], row["reward"], row["started"], row["duration"]) == (
        "unknown",
        "—",
        "—",
        "—",
        "—",
    )
    assert row["task"] == "mine.jsonl (data)"


def test_live_duration_runs_to_now(make_run):
    status = {"state": "training", "step": 2, "total_steps": 9, "started_at": 100.0, "updated_at": 110.0}
    row = runs_view.summarise_run(entry(make_run("r", status=status), status), now=190.0)
    assert row["duration"] == "1 min 30 s" and row["steps"] == "2 / 9"


def test_a_queued_run_shows_its_place_and_what_it_waits_for(make_run):
    status = {
        "state": "queued",
        "step": 0,
        "queued_at": 100.0,
        "queue_position": 2,
        "waits_for": "GPU 0 (run 20261122-010203-demo)",
    }
    row = runs_view.summarise_run(entry(make_run("q", status=status), status), now=190.0)
    assert row["state"] == "queued #2 — waits for GPU 0 (run 20261122-010203-demo)"
    assert (row["steps"], row["started"], row["duration"]) == ("0", "—", "—")
    assert runs_view.queued_text({"state": "queued"}) == "queued"


def test_last_metric_reads_only_the_tail(make_run):
    metrics = [{"step": s, "reward": float(s), "pad": "x" * 200} for s in range(1, 200)]
    run_dir = make_run("r", metrics=metrics)
    assert runfolder.last_metric(run_dir, "reward", tail_bytes=1000) == 199.0
    assert runfolder.last_metric(run_dir, "kl") is None
    assert runfolder.last_metric(run_dir.parent / "missing", "reward") is None


@pytest.mark.parametrize(
    "configs, expected_rows",
    [
        ({"a": {"beta": 0.04, "model": "tiny"}}, []),
        ({"a": {"beta": 0.04, "model": "tiny"}, "b": {"beta": 0.0, "model": "tiny"}}, [["beta", "0.04", "0.0"]]),
        ({"a": {"gpu_ids": [0, 1]}, "b": {"gpu_ids": []}}, [["gpu_ids", "[0, 1]", "(empty)"]]),
        ({"a": {"x": 1}, "b": {}}, [["x", "1", "—"]]),
    ],
    ids=["single-run", "changed-value", "lists", "missing-field"],
)
def test_config_diff_lists_only_differences(configs, expected_rows):
    headers, rows = runs_view.config_diff(configs)
    assert headers == ["setting", *configs] and rows == expected_rows


def test_an_unreadable_run_shows_its_reason_in_the_table(make_run):
    from workbench.jobs import run_list

    run_dir = make_run("20261122-010203-broken")
    (run_dir / runfolder.STATUS_FILE).write_bytes(b"\xff\xfe")
    rows = [runs_view.summarise_run(with_final_reward(e)) for e in run_list.list_runs(run_dir.parent)]
    assert rows[0]["state"] == "unreadable" and "status.json is not UTF-8 text" in rows[0]["task"]


@pytest.mark.parametrize(
    "columns, widths",
    [(runs_view.COLUMNS, runs_view.COLUMN_WIDTHS), (runs_view.SHARED_COLUMNS, runs_view.SHARED_COLUMN_WIDTHS)],
)
def test_every_column_but_the_last_has_a_width_and_the_last_keeps_room(columns, widths):
    assert len(widths) == len(columns) - 1
    assert 85 <= sum(float(width.rstrip("%")) for width in widths) <= 92


@pytest.mark.parametrize("state", ["running", "stopped", "failed"])
def test_a_run_that_did_not_finish_shows_its_latest_reward_not_a_final_one(make_run, state):
    metrics = [{"step": s, "reward": s / 10} for s in range(1, 4)]
    run_dir = make_run("20261122-010203-demo", status={"state": state, "step": 3}, metrics=metrics)
    row = runs_view.summarise_run(entry(run_dir, {"state": state, "step": 3}, model="tiny", task="demo"))
    assert row["reward"] == "0.300 latest"
    assert "final reward" not in runs_view.COLUMNS
