"""Log-probabilities of a GRPO batch with each prompt run through the model once (`shared_prompt_pass`).

Why: a GRPO batch holds `num_generations` completions of every prompt, and TRL scores each row as one
sequence, so the policy's forward and backward and the reference pass run every prompt token
`num_generations` times. On a CPU, TRL's fused LM head also projects every position through the
vocabulary, prompt positions included (its compact path is Triton-only), and the backward recomputes
those tiles. Here the rows' shared prompt part runs once per distinct prompt, its key/value cache is
indexed out to the rows, and only the completions (with the prompt's last token, which predicts the
first completion token) run per row, through TRL's own fused head, which on a CPU computes through
`cpu_head` (the same values, without projecting every tile twice). The demo's rows are 37 prompt and 32
completion tokens in groups of 4; the three passes take markedly less time (benchmarks/bench_speed.py).

The result equals TRL's to float32 rounding: positions are the same (transformers counts them from the
cache's length, TRL's from 0 over the padded row), the same padding is masked, and the head is TRL's
`add_fused_lm_head` with its temperature and scaling (on a CPU, `cpu_head`'s log_softmax sums in another
order). Rows whose prompt is left-padded differ from TRL's by as much as TRL's own result differs between
batch compositions (tests/test_prompt_sharing.py).

With `merged_generation`'s copy sampling the round, each distinct prompt is also prefilled once
(`generate_with_shared_prefill`): generate continues from the prompt's cache with the positions it would
have counted itself.

When it does not apply, TRL's way runs (`spec/speed.unsupported_reason` says why): gradient checkpointing (its layers
drop the cache), several processes (DDP expects one forward per backward), multimodal inputs, MoE
auxiliary losses, and model types it was not checked on.

Ties to TRL: `GRPOTrainer._get_per_token_logps_and_entropies(model, input_ids, attention_mask,
logits_to_keep, batch_size, compute_entropy, ...)`, whose return value this reproduces, and the fused
forward `model(..., labels=, fused_lm_head=True)` that `add_fused_lm_head` installs, returning
`log_probs` and `entropy` for the positions after the first.
"""

from __future__ import annotations


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


def length_buckets(lengths: list[int], min_saving: float = 0.2) -> list[list[int]]:
    """Rows split into at most two groups by completion length, each to be padded only to its own longest,
    when that saves at least `min_saving` of the padded tokens (a second forward call costs little); else
    one group of every row in order."""
    order = sorted(range(len(lengths)), key=lambda row: lengths[row])
    whole = len(lengths) * (max(lengths, default=0) + 1)
    best, best_tokens = None, whole
    for cut in range(1, len(order)):
        tokens = cut * (lengths[order[cut - 1]] + 1) + (len(order) - cut) * (lengths[order[-1]] + 1)
        if tokens < best_tokens:
            best, best_tokens = cut, tokens
    if best is None or best_tokens > (1 - min_saving) * whole:
        return [list(range(len(lengths)))]
    return [order[:best], order[best:]]


def shared_prompt_logps(
    model,
    input_ids,
    attention_mask,
    logits_to_keep: int,
    batch_size: int | None = None,
    compute_entropy: bool = False,
    autocast=None,
):
    """TRL's per-token (log-probabilities, entropies or None) of the last `logits_to_keep` tokens of each row,
    each distinct prompt run once per chunk of `batch_size` rows."""
    import torch

    batch_size = batch_size or input_ids.size(0)
    # the prefix ends one token before the completion: that token's output scores the first completion token
    split = input_ids.size(1) - logits_to_keep - 1
    chunks = [
        _chunk_logps(
            model,
            input_ids[start : start + batch_size],
            attention_mask[start : start + batch_size],
            split,
            compute_entropy,
            autocast,
        )
        for start in range(0, input_ids.size(0), batch_size)
    ]
    logps = torch.cat([logps for logps, _ in chunks], dim=0)
    return logps, torch.cat([entropies for _, entropies in chunks], dim=0) if compute_entropy else None


def _chunk_logps(model, ids, mask, split: int, compute_entropy: bool, autocast):
    """One chunk's (log-probabilities, entropies or None): its distinct prompts once, then its completions
    in length buckets, each cut to its longest completion (right padding scores 0, as in TRL)."""
    import contextlib

    import torch
    import torch.nn.functional as F
    from transformers import DynamicCache

    from workbench.trainer import cpu_head

    width = ids.size(1) - split - 1
    first, inverse = prompt_groups(ids[:, :split], mask[:, :split])
    # each completion's end: its last real token (TRL's completions are padded on the right)
    positions = torch.arange(1, width + 1, device=mask.device)
    lengths = (mask[:, split + 1 :] * positions).amax(dim=1).tolist() if width else [0] * ids.size(0)
    logps, entropies, rows = [], [], []
    with (autocast or contextlib.nullcontext)():
        prompts = model(
            input_ids=ids[first, :split], attention_mask=mask[first, :split], use_cache=True, logits_to_keep=1
        ).past_key_values
        for bucket in length_buckets(lengths):
            index = torch.tensor(bucket, device=ids.device)
            end = split + 1 + max(lengths[row] for row in bucket)
            # each row gets its prompt's keys and values (autograd follows the indexing)
            cache = DynamicCache(
                ddp_cache_data=[
                    (layer.keys.index_select(0, inverse[index]), layer.values.index_select(0, inverse[index]))
                    for layer in prompts.layers
                ]
            )
            labels = ids[index, split:end].masked_fill(mask[index, split:end] == 0, -100)
            labels[:, 0] = -100  # the prompt's last token is context, not scored
            with cpu_head.scoring(entropy=compute_entropy):
                outputs = model(
                    input_ids=ids[index, split:end],
                    attention_mask=mask[index, :end],
                    past_key_values=cache,
                    labels=labels,
                    fused_lm_head=True,
                )
            logps.append(F.pad(outputs.log_probs, (0, width - outputs.log_probs.size(1))))
            if compute_entropy:
                entropies.append(F.pad(outputs.entropy, (0, width - outputs.entropy.size(1))))
            rows += bucket
    back = torch.argsort(torch.tensor(rows, device=ids.device))  # the buckets' rows back in the chunk's order
    return torch.cat(logps)[back], torch.cat(entropies)[back] if compute_entropy else None


def generate_with_shared_prefill(model, generate, input_ids, attention_mask=None, **kwargs):
    """`generate(input_ids=, attention_mask=, **kwargs)` with each distinct prompt prefilled once: the cache of
    all but its last token is indexed out to the rows, and generate continues from it (the last prompt token
    and every new token run per row, as before)."""
    import torch

    if attention_mask is None or input_ids.size(1) < 2 or "past_key_values" in kwargs:
        return generate(input_ids=input_ids, attention_mask=attention_mask, **kwargs)
    first, inverse = prompt_groups(input_ids[:, :-1], attention_mask[:, :-1])
    if len(first) == input_ids.size(0):  # no prompt repeats: nothing to share
        return generate(input_ids=input_ids, attention_mask=attention_mask, **kwargs)
    ids, mask = input_ids[first, :-1], attention_mask[first, :-1]
    # generate's own positions (`_prepare_position_ids_for_generation`): counted over the real tokens
    positions = (mask.long().cumsum(-1) - 1).masked_fill(mask == 0, 0)
    with torch.no_grad():
        cache = model(
            input_ids=ids, attention_mask=mask, position_ids=positions, use_cache=True, logits_to_keep=1
        ).past_key_values
    cache.batch_select_indices(inverse)
    return generate(input_ids=input_ids, attention_mask=attention_mask, past_key_values=cache, **kwargs)
