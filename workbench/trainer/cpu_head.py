"""TRL's fused LM head, computed the way a CPU runs it fastest: the shared prompt pass scores through it.

Why: TRL's `ChunkedLogProbFunction` never holds a `[tokens, vocab]` logits tensor. Its forward folds each
projection tile into online-logsumexp statistics, and its backward projects every tile again and turns it
into the logits' gradient, one torch op at a time where there is no Triton. On a GPU that saves memory at
little cost; on a CPU each of those ops is a pass over the tile, and the backward's own projection repeats
the forward's.

Here the head is one matmul and `log_softmax` per chunk of positions, and the chunk's log-probabilities are
kept for the backward (at most `KEEP_BYTES` of them a call: past that, the backward computes them again, as
TRL's does), so the backward is one elementwise pass and one matmul for the hidden states' gradient: faster on a
CPU than TRL's for the reference pass and for the policy's forward and backward, since each tile is projected once
(`.venv/bin/python benchmarks/bench_step_phases.py --head-only` times both).
The log-probabilities and entropies equal TRL's to float32 rounding (the log-sum-exp is summed in another
order), and so do the gradients (tests/test_cpu_head.py).

It takes TRL's place only where it computes the same thing: float32 on a CPU, no autocast, no logit
soft-capping, and only the outputs GRPO asks for (log-probabilities and entropies); anything else goes to
TRL's own function. `scoring()` swaps it in for the duration of one forward call: TRL's fused forward looks
the function up in `trl.trainer.utils` at call time, and the graph keeps the class that ran the forward, so
the backward runs this one's too. A pass that needs no entropies (the reference pass) skips computing them.

Ties to TRL: its fused head's function `.apply(hidden, weight, bias, targets, temperature, chunk_size,
final_logit_softcapping, logit_scale, outputs)`, returning `(log_probs, entropy, log_sum_sq_probs, mean_logits,
is_top1)`, a private module global of `trl.trainer.utils` swapped through `library_compat.trl_lm_head_replaced`
(the registry's tie says why and what happens without it).
"""

from __future__ import annotations

import contextlib

import torch

from workbench import library_compat

# Keep the log-probabilities for the backward while one call's take at most this much (the demo's take 52 MB;
# a pass scores its length buckets in separate calls, and each keeps its own until the backward)
KEEP_BYTES = 256 * 1024 * 1024
# Positions projected at once: a chunk's logits take at most this much
CHUNK_BYTES = 128 * 1024 * 1024
GRPO_OUTPUTS = ("log_probs", "entropy")


def applies(
    hidden: torch.Tensor,
    weight: torch.Tensor,
    bias: torch.Tensor | None,
    softcap: float | None,
    outputs: tuple[str, ...],
) -> bool:
    """Whether this head computes what TRL's would for these arguments."""
    frozen = not weight.requires_grad and (bias is None or not bias.requires_grad)  # LoRA leaves the head alone
    return (
        hidden.device.type == "cpu"
        and hidden.dtype == weight.dtype == torch.float32
        and frozen
        and hidden.shape[0] > 0  # nothing to score (a bucket of masked completions): TRL's returns empties
        and not torch.is_autocast_enabled("cpu")
        and softcap is None
        and set(outputs) <= set(GRPO_OUTPUTS)
    )


def _chunks(positions: int, vocab: int) -> list[slice]:
    step = max(1, CHUNK_BYTES // (vocab * 4))
    return [slice(start, min(start + step, positions)) for start in range(0, positions, step)]


def _log_probs(hidden, weight, bias, scale: float) -> torch.Tensor:
    """log_softmax over the vocabulary of `(hidden @ weight.T + bias) * scale`, as one `[n, vocab]` tensor."""
    logits = hidden @ weight.t() if bias is None else torch.addmm(bias, hidden, weight.t())
    if scale != 1.0:
        logits.mul_(scale)
    return torch.log_softmax(logits, dim=-1)


class CpuLogProbFunction(torch.autograd.Function):
    """Per-token log-probabilities (and entropies) of `(hidden @ weight.T + bias) * logit_scale / temperature`."""

    @staticmethod
    def forward(
        ctx,
        hidden,
        weight,
        bias,
        targets,
        temperature,
        chunk_size,
        final_logit_softcapping=None,
        logit_scale=1.0,
        outputs=GRPO_OUTPUTS,
    ):
        ctx.set_materialize_grads(False)
        scale = logit_scale / temperature
        keep = hidden.requires_grad and hidden.shape[0] * weight.shape[0] * 4 <= KEEP_BYTES
        log_probs, entropies, kept = [], [], []
        for rows in _chunks(hidden.shape[0], weight.shape[0]):
            log_p = _log_probs(hidden[rows], weight, bias, scale)
            log_probs.append(log_p.gather(-1, targets[rows, None]).squeeze(-1))
            if "entropy" in outputs:
                entropies.append(-(log_p.exp() * log_p).sum(-1))
            if keep:
                kept.append(log_p)
        log_probs = torch.cat(log_probs)
        entropy = torch.cat(entropies) if entropies else None
        ctx.kept = kept if keep else None
        ctx.scale = scale
        ctx.save_for_backward(hidden, weight, bias, targets, log_probs if entropy is None else entropy)
        return log_probs, entropy, None, None, None

    @staticmethod
    def backward(ctx, grad_log_probs, grad_entropy, *_):
        hidden, weight, bias, targets, entropy = ctx.saved_tensors
        grad_hidden = torch.empty_like(hidden)
        for index, rows in enumerate(_chunks(hidden.shape[0], weight.shape[0])):
            log_p = ctx.kept[index] if ctx.kept is not None else _log_probs(hidden[rows], weight, bias, ctx.scale)
            p = log_p.exp()
            # d log p_target / dz_j = 1[j = target] - p_j;  d entropy / dz_j = -p_j (log p_j + entropy)
            if grad_log_probs is not None:
                grad = p * -grad_log_probs[rows, None]
                grad.scatter_add_(-1, targets[rows, None], grad_log_probs[rows, None])
            else:
                grad = torch.zeros_like(p)
            if grad_entropy is not None:
                grad.sub_(p * (log_p + entropy[rows, None]) * grad_entropy[rows, None])
            torch.mm(grad, weight, out=grad_hidden[rows])
            if ctx.kept is not None:
                ctx.kept[index] = None  # freed as soon as it is used
        ctx.kept = None
        return grad_hidden.mul_(ctx.scale), None, None, None, None, None, None, None, None


class _Dispatch:
    """TRL's fused head function's stand-in: this head where it applies, TRL's function elsewhere."""

    def __init__(self, trls, entropy: bool):
        self.trls, self.entropy = trls, entropy

    def apply(
        self,
        hidden,
        weight,
        bias,
        targets,
        temperature,
        chunk_size,
        final_logit_softcapping=None,
        logit_scale=1.0,
        outputs=GRPO_OUTPUTS,
    ):
        if not applies(hidden, weight, bias, final_logit_softcapping, outputs):
            return self.trls.apply(
                hidden, weight, bias, targets, temperature, chunk_size, final_logit_softcapping, logit_scale, outputs
            )
        if not self.entropy:  # TRL's head always asks for entropies; the reference pass has no use for them
            outputs = tuple(name for name in outputs if name != "entropy")
        return CpuLogProbFunction.apply(
            hidden, weight, bias, targets, temperature, chunk_size, final_logit_softcapping, logit_scale, outputs
        )


@contextlib.contextmanager
def scoring(entropy: bool = True):
    """TRL's fused LM head computes through this one where it applies, for the duration of the block; without
    `entropy` its entropies are left out (None) there."""
    with library_compat.trl_lm_head_replaced(lambda trls: _Dispatch(trls, entropy)):
        yield
