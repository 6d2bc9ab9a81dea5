"""What a tokens.jsonl record is: one recorded completion's values token by token, from one loss computation.

At its logging steps a run records, for each completion of the step's batch, what TRL's `_compute_loss`
computed for each of its tokens (`trainer/token_capture.py` takes them there, without a second forward pass):

    {"step": 2, "round": 2, "index": 5, "group": 1, "micro_batch": 0, "advantage": 0.87,
     "ref": "reference", "ids": [...], "tokens": ["The", " answer", ...],
     "logprob": [...], "ref_logprob": [...], "kl": [...], "entropy": [...], "ratio": null,
     "clipped": [0, 1, ...], "masked": [0, 0, ...]}

- `step`: the optimizer step whose loss computed the values; `round`: the step of the completions.jsonl
  records the completion belongs to (its generation round; equal to `step` on TRL's on-policy defaults,
  earlier when a round is trained on more than once); `index`: its position among that round's records;
  `micro_batch`: which of the step's loss computations it was in (TRL logs the mean of their means).
- `ref`: what `ref_logprob` holds: `reference` (beta > 0: the reference model's) or `old policy` (beta = 0:
  the log-probabilities the ratio is taken against).
- `kl`: TRL's per-token KL term exp(ref - logprob) - (ref - logprob) - 1, null when beta = 0.
- `ratio`: the importance ratio exp(logprob - old logprob) per token, null when the step was on-policy (the
  old log-probabilities are the policy's own, so the ratio is exactly 1 and nothing can be clipped).
- `clipped`: 0, or -1 where the ratio fell under 1 - epsilon with a negative advantage (TRL's low side), 1
  where it rose above 1 + epsilon_high with a positive one (the high side): the tokens behind `clip_ratio/*`.
- `masked`: 1 where the token is outside the loss (a truncated completion with mask_truncated_completions).
- a run that generates with vLLM adds the engine's log-probabilities, their difference to the trainer's and the
  importance-sampling weight TRL applied (`engine_logprob`, `engine_diff`, `is_weight`, `is_mode`:
  workbench/spec/engine_records.py); other runs' records have none of these fields.

Floats are rounded to `DIGITS` significant digits to keep the file small. Pure: no torch, no I/O.
"""

from __future__ import annotations

import math
from typing import Any

from workbench.spec.engine_records import engine_problem
from workbench.spec.run_records import is_number, object_problem, shown

DIGITS = 5
REFERENCE = "reference"
OLD_POLICY = "old policy"
REF_KINDS = (REFERENCE, OLD_POLICY)
CLIP_LOW, CLIP_NONE, CLIP_HIGH = -1, 0, 1
# the per-token lists; those that may be null for a whole record are NULLABLE_LISTS
TOKEN_LISTS = ("ids", "tokens", "logprob", "ref_logprob", "kl", "entropy", "ratio", "clipped", "masked")
NULLABLE_LISTS = ("kl", "ratio")
NUMBER_FIELDS = ("step", "round", "index", "group", "micro_batch", "advantage")


def rounded(value: float | None) -> float | None:
    """`value` to DIGITS significant digits; None for None, NaN or an infinity (JSON has no NaN)."""
    if value is None or not math.isfinite(value):
        return None
    return float(f"{value:.{DIGITS}g}")


def rounded_list(values: list[float] | None) -> list[float | None] | None:
    return None if values is None else [rounded(v) for v in values]


def clip_code(low: bool, high: bool) -> int:
    """The `clipped` value of one token from TRL's is_low_clipped / is_high_clipped."""
    return CLIP_LOW if low else CLIP_HIGH if high else CLIP_NONE


def completion_length(ids: list[int], eos_ids: set[int], pad_id: int | None) -> int:
    """How many of a padded row's completion ids are the completion: up to its first end-of-sequence token
    (included), else up to the padding, else all (a completion cut at max_completion_length)."""
    for position, token in enumerate(ids):
        if token in eos_ids:
            return position + 1
    if pad_id is not None and pad_id not in eos_ids and pad_id in ids:
        return ids.index(pad_id)
    return len(ids)


def token_problem(record: Any) -> str | None:
    """What is wrong with a tokens.jsonl record, or None: numbers where numbers go, a known `ref`, and the
    per-token lists all as long as `ids` (`kl` and `ratio` may be null), and the engine's fields when present."""
    problem = object_problem(record)
    if problem:
        return problem
    for name in NUMBER_FIELDS:
        value = record.get(name)
        if not is_number(value) or not math.isfinite(value):
            return f"{name} is {shown(value)}, not a number"
    if record.get("ref") not in REF_KINDS:
        return f"ref is {shown(record.get('ref'))}, not one of {', '.join(REF_KINDS)}"
    ids = record.get("ids")
    if not isinstance(ids, list):
        return f"ids is {shown(ids)}, not a list"
    for name in TOKEN_LISTS:
        values = record.get(name)
        if values is None and name in NULLABLE_LISTS:
            continue
        if not isinstance(values, list) or len(values) != len(ids):
            return f"{name} is {shown(values)}, not a list of {len(ids)} values (one per token)"
    return engine_problem(record)
