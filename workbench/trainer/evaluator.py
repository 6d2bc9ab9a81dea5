"""Held-out evaluation inside the training process: one callback, paid for once per evaluation.

With `eval_strategy="steps"` the `EvalCallback` answers the held-out prompts (`load_eval_rows`) with the
policy as it is (the LoRA adapter on; from merged_generation's float32 copy of it, refreshed to the step,
when the run samples its rounds from one: float32 rounding apart, the same answers, and the same ones in
tests and benchmarks here, and faster on a CPU for the reasons merged_generation is; benchmarks/bench_eval.py):
greedily, and with `eval_pass_k` samples each at the run's temperature (with k >= 2 each sample also keeps
its total reward and the answer the correctness reward's extractor reads, for mean@k, maj@k and best@k:
workbench/spec/eval_at_k.py); scores the answers with the run's reward functions; and appends one record to
the run folder's eval.jsonl (workbench/spec/heldout.py describes it). It runs before the first update (step 0),
after every `eval_steps`-th optimizer step and when training ends, never twice for one step (a resumed run
continues the curve). TRL's own eval loop never runs: GRPOConfig keeps its eval_strategy "no". The checkpoint
with the best held-out figure (`best_checkpoint_metric`, accuracy by default) is kept whatever
save_total_limit prunes: the callback sets transformers'
`state.best_global_step`, which the Trainer's checkpoint rotation protects (`keep_best`).

Sampling draws from a random generator of its own (forked and seeded by step), so a run with evaluation on
trains on exactly the random numbers it would have drawn with it off. The time it takes is recorded in
the record (`eval_seconds`), apart from TRL's step_time. A reward model (reward_model) is not scored here:
the record holds the reward functions' scores.

Ties to TRL, all public names: GRPOTrainer's `reward_funcs`, `eos_token_ids` (every id that ends a
completion) and `processing_class`; the answers come from trainer/answering.py (the prompt text TRL
generates from, the run's sampling settings), as the signal check's do.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from workbench.runstore import checkpoint_integrity, runfolder
from workbench.spec.chat import completion_text, prompt_text
from workbench.spec.config import RunConfig, column_mapping, data_field, reward_names_for, reward_weights_for
from workbench.spec.eval_at_k import Sample
from workbench.spec.heldout import best_evaluation, eval_record, held_out_task_rows, is_correct
from workbench.spec.reward_choice import correctness_reward_for
from workbench.spec.rewards import call_as_trl
from workbench.spec.rewards.answer_keys import answer_key_for, majority_note
from workbench.trainer.answering import Answers, generate


def load_eval_rows(cfg: RunConfig, train_prompts: list, has_chat_template: bool = True) -> list[dict]:
    """The held-out rows, mapped as training maps its rows (`prompt`, `solution`, the data's columns).

    For a dataset, the first `eval_size` rows of `dataset_test_split`; for a built-in task, the questions it makes
    after its training ones. A row whose prompt is also a training prompt is left out (said in train.log).
    """
    from workbench.spec.data_mapping import map_row

    field_name, name = data_field(cfg)
    if name:
        from workbench.sources import hub_datasets

        split = hub_datasets.parse_split(cfg.dataset_test_split, "dataset_test_split")
        dataset = hub_datasets.load_split(hub_datasets.locate(name, field_name), cfg.dataset_config, split)
        rows = dataset.select(range(min(cfg.eval_size, len(dataset)))).to_list()
    else:
        rows = held_out_task_rows(cfg.task, cfg.eval_size, cfg.seed)
    mapping = column_mapping(cfg, has_chat_template)
    mapped = [map_row(row, mapping) for row in rows]
    trained = {prompt_text(prompt) for prompt in train_prompts}
    kept = [row for row in mapped if prompt_text(row["prompt"]) not in trained]
    if len(kept) < len(mapped):
        print(
            f"Evaluation: {len(mapped) - len(kept)} of {len(mapped)} held-out prompts are also training "
            f"prompts and are left out.",
            flush=True,
        )
    return kept


@dataclass
class Policy:
    """What answers the held-out prompts: a model (adapter on), its tokenizer, where it runs, the ids that end a
    completion, and the run's reward functions (TRL's `reward_funcs` order; a reward model, last, is left out)."""

    model: Any
    tokenizer: Any
    device: Any
    eos_token_ids: list[int]
    reward_funcs: list
    trainer_state: Any = None
    # merged_generation's plain copy of the model (trainer/generation_copy.py), None for none: answers come from
    # it, synced to the step, as the run's rounds are sampled
    generation_copy: Any = None

    @classmethod
    def of_trainer(cls, trainer) -> Policy:
        """The policy a GRPOTrainer trains, as it is at the moment of each evaluation; a float32 merged copy
        answers for it (a bfloat16 one would round the answers' logits: the policy answers then)."""
        copy = getattr(trainer, "generation_copy", None)
        policy = trainer.accelerator.unwrap_model(trainer.model)
        if copy is not None and not str(copy.dtype) == str(next(policy.parameters()).dtype) == "torch.float32":
            copy = None  # a bfloat16 copy, or a float32 one beside bfloat16 weights: not the policy's numbers
        return cls(
            policy,
            trainer.processing_class,
            trainer.accelerator.device,
            list(trainer.eos_token_ids),
            list(trainer.reward_funcs),
            trainer.state,
            copy,
        )


class Evaluator:
    """Answers and scores the held-out rows with a policy."""

    def __init__(self, policy: Policy, cfg: RunConfig, rows: list[dict]):
        self.policy = policy
        self.cfg = cfg
        self.rows = rows
        self.names = reward_names_for(cfg)
        self.functions = policy.reward_funcs[: len(self.names)]
        self.correctness = correctness_reward_for(cfg)
        self.weights = dict(zip(self.names, reward_weights_for(cfg)))
        function = dict(zip(self.names, self.functions)).get(self.correctness)
        self.answer_key = answer_key_for(self.correctness, function)
        self.majority_note = majority_note(self.correctness, function)

    def evaluate(self, step: int) -> dict:
        import torch

        started = time.perf_counter()
        model = self.policy.model
        copy = self.policy.generation_copy
        if copy is not None:
            # the policy's logits to float32 rounding, without PEFT's layers per token: refreshed to this step,
            # which the step's round then reuses (packed_decode packs for a round's row count, not this batch's)
            copy.sync(step)
            model = copy.model
        was_training = model.training
        model.eval()
        prompts = [row["prompt"] for row in self.rows]
        devices = [torch.cuda.current_device()] if torch.cuda.is_available() else []
        try:
            with torch.no_grad(), torch.random.fork_rng(devices=devices):
                torch.manual_seed(self.cfg.seed + step)  # the samples of one step are the same on a rerun
                answers = self._generate(model, prompts, sample=False)
                completions, ids = answers.texts, answers.ids
                rewards = self._score(completions, ids, self.rows)
                samples, k = None, self.cfg.eval_pass_k
                if k:
                    samples = self._samples(model, prompts, k)
        finally:
            if was_training:
                model.train()
        column = self.cfg.eval_group_column.strip()
        groups = [row.get(column) for row in self.rows] if column else None  # map_row keeps every column
        return eval_record(
            step,
            prompts,
            completions,
            rewards,
            [len(i) for i in ids],
            self.correctness,
            k=k,
            seconds=time.perf_counter() - started,
            samples=samples,
            majority_note=self.majority_note,
            groups=groups,
            best_metric=self.cfg.best_checkpoint_metric,
        )

    def _samples(self, model, prompts: list, k: int) -> list[list[Sample]]:
        """Per prompt, its k samples: right or not, total reward (TRL's weighted sum, a missing score left out
        as TRL's nansum leaves it) and the answer the correctness reward's extractor reads."""
        answers = self._generate(model, prompts, sample=True, count=k)
        rows = [row for row in self.rows for _ in range(k)]
        scores = self._score(answers.texts, answers.ids, rows)
        samples = []
        for i, (text, row) in enumerate(zip(answers.texts, rows)):
            parts = [
                self.weights.get(name, 1.0) * values[i] for name, values in scores.items() if values[i] is not None
            ]
            answer = self.answer_key(completion_text(text), row) if self.answer_key and k >= 2 else None
            samples.append(Sample(is_correct(scores[self.correctness][i]), sum(parts) if parts else None, answer))
        return [samples[i * k : (i + 1) * k] for i in range(len(prompts))]

    def _generate(self, model, prompts: list, sample: bool, count: int = 1) -> Answers:
        """`count` completions per prompt in order, greedy or sampled as the run samples (trainer/answering.py)."""
        return generate(
            model,
            self.policy.tokenizer,
            prompts,
            self.cfg,
            self.policy.eos_token_ids,
            self.policy.device,
            sample,
            count,
        )

    def _score(self, texts: list[str], ids: list[list[int]], rows: list[dict]) -> dict[str, list]:
        """Each reward function's score per completion of `rows`' prompts, called as TRL calls it."""
        scores = call_as_trl(zip(self.names, self.functions), rows, texts, ids, trainer_state=self.policy.trainer_state)
        return {name: [None if v is None else float(v) for v in values] for name, values in scores.items()}


def keep_best(state, saved: list[dict]) -> None:
    """Point transformers' own record of the best checkpoint at the best evaluated one of `saved`.

    `state.best_global_step` is what `Trainer._save_checkpoint` turns into `best_model_checkpoint` (when that
    checkpoint folder exists), and `rotate_checkpoints` never deletes `best_model_checkpoint`, whatever
    `save_total_limit` says; both are saved in each checkpoint's trainer_state.json, so a resume keeps them.
    """
    best = best_evaluation(saved)  # by the run's best_checkpoint_metric, which each record names
    if best is not None:
        state.best_global_step = best["step"]
        state.best_metric = best.get(best.get("best_checkpoint_metric") or "accuracy")


def make_eval_callback(evaluator: Evaluator, path: Path, eval_steps: int, is_main: bool = True):
    """The TrainerCallback that evaluates at the start, every `eval_steps` and at the end, once per step.

    The evaluation of a step the Trainer saves runs in on_step_end, before that save (the Trainer saves
    right after the callbacks' on_step_end), so the checkpoint with the best held-out figure is marked
    best before rotation could delete it (`keep_best`). The last step is evaluated there too, before the
    Trainer's end of training, which with save_total_limit=1 keeps only the best checkpoint. A run stopped
    early is evaluated at on_train_end, after its last save.
    """
    from transformers import TrainerCallback

    class EvalCallback(TrainerCallback):
        def __init__(self) -> None:
            records = runfolder.read_jsonl(path) if is_main else []
            self.done = {r["step"] for r in records if isinstance(r.get("step"), int)}
            # a resumed run: the evaluations of checkpoints still on disk stay candidates for the best one
            on_disk = set(checkpoint_integrity.checkpoint_steps(path.parent))
            self.saved = [r for r in records if r.get("step") in on_disk]

        def evaluate(self, state, saved: bool = False) -> None:
            step = state.global_step
            if not is_main or step in self.done:
                return
            evaluator.policy.trainer_state = state  # the Trainer makes a new state when training starts
            record = evaluator.evaluate(step)
            runfolder.append_jsonl(path, [record])
            self.done.add(step)
            if saved and step > 0:
                self.saved.append(record)

        def on_train_begin(self, args, state, control, **kwargs):
            self.evaluate(state)  # step 0: the base policy, before any update
            keep_best(state, self.saved)

        def on_step_end(self, args, state, control, **kwargs):
            if state.global_step % eval_steps == 0 or state.global_step >= state.max_steps:
                self.evaluate(state, saved=control.should_save)
                keep_best(state, self.saved)

        def on_train_end(self, args, state, control, **kwargs):
            self.evaluate(state)

    return EvalCallback()
