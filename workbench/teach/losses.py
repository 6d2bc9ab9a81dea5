"""The GRPO loss written out: per-token policy loss, the k3 KL term, and the
four ways TRL 1.16 turns a (B, T) grid of per-token losses into one number.

These are the formulas of `GRPOTrainer._compute_loss` in TRL 1.16.0
(`trl/trainer/grpo_trainer.py`) without vLLM, entropy mask or off-policy
mask, with the two knobs the published variants turn: `epsilon_high` (DAPO's
clip-higher: the ratio may rise to 1 + epsilon_high before it is clipped) and
`importance_sampling_level="sequence"` (GSPO: one ratio per completion, the
exponential of its mean token log-ratio), as plain torch functions so a notebook can compute, print and plot each
piece. `tests/test_losses.py` checks them against the loss TRL itself computes
and logs for the same batch, so a TRL upgrade that changes a formula fails a
test instead of silently making the notebook wrong.

Shapes: B completions (rows), T completion positions (columns, right-padded);
`completion_mask` is 1 on real completion tokens and 0 on padding.

    per_token_logps = completion_logps(model, prompt_ids, prompt_mask, completion_ids, completion_mask)
    parts = compute_loss(per_token_logps, advantages, completion_mask, loss_type="grpo", beta=0.04,
                         ref_per_token_logps=ref_logps, max_completion_length=32)
    parts.loss, parts.policy_term, parts.kl_term
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from workbench.errors import WorkbenchError

# The four aggregations this module reproduces, in the order the notebook
# shows them. TRL also has cispo / sapo / vespo / luspo; they change the
# per-token loss itself, not only its normalisation, and are left out.
LOSS_TYPES = ("grpo", "bnpo", "dr_grpo", "dapo")

IMPORTANCE_SAMPLING_LEVELS = ("token", "sequence")

LOSS_TYPE_HELP = {
    "grpo": "mean over completions of each completion's mean token loss (per-sequence, as in the GRPO paper)",
    "bnpo": "sum of all token losses / number of completion tokens in the micro-batch (global token mean)",
    "dr_grpo": "sum of all token losses / (completions x max_completion_length) (a constant denominator)",
    "dapo": "sum of all token losses / completion tokens in the whole generation batch (TRL's default)",
}


class LossInputError(WorkbenchError):
    """A loss argument that cannot work; the message names the field, the rule and a fix."""


@dataclass
class LossParts:
    """One micro-batch's loss as TRL returns it, split into its two terms.

    `loss = policy_term + beta * kl_term` (aggregation is linear, so the two
    terms can be aggregated separately). `loss` keeps the autograd graph;
    `kl_mean` is TRL's `kl` metric (token mean over the micro-batch) and is
    None when beta is 0, as in TRL, which then logs no `kl` at all.
    """

    loss: torch.Tensor
    policy_term: torch.Tensor
    kl_term: torch.Tensor
    kl_mean: float | None
    per_token_loss: torch.Tensor  # (B, T) policy + beta * kl, before aggregation ((B, 1) at sequence level, beta 0)

    def as_floats(self) -> dict[str, float | None]:
        return {
            "loss": float(self.loss.detach()),
            "policy_term": float(self.policy_term.detach()),
            "kl_term": float(self.kl_term.detach()),
            "kl_mean": self.kl_mean,
        }


def check_loss_type(loss_type: str) -> None:
    if loss_type not in LOSS_TYPES:
        raise LossInputError(
            f"loss_type: {loss_type!r} is not one of {', '.join(LOSS_TYPES)}; "
            f"pick one of those (the other TRL loss types change the per-token loss and are not covered here)"
        )


def completion_logps(
    model,
    prompt_ids: torch.Tensor,
    prompt_mask: torch.Tensor,
    completion_ids: torch.Tensor,
    completion_mask: torch.Tensor,
    temperature: float = 1.0,
) -> torch.Tensor:
    """Log-probability of each completion token under `model`, shape (B, T).

    The logits at position i predict token i+1, so the T completion tokens are
    scored by the T logits just before them. TRL divides the logits by the
    sampling temperature before the softmax; so do we.
    """
    input_ids = torch.cat([prompt_ids, completion_ids], dim=1)
    attention_mask = torch.cat([prompt_mask, completion_mask], dim=1)
    num_completion_tokens = completion_ids.size(1)
    logits = model(input_ids=input_ids, attention_mask=attention_mask).logits  # (B, P+T, V)
    logits = logits[:, -num_completion_tokens - 1 : -1, :].float() / temperature  # (B, T, V)
    logps = torch.log_softmax(logits, dim=-1)
    return logps.gather(-1, completion_ids.unsqueeze(-1)).squeeze(-1)  # (B, T)


def k3_kl(per_token_logps: torch.Tensor, ref_per_token_logps: torch.Tensor) -> torch.Tensor:
    """Per-token KL(policy || reference) estimate `exp(ref - logp) - (ref - logp) - 1`.

    Schulman's k3 estimator: never negative, 0 where the two models agree.
    """
    delta = ref_per_token_logps - per_token_logps
    return torch.exp(delta) - delta - 1


def importance_ratio(
    per_token_logps: torch.Tensor,
    old_per_token_logps: torch.Tensor,
    completion_mask: torch.Tensor | None = None,
    importance_sampling_level: str = "token",
) -> torch.Tensor:
    """The policy ratio new / old: per token (B, T), or per completion (B, 1) at the sequence level.

    At the sequence level (GSPO) every token of a completion shares one ratio,
    `exp(mean of its token log-ratios)`: the geometric mean of the token
    ratios, so a long completion's ratio does not run away.
    """
    log_ratio = per_token_logps - old_per_token_logps
    if importance_sampling_level == "token":
        return torch.exp(log_ratio)
    if importance_sampling_level != "sequence":
        raise LossInputError(
            f"importance_sampling_level: {importance_sampling_level!r} is not one of "
            f"{', '.join(IMPORTANCE_SAMPLING_LEVELS)}; use token, or sequence for GSPO"
        )
    if completion_mask is None:
        raise LossInputError(
            "completion_mask: the sequence-level ratio averages over each completion's real "
            "tokens, so it needs the completion mask; pass it"
        )
    mask = completion_mask.to(log_ratio.dtype)
    return torch.exp((log_ratio * mask).sum(-1) / mask.sum(-1).clamp(min=1.0)).unsqueeze(-1)


def per_token_policy_loss(
    per_token_logps: torch.Tensor,
    advantages: torch.Tensor,
    old_per_token_logps: torch.Tensor | None = None,
    epsilon_low: float = 0.2,
    epsilon_high: float | None = None,
    delta: float | None = None,
    completion_mask: torch.Tensor | None = None,
    importance_sampling_level: str = "token",
) -> torch.Tensor:
    """The clipped surrogate `-min(ratio * A, clip(ratio, 1-eps_low, 1+eps_high) * A)`.

    Shape (B, T) at the token level, (B, 1) at the sequence level (one value
    per completion, which aggregation spreads over its tokens as TRL does).
    With one iteration per generation round TRL does not compute the old
    log-probs and uses `per_token_logps.detach()`: the ratio is exactly 1 in
    value (so each token's loss is -A, and epsilon, epsilon_high and the
    sequence level change nothing) while its gradient is still d logp, which
    is the policy gradient.
    """
    epsilon_high = epsilon_low if epsilon_high is None else epsilon_high
    if old_per_token_logps is None:
        old_per_token_logps = per_token_logps.detach()
    if advantages.dim() == 1:
        advantages = advantages.unsqueeze(1)  # (B, 1): one advantage per completion, shared by its tokens
    ratio = importance_ratio(per_token_logps, old_per_token_logps, completion_mask, importance_sampling_level)
    clipped_ratio = torch.clamp(ratio, 1 - epsilon_low, 1 + epsilon_high)
    if delta is not None:  # TRL's optional two-sided clipping of the unclipped ratio
        ratio = torch.clamp(ratio, max=delta)
    return -torch.min(ratio * advantages, clipped_ratio * advantages)


def aggregate(
    per_token_loss: torch.Tensor,
    completion_mask: torch.Tensor,
    loss_type: str,
    max_completion_length: int | None = None,
    num_items_in_batch: int | float | torch.Tensor | None = None,
    gradient_accumulation_steps: int = 1,
    steps_per_generation: int | None = None,
    num_processes: int = 1,
) -> torch.Tensor:
    """One micro-batch's (B, T) token losses -> the scalar TRL returns for it.

    The value is already divided for gradient accumulation, as in TRL: summing
    it over the micro-batches of one optimizer step gives the logged `loss`.
    `num_items_in_batch` (dapo only) is the number of completion tokens in the
    whole generation batch across processes; it defaults to this micro-batch's
    own count, which is right when the micro-batch is the whole batch.
    """
    check_loss_type(loss_type)
    mask = completion_mask.to(per_token_loss.dtype)
    masked = per_token_loss * mask
    if loss_type == "grpo":
        loss = (masked.sum(-1) / mask.sum(-1).clamp(min=1.0)).mean()
        return loss / gradient_accumulation_steps
    if loss_type == "bnpo":
        return masked.sum() / mask.sum().clamp(min=1.0) / gradient_accumulation_steps
    if loss_type == "dr_grpo":
        if not max_completion_length or max_completion_length < 1:
            raise LossInputError(
                f"max_completion_length: dr_grpo divides by completions x max_completion_length, "
                f"so it needs a positive max_completion_length (got {max_completion_length!r}); "
                f"pass the value the run was configured with"
            )
        return masked.sum() / (per_token_loss.size(0) * max_completion_length) / gradient_accumulation_steps
    # dapo: the token count of the whole generation batch, rescaled to one
    # accumulation window so the micro-batch values add up to sum / tokens.
    steps_per_generation = steps_per_generation or gradient_accumulation_steps
    if num_items_in_batch is None:
        num_items_in_batch = mask.sum() * steps_per_generation * num_processes
    num_items = torch.as_tensor(num_items_in_batch, dtype=per_token_loss.dtype)
    normalizer = num_items.clamp(min=1.0) / num_processes
    normalizer = normalizer * gradient_accumulation_steps / steps_per_generation
    return masked.sum() / normalizer


def token_weights(
    completion_mask: torch.Tensor,
    loss_type: str,
    max_completion_length: int | None = None,
) -> torch.Tensor:
    """How much each token counts in the loss of a batch taken as a whole, shape (B, T).

    `aggregate(l, mask, loss_type) == (l * token_weights(mask, loss_type)).sum()`
    with one micro-batch. Under `grpo` a completion of n tokens gives each token
    1/(B n): every completion weighs the same in total. Under the other three a
    token weighs the same wherever it is, so a long completion weighs more.
    """
    check_loss_type(loss_type)
    mask = completion_mask.float()
    num_rows = mask.size(0)
    if loss_type == "grpo":
        return mask / mask.sum(-1, keepdim=True).clamp(min=1.0) / num_rows
    if loss_type == "dr_grpo":
        if not max_completion_length or max_completion_length < 1:
            raise LossInputError(
                f"max_completion_length: dr_grpo needs a positive max_completion_length "
                f"(got {max_completion_length!r}); pass the value the run was configured with"
            )
        return mask / (num_rows * max_completion_length)
    return mask / mask.sum().clamp(min=1.0)  # bnpo and dapo agree on a single micro-batch


def compute_loss(
    per_token_logps: torch.Tensor,
    advantages: torch.Tensor,
    completion_mask: torch.Tensor,
    loss_type: str = "dapo",
    beta: float = 0.0,
    ref_per_token_logps: torch.Tensor | None = None,
    old_per_token_logps: torch.Tensor | None = None,
    epsilon_low: float = 0.2,
    epsilon_high: float | None = None,
    max_completion_length: int | None = None,
    num_items_in_batch: int | float | torch.Tensor | None = None,
    gradient_accumulation_steps: int = 1,
    steps_per_generation: int | None = None,
    num_processes: int = 1,
    importance_sampling_level: str = "token",
) -> LossParts:
    """TRL's loss for one micro-batch: clipped policy loss plus beta x k3 KL, aggregated by loss_type.

    TRL adds `beta * kl` to every token's policy loss before aggregating, so
    the KL term is normalised exactly like the policy term (older TRL releases
    did not do this, which is why its loss_type is a choice).
    """
    check_loss_type(loss_type)
    if beta < 0:
        raise LossInputError(f"beta: must be >= 0 (got {beta}); use 0 for no KL term or a small value such as 0.04")
    if beta != 0.0 and ref_per_token_logps is None:
        raise LossInputError(
            f"ref_per_token_logps: beta={beta} adds a KL term, which needs the reference model's "
            f"log-probs; pass them, or set beta=0"
        )
    policy = per_token_policy_loss(
        per_token_logps,
        advantages,
        old_per_token_logps,
        epsilon_low,
        epsilon_high,
        completion_mask=completion_mask,
        importance_sampling_level=importance_sampling_level,
    )
    kl = k3_kl(per_token_logps, ref_per_token_logps) if beta != 0.0 else torch.zeros_like(per_token_logps)
    settings = dict(
        completion_mask=completion_mask,
        loss_type=loss_type,
        max_completion_length=max_completion_length,
        num_items_in_batch=num_items_in_batch,
        gradient_accumulation_steps=gradient_accumulation_steps,
        steps_per_generation=steps_per_generation,
        num_processes=num_processes,
    )
    per_token_loss = policy + beta * kl
    kl_mean = None
    if beta != 0.0:
        mask = completion_mask.to(kl.dtype)
        kl_mean = float((kl.detach() * mask).sum() / mask.sum().clamp(min=1.0))
    return LossParts(
        loss=aggregate(per_token_loss, **settings),
        policy_term=aggregate(policy, **settings),
        kl_term=aggregate(kl, **settings),
        kl_mean=kl_mean,
        per_token_loss=per_token_loss,
    )


def compare_loss_types(
    per_token_logps: torch.Tensor,
    advantages: torch.Tensor,
    completion_mask: torch.Tensor,
    max_completion_length: int,
    beta: float = 0.0,
    ref_per_token_logps: torch.Tensor | None = None,
    loss_types: tuple[str, ...] = LOSS_TYPES,
) -> list[dict]:
    """The same whole batch under each loss type: one row per type with loss, policy and KL terms."""
    rows = []
    for loss_type in loss_types:
        parts = compute_loss(
            per_token_logps,
            advantages,
            completion_mask,
            loss_type=loss_type,
            beta=beta,
            ref_per_token_logps=ref_per_token_logps,
            max_completion_length=max_completion_length,
        )
        rows.append({"loss_type": loss_type, **parts.as_floats(), "rule": LOSS_TYPE_HELP[loss_type]})
    return rows


def clip_fractions(
    ratio: torch.Tensor,
    advantages: torch.Tensor,
    completion_mask: torch.Tensor,
    epsilon_low: float = 0.2,
    epsilon_high: float | None = None,
) -> dict[str, float]:
    """TRL's `clip_ratio/low_mean`, `high_mean` and `region_mean`: the share of tokens whose gradient the clip stops.

    A token is clipped low when its ratio fell under 1 - epsilon_low with a
    negative advantage, high when it rose over 1 + epsilon_high with a positive
    one. At the sequence level (`ratio` of shape (B, 1)) TRL counts completions, not tokens.
    """
    epsilon_high = epsilon_low if epsilon_high is None else epsilon_high
    if advantages.dim() == 1:
        advantages = advantages.unsqueeze(1)
    low = (ratio < 1 - epsilon_low) & (advantages < 0)
    high = (ratio > 1 + epsilon_high) & (advantages > 0)

    def share(flags: torch.Tensor) -> float:
        if flags.shape[1] == 1:
            return float(flags.float().mean())
        mask = completion_mask.to(torch.float32)
        return float((flags.float() * mask).sum() / mask.sum().clamp(min=1.0))

    return {"low_mean": share(low), "high_mean": share(high), "region_mean": share(low | high)}


# The knobs of the published variants, beside plain GRPO clipping, as the notebook compares them.
VARIANTS = {
    "clip 0.2 (GRPO)": dict(epsilon_low=0.2, epsilon_high=None, importance_sampling_level="token"),
    "clip-higher 0.2 / 0.28 (DAPO)": dict(epsilon_low=0.2, epsilon_high=0.28, importance_sampling_level="token"),
    "sequence ratio, clip 3e-4 / 4e-4 (GSPO)": dict(
        epsilon_low=3e-4, epsilon_high=4e-4, importance_sampling_level="sequence"
    ),
}


def compare_variants(
    per_token_logps: torch.Tensor,
    old_per_token_logps: torch.Tensor,
    advantages: torch.Tensor,
    completion_mask: torch.Tensor,
    loss_type: str = "grpo",
    max_completion_length: int | None = None,
) -> list[dict]:
    """One off-policy batch under each of `VARIANTS`: its loss and the share of tokens (or completions) clipped."""
    rows = []
    for name, knobs in VARIANTS.items():
        parts = compute_loss(
            per_token_logps,
            advantages,
            completion_mask,
            loss_type=loss_type,
            old_per_token_logps=old_per_token_logps,
            max_completion_length=max_completion_length,
            **knobs,
        )
        ratio = importance_ratio(
            per_token_logps, old_per_token_logps, completion_mask, knobs["importance_sampling_level"]
        )
        clipped = clip_fractions(ratio, advantages, completion_mask, knobs["epsilon_low"], knobs["epsilon_high"])
        rows.append(
            {"variant": name, "loss": float(parts.loss.detach()), **{f"clip_{k}": v for k, v in clipped.items()}}
        )
    return rows
