"""The records of a run that still count after a resume: the newest record of a step wins.

A run resumed from `checkpoint-S` trains step S + 1 and on again. The
trainer cuts metrics.jsonl and completions.jsonl back to step S before it
appends (`runfolder.keep_steps_up_to`), but files written before it did, or
read while it was cutting, may still hold a step twice: the record from
before the crash and the one after. Readers pass their records through here:

- `merge_metrics(old, new)`: one metric record per step, in step order; a
  record for an earlier step than the last means a resume, and replaces the
  records from that step on (so no stale point stays on a figure).
- `latest_round(records, step, num_generations)`: the completion records of
  the step's newest generation round (G per group, not 2G).

Both expect records in the order they were written (as read from the file).

Pure standard library: importable without torch or gradio.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping


def _step(record: Mapping) -> float | None:
    value = record.get("step") if isinstance(record, Mapping) else None  # a JSON line may hold any value
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return None
    return value


def merge_metrics(old: list[dict], new: Iterable[dict]) -> list[dict]:
    """Append new metric records, keeping one record per step in step order.

    A record for the step already last is merged into it (the trainer's
    end-of-run summary shares the last step). A record for an earlier step
    means the run was resumed from a checkpoint and logs those steps again:
    the newer records replace the older ones from that step on.
    """
    merged = list(old)
    for record in new:
        if not isinstance(record, Mapping):  # a JSON line may hold any value: only objects are records
            continue
        step = _step(record)
        last = _step(merged[-1]) if merged else None
        if step is None or last is None or step > last:
            merged.append(record)
        elif step == last:
            merged[-1] = {**merged[-1], **record}
        else:
            merged = [r for r in merged if _step(r) is None or _step(r) < step]
            merged.append(record)
    return merged


def _group(record: Mapping) -> float:
    value = record.get("group", 0)
    return value if isinstance(value, (int, float)) and not isinstance(value, bool) else 0


def latest_round(records: Iterable[Mapping], step: int, num_generations: int | None = None) -> list[Mapping]:
    """The completion records of `step`'s newest generation round, in the order they were written.

    A round is written group by group (group 0, 0, ..., 1, 1, ...) in one
    stretch of the file. The step was generated again when its records stop
    and start later (a resume after later steps), go back to an earlier group,
    or - when `num_generations` (G) is known - give a group more than G
    completions (a one-group round written twice in a row).
    """
    rounds: list[list[Mapping]] = []
    previous_index = previous_group = None
    counts: dict[float, int] = {}
    for index, record in enumerate(records):
        if _step(record) != step:
            continue
        group = _group(record)
        if (
            not rounds
            or index != previous_index + 1
            or group < previous_group
            or (num_generations and counts.get(group, 0) >= num_generations)
        ):
            rounds.append([])
            counts = {}
        rounds[-1].append(record)
        counts[group] = counts.get(group, 0) + 1
        previous_index, previous_group = index, group
    return rounds[-1] if rounds else []
