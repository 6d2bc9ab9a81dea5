"""torch.multinomial's draws for one token per row, the same values faster: the packed copy samples with them.

Why: `torch.multinomial(probs, 1)` on a CPU draws one exponential per vocabulary entry and row
(`aten::exponential_`: a serial loop of MT19937 words, a 53-bit double and `log1p` each) and takes the argmax
of `probs / draws`. For the demo's 8 rows x 49,152 tokens that loop is a sizeable share of a decode step. The
same draws come from numpy's MT19937 (its words in C, in bulk) started at the generator's own position, with
the doubles and `log1p` in torch over every core, in less time (benchmarks/bench_decode_variants.py). Every value,
and the generator's state after them, are torch's to the bit, so a seed draws the tokens it drew before.

How: `torch.get_rng_state()` holds the default CPU generator's MT19937 words and position
(CPUGeneratorImplState: seed u64, left i32, seeded i32, next u64, 624 words as u64, then the normal-sample
caches, left as they are). The words and position go into numpy's MT19937, which draws two 32-bit words per
double as torch's `random64()` does; the new position and words are written back with `torch.set_rng_state`.

This ties the sampler to the layout of torch's generator state (read and written only in
workbench/library_compat.py, where the registry's tie checks it at start-up), so `verified()` draws a few thousand
exponentials both ways once a process and compares every value and the state after them; where they differ
(another torch, another layout), `faster_multinomial()` leaves torch.multinomial as it is. Only the default
CPU generator's one-sample draws over float32 rows take this path; anything else is torch's own call. The
swap of `torch.multinomial` is process-wide for the block: generation runs on one thread here.
"""

from __future__ import annotations

import contextlib
import functools
import importlib.util

import torch

from workbench import library_compat


def _twister():
    """(numpy MT19937 at the default CPU generator's position, the generator's state bytes)."""
    import numpy as np

    words, position, state = library_compat.cpu_generator_mt19937()
    twister = np.random.MT19937()
    twister.state = {"bit_generator": "MT19937", "state": {"key": words, "pos": position}}
    return twister, state


def _write_back(twister, state) -> None:
    """The default CPU generator continues where `twister` stopped."""
    library_compat.set_cpu_generator_mt19937(state, twister.state["state"]["key"], twister.state["state"]["pos"])


def exponentials(count: int) -> torch.Tensor:
    """`torch.empty(count).exponential_()`'s float32 values, and the default generator moved on as far."""
    import numpy as np

    twister, state = _twister()
    words = torch.from_numpy(twister.random_raw(2 * count).view(np.int64)).view(-1, 2)
    # random64() = first word << 32 | second; a uniform double from its low 53 bits; then -log1p(-u)
    uniform = ((words[:, 0] << 32) | words[:, 1]).bitwise_and_((1 << 53) - 1).to(torch.float64).mul_(2.0**-53)
    _write_back(twister, state)
    return uniform.neg_().log1p_().neg_().to(torch.float32)


@functools.cache
def verified() -> bool:
    """Whether `exponentials` gives this torch's own values and generator state (checked once a process)."""
    if importlib.util.find_spec("numpy") is None:  # the twister is numpy's
        return False
    saved = torch.get_rng_state()
    try:
        torch.default_generator.manual_seed(20_251_128)  # the CPU generator only, restored below
        torch.empty(5).exponential_()  # start mid-block, at a position other than a fresh seed's
        start = torch.get_rng_state()
        expected, after = torch.empty(4099).exponential_(), torch.get_rng_state()
        torch.set_rng_state(start)
        ours = exponentials(4099)
        return torch.equal(ours, expected) and torch.equal(torch.get_rng_state(), after)
    except Exception:  # any failure here means: not this layout, use torch's own draws
        return False
    finally:
        torch.set_rng_state(saved)


def one_per_row(probs: torch.Tensor) -> torch.Tensor:
    """`torch.multinomial(probs, 1)` for 2-D float32 CPU rows: argmax(probs / exponential draws), its checks included."""
    if not bool((probs.max() < float("inf")) & (probs.min() >= 0)):
        raise RuntimeError("probability tensor contains either `inf`, `nan` or element < 0")
    if bool((probs.sum(1) == 0).any()):
        raise RuntimeError("invalid multinomial distribution (sum of probabilities <= 0)")
    draws = exponentials(probs.numel()).view(probs.shape)
    return torch.div(probs, draws, out=draws).argmax(dim=-1, keepdim=True)


@contextlib.contextmanager
def faster_multinomial():
    """Within the block, torch.multinomial's one-sample draws over float32 CPU rows come from `one_per_row`
    (where `verified()`); everything else is torch's own call."""
    if not verified():
        yield
        return
    torch_multinomial = torch.multinomial

    def multinomial(input, num_samples, replacement=False, *, generator=None, out=None):  # torch's names
        if (
            num_samples == 1
            and generator is None
            and out is None
            and input.dim() == 2
            and input.numel() > 0
            and input.dtype == torch.float32
            and input.device.type == "cpu"
            and input.is_contiguous()
        ):
            return one_per_row(input)
        return torch_multinomial(input, num_samples, replacement, generator=generator, out=out)

    torch.multinomial = multinomial
    try:
        yield
    finally:
        torch.multinomial = torch_multinomial
