"""Held-out figures over k sampled answers per prompt: mean@k, maj@k and best@k, with bootstrap spreads.

With `eval_pass_k` = k >= 2 the evaluator samples k answers per held-out prompt and scores each
(`Sample`: right or not by the correctness reward, the total reward, the answer its extractor reads). Then:

- `mean_at_k`: mean correctness over the k samples, averaged over prompts;
- `maj_at_k`: the correctness of the majority answer (the answer most samples give, as the correctness
  reward's extractor reads it; a tie goes to the answer of the earliest sample, a sample with no readable
  answer does not vote, and a prompt where none votes counts as wrong), averaged over prompts; None when the
  correctness reward has no extractor;
- `best_at_k`: the best total reward among the k samples, averaged over prompts (a prompt with no finite total
  is left out); on a 0/1 correctness reward alone it equals pass@k with n = k.

Each comes with `<name>_std`, a bootstrap standard deviation **over sample subsets**, as verl's
`bootstrap_metric` draws them: each of `BOOTSTRAP_ROUNDS` rounds draws, for every prompt, k of its k samples
with replacement, and computes the figure averaged over prompts; the spread is the standard deviation of the
rounds' figures (population, numpy's default). The held-out prompts stay fixed, so the spread says how much the
figure would move if the same prompts were sampled again, not how it would move on other prompts. The draws
come from numpy's generator seeded with `BOOTSTRAP_SEED`: the same samples always give the same spread.
Pure: numpy, no torch.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

BOOTSTRAP_ROUNDS = 1000  # verl's n_bootstrap
BOOTSTRAP_SEED = 42
ROUNDS_AT_ONCE = 100
FIGURES = ("mean_at_k", "maj_at_k", "best_at_k")


@dataclass(frozen=True)
class Sample:
    """One sampled answer: right by the correctness reward, its total reward (None: none scored), its answer
    as the correctness reward's extractor reads it (None: unreadable, or no extractor)."""

    correct: bool
    total: float | None = None
    answer: str | None = None


def majority_correct(samples: Sequence[Sample]) -> bool:
    """Whether the answer most of `samples` give is right (ties: the earliest sample's answer wins)."""
    counts: dict[str, int] = {}
    first: dict[str, Sample] = {}
    for sample in samples:
        if sample.answer is None:
            continue
        counts[sample.answer] = counts.get(sample.answer, 0) + 1
        first.setdefault(sample.answer, sample)
    if not counts:
        return False
    # max keeps the first of equal counts, and dicts keep the order answers first appeared in
    winner = max(counts, key=counts.__getitem__)
    return first[winner].correct


def _best_total(samples: Sequence[Sample]) -> float | None:
    totals = [s.total for s in samples if s.total is not None and math.isfinite(s.total)]
    return max(totals) if totals else None


def _average(values: list) -> float | None:
    kept = [v for v in values if v is not None]
    return sum(kept) / len(kept) if kept else None


def point_figures(prompts: Sequence[Sequence[Sample]], with_majority: bool) -> dict[str, float | None]:
    """mean@k, maj@k (None unless `with_majority`) and best@k of each prompt's samples, averaged over prompts."""
    kept = [samples for samples in prompts if samples]
    return {
        "mean_at_k": _average([sum(s.correct for s in samples) / len(samples) for samples in kept]),
        "maj_at_k": _average([float(majority_correct(samples)) for samples in kept]) if with_majority else None,
        "best_at_k": _average([_best_total(samples) for samples in kept]),
    }


def bootstrap_std(
    prompts: Sequence[Sequence[Sample]],
    with_majority: bool,
    rounds: int = BOOTSTRAP_ROUNDS,
    seed: int = BOOTSTRAP_SEED,
) -> dict[str, float | None]:
    """`<figure>_std` of each figure: its standard deviation over `rounds` redrawn sample subsets (see above).

    Drawn with numpy, a hundred rounds at a time: per prompt and round, figures as `point_figures` reads them from the
    draw (maj@k's tie to the answer drawn first), then averaged over the prompts of the round.
    """
    import numpy as np

    rng = np.random.default_rng(seed)
    by_count: dict[int, list[Sequence[Sample]]] = {}
    for samples in prompts:
        if samples:
            by_count.setdefault(len(samples), []).append(samples)
    per_prompt: dict[str, list] = {name: [] for name in FIGURES}  # each: (rounds, prompts) arrays
    for k, group in by_count.items():
        # a hundred rounds at a time: the draws of every round at once would hold rounds x prompts x k numbers
        chunks: dict[str, list] = {name: [] for name in FIGURES}
        for start in range(0, rounds, ROUNDS_AT_ONCE):
            drawn = rng.integers(0, k, size=(min(ROUNDS_AT_ONCE, rounds - start), len(group), k))
            for name, values in _drawn_figures(group, drawn, with_majority).items():
                chunks[name].append(values)
        for name, parts in chunks.items():
            if parts:
                per_prompt[name].append(np.concatenate(parts, axis=0))
    spreads: dict[str, float | None] = {}
    for name, parts in per_prompt.items():
        if not parts or (name == "maj_at_k" and not with_majority):
            spreads[f"{name}_std"] = None
            continue
        values = np.concatenate(parts, axis=1)
        kept = ~np.isnan(values)
        if not kept.any():
            spreads[f"{name}_std"] = None
            continue
        # a prompt with no finite total is left out of best@k, in every round alike
        figure = np.where(kept, values, 0.0).sum(axis=1) / kept.sum(axis=1)
        spreads[f"{name}_std"] = float(figure.std())
    return spreads


def _drawn_figures(group: list[Sequence[Sample]], drawn, with_majority: bool) -> dict:
    """Per round and prompt of `group` (prompts of k samples each), each figure of the samples `drawn` picks
    ((rounds, prompts, k) indices); NaN where a figure has no value (best@k without a finite total)."""
    import numpy as np

    k = drawn.shape[-1]
    correct = np.array([[s.correct for s in samples] for samples in group], dtype=float)
    totals = np.array(
        [[s.total if s.total is not None and math.isfinite(s.total) else np.nan for s in samples] for samples in group]
    )
    rows = np.arange(len(group))[None, :, None]
    picked_right, picked_total = correct[rows, drawn], totals[rows, drawn]
    has_total = ~np.isnan(picked_total).all(axis=-1)
    best = np.where(has_total, np.nanmax(np.where(np.isnan(picked_total), -np.inf, picked_total), axis=-1), np.nan)
    figures = {"mean_at_k": picked_right.mean(axis=-1), "best_at_k": best}
    if with_majority:
        figures["maj_at_k"] = _drawn_majority(group, drawn, picked_right, k)
    return figures


def _drawn_majority(group, drawn, picked_right, k: int):
    """maj@k per round and prompt: the answer with most votes among those drawn, a tie to the one drawn first,
    right as the first drawn sample with it is; wrong where no drawn sample has a readable answer."""
    import numpy as np

    codes = np.full((len(group), k), -1)
    for p, samples in enumerate(group):
        seen: dict[str, int] = {}
        for j, sample in enumerate(samples):
            if sample.answer is not None:
                codes[p, j] = seen.setdefault(sample.answer, len(seen))
    picked = codes[np.arange(len(group))[None, :, None], drawn]  # (rounds, prompts, k) answer codes
    best_key = np.full(picked.shape[:2], -1)
    best_right = np.zeros(picked.shape[:2])
    for code in range(k):
        has = picked == code
        votes = has.sum(axis=-1)
        first = np.where(has.any(axis=-1), has.argmax(axis=-1), k)
        key = np.where(votes > 0, votes * (k + 1) + (k - first), -1)  # more votes first, then drawn earlier
        right = np.take_along_axis(picked_right, np.minimum(first, k - 1)[..., None], axis=-1)[..., 0]
        better = key > best_key
        best_key, best_right = np.where(better, key, best_key), np.where(better, right, best_right)
    return best_right


def figures_at_k(prompts: Sequence[Sequence[Sample]], with_majority: bool) -> dict[str, float | None]:
    """The three figures and their spreads: `mean_at_k`, `mean_at_k_std`, ... (None where it cannot be had)."""
    found = point_figures(prompts, with_majority)
    spreads = bootstrap_std(prompts, with_majority)
    figures: dict[str, float | None] = {}
    for name in FIGURES:
        figures[name] = found[name]
        figures[f"{name}_std"] = spreads[f"{name}_std"] if found[name] is not None else None
    return figures
