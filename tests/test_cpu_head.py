"""cpu_head: TRL's fused LM head computed with whole logits per chunk on a CPU must give TRL's numbers.

The oracle is TRL's own `ChunkedLogProbFunction` on the same tensors: log-probabilities, entropies and the
hidden states' gradient of a loss over both, with temperature, a logit scale and a bias, whether the
log-probabilities are kept for the backward or computed again, in one chunk or several. Where it does not
compute the same thing (soft-capping, a head with gradients, other outputs), TRL's function runs.
"""

from __future__ import annotations

import pytest
import torch
from trl.kernels.chunked_logprob import ChunkedLogProbFunction

from workbench.trainer import cpu_head

TOKENS, HIDDEN, VOCAB = 37, 24, 1000


def head_inputs(bias: bool):
    generator = torch.Generator().manual_seed(0)
    hidden = torch.randn(TOKENS, HIDDEN, generator=generator)
    weight = torch.randn(VOCAB, HIDDEN, generator=generator) * 0.3
    targets = torch.randint(0, VOCAB, (TOKENS,), generator=generator)
    return hidden, weight, torch.randn(VOCAB, generator=generator) if bias else None, targets


def scored(function, hidden, weight, bias, targets, temperature, scale, entropy_weight):
    """Log-probabilities, entropies and the hidden states' gradient of a loss over them (entropy_weight None:
    the loss leaves the entropies out, so their gradient is None, GRPO's usual case; 0 and no log-probabilities:
    a loss of the entropies alone)."""
    hidden = hidden.clone().requires_grad_()
    log_probs, entropy, *_ = function.apply(
        hidden, weight, bias, targets, temperature, 256, None, scale, ("log_probs", "entropy")
    )
    if entropy_weight == 0:
        entropy.sum().backward()
    else:
        loss = (log_probs * torch.linspace(-1, 1, TOKENS)).sum()
        (loss if entropy_weight is None else loss + entropy_weight * entropy.sum()).backward()
    return log_probs.detach(), entropy.detach(), hidden.grad


@pytest.mark.parametrize("layout", ["kept, one chunk", "kept, in chunks", "computed again, in chunks"])
@pytest.mark.parametrize(
    ("temperature", "scale", "bias", "entropy_weight"),
    [(1.0, 1.0, False, None), (0.7, 1.0, False, None), (0.9, 0.5, True, 0.3), (0.8, 1.0, False, 0)],
)
def test_log_probabilities_entropies_and_gradients_are_trls(
    monkeypatch, layout, temperature, scale, bias, entropy_weight
):
    if layout != "kept, one chunk":
        monkeypatch.setattr(cpu_head, "CHUNK_BYTES", 10 * VOCAB * 4)  # 10 positions a chunk: 4 chunks
    if layout == "computed again, in chunks":
        monkeypatch.setattr(cpu_head, "KEEP_BYTES", 0)
    inputs = head_inputs(bias)
    ours = scored(cpu_head.CpuLogProbFunction, *inputs, temperature, scale, entropy_weight)
    trls = scored(ChunkedLogProbFunction, *inputs, temperature, scale, entropy_weight)
    for name, mine, theirs in zip(("log-probabilities", "entropies", "hidden gradient"), ours, trls):
        assert torch.allclose(mine, theirs, atol=2e-5, rtol=1e-5), (name, (mine - theirs).abs().max())
    assert ours[2].abs().sum() > 0


def test_within_scoring_trls_fused_forward_computes_through_this_head_and_only_there():
    from trl.trainer import utils

    hidden, weight, bias, targets = head_inputs(False)
    trls = utils._ChunkedLogProbFunction
    with cpu_head.scoring():
        log_probs, *_ = utils._ChunkedLogProbFunction.apply(
            hidden.requires_grad_(), weight, bias, targets, 1.0, 256, None, 1.0, ("log_probs", "entropy")
        )
        assert type(log_probs.grad_fn).__name__ == "CpuLogProbFunctionBackward"
    assert utils._ChunkedLogProbFunction is trls
    with cpu_head.scoring(entropy=False):  # the reference pass: no entropies, the same log-probabilities
        without = utils._ChunkedLogProbFunction.apply(
            hidden, weight, bias, targets, 1.0, 256, None, 1.0, ("log_probs", "entropy")
        )
    assert without[1] is None and torch.equal(without[0], log_probs.detach())
    with pytest.raises(RuntimeError), cpu_head.scoring():  # put back however the block ends
        raise RuntimeError("a failed forward")
    assert utils._ChunkedLogProbFunction is trls


@pytest.mark.parametrize("case", ["soft-capping", "a trained head", "another output", "autocast", "no positions"])
def test_what_it_does_not_compute_the_same_way_goes_to_trls_function(case):
    from trl.trainer import utils

    hidden, weight, bias, targets = head_inputs(False)
    if case == "no positions":  # a length bucket of masked completions (mask_truncated_completions)
        hidden, targets = hidden[:0], targets[:0]
    softcap = 30.0 if case == "soft-capping" else None
    outputs = ("log_probs", "entropy", "is_top1") if case == "another output" else ("log_probs", "entropy")
    weight.requires_grad_(case == "a trained head")
    with cpu_head.scoring(), torch.autocast("cpu", dtype=torch.bfloat16, enabled=case == "autocast"):
        log_probs, *_ = utils._ChunkedLogProbFunction.apply(
            hidden.requires_grad_(), weight, bias, targets, 1.0, 256, softcap, 1.0, outputs
        )
    assert type(log_probs.grad_fn).__name__ == "ChunkedLogProbFunctionBackward"
