"""Attack: a run writes many small, valid records (within its disk limit), and one look at it costs the server
several times their size in memory and minutes of CPU, kept afterwards.

Reads are bounded per read now (8 MiB), but every record is kept: the Train tab's metrics
(`follow.read_metrics`, `jsonl_cache.records`) and the run report (all completions) parse every line of the
file into a dict and keep them all. Measured: a 100 MiB metrics.jsonl held 519 MiB and took 73 s for one
Train tab look (2 cores, loaded); a 50 MiB completions.jsonl 275 MiB and 30 s for the report. The disk
limit's default is 50 GiB: a run that writes 2 GiB of one-number metric lines costs the server about 10 GiB
each time its page is opened, per server process, and keeps it cached. Here: 16 MiB files, 64 MiB allowed.

Fixed (issue 52): a reader keeps the newest WORKBENCH_MAX_RUN_RECORDS records read from the last
WORKBENCH_MAX_RUN_RECORDS_MB of the file and says what it left out (runstore/kept_records.py).
"""

from __future__ import annotations

import tracemalloc

import pytest
from helpers import tiny_config

from workbench.runstore import runfolder

pytestmark = pytest.mark.slow
LIMIT = 64 * 2**20
SIZE_MIB = 16
METRIC = b'{"step": 1, "loss": 0.0, "reward": 0.0, "k0": 0.0, "k1": 0.0, "k2": 0.0, "k3": 0.0}\n'
COMPLETION = (
    b'{"step": 1, "group": 0, "prompt": "p", "completion": "c", "rewards": {"brevity": 0.0}, "reward": 0.0, '
    b'"advantage": 0.0, "length": 1, "truncated": false}\n'
)


def run_with(tmp_path, name: str, line: bytes):
    runs = tmp_path / "runs"
    run_dir = runs / "20260101-000001-alice"
    run_dir.mkdir(parents=True)
    tiny_config().save(run_dir / runfolder.CONFIG_FILE)
    runfolder.update_status(run_dir, state="finished", step=1)
    with open(run_dir / name, "wb") as handle:
        chunk = line * (2**20 // len(line))
        for _ in range(SIZE_MIB):
            handle.write(chunk)
    return runs, run_dir


def peak_bytes(look) -> int:
    tracemalloc.start()
    try:
        look()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_the_train_tab_holds_a_bounded_amount_of_a_long_metrics_file(tmp_path):
    from workbench.insight import follow
    from workbench.ui import train_tab

    runs, run_dir = run_with(tmp_path, runfolder.METRICS_FILE, METRIC)

    def look():
        watch = train_tab.start_watching(runs, run_dir.name)
        train_tab.poll_run(watch, runs)
        follow.read_metrics(run_dir)

    peak = peak_bytes(look)
    assert peak < LIMIT, f"one Train tab look held {peak / 2**20:.0f} MiB for {SIZE_MIB} MiB of metric lines"


def test_the_report_holds_a_bounded_amount_of_a_long_completions_file(tmp_path):
    from workbench.ui import run_reports

    runs, run_dir = run_with(tmp_path, runfolder.COMPLETIONS_FILE, COMPLETION)
    (tmp_path / "downloads").mkdir()
    peak = peak_bytes(lambda: run_reports.write_report(run_dir, tmp_path / "downloads"))
    assert peak < LIMIT, f"the report held {peak / 2**20:.0f} MiB for {SIZE_MIB} MiB of completion lines"
