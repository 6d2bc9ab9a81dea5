"""exact_draws: torch.multinomial's one-sample draws, made faster, must be torch's to the bit.

The oracle is torch itself: the same seed must give the same exponentials, the same tokens and the same
generator state after them (so what is drawn later, dropout included, is unchanged), from any position in
the generator's block; calls it does not cover, and bad probabilities, behave as torch's own call.
"""

from __future__ import annotations

import pytest
import torch

from workbench.trainer import exact_draws


def test_this_torchs_generator_layout_is_verified():
    assert exact_draws.verified()


@pytest.mark.parametrize(("seed", "skip", "count"), [(0, 0, 1), (1, 3, 624), (2, 311, 5000), (3, 1, 49_152 * 2)])
def test_exponentials_and_the_generator_after_them_are_torchs(seed, skip, count):
    torch.manual_seed(seed)
    torch.rand(skip)  # start anywhere in MT19937's block of 624 words
    start = torch.get_rng_state()
    theirs, after = torch.empty(count).exponential_(), torch.get_rng_state()
    torch.set_rng_state(start)
    ours = exact_draws.exponentials(count)
    assert torch.equal(ours, theirs) and torch.equal(torch.get_rng_state(), after)
    assert torch.equal(torch.rand(7), (torch.set_rng_state(after), torch.rand(7))[1])


@pytest.mark.parametrize("shape", [(8, 49_152), (3, 17), (1, 5)])
def test_tokens_drawn_within_the_block_are_torchs_and_so_is_what_comes_after(shape):
    probs = torch.softmax(torch.randn(shape, generator=torch.Generator().manual_seed(4)) * 3, dim=-1)
    torch.manual_seed(9)
    theirs = [torch.multinomial(probs, 1) for _ in range(5)] + [torch.rand(3)]
    torch.manual_seed(9)
    with exact_draws.faster_multinomial():
        assert torch.multinomial.__module__ == exact_draws.__name__
        ours = [torch.multinomial(probs, 1) for _ in range(5)] + [torch.rand(3)]
    assert torch.multinomial.__module__ != exact_draws.__name__  # torch's own again after the block
    assert all(torch.equal(a, b) for a, b in zip(ours, theirs))


def test_calls_it_does_not_cover_are_torchs_own(monkeypatch):
    def refuse(probs):
        raise AssertionError("routed to one_per_row")

    monkeypatch.setattr(exact_draws, "one_per_row", refuse)
    probs = torch.softmax(torch.randn(3, 11, generator=torch.Generator().manual_seed(1)), dim=-1)
    calls = {
        "two samples": lambda: torch.multinomial(probs, 2),
        "a generator": lambda: torch.multinomial(probs, 1, generator=torch.Generator().manual_seed(3)),
        "float64": lambda: torch.multinomial(probs.double(), 1),
        "one row": lambda: torch.multinomial(probs[0], 1),
        "not contiguous": lambda: torch.multinomial(probs.t().contiguous().t(), 1),
        "no rows": lambda: torch.multinomial(probs[:0], 1),
    }
    for name, call in calls.items():
        torch.manual_seed(2)
        theirs = call()
        torch.manual_seed(2)
        with exact_draws.faster_multinomial():
            assert torch.equal(call(), theirs), name


@pytest.mark.parametrize(
    ("probs", "message"),
    [
        (torch.tensor([[0.5, float("nan")]]), "probability tensor contains either `inf`, `nan` or element < 0"),
        (torch.tensor([[0.5, -0.1]]), "probability tensor contains either `inf`, `nan` or element < 0"),
        (torch.tensor([[0.0, 0.0], [0.5, 0.5]]), "invalid multinomial distribution"),
    ],
)
def test_bad_probabilities_are_refused_as_torch_refuses_them(probs, message):
    with pytest.raises(RuntimeError, match="probability tensor|invalid multinomial") as theirs:
        torch.multinomial(probs, 1)
    with exact_draws.faster_multinomial(), pytest.raises(RuntimeError) as ours:
        torch.multinomial(probs, 1)
    assert message in str(ours.value) and message in str(theirs.value)
