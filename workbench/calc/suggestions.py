"""Nearest valid alternatives to an invalid GRPO batch configuration.

Each lever of the batch (G, batch, accumulation) is searched on its own for the closest valid value
below and above the current one: num_generations, per_device_train_batch_size,
gradient_accumulation_steps (or steps_per_generation / generation_batch_size
when those are set), the eval batch, and, when GPUs are split between training
and a vLLM server (4 GPUs, 1 serving vLLM, batch 1, G 8), moving GPUs between the two. Every suggestion is
a complete valid Plan, ordered by how small the change is.
"""

from __future__ import annotations

import math

from workbench.calc.rules import MAX_VALUE, Suggestion, build_plan, divisors, trl_errors

MAX_SUGGESTIONS = 8
# How far each search looks: a multiple of the current value, at least this many.
SEARCH_SPAN = 64
# At most this many values tried each way per lever, so absurd inputs still answer in milliseconds.
MAX_PROBES = 400
# GPU splits tried on each side of the current one.
MAX_GPU_MOVES = 8


def change_size(v: dict, changes: dict) -> float:
    """Sum over changed fields of |log(new/old)|; setting or clearing a field counts 1."""
    size = 0.0
    for name, new in changes.items():
        old = v[name]
        if old is None or new is None:
            size += 1.0
        elif name == "vllm_gpus":
            size += abs(new - old) * 0.5  # moving a GPU is one GPU, whatever the split
        else:
            size += abs(math.log(new / old))
    return size


def _describe(v: dict, changes: dict) -> str:
    if "vllm_gpus" in changes:
        moved = changes["vllm_gpus"] - v["vllm_gpus"]
        direction = "from training to the vLLM server" if moved > 0 else "from the vLLM server to training"
        text = (
            f"move {abs(moved)} GPU{'s' if abs(moved) > 1 else ''} {direction}: "
            f"{changes['num_processes']} train, {changes['vllm_gpus']} serve vLLM"
        )
        if "per_device_train_batch_size" in changes:
            text += f", per_device_train_batch_size {v['per_device_train_batch_size']} -> {changes['per_device_train_batch_size']}"
        return text
    parts = []
    for name, new in changes.items():
        parts.append(f"unset {name}" if new is None else f"{name} {v[name]} -> {new}")
    return ", ".join(parts)


def _nearest_valid(v: dict, name: str, lowest: int, highest: int) -> list[int]:
    """The closest valid values of `name` below and above its current value (0, 1 or 2 values)."""
    current = v[name]
    highest = min(highest, MAX_VALUE, current + MAX_PROBES)
    lowest = max(lowest, current - MAX_PROBES)
    found = []
    for candidates in (range(current - 1, lowest - 1, -1), range(current + 1, highest + 1)):
        for value in candidates:
            if not trl_errors({**v, name: value})[0]:
                found.append(value)
                break
    return found


def _nearest_valid_generations(v: dict, gbs: int | None) -> list[int]:
    """The divisors of the generation batch closest to num_generations that TRL accepts (the first fix for 1 x batch 1 with G 8)."""
    options = divisors(gbs) if gbs else None
    if options is None:
        return _nearest_valid(v, "num_generations", 2, max(v["num_generations"] * 4, SEARCH_SPAN))
    current = v["num_generations"]
    below = [g for g in reversed(options) if 2 <= g < current and not trl_errors({**v, "num_generations": g})[0]]
    above = [g for g in options if g > current and not trl_errors({**v, "num_generations": g})[0]]
    return below[:1] + above[:1]


def _candidate_changes(v: dict) -> list[dict]:
    """Change sets to try, one lever at a time (after resolving a both-set conflict)."""
    bases = [{}]
    if v["steps_per_generation"] is not None and v["generation_batch_size"] is not None:
        bases = [{"generation_batch_size": None}, {"steps_per_generation": None}]
    changes = []
    for base in bases:
        w = {**v, **base}
        errors, gbs, _ = trl_errors(w)
        if not errors:
            changes.append(base)
            continue
        # Only search levers that enter a failing rule: the eval rule reads the eval batch, the
        # processes and the eval group size; the others read the training batch.
        eval_failing = any(e.startswith("The global eval batch size") for e in errors)
        train_failing = len(errors) > int(eval_failing)
        levers = []
        if train_failing or (eval_failing and not w["num_generations_eval"]):
            for value in _nearest_valid_generations(w, gbs):
                changes.append({**base, "num_generations": value})
        if train_failing:
            levers.append(("per_device_train_batch_size", 1))
            if w["generation_batch_size"] is not None:
                levers.append(("generation_batch_size", 1))
            elif w["steps_per_generation"] is not None:
                levers.append(("steps_per_generation", 1))
            else:
                levers.append(("gradient_accumulation_steps", 1))
        if eval_failing:
            levers.append(("per_device_eval_batch_size", 1))
            levers.append(("num_generations_eval" if w["num_generations_eval"] else "num_generations", 2))
        if w["vllm_gpus"] == 0:
            levers.append(("num_processes", 1))
        for name, lowest in levers:
            current = w[name] or 1
            highest = max(current * 4, SEARCH_SPAN)
            for value in _nearest_valid(w, name, lowest, highest):
                changes.append({**base, name: value})
        if w["vllm_gpus"] > 0:
            total = w["num_processes"] + w["vllm_gpus"]
            nearby = range(max(0, w["vllm_gpus"] - MAX_GPU_MOVES), min(total - 1, w["vllm_gpus"] + MAX_GPU_MOVES) + 1)
            for served in nearby:
                moved = {"num_processes": total - served, "vllm_gpus": served}
                if served == w["vllm_gpus"]:
                    continue
                if not trl_errors({**w, **moved})[0]:
                    changes.append({**base, **moved})
                    continue
                # Seed 001's second fix: move a GPU and raise the batch to match.
                moved_w = {**w, **moved}
                # Raise only: a larger global batch is what the split lacks.
                bs = moved_w["per_device_train_batch_size"]
                for value in _nearest_valid(moved_w, "per_device_train_batch_size", bs, max(SEARCH_SPAN, 4 * bs)):
                    changes.append({**base, **moved, "per_device_train_batch_size": value})
    return changes


def suggest_fixes(v: dict, limit: int = MAX_SUGGESTIONS) -> list[Suggestion]:
    """Valid plans near the normalised inputs `v`, smallest change first."""
    seen, ranked = set(), []
    for order, changes in enumerate(_candidate_changes(v)):
        key = tuple(sorted(changes.items()))
        if key in seen:
            continue
        seen.add(key)
        ranked.append((change_size(v, changes), order, changes))
    ranked.sort(key=lambda item: (item[0], item[1]))
    return [
        Suggestion(changes=changes, description=_describe(v, changes), plan=build_plan({**v, **changes}))
        for _, _, changes in ranked[:limit]
    ]
