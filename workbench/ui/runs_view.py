"""The Runs tab's pure parts: one summary row per run, the diff of run configs, a run's report.

Rows are built from `workbench.jobs.launcher.list_runs()` entries (each run's
status plus its model and task), read from the run folders every time, so two
browser tabs, a reload or a restarted app see the same runs. The final reward
comes from the last lines of `metrics.jsonl`, read from its end, so a long run
costs no more to list than a short one. A run waiting in the GPU queue shows
its place and what it waits for in the state column: `queued #2 — waits for
GPU 0 (run X)`. The runs overlaid for comparison are read as they grow
(`read_run_metrics`), and a run's completions through the index of where each
step's lines lie (`jobs.jsonl_cache`): a run of 640,000 completions shows a
step by parsing that step's lines only.
"""

from __future__ import annotations

import atexit
import functools
import json
import shutil
import tempfile
import time
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, Iterable

from workbench.insight import report
from workbench.insight.figures import metrics_frame
from workbench.insight.resumed import merge_metrics
from workbench.jobs import file_cache, jsonl_cache, probes, runfolder
from workbench.jobs.launcher import LOST_SECONDS, runs_elsewhere
from workbench.jobs.runfolder import LOST, QUEUED, UNREADABLE
from workbench.ui.train_view import format_duration, is_live

COLUMNS = ("run", "state", "model", "task", "generation", "steps", "final reward", "started", "duration")
# On a dashboard with accounts: who launched each run (an admin's table holds everyone's).
SHARED_COLUMNS = ("run", "owner", *COLUMNS[1:])
# The widths of all columns but the last, which takes what is left (about a tenth, for the duration).
COLUMN_WIDTHS = ("21%", "8%", "12%", "8%", "11%", "7%", "9%", "14%")
SHARED_COLUMN_WIDTHS = ("17%", "8%", "8%", "10%", "7%", "10%", "7%", "8%", "14%")


def metrics_of_run(run_dir: str | Path) -> list[dict]:
    """The run's metric records as they count: after a resume, the newest record of a step wins and
    the steps logged before the resume past its checkpoint are gone (no stale points on the overlay)."""
    return read_run_metrics(run_dir).records


@dataclass(frozen=True)
class RunMetrics:
    """What a page has of one run's metrics: the records as they count and their figures.metrics_frame.

    `read` is how many of the file's records (`jsonl_cache.records`) they hold, and `last_read` the
    last of those, so the next read folds in only the records after it.
    """

    records: list = field(default_factory=list)
    frame: Any = None
    read: int = 0
    last_read: Any = None


def read_run_metrics(run_dir: str | Path, previous: RunMetrics | None = None) -> RunMetrics:
    """The run's metrics, folding into `previous` (this page's last read of the run) only the new records.

    The file is read through the process's cache (`jsonl_cache.records`): an overlay redrawn while a run
    goes parses only the lines appended since, and adds only their rows to the frame. A file read anew
    (a resume's rewrite) starts over.
    """
    everything = jsonl_cache.records(Path(run_dir) / runfolder.METRICS_FILE).records
    if previous is None or len(everything) < previous.read or \
            (previous.read and everything[previous.read - 1] is not previous.last_read):
        previous = RunMetrics()
    if previous.frame is not None and len(everything) == previous.read:
        return previous
    records = merge_metrics(previous.records, everything[previous.read:])
    frame = metrics_frame(records, previous=(previous.records, previous.frame))
    return RunMetrics(records, frame, len(everything), everything[-1] if everything else None)


def completion_steps(run_dir: str | Path) -> list:
    """The steps that have completions, ascending, from the process's index of completions.jsonl."""
    return jsonl_cache.step_index(Path(run_dir) / runfolder.COMPLETIONS_FILE).steps


def completions_of_step(run_dir: str | Path, step) -> list[dict]:
    """The completion records of one step (its last stretch of lines, which holds its newest round)."""
    return jsonl_cache.records_of_step(Path(run_dir) / runfolder.COMPLETIONS_FILE, step)


def format_started(timestamp: float | None) -> str:
    if not timestamp:
        return "—"
    return datetime.fromtimestamp(timestamp).strftime("%Y-%m-%d %H:%M")


def summarise_run(entry: dict, now: float | None = None) -> dict:
    """One table row from a `list_runs()` entry: state, model, task, generation backend, steps, final reward,
    started, duration."""
    now = time.time() if now is None else now
    started = entry.get("started_at")
    end = now if is_live(entry) else entry.get("updated_at")
    duration = (end - started) if started and end else None
    step = entry.get("step")
    total = entry.get("total_steps")
    steps = "—" if step is None else (f"{step} / {total}" if total else str(step))
    reward = file_cache.last_metric(entry["run_dir"], "reward") if entry.get("run_dir") else None
    task = entry.get("task") or ""
    if entry.get("dataset_path"):
        task = f"{Path(entry['dataset_path']).name} (file)"
    if entry.get("state") in (UNREADABLE, LOST):  # the reason, where the row has room for it
        task = (entry.get("error") or {}).get("message", "")
    state = entry.get("state") or "unknown"
    if runs_elsewhere(entry):
        state = f"{state} on {entry['host']}"
    if state == QUEUED:
        state = queued_text(entry)
    return {
        "run": entry.get("run_id") or Path(entry.get("run_dir", "")).name,
        "owner": entry.get("owner") or "—",
        "state": state,
        "model": entry.get("model") or "",
        "task": task,
        "generation": entry.get("generation") or "transformers",  # runs from before the field generated so
        "steps": steps,
        "final reward": "—" if reward is None else f"{reward:.3f}",
        "started": format_started(started),
        "duration": format_duration(duration) if duration is not None else "—",
    }


def queued_text(entry: dict) -> str:
    """`queued #2 — waits for GPU 0 (run X)` from a `list_runs()` entry of a queued run."""
    position = entry.get("queue_position")
    text = f"{QUEUED} #{position}" if position else QUEUED
    return f"{text} — waits for {entry['waits_for']}" if entry.get("waits_for") else text


def runs_folder_note(runs_dir: str | Path) -> str:
    """Where the table reads runs from, and how runs of other machines get there."""
    return (f"Runs folder: {runs_dir}. Runs on other machines (a cluster bundle's) show here when their run "
            f"folder is on a filesystem this machine shares: start the app with {runfolder.RUNS_DIR_ENV} set to "
            "that folder. They are followed by their heartbeat, shown as lost when it has been "
            f"silent for {LOST_SECONDS:.0f} s, and Stop reaches them through the folder (stop.request).")


def runs_rows(summaries: Iterable[dict], columns: tuple[str, ...] = COLUMNS) -> list[list[Any]]:
    """Summaries as table rows in `columns` order (COLUMNS, or SHARED_COLUMNS with the owner)."""
    return [[summary[column] for column in columns] for summary in summaries]


def config_diff(configs: dict[str, dict]) -> tuple[list[str], list[list[str]]]:
    """(headers, rows) of the config fields whose values differ between runs.

    `configs` maps run id to its config dict; a field one run lacks shows as
    "—". With a single run there is nothing to compare and no rows.
    """
    headers = ["setting", *configs]
    if len(configs) < 2:
        return headers, []
    fields: list[str] = []
    for config in configs.values():
        fields += [name for name in config if name not in fields]
    rows = []
    for name in fields:
        values = [_show(config.get(name, _MISSING)) for config in configs.values()]
        if len(set(values)) > 1:
            rows.append([name, *values])
    return headers, rows


_MISSING = object()


def _show(value: Any) -> str:
    if value is _MISSING:
        return "—"
    if isinstance(value, (list, dict)):
        return json.dumps(value) if value else "(empty)"
    if value == "" or value is None:
        return "(empty)"
    return str(value)


REPORTS_PREFIX = "workbench-reports-"


@functools.cache
def reports_root(download_root: str | Path | None = None) -> Path:
    """This process's private folder of report copies: made once, 0700, under an unguessable name.

    A fixed name in the shared temporary folder would let another account
    of the machine read the reports, or plant a link where the next one is
    written. It goes when the process ends (the browser has its download by then).
    """
    root = Path(tempfile.mkdtemp(prefix=REPORTS_PREFIX, dir=download_root))
    atexit.register(shutil.rmtree, root, True)
    return root


def write_report(run_dir: str | Path, download_root: str | Path | None = None) -> tuple[Path, Path]:
    """Write the run's report into its folder (report.html) and a copy to download; returns both paths.

    Gradio hands the browser only files under the working folder or the system's
    temporary folder, and a runs folder may lie anywhere, so the copy goes to
    `<reports_root>/<run id>/<run id>-report.html`, in a private folder under
    `download_root` (the temporary folder by default; the next report of the
    run replaces it, and ui/cleanup.py removes day-old copies).
    """
    run_dir = Path(run_dir)
    contents = report.RunContents(name=run_dir.name, folder=str(run_dir), comparisons=probes.stored_comparisons(run_dir),
                                  **runfolder.read_run(run_dir))
    page = report.build_report(contents).encode("utf-8")
    written = run_dir / runfolder.REPORT_FILE
    runfolder.replace_file(written, page)
    copy = reports_root(download_root) / run_dir.name / f"{run_dir.name}-report.html"
    runfolder.replace_file(copy, page)
    return written, copy
