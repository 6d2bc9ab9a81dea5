"""A run's metric records as a table: one row per logging step, sorted, numbers only (`metrics_frame`).

Input is what the training process appends to `metrics.jsonl`: a list of dicts, one per logging step, under
TRL's own metric names. The figures (`figures`, `overlay_figures`) and the health notes read this frame; a
page that keeps the frame of the records it has (`metrics_frame(records, previous=...)`) adds one row a step
instead of building the table anew.

No torch or gradio here: importable by the UI process and by notebooks.
"""

from __future__ import annotations

import operator
from collections.abc import Iterable, Mapping

import numpy as np
import pandas as pd

from workbench.spec.run_records import metric_problem, well_formed

STEP = "step"
# Set on a frame whose rows are its records, one each and in their order (nothing dropped or reordered).
ROWS_ARE_RECORDS = "rows_are_records"


def metrics_frame(records: Iterable[Mapping], previous: tuple[list, pd.DataFrame | None] | None = None) -> pd.DataFrame:
    """Metric records as a DataFrame: one row per step, sorted, numbers only.

    A record without `step` takes its position (1-based). When a step appears
    twice the later record wins; records read from a resumed run's file go
    through `resumed.merge_metrics` first, which also drops the later steps
    logged before the resume. Values that are not numbers (None, text) become
    NaN, so a figure shows a gap, not an error; a record of the wrong shape
    (`spec.run_records.metric_problem`: not an object, a step that is not a
    number, a list for a value) is left out.

    `previous` is (records, frame) of an earlier call. When these records are
    those same record objects with more appended, or with the last one
    replaced (how `merge_metrics` grows a run's list), only the rows of the
    new ones are built; otherwise, or when that frame had to drop or reorder
    records, the frame is built anew. Either way the result is the same.
    """
    records = records if isinstance(records, list) else list(records)
    if previous is not None:
        frame = _extend_frame(records, *previous)
        if frame is not None:
            return frame
    return _build_frame(records)


def _build_frame(records: list, first_position: int = 1) -> pd.DataFrame:
    kept = well_formed(records, metric_problem)
    rows = []
    for position, record in enumerate(kept, start=first_position):
        row = dict(record)
        row.setdefault(STEP, position)
        rows.append(row)
    if not rows:
        frame = pd.DataFrame({STEP: pd.Series(dtype="float64")})
        frame.attrs[ROWS_ARE_RECORDS] = not records
        return frame
    frame = pd.DataFrame(rows)
    # Columns pandas already holds as numbers (or booleans) are what to_numeric would give back.
    odd = [name for name, dtype in frame.dtypes.items() if dtype.kind not in "iufb"]
    if odd:
        frame[odd] = frame[odd].apply(pd.to_numeric, errors="coerce")
    frame = frame[frame[STEP].notna()]
    in_order = len(frame) == len(rows) == len(records) and frame[STEP].is_monotonic_increasing and frame[STEP].is_unique
    if not in_order:
        frame = frame.drop_duplicates(subset=STEP, keep="last").sort_values(STEP, kind="stable")
    frame = frame.reset_index(drop=True)
    frame.attrs[ROWS_ARE_RECORDS] = bool(in_order)
    return frame


def _extend_frame(records: list, old_records, old_frame) -> pd.DataFrame | None:
    """The frame of `records` from that of `old_records`, building only the new rows; None when it cannot."""
    if (
        old_frame is None
        or not isinstance(old_records, list)
        or not old_frame.attrs.get(ROWS_ARE_RECORDS)
        or len(old_frame) != len(old_records)
    ):
        return None
    shared = len(old_records)
    if len(records) < shared or (shared and records[shared - 1] is not old_records[shared - 1]):
        shared -= 1  # the last record merged with a newer one for the same step
    if shared < 0 or len(records) < shared or not all(map(operator.is_, records[:shared], old_records[:shared])):
        return None
    if shared == len(records) == len(old_records):
        return old_frame
    added = _build_frame(records[shared:], first_position=shared + 1)
    if not added.attrs[ROWS_ARE_RECORDS] or len(added) != len(records) - shared:
        return None
    if shared and len(added) and added[STEP].iloc[0] <= old_frame[STEP].iloc[shared - 1]:
        return None
    kept = old_frame.iloc[:shared]
    frame = pd.concat([kept, added], ignore_index=True) if shared else added
    frame.attrs[ROWS_ARE_RECORDS] = True
    return frame


def frame_of(records) -> pd.DataFrame:
    """`records` if they already are a metrics frame, else their frame."""
    return records if isinstance(records, pd.DataFrame) else metrics_frame(records)


def metric_steps(frame: pd.DataFrame, metric: str) -> tuple[np.ndarray, np.ndarray]:
    """(steps, values) of one metric with its missing points dropped."""
    if metric not in frame.columns:
        return np.empty(0), np.empty(0)
    column = frame[metric]
    present = column.notna().to_numpy()
    return frame[STEP].to_numpy()[present], column.to_numpy()[present]


def has_metric(frame: pd.DataFrame, metric: str) -> bool:
    return metric in frame.columns and bool(frame[metric].notna().any())


def reward_function_names(frame: pd.DataFrame) -> list[str]:
    """Names of the reward functions logged as `rewards/<func>/mean`, in log order."""
    return [
        col[len("rewards/") : -len("/mean")]
        for col in frame.columns
        if col.startswith("rewards/") and col.endswith("/mean")
    ]
