"""The signal check's probe: sample a few groups from the base model and score them as a run would.

`probe_signal(cfg, groups)` loads the run's base model (no adapter) the way training does, takes
`groups` prompts from the run's training rows (shuffled with the run's seed, as the trainer's sampler
draws them), generates `num_generations` completions for each in one batched `generate` with the run's
temperature, top_p, top_k, repetition_penalty and max_completion_length, scores them with the run's
reward functions called exactly as TRL calls them (`prompts`, `completions` as assistant messages when
the prompts are conversations, `completion_ids`, every other column of the row), and returns
`spec.signal_check.SignalReport`. It lives beside the training code because it must build the data and
the rewards as training does; it runs in a process of its own (`python -m workbench check-signal`,
which the Setup tab starts in the background), never in the dashboard.
"""

from __future__ import annotations

import math
from pathlib import PurePath

from workbench.spec.config import (
    RunConfig,
    correctness_reward_for,
    data_field,
    reward_names_for,
    reward_weights_for,
)
from workbench.spec.rewards import call_as_trl
from workbench.spec.signal_check import GroupScores, SignalReport, signal_report

DEFAULT_GROUPS = 8
GENERATE_BATCH = 64  # completions per generate call: bounds memory on a large num_generations x groups


def probe_signal(cfg: RunConfig, groups: int = DEFAULT_GROUPS) -> SignalReport:
    """The signal report of `groups` prompts x cfg.num_generations completions of the base model."""
    import torch

    from workbench.trainer.training import load_dataset_for, load_model_and_tokenizer

    torch.manual_seed(cfg.seed)
    model, tokenizer = load_model_and_tokenizer(cfg)
    device = "cuda" if torch.cuda.is_available() and cfg.device != "cpu" else "cpu"
    model = model.to(device).eval()
    dataset = load_dataset_for(cfg, bool(getattr(tokenizer, "chat_template", None)))
    rows = [dict(row) for row in dataset.shuffle(seed=cfg.seed).select(range(min(groups, len(dataset))))]
    g = cfg.num_generations
    batch_rows = [row for row in rows for _ in range(g)]  # each prompt g times, as TRL repeats it
    texts, ids, truncated = generate(cfg, model, tokenizer, [row["prompt"] for row in batch_rows], device)
    per_reward = score_rewards(cfg, batch_rows, texts, ids)
    totals = weighted_totals(per_reward, reward_weights_for(cfg)[:len(per_reward)])
    correct_name = correctness_reward_for(cfg)
    correctness = per_reward.get(correct_name) if correct_name else None
    scored = [GroupScores(totals=totals[i * g:(i + 1) * g], lengths=[len(x) for x in ids[i * g:(i + 1) * g]],
                          truncated=truncated[i * g:(i + 1) * g],
                          correctness=correctness[i * g:(i + 1) * g] if correctness is not None else None)
              for i in range(len(rows))]
    return signal_report(scored, run_label(cfg), correct_name)


def run_label(cfg: RunConfig) -> str:
    """How the verdict names the run: "gsm8k (gsm8k_sample) on smollm2-135m-instruct"."""
    data = data_field(cfg)[1].strip().rstrip("/")
    task = f"{cfg.task} ({PurePath(data).name})" if data else cfg.task
    return f"{task} on {PurePath(cfg.model.rstrip('/')).name or cfg.model}"


def prompt_text(tokenizer, prompt) -> str:
    """What the model receives: a conversation through the chat template with the generation prompt (as
    TRL renders it), a text prompt as it is (the data mapping already applied the run's chat_template)."""
    if isinstance(prompt, list):
        return tokenizer.apply_chat_template(prompt, tokenize=False, add_generation_prompt=True)
    return prompt


def generate(cfg: RunConfig, model, tokenizer, prompts: list, device: str) -> tuple[list, list, list]:
    """(completion texts, completion ids up to and including the first EOS, whether each was cut at
    max_completion_length) for each prompt, sampled with the run's settings."""
    import torch

    tokenizer.padding_side = "left"  # decoder-only: pad on the left so every completion starts at one column
    settings = dict(do_sample=True, temperature=cfg.temperature, top_p=cfg.top_p, top_k=cfg.top_k,
                    repetition_penalty=cfg.repetition_penalty, max_new_tokens=cfg.max_completion_length,
                    pad_token_id=tokenizer.pad_token_id, eos_token_id=tokenizer.eos_token_id)
    texts, ids, truncated = [], [], []
    for start in range(0, len(prompts), GENERATE_BATCH):
        chunk = [prompt_text(tokenizer, p) for p in prompts[start:start + GENERATE_BATCH]]
        inputs = tokenizer(chunk, return_tensors="pt", padding=True, add_special_tokens=False).to(device)
        with torch.inference_mode():
            output = model.generate(**inputs, **settings)
        for row in output[:, inputs["input_ids"].shape[1]:].tolist():  # (B, T_new) ids after the prompts
            end = row.index(tokenizer.eos_token_id) + 1 if tokenizer.eos_token_id in row else None
            kept = row[:end] if end else row  # no EOS: no padding either, every token was generated
            ids.append(kept)
            truncated.append(end is None)  # no EOS: generation stopped at max_completion_length
            texts.append(tokenizer.decode(kept, skip_special_tokens=True))
    return texts, ids, truncated


def score_rewards(cfg: RunConfig, rows: list[dict], texts: list[str], ids: list[list[int]]) -> dict[str, list]:
    """Each reward function's scores, by name, called as TRL calls it. A reward model (a str in TRL's
    reward_funcs) is left out: it is not loaded for the check."""
    from transformers import TrainerState

    from workbench.trainer.training import build_reward_funcs

    funcs = [f for f in build_reward_funcs(cfg) if callable(f)]
    # step 0 of a run, and TRL's logging hooks, which the check has no table for
    return call_as_trl(zip(reward_names_for(cfg), funcs), rows, texts, ids, trainer_state=TrainerState(),
                       log_extra=lambda column, values: None, log_metric=lambda name, value: None)


def weighted_totals(per_reward: dict[str, list], weights: list[float]) -> list[float | None]:
    """TRL's total per completion: the weighted sum of the rewards that scored it (None and NaN skipped),
    None when none did."""
    columns = list(per_reward.values())
    totals = []
    for i in range(len(columns[0]) if columns else 0):
        scored = [(col[i], w) for col, w in zip(columns, weights)
                  if col[i] is not None and not (isinstance(col[i], float) and math.isnan(col[i]))]
        totals.append(sum(v * w for v, w in scored) if scored else None)
    return totals
