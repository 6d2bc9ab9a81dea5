"""The signal check's probe: sample a few groups from the base model and score them as a run would.

`probe_signal(cfg, groups)` loads the run's base model (no adapter) the way training does, takes
`groups` prompts from the run's training rows (shuffled with the run's seed, as the trainer's sampler
draws them), generates `num_generations` completions for each in batches with the run's
temperature, top_p, top_k, repetition_penalty and max_completion_length (trainer/answering.py, as
held-out evaluation answers), scores them with the run's
reward functions called exactly as TRL calls them (`prompts`, `completions` as assistant messages when
the prompts are conversations, `completion_ids`, every other column of the row), and returns
`spec.signal_check.SignalReport`. It lives beside the training code because it must build the data and
the rewards as training does; it runs in a process of its own (`python -m workbench check-signal`,
which the Setup tab starts in the background), never in the dashboard.
"""

from __future__ import annotations

from pathlib import PurePath

from workbench import startup
from workbench.spec.config import RunConfig, data_field, reward_names_for, reward_weights_for
from workbench.spec.reward_choice import correctness_reward_for
from workbench.spec.rewards import call_as_trl, weighted_total
from workbench.spec.signal_check import GroupScores, SignalReport, signal_report
from workbench.trainer.answering import end_token_ids, generate

DEFAULT_GROUPS = 8


def probe_signal(cfg: RunConfig, groups: int = DEFAULT_GROUPS) -> SignalReport:
    """The signal report of `groups` prompts x cfg.num_generations completions of the base model."""
    import torch

    from workbench.trainer.run_pieces import load_dataset_for, load_model_and_tokenizer

    torch.manual_seed(cfg.seed)
    model, tokenizer = load_model_and_tokenizer(cfg)
    device = "cuda" if torch.cuda.is_available() and cfg.device != "cpu" else "cpu"
    model = model.to(device).eval()
    startup.resume_collection()  # a `workbench check-signal` process's libraries and model are in
    dataset = load_dataset_for(cfg, bool(getattr(tokenizer, "chat_template", None)))
    rows = [dict(row) for row in dataset.shuffle(seed=cfg.seed).select(range(min(groups, len(dataset))))]
    g = cfg.num_generations
    batch_rows = [row for row in rows for _ in range(g)]  # each prompt g times, as TRL repeats it
    answers = generate(
        model,
        tokenizer,
        [row["prompt"] for row in rows],
        cfg,
        end_token_ids(model, tokenizer),
        device,
        sample=True,
        count=g,
    )
    texts, ids, truncated = answers.texts, answers.ids, answers.truncated
    per_reward = score_rewards(cfg, batch_rows, texts, ids)
    weights = reward_weights_for(cfg)[: len(per_reward)]
    totals = [weighted_total([per_reward[name][i] for name in per_reward], weights) for i in range(len(texts))]
    correct_name = correctness_reward_for(cfg)
    correctness = per_reward.get(correct_name) if correct_name else None
    scored = [
        GroupScores(
            totals=totals[i * g : (i + 1) * g],
            lengths=[len(x) for x in ids[i * g : (i + 1) * g]],
            truncated=truncated[i * g : (i + 1) * g],
            correctness=correctness[i * g : (i + 1) * g] if correctness is not None else None,
        )
        for i in range(len(rows))
    ]
    return signal_report(scored, run_label(cfg), correct_name)


def run_label(cfg: RunConfig) -> str:
    """How the verdict names the run: "gsm8k (gsm8k_sample) on smollm2-135m-instruct"."""
    data = data_field(cfg)[1].strip().rstrip("/")
    task = f"{cfg.task} ({PurePath(data).name})" if data else cfg.task
    return f"{task} on {PurePath(cfg.model.rstrip('/')).name or cfg.model}"


def score_rewards(cfg: RunConfig, rows: list[dict], texts: list[str], ids: list[list[int]]) -> dict[str, list]:
    """Each reward function's scores, by name, called as TRL calls it. A reward model (a str in TRL's
    reward_funcs) is left out: it is not loaded for the check."""
    from transformers import TrainerState

    from workbench.trainer.run_pieces import build_reward_funcs

    funcs = [f for f in build_reward_funcs(cfg) if callable(f)]
    # step 0 of a run, and TRL's logging hooks, which the check has no table for
    return call_as_trl(
        zip(reward_names_for(cfg), funcs),
        rows,
        texts,
        ids,
        trainer_state=TrainerState(),
        log_extra=lambda column, values: None,
        log_metric=lambda name, value: None,
    )
