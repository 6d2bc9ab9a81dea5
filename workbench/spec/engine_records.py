"""The generation engine's side of a tokens.jsonl record: its log-probabilities, their difference to the trainer's,
the importance-sampling weight TRL applies, and a step's summary of them.

A run that generates with vLLM (`generation=vllm-server`, `trl-colocate`, `trl-server`) samples from the engine's
copy of the policy, whose numbers differ a little from the trainer's (other kernels, other precision). TRL 1.16
corrects for it: the trainer scores each completion again (`old_per_token_logps`), and the loss of each completion
is multiplied by an importance-sampling weight built from the per-token differences to the engine's
log-probabilities (`sampling_per_token_logps`), as `vllm_importance_sampling_mode` says:

- `sequence_mask` (TRL's default) and `sequence_truncate`: one weight per completion, exp of the sum of its tokens'
  differences; `token_mask` and `token_truncate`: one weight per token, exp of its difference;
- `*_truncate` clamps the weight into [clip_min, clip_max]; `*_mask` sets a weight outside it to 0 (that completion,
  or token, then adds nothing to the loss); a missing bound does not bound its side.

Tokens outside the loss (`masked`) and tokens the engine could not score (null) count as a difference of 0, as in
TRL. Such a run's records carry four more fields (records of other runs have none of them):

    "engine_logprob": [...], "engine_diff": [...], "is_weight": 0.98, "is_mode": "sequence_mask"

- `engine_logprob`: the engine's log-probability of each sampled token (null where it gave none);
- `engine_diff`: the trainer's log-probability of the token when the round was scored (TRL's old log-probabilities,
  the policy's own on an on-policy step) minus the engine's: what the weight is made of;
- `is_weight`: the weight TRL applied, a number (sequence modes) or one per token (token modes); null when the run
  turned the correction off (`vllm_importance_sampling_correction=False`);
- `is_mode`: the mode it was applied under.

`step_metrics(records)` summarises a step's records into the `engine/*` metrics of metrics.jsonl. Pure: no torch,
no I/O.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any

from workbench.spec.run_records import is_number, shown

IS_MODES = ("sequence_mask", "sequence_truncate", "token_mask", "token_truncate")
ENGINE_LISTS = ("engine_logprob", "engine_diff")
ENGINE_FIELDS = (*ENGINE_LISTS, "is_weight", "is_mode")
# the metrics a step's records give (metrics.jsonl names), drawn by insight/figures.py's engine figure
MISMATCH_MEAN = "engine/logprob_mismatch_mean"
MISMATCH_MAX = "engine/logprob_mismatch_max"
WEIGHT_MIN, WEIGHT_MEAN, WEIGHT_MAX = "engine/is_weight_min", "engine/is_weight_mean", "engine/is_weight_max"
MASKED_COMPLETIONS = "engine/masked_completions"


def is_sequence_mode(mode: str) -> bool:
    return mode.startswith("sequence")


def _bounded(weight: float, mode: str, clip_min: float | None, clip_max: float | None) -> float:
    low = -math.inf if clip_min is None else clip_min
    high = math.inf if clip_max is None else clip_max
    if mode.endswith("truncate"):
        return min(max(weight, low), high)
    return 0.0 if weight < low or weight > high else weight


def importance_weight(
    diffs: list[float | None],
    masked: list[int],
    mode: str = "sequence_mask",
    clip_min: float | None = None,
    clip_max: float | None = 3.0,
) -> float | list[float]:
    """The weight TRL 1.16 applies to one completion, from its tokens' `engine_diff` (trainer's minus engine's
    log-probability) and `masked` flags: a number for the sequence modes, one per token for the token modes.
    `clip_min`, `clip_max`: `vllm_importance_sampling_clip_min` / `_max` (TRL's defaults: None, 3.0)."""
    if mode not in IS_MODES:
        raise ValueError(f"vllm_importance_sampling_mode {mode!r} is not one of {', '.join(IS_MODES)}")
    kept = [0.0 if d is None or m or not math.isfinite(d) else d for d, m in zip(diffs, masked)]
    if is_sequence_mode(mode):
        return _bounded(math.exp(sum(kept)), mode, clip_min, clip_max)
    return [_bounded(math.exp(d), mode, clip_min, clip_max) for d in kept]


def has_engine(record: Mapping) -> bool:
    return record.get("engine_logprob") is not None


def _weights(record: Mapping) -> list[float]:
    """The record's weights that act on the loss: its one weight, or those of its tokens in the loss."""
    weight = record.get("is_weight")
    if weight is None:
        return []
    if isinstance(weight, list):
        return [w for w, m in zip(weight, record["masked"]) if w is not None and not m]
    return [weight]


def step_metrics(records: Iterable[Mapping]) -> dict[str, float]:
    """The engine's summary of one step's records: the mean and largest |engine_diff| over the tokens in the loss,
    the weights' min / mean / max, and how many completions a mask mode zeroed (wholly, or in some token).
    Empty when no record has the engine's values (a run that does not generate with vLLM)."""
    records = [r for r in records if has_engine(r)]
    if not records:
        return {}
    gaps = [abs(d) for r in records for d, m in zip(r["engine_diff"], r["masked"]) if d is not None and not m]
    metrics = {MISMATCH_MEAN: sum(gaps) / len(gaps) if gaps else 0.0, MISMATCH_MAX: max(gaps, default=0.0)}
    weights = [w for r in records for w in _weights(r)]
    if weights:
        metrics.update({WEIGHT_MIN: min(weights), WEIGHT_MEAN: sum(weights) / len(weights), WEIGHT_MAX: max(weights)})
        metrics[MASKED_COMPLETIONS] = sum(
            1 for r in records if str(r.get("is_mode", "")).endswith("mask") and 0.0 in _weights(r)
        )
    return metrics


def engine_problem(record: Mapping) -> str | None:
    """What is wrong with a record's engine fields, or None (also when it has none: a run without vLLM)."""
    if not any(name in record for name in ENGINE_FIELDS):
        return None
    n = len(record.get("ids") or [])
    for name in ENGINE_LISTS:
        values = record.get(name)
        if not isinstance(values, list) or len(values) != n or not all(v is None or is_number(v) for v in values):
            return f"{name} is {shown(values)}, not a list of {n} numbers or nulls (one per token)"
    mode = record.get("is_mode")
    if mode not in IS_MODES:
        return f"is_mode is {shown(mode)}, not one of {', '.join(IS_MODES)}"
    weight: Any = record.get("is_weight")
    if weight is None:
        return None
    if is_sequence_mode(mode) and not is_number(weight):
        return f"is_weight is {shown(weight)}, not a number (one weight per completion under {mode})"
    if not is_sequence_mode(mode) and (not isinstance(weight, list) or len(weight) != n):
        return f"is_weight is {shown(weight)}, not a list of {n} weights (one per token under {mode})"
    return None
