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
come from a generator seeded with `BOOTSTRAP_SEED`: the same samples always give the same spread.
Pure standard library.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from dataclasses import dataclass

BOOTSTRAP_ROUNDS = 1000  # verl's n_bootstrap
BOOTSTRAP_SEED = 42
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


def _std(values: list[float]) -> float:
    mean = sum(values) / len(values)
    return math.sqrt(sum((v - mean) ** 2 for v in values) / len(values))


def bootstrap_std(
    prompts: Sequence[Sequence[Sample]],
    with_majority: bool,
    rounds: int = BOOTSTRAP_ROUNDS,
    seed: int = BOOTSTRAP_SEED,
) -> dict[str, float | None]:
    """`<figure>_std` of each figure: its standard deviation over `rounds` redrawn sample subsets (see above)."""
    rng = random.Random(seed)
    kept = [list(samples) for samples in prompts if samples]
    drawn: dict[str, list[float]] = {name: [] for name in FIGURES}
    for _ in range(rounds if kept else 0):
        subsets = [rng.choices(samples, k=len(samples)) for samples in kept]
        for name, value in point_figures(subsets, with_majority).items():
            if value is not None:
                drawn[name].append(value)
    return {f"{name}_std": (_std(values) if values else None) for name, values in drawn.items()}


def figures_at_k(prompts: Sequence[Sequence[Sample]], with_majority: bool) -> dict[str, float | None]:
    """The three figures and their spreads: `mean_at_k`, `mean_at_k_std`, ... (None where it cannot be had)."""
    found = point_figures(prompts, with_majority)
    spreads = bootstrap_std(prompts, with_majority)
    figures: dict[str, float | None] = {}
    for name in FIGURES:
        figures[name] = found[name]
        figures[f"{name}_std"] = spreads[f"{name}_std"] if found[name] is not None else None
    return figures
