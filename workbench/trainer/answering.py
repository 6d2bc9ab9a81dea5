"""Answering prompts with a model outside TRL's generation: held-out evaluation and the signal check.

`generate(model, tokenizer, prompts, cfg, ...)` renders each prompt as TRL does (`maybe_apply_chat_template`:
a conversation through the chat template with the generation prompt, a text prompt as it is), answers
them in left-padded batches of at most GENERATE_BATCH completions with the run's max_completion_length and
repetition_penalty, greedily or sampled with its temperature, top_p and top_k (top_k 0: no top-k filtering,
as in TRL's generation settings), and returns each completion's text, its ids up to and including the
token that ended it, and whether it was cut at max_completion_length instead. `end_token_ids` are the
ids that end a completion, counted as GRPOTrainer counts them. The caller seeds the random generator and
puts the model in eval mode; torch is imported only when a model answers.
"""

from __future__ import annotations

from dataclasses import dataclass

GENERATE_BATCH = 64  # completions per generate call: bounds memory on many prompts x samples


@dataclass
class Answers:
    """Completions in prompt order (`count` per prompt, in a row): texts, ids up to the end token, truncated."""

    texts: list[str]
    ids: list[list[int]]
    truncated: list[bool]


def end_token_ids(model, tokenizer) -> list[int]:
    """Every id that ends a completion, as GRPOTrainer counts them: the model's eos ids and the tokenizer's."""
    ids = model.generation_config.eos_token_id
    ids = [] if ids is None else [ids] if isinstance(ids, int) else list(ids)
    return ids if tokenizer.eos_token_id in ids else [tokenizer.eos_token_id, *ids]


def generate(model, tokenizer, prompts: list, cfg, end_ids: list[int], device, sample: bool, count: int = 1) -> Answers:
    """`count` completions of each prompt (sampled, or the greedy one), answered with `cfg`'s settings."""
    import torch
    from trl.data_utils import maybe_apply_chat_template

    settings = (
        dict(do_sample=True, temperature=cfg.temperature, top_p=cfg.top_p, top_k=cfg.top_k, num_return_sequences=count)
        if sample
        else dict(do_sample=False, temperature=None, top_p=None, top_k=None)
    )
    # generation pads a finished completion with the pad token: it ends there too
    ends = set(end_ids) | {tokenizer.pad_token_id}
    answers = Answers([], [], [])
    per_call = max(1, GENERATE_BATCH // count)
    for start in range(0, len(prompts), per_call):
        texts = [
            maybe_apply_chat_template({"prompt": p}, tokenizer)["prompt"] for p in prompts[start : start + per_call]
        ]
        # decoder-only: pad on the left so every completion starts at one column
        batch = tokenizer(texts, return_tensors="pt", padding=True, padding_side="left", add_special_tokens=False)
        batch = {key: value.to(device) for key, value in batch.items()}
        with torch.no_grad():
            output = model.generate(
                **batch,
                max_new_tokens=cfg.max_completion_length,
                repetition_penalty=cfg.repetition_penalty,
                eos_token_id=list(end_ids),
                pad_token_id=tokenizer.pad_token_id,
                **settings,
            )
        for row in output[:, batch["input_ids"].shape[1] :].tolist():  # (B * count, T_new): the new tokens
            stop = next((i + 1 for i, token in enumerate(row) if token in ends), None)
            answers.ids.append(row[:stop] if stop else row)
            answers.truncated.append(stop is None)  # no end token: generation stopped at max_completion_length
    answers.texts = tokenizer.batch_decode(answers.ids, skip_special_tokens=True)
    return answers
