"""The speed benchmark's recorded table (benchmarks/bench_speed.py, benchmarks/results/bench_speed.jsonl): each row's
fields, and every record kept says which CPU (or GPU) and command it came from; the launch path's benchmark refuses
a busy machine. No training here."""

import importlib
import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
ROW_FIELDS = {
    "row",
    "what",
    "settings",
    "median_step_s",
    "median_step_per_run_s",
    "x_baseline",
    "mean_reward",
    "mean_reward_per_run",
    "peak_rss_gib",
    "runs",
    "steps",
}
RECORD_FIELDS = {
    "benchmark",
    "date",
    "command",
    "load_average",
    "cpu",
    "cpu_flags",
    "cores",
    "machine",
    "torch",
    "transformers",
    "trl",
    "peft",
    "note",
    "figures",
}


@pytest.fixture
def bench_speed(monkeypatch):
    monkeypatch.syspath_prepend(str(ROOT / "benchmarks"))
    return importlib.import_module("bench_speed")


def test_the_table_is_recorded_per_row_against_the_faster_bare_row(bench_speed):
    run = {"step_time": [9.0, 4.0, 4.0], "reward": [0.1, 0.3], "peak_rss": 2**30}
    results = {
        "bare-fp32": [run, run],
        "bare-trl-defaults": [{**run, "step_time": [9.0, 2.0, 2.0]}] * 2,
        "defaults": [{**run, "step_time": [9.0, 1.0, 1.0], "reward": [0.2, 0.2]}] * 2,
    }
    figures = bench_speed.table_figures(results, steps=3, runs=2, device="CPU", model="m")
    assert (figures["baseline"], figures["steps"], figures["runs"]) == ("bare-trl-defaults", 3, 2)
    rows = {line["row"]: line for line in figures["rows"]}
    assert all(set(line) == ROW_FIELDS for line in rows.values())
    assert (rows["bare-fp32"]["median_step_s"], rows["bare-fp32"]["x_baseline"]) == (4.0, 2.0)  # first step left out
    assert (rows["defaults"]["x_baseline"], rows["defaults"]["mean_reward_per_run"]) == (0.5, [0.2, 0.2])
    assert rows["bare-trl-defaults"]["settings"] == {"trl_bf16": None} and rows["bare-fp32"]["peak_rss_gib"] == 1.0
    json.dumps(figures)


def test_every_recorded_speed_table_names_its_machine_and_command():
    path = ROOT / "benchmarks" / "results" / "bench_speed.jsonl"
    records = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    assert records
    for record in records:
        assert RECORD_FIELDS <= set(record) and record["cpu"] and record["command"].startswith(("python", "python3"))
        if record.get("note", "").startswith("imported from README.md"):  # the old README's prose figures, as said
            assert record["figures"] and "commit" in record["note"]
            continue
        rows = record["figures"]["rows"]
        assert record["figures"]["baseline"] in {line["row"] for line in rows}
        assert all(ROW_FIELDS <= set(line) and line["median_step_s"] > 0 for line in rows)


@pytest.mark.slow  # the benchmark's own start: it imports the training stack's launcher before it looks
def test_the_launch_path_benchmark_refuses_a_busy_machine_before_it_trains(tmp_path):
    import os
    import subprocess
    import sys

    spin = "import time\nend = time.monotonic() + 60\nwhile time.monotonic() < end: pass\n"
    spinners = [subprocess.Popen([sys.executable, "-c", spin]) for _ in range(os.cpu_count())]
    try:
        done = subprocess.run(
            [sys.executable, str(ROOT / "benchmarks" / "bench_launch_path.py"), "--rows", "bare", "--steps", "1"],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=120,
        )
    finally:
        for process in spinners:
            process.kill()
            process.wait()
    assert done.returncode != 0
    assert "not a quiet machine: other processes took" in done.stderr and "--busy-ok" in done.stderr
    assert "at the start:" in done.stdout and "cores; load average" in done.stdout  # the CPU and the load, first
    assert "running 1 steps" not in done.stdout  # nothing trained
