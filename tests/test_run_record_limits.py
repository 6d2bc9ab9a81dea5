"""A reader of a run's records keeps the newest only, at most the admin's number of records and bytes
(runstore/kept_records.py), and says what it left out, naming the limit and its settings."""

from __future__ import annotations

import inspect

import pytest
from helpers import app_handler, tiny_config

from workbench.insight import follow
from workbench.runstore import jsonl_cache, kept_records, runfolder

LINE = b'{"step": %d, "loss": 0.5, "reward": 1.0}\n'


@pytest.fixture
def run_dir(tmp_path, monkeypatch):
    monkeypatch.setenv(kept_records.RECORDS_ENV, "1000")
    run_dir = tmp_path / "runs" / "20260101-000001-alice"
    run_dir.mkdir(parents=True)
    tiny_config().save(run_dir / runfolder.CONFIG_FILE)
    jsonl_cache.forget()
    yield run_dir
    jsonl_cache.forget()


def write_steps(run_dir, steps) -> None:
    with open(run_dir / runfolder.METRICS_FILE, "ab") as handle:
        handle.write(b"".join(LINE % step for step in steps))


def test_a_look_keeps_the_newest_records_and_says_what_it_left_out(run_dir):
    write_steps(run_dir, range(1, 30_001))
    seen, _ = follow.look(follow.start(run_dir), run_dir)
    assert [r["step"] for r in seen.metrics] == list(range(29_001, 30_001))
    note = seen.left_out[runfolder.METRICS_FILE]
    assert "showing the newest 1,000 steps" in note and "29,000 older records" in note
    assert kept_records.RECORDS_ENV in note and kept_records.BYTES_ENV in note

    write_steps(run_dir, range(30_001, 35_001))  # the run goes on: the reader still keeps about as many
    seen, changes = follow.look(seen, run_dir)
    assert changes.metrics and seen.metrics[-1]["step"] == 35_000 and len(seen.metrics) <= 1250
    assert seen.frame["step"].iloc[-1] == 35_000 and len(seen.frame) == len(seen.metrics)


def test_a_long_file_is_read_from_its_last_bytes_only(run_dir, monkeypatch):
    monkeypatch.setenv(kept_records.BYTES_ENV, "0.01")  # about 10 KB
    write_steps(run_dir, range(1, 30_001))
    read = jsonl_cache.records(run_dir / runfolder.METRICS_FILE)
    assert read.kept.unread_bytes > 0 and read.records[-1]["step"] == 30_000
    assert sum(len(LINE % r["step"]) for r in read.records) <= 0.01 * 2**20 + len(LINE % 30_000)
    assert not read.skipped.count  # the window starts at a line's start: no line cut in two
    assert "its first" in follow.read_metrics(run_dir).left_out  # MiB of the file never read


def test_the_runs_tab_overlay_and_the_report_keep_the_newest_too(run_dir):
    write_steps(run_dir, range(1, 5_001))
    metrics = follow.read_metrics(run_dir)
    assert len(metrics.records) == 1000 and metrics.records[-1]["step"] == 5_000 and "1,000" in metrics.left_out
    write_steps(run_dir, range(5_001, 5_101))
    grown = follow.read_metrics(run_dir, metrics)
    assert grown.records[-1]["step"] == 5_100 and len(grown.records) == 1100
    read = runfolder.read_run(run_dir)
    assert len(read["metrics"]) == 1000 and kept_records.RECORDS_ENV in read["left_out"][runfolder.METRICS_FILE]


def test_the_limits_are_the_admins(monkeypatch):
    assert kept_records.limits({}) == kept_records.Limits()
    bounds = kept_records.limits({kept_records.RECORDS_ENV: "50", kept_records.BYTES_ENV: "-1"})
    assert bounds.most_records == 50 and bounds.most_bytes == kept_records.DEFAULT_MB << 20


@pytest.mark.slow  # builds the whole app
def test_the_runs_tab_overlay_says_older_steps_were_left_out(run_dir):
    from workbench.access.owners import Viewer
    from workbench.ui.app import build_app

    write_steps(run_dir, range(1, 5_001))
    tab = inspect.unwrap(app_handler(build_app(run_dir.parent), "runs_tab", "on_load")).__self__
    out = tab.overlay_figure(Viewer(None), [run_dir.name], "reward", 0.0, {})
    assert kept_records.RECORDS_ENV in str(out[tab.ui.overlay])


def test_a_look_after_many_appended_completions_parses_only_the_newest_step(run_dir, monkeypatch):
    monkeypatch.setenv(kept_records.BYTES_ENV, "0.01")  # about 10 KB parsed at once
    line = b'{"step": %d, "group": 0, "prompt": "p", "completion": "c", "reward": 0.0}\n'
    path = run_dir / runfolder.COMPLETIONS_FILE
    path.write_bytes(line % 1)
    seen, _ = follow.look(follow.start(run_dir), run_dir)
    with open(path, "ab") as handle:  # far more than a reader parses at once, between two looks
        handle.write(b"".join(line % step for step in range(2, 20_001)))
    parsed = []
    real = runfolder.parse_lines
    monkeypatch.setattr(
        runfolder, "parse_lines", lambda chunk, *a, **k: parsed.append(len(chunk)) or real(chunk, *a, **k)
    )
    seen, changes = follow.look(seen, run_dir)
    assert changes.completions and seen.completion_steps[-1] == 20_000
    assert [r["step"] for r in seen.newest_completions] == [20_000] and sum(parsed) < 4096
