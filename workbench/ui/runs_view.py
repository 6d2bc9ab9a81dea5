"""The Runs tab's pure parts: one summary row per run, and the diff of run configs.

Rows are built from `workbench.jobs.run_list.list_runs()` entries (each run's
status plus its model and task), which the tab reads from the run folders
every time, so two browser tabs, a reload or a restarted app see the same
runs; the tab adds each run's final reward (`final_reward`, from the last
lines of `metrics.jsonl`, read from its end, so a long run costs no more to
list than a short one) and its best evaluated checkpoint (`best_checkpoint`,
the eval.jsonl record of the checkpoint with the best held-out accuracy, the
one training keeps whatever save_total_limit prunes), marked in the steps
column: `10 / 10 · best 4 (75%)`. A run waiting in the GPU queue shows its place and
what it waits for in the state column: `queued #2 — waits for GPU 0 (run X)`.
The runs overlaid for comparison and a run's completions are read by the tab
through workbench/insight/follow.py; the report it offers, by ui/run_reports.py.
No gradio, and no file read.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable
from datetime import datetime
from pathlib import Path
from typing import Any

from workbench.jobs.run_state import LOST_SECONDS, runs_elsewhere
from workbench.runstore.runfolder import LOST, QUEUED, RUNS_DIR_ENV, UNREADABLE
from workbench.spec.run_status import UNREADABLE_FIELDS, running_seconds
from workbench.ui.train_view import format_duration, is_live

COLUMNS = ("run", "state", "model", "task", "generation", "steps", "reward", "started", "duration")
# On a dashboard with accounts: who launched each run (an admin's table holds everyone's).
SHARED_COLUMNS = ("run", "owner", *COLUMNS[1:])
# The widths of all columns but the last, which takes what is left (about a tenth, for the duration).
COLUMN_WIDTHS = ("21%", "8%", "12%", "8%", "11%", "7%", "9%", "14%")
SHARED_COLUMN_WIDTHS = ("17%", "8%", "8%", "10%", "7%", "10%", "7%", "8%", "14%")


def format_started(timestamp: float | None) -> str:
    if not timestamp:
        return "—"
    return datetime.fromtimestamp(timestamp).strftime("%Y-%m-%d %H:%M")


def summarise_run(entry: dict, now: float | None = None) -> dict:
    """One table row from a `list_runs()` entry: state, model, task, generation backend, steps, reward (final
    once it finished, else latest), started, duration. The reward is the entry's `final_reward`, the best checkpoint its `best_checkpoint`
    (the tab reads both, `with_final_reward`). A field the run's files held with the wrong type or too long
    (the entry's `unreadable_fields`) shows as `unreadable`."""
    now = time.time() if now is None else now
    bad = set(entry.get(UNREADABLE_FIELDS) or ())
    started, updated = _number(entry.get("started_at")), _number(entry.get("updated_at"))
    duration = running_seconds(entry, now, is_live(entry)) if updated or is_live(entry) else None
    step, total = _number(entry.get("step")), _number(entry.get("total_steps"))
    steps = "—" if step is None else (f"{step:.0f} / {total:.0f}" if total else f"{step:.0f}")
    if bad & {"step", "total_steps"}:
        steps = UNREADABLE
    if entry.get("best_checkpoint"):
        steps = f"{steps} · {best_text(entry['best_checkpoint'])}"
    reward = entry.get("final_reward")
    task = _text(entry.get("task"))
    data = entry.get("dataset_name") or entry.get("dataset_path")
    if data:
        task = f"{Path(str(data)).name} (data)"
    if bad & {"task", "dataset_name", "dataset_path"}:
        task = UNREADABLE
    if entry.get("state") in (UNREADABLE, LOST):  # the reason, where the row has room for it
        task = _text((entry.get("error") or {}).get("message", ""))
    state = _text(entry.get("state")) or "unknown"
    if runs_elsewhere(entry):
        state = f"{state} on {_text(entry['host'])}"
    if state == QUEUED:
        state = queued_text(entry)
    return {
        "run": entry.get("run_id") or Path(entry.get("run_dir", "")).name,
        "owner": UNREADABLE if "owner" in bad else _text(entry.get("owner")) or "—",
        "state": state,
        "model": UNREADABLE if "model" in bad else _text(entry.get("model")),
        "task": task,
        "generation": UNREADABLE if "generation" in bad else _text(entry.get("generation")) or "transformers",
        "steps": steps,
        "reward": _reward_text(reward, entry.get("state")),
        "started": UNREADABLE if "started_at" in bad else format_started(started),
        "duration": UNREADABLE if bad & {"started_at", "updated_at"} else _duration(duration),
    }


def _reward_text(reward, state) -> str:
    """The run's last logged reward, called final only when the run finished: a training, stopped or failed run's
    is its latest so far."""
    if reward is None:
        return "—"
    return f"{reward:.3f} {'final' if state == 'finished' else 'latest'}"


# The most of one text field a row shows: the fields are bounded where they are read (RunStatus.MAX_CHARS), the
# table's cells more tightly still.
MAX_CELL_CHARS = 200


def _text(value: Any) -> str:
    return value[:MAX_CELL_CHARS] if isinstance(value, str) else ""


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _duration(seconds: float | None) -> str:
    return format_duration(seconds) if seconds is not None else "—"


def best_text(record: dict) -> str:
    """The best checkpoint in a few characters: `best 4 (75%)` (its step and held-out accuracy), or by the figure
    the run chose it by (`best_checkpoint_metric`): `best 4 (maj@4 75%)`, `best 4 (best@4 1.20)`."""
    metric = record.get("best_checkpoint_metric") or "accuracy"
    value = record.get(metric)
    if value is None:
        return f"best {record['step']}"
    if metric == "accuracy":
        return f"best {record['step']} ({value:.0%})"
    label = f"{metric.split('_')[0]}@{record.get('k')}"
    return (
        f"best {record['step']} ({label} {value:.2f})"
        if metric == "best_at_k"
        else f"best {record['step']} ({label} {value:.0%})"
    )


def queued_text(entry: dict) -> str:
    """`queued #2 — waits for GPU 0 (run X)` from a `list_runs()` entry of a queued run."""
    position = entry.get("queue_position")
    text = f"{QUEUED} #{position}" if position else QUEUED
    return f"{text} — waits for {entry['waits_for']}" if entry.get("waits_for") else text


def runs_folder_note(runs_dir: str | Path) -> str:
    """Where the table reads runs from, and how runs of other machines get there."""
    return (
        f"Runs folder: `{str(runs_dir).replace('`', '')}`. Runs on other machines (a cluster bundle's) show here when their run "
        f"folder is on a filesystem this machine shares: start the app with {RUNS_DIR_ENV} set to "
        "that folder. They are followed by their heartbeat, shown as lost when it has been "
        f"silent for {LOST_SECONDS:.0f} s, and Stop reaches them through the folder (stop.request)."
    )


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
