"""A run folder with lines no reader can take: every reader skips them, shows the rest, and says so once.

The run's metrics.jsonl and completions.jsonl hold the trainer's records
with, between them, what a full disk, a copy or a hand edit leaves: bytes
that are not UTF-8, a line cut in the middle, a JSON array, a completion
whose `rewards` is a list or whose `step` is text, a metric whose step is
text. The run is read the ways a user reads it: the Train tab's events run
as Gradio runs them (opening the run, an earlier step, a refresh after more
such lines), the report, and `python -m workbench report` / `runs`. None
may raise; each shows the good records; the Train tab and the report carry
a note naming the file and the count; and each process logs each file once.
"""

from __future__ import annotations

import json
import logging
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from app_events import Page, find_event

from workbench.insight import report
from workbench.insight.groups import groups_for_step
from workbench.runstore import jsonl_cache, runfolder
from workbench.spec.config import RunConfig
from workbench.spec.run_records import Skipped, completion_problem, metric_problem

REPO = Path(__file__).resolve().parents[1]
G = 2
RUN_ID = "20260301-000000-odd-lines"


def completion(step, i, **changes) -> dict:
    record = {
        "step": step,
        "group": 0,
        "prompt": f"question {step}",
        "completion": f"answer {step}.{i}",
        "rewards": {"brevity": i / 2},
        "reward": i / 2,
        "advantage": i - 0.5,
        "length": 3,
        "truncated": False,
    }
    return {**record, **changes}


def line(record) -> bytes:
    return json.dumps(record).encode() + b"\n"


# What a reader meets between good records, and the reason it gives for each.
BAD_COMPLETIONS = [
    (b'{"step": 2, "completion": "\xff\xfe cut"}\n', "not UTF-8 text"),
    (b'{"step": 2, "group": 0, "compl\n', "not JSON"),
    (b"[1, 2]\n", "[1, 2] is not a JSON object"),
    (line(completion(2, 9, rewards=[1])), "rewards is [1], not an object {function: score}"),
    (line(completion("2", 9)), 'step is "2", not a number'),
]
BAD_METRICS = [
    (b'{"step": 2, "loss": "\xff"}\n', "not UTF-8 text"),
    (b'{"step": "2", "loss": 0.3}\n', 'step is "2", not a number'),
    (b"7\n", "7 is not a JSON object"),
]


def write_run(runs_dir: Path) -> Path:
    """A finished 3-step run; step 2 and step 3 each have unreadable lines among their records."""
    run_dir = runs_dir / RUN_ID
    RunConfig.for_task("demo").with_changes(model="tiny", num_generations=G, max_steps=3).save(
        run_dir / runfolder.CONFIG_FILE
    )
    runfolder.write_json_atomic(
        run_dir / runfolder.STATUS_FILE, {"state": "finished", "step": 3, "total_steps": 3, "started_at": 1000.0}
    )
    completions, metrics = b"", b""
    for step in (1, 2, 3):
        completions += line(completion(step, 0))
        if step == 2:
            completions += b"".join(bad for bad, _ in BAD_COMPLETIONS)
            metrics += b"".join(bad for bad, _ in BAD_METRICS)
        if step == 3:
            completions += line(completion(3, 9, rewards="high"))
        completions += line(completion(step, 1))
        metrics += line(
            {"step": step, "loss": 0.1, "reward": step / 3, "reward_std": 0.2, "kl": 0.01 * step, "step_time": 1.0}
        )
    (run_dir / runfolder.COMPLETIONS_FILE).write_bytes(completions)
    (run_dir / runfolder.METRICS_FILE).write_bytes(metrics)
    return run_dir


@pytest.fixture
def run_dir(tmp_path):
    jsonl_cache.forget()
    yield write_run(tmp_path / "runs")
    jsonl_cache.forget()


def said(caplog, name: str) -> list[str]:
    """What the readers logged about the file `name`."""
    return [r.getMessage() for r in caplog.records if r.name == runfolder.__name__ and name in r.getMessage()]


def test_each_bad_line_is_skipped_with_its_reason():
    for records, rule, bad_lines in ((BAD_COMPLETIONS, completion_problem, 5), (BAD_METRICS, metric_problem, 3)):
        assert len(records) == bad_lines  # every kind of bad line the readers know has its case here
        for bad, reason in records:
            good = line({"step": 1, "reward": 0.5})
            parsed, skipped = runfolder.parse_lines(good + bad + good, base=100, rule=rule)
            assert parsed == [{"step": 1, "reward": 0.5}] * 2
            assert skipped.count == 1 and re.fullmatch(
                rf"byte {100 + len(good)}: {re.escape(reason)}.*", skipped.first
            ), (bad, skipped)
    assert completion_problem(completion(1, 0)) is None and metric_problem({"loss": 0.1}) is None
    deep = b"[" * 100_000 + b"]" * 100_000 + b"\n"  # deeper than Python's parser goes
    assert runfolder.parse_lines(deep) == ([], Skipped(1, "byte 0: not JSON"))


def test_the_train_tab_shows_the_good_records_and_a_note(run_dir, caplog):
    from workbench.ui.app import build_app

    caplog.set_level(logging.WARNING, logger=runfolder.__name__)
    app = build_app(run_dir.parent)
    page = Page(app)
    on_load = find_event(app, "workbench.ui.train_tab", "on_load")
    on_step = find_event(app, "workbench.ui.train_tab", "on_step")
    on_refresh = find_event(app, "workbench.ui.train_tab", "on_refresh")

    opened = page.run(on_load, [RUN_ID, 0.5])
    cards = page.output(on_load, opened, "wb-train-completions")
    assert "answer 3.0" in cards and "answer 3.1" in cards and "answer 3.9" not in cards
    alarms = json.dumps(page.output(on_load, opened, "wb-train-alarms"))
    assert "completions.jsonl: 1 line could not be read and was skipped" in alarms
    assert "metrics.jsonl: 3 lines could not be read and were skipped" in alarms

    earlier = page.run(on_step, [None, 2])  # the watch comes from the session
    cards = json.dumps(page.output(on_step, earlier, "wb-train-completions"))
    assert "answer 2.0" in cards and "answer 2.1" in cards and "answer 2.9" not in cards

    with open(run_dir / runfolder.COMPLETIONS_FILE, "ab") as handle:
        handle.write(
            b"\xff\xfe\n" + line(completion(4, 0, rewards=[1])) + line(completion(4, 0)) + line(completion(4, 1))
        )
    with open(run_dir / runfolder.METRICS_FILE, "ab") as handle:
        handle.write(b'{"step": "4"}\n' + line({"step": 4, "loss": 0.1, "reward": 0.9}))
    runfolder.update_status(run_dir, step=4, total_steps=4)
    refreshed = page.run(on_refresh, [None, None, 0.5])  # reads only what was appended
    alarms = json.dumps(page.output(on_refresh, refreshed, "wb-train-alarms"))
    assert "completions.jsonl: 3 lines could not be read" in alarms and "metrics.jsonl: 4 lines" in alarms
    newest = page.run(on_step, [None, 4])
    cards = json.dumps(page.output(on_step, newest, "wb-train-completions"))
    assert "answer 4.0" in cards and "answer 4.1" in cards and "2 of 2 completions" in cards

    # A second page reads the same files: nothing more is logged.
    Page(app).run(on_load, [RUN_ID, 0.5])
    assert len(said(caplog, runfolder.COMPLETIONS_FILE)) == 1 and len(said(caplog, runfolder.METRICS_FILE)) == 1


def test_the_report_shows_the_good_records_and_a_note(run_dir, caplog):
    caplog.set_level(logging.WARNING, logger=runfolder.__name__)
    contents = report.RunContents(name=RUN_ID, **runfolder.read_run(run_dir))
    page = report.build_report(contents, plotly_js="")
    for step in (1, 2, 3):
        assert f"answer {step}.0" in page and f"answer {step}.1" in page and f"answer {step}.9" not in page
    assert "completions.jsonl: 6 lines could not be read and were skipped (the first at byte" in page
    assert "metrics.jsonl: 3 lines could not be read and were skipped" in page
    notes = said(caplog, runfolder.COMPLETIONS_FILE)
    assert len(notes) == 1 and "(the first at byte" in notes[0] and "not UTF-8 text" in notes[0]

    # Records handed over already read (a notebook's own json.loads) are filtered the same way.
    records = [json.loads(bad) for bad, _ in BAD_COMPLETIONS[2:]] + [completion(2, 0), completion(2, 1)]
    assert [len(group.completions) for group in groups_for_step(records, 2)] == [2]


def test_a_damaged_last_line_leaves_the_last_metric(run_dir):
    with open(run_dir / runfolder.METRICS_FILE, "ab") as handle:
        handle.write(b'{"step": 4, "reward": "\xff"}\n')
    assert runfolder.last_metric(run_dir, "reward") == 1.0


@pytest.mark.slow
def test_the_command_line_reads_the_run_and_says_so_once(run_dir, tmp_path):
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    out = tmp_path / "report.html"

    def workbench(*args) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, "-m", "workbench", *args, "--runs-dir", str(run_dir.parent)],
            capture_output=True,
            text=True,
            env=env,
            cwd=tmp_path,
            timeout=120,
        )

    made = workbench("report", RUN_ID, "--out", str(out))
    assert made.returncode == 0 and "Traceback" not in made.stderr, made.stderr
    assert made.stderr.count(runfolder.COMPLETIONS_FILE) == 1 and made.stderr.count(runfolder.METRICS_FILE) == 1
    assert "completions.jsonl: 6 lines could not be read and were skipped" in made.stderr
    assert "answer 2.1" in out.read_text(encoding="utf-8")
    listed = workbench("runs")
    assert listed.returncode == 0 and RUN_ID in listed.stdout and "Traceback" not in listed.stderr
