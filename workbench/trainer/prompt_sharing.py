"""Log-probabilities of a GRPO batch with each prompt run through the model once (`shared_prompt_pass`).

Why: a GRPO batch holds `num_generations` completions of every prompt, and TRL scores each row as one
sequence, so the policy's forward and backward and the reference pass run every prompt token
`num_generations` times. On a CPU, TRL's fused LM head also projects every position through the
vocabulary, prompt positions included (its compact path is Triton-only), and the backward recomputes
those tiles. Here the rows' shared prompt part runs once per distinct prompt, its key/value cache is
indexed out to the rows, and only the completions (with the prompt's last token, which predicts the
first completion token) run per row, through TRL's own fused head. The demo's rows are 37 prompt and 32
completion tokens in groups of 4; the three passes take about 0.64x the time (benchmarks/bench_speed.py).

The result equals TRL's to float32 rounding: positions are the same (transformers counts them from the
cache's length, TRL's from 0 over the padded row), the same padding is masked, and the head is TRL's
`add_fused_lm_head` with its temperature and scaling. Rows whose prompt is left-padded differ from TRL's
by as much as TRL's own result differs between batch compositions (tests/test_prompt_sharing.py).

When it does not apply, TRL's way runs (`unsupported_reason` says why): gradient checkpointing (its layers
drop the cache), several processes (DDP expects one forward per backward), multimodal inputs, MoE
auxiliary losses, and model types it was not checked on.

Ties to TRL: `GRPOTrainer._get_per_token_logps_and_entropies(model, input_ids, attention_mask,
logits_to_keep, batch_size, compute_entropy, ...)`, whose return value this reproduces, and the fused
forward `model(..., labels=, fused_lm_head=True)` that `add_fused_lm_head` installs, returning
`log_probs` and `entropy` for the positions after the first.
"""

from __future__ import annotations

# Model types whose forward was checked against TRL's with a cache passed in (tests/test_prompt_sharing.py
# runs llama; qwen2 and qwen3 share its cache and position code in transformers 5).
CHECKED_MODEL_TYPES = ("llama", "qwen2", "qwen3")


def unsupported_reason(model_type: str, gradient_checkpointing: bool, num_processes: int) -> str | None:
    """Why the shared prompt pass cannot run for this model and run, or None when it can."""
    if gradient_checkpointing:
        return "gradient_checkpointing: its checkpointed layers drop the prompt's cache"
    if num_processes > 1:
        return f"{num_processes} processes: DDP expects one forward per backward"
    if model_type not in CHECKED_MODEL_TYPES:
        return f"model type {model_type!r} not checked (checked: {', '.join(CHECKED_MODEL_TYPES)})"
    return None


def prompt_groups(prefix_ids, prefix_mask):
    """(first row of each distinct prefix, each row's distinct-prefix index) over the rows' prefixes."""
    import torch

    key = torch.cat([prefix_ids, prefix_mask.to(prefix_ids.dtype)], dim=1)
    distinct, inverse = torch.unique(key, dim=0, return_inverse=True)
    rows = torch.arange(key.size(0), device=key.device)
    # scatter in reverse row order so each distinct prefix keeps its first row
    first = torch.empty(distinct.size(0), dtype=torch.long, device=key.device)
    first.scatter_(0, inverse.flip(0), rows.flip(0))
    return first, inverse


def shared_prompt_logps(model, input_ids, attention_mask, logits_to_keep: int, batch_size: int | None = None,
                        compute_entropy: bool = False, autocast=None):
    """TRL's per-token (log-probabilities, entropies or None) of the last `logits_to_keep` tokens of each row,
    each distinct prompt run once per chunk of `batch_size` rows."""
    import contextlib

    import torch

    autocast = autocast or contextlib.nullcontext
    batch_size = batch_size or input_ids.size(0)
    # the prefix ends one token before the completion: that token's output scores the first completion token
    split = input_ids.size(1) - logits_to_keep - 1
    all_logps, all_entropies = [], []
    for start in range(0, input_ids.size(0), batch_size):
        ids, mask = input_ids[start:start + batch_size], attention_mask[start:start + batch_size]
        first, inverse = prompt_groups(ids[:, :split], mask[:, :split])
        with autocast():
            cache = model(input_ids=ids[first, :split], attention_mask=mask[first, :split], use_cache=True,
                          logits_to_keep=1).past_key_values
            cache.batch_select_indices(inverse)  # each row gets its prompt's keys and values (autograd follows)
            labels = ids[:, split:].masked_fill(mask[:, split:] == 0, -100)
            labels[:, 0] = -100  # the prompt's last token is context, not scored
            outputs = model(input_ids=ids[:, split:], attention_mask=mask, past_key_values=cache, labels=labels,
                            fused_lm_head=True)
        all_logps.append(outputs.log_probs)
        if compute_entropy:
            all_entropies.append(outputs.entropy)
    logps = torch.cat(all_logps, dim=0)
    return logps, torch.cat(all_entropies, dim=0) if compute_entropy else None
