"""Per-token values of the loss, taken from the tensors TRL's `_compute_loss` computes: no second forward pass.

The trainer (`grpo_subclass.make_trainer_class`) hands this module two things:
- each generation round, right after `_generate_and_score_completions` (before TRL shuffles and splits it),
  the round's rows: `TokenCapture.remember_round` keys every completion by its token ids (prompt and
  completion) and its advantage, and keeps where it lies among the round's completions.jsonl records;
- each loss computation of a logging step, the micro-batch's inputs and the policy's `per_token_logps` and
  `entropies` from the one call of `_get_per_token_logps_and_entropies` inside `_compute_loss`:
  `TokenCapture.capture` recomputes from them, with TRL's own formulas, the per-token KL, the ratio and the
  clipped masks (elementwise, on tensors already there), and matches each row back to its record by its key,
  since TRL shuffled the rows in between.

Ties to TRL 1.16's internals (pinned; tests/test_tokens.py covers them, tests/test_vllm_rollout*.py the vLLM ones):
the two overridden methods above, the `inputs` keys `prompt_ids`, `prompt_mask`, `completion_ids`,
`completion_mask`, `tool_mask`, `advantages`, `old_per_token_logps`, `ref_per_token_logps` (and, when TRL generates
with vLLM, `sampling_per_token_logps` and `importance_sampling_ratio`: the engine's log-probabilities and the weight
the loss applies, recorded as workbench/spec/engine_records.py says), and the trainer attributes `beta`,
`loss_type`, `epsilon_low`, `epsilon_high`, `args.use_bias_correction_kl`, `vllm_importance_sampling_mode`,
`eos_token_ids`, and TRL's tokenizer (the private ties are in workbench/library_compat.py's registry, reached
through it).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from workbench import library_compat
from workbench.spec.engine_records import is_sequence_mode
from workbench.spec.token_records import OLD_POLICY, REFERENCE, clip_code, completion_length, rounded, rounded_list

# loss types whose clipping TRL measures as clip_ratio/low and /high; cispo caps the ratio above only
TWO_SIDED_CLIP = ("grpo", "bnpo", "dr_grpo", "dapo", "luspo")


def _key(prompt_ids: list[int], prompt_mask: list[int], completion: list[int], advantage: float) -> tuple:
    prompt = tuple(token for token, keep in zip(prompt_ids, prompt_mask) if keep)
    return prompt, tuple(completion), round(float(advantage), 4)


@dataclass
class TokenCapture:
    """What one training process knows of the current round, and the records of this step not yet written."""

    eos_ids: set[int]
    pad_id: int | None
    num_generations: int
    places: dict[tuple, list[tuple[int, int]]] = field(default_factory=dict)  # key -> [(round, index)]
    pending: list[dict] = field(default_factory=list)
    micro_batches: dict[int, int] = field(default_factory=dict)  # step -> loss computations seen

    def lengths(self, completion_ids: list[list[int]]) -> list[int]:
        return [completion_length(row, self.eos_ids, self.pad_id) for row in completion_ids]

    def remember_round(self, output: dict, round_step: int, offset: int) -> None:
        """Key this process's rows of a new round; `offset`: where its rows start among the round's records."""
        prompt_ids, prompt_mask = output["prompt_ids"].tolist(), output["prompt_mask"].tolist()
        completions = output["completion_ids"].tolist()
        advantages = output["advantages"].reshape(len(completions), -1)[:, 0].tolist()
        self.places = {}
        for row, (ids, mask, completion, n, advantage) in enumerate(
            zip(prompt_ids, prompt_mask, completions, self.lengths(completions), advantages)
        ):
            key = _key(ids, mask, completion[:n], advantage)
            self.places.setdefault(key, []).append((round_step, offset + row))

    def capture(self, trainer, inputs: dict, per_token_logps, entropies, step: int) -> None:
        """Records for every row of one micro-batch of `step`, from its loss computation's tensors."""
        import torch

        micro_batch = self.micro_batches.get(step, 0)
        self.micro_batches = {step: micro_batch + 1}
        with torch.no_grad():
            values = loss_terms(trainer, inputs, per_token_logps.detach().float(), entropies.detach().float())
        completions = inputs["completion_ids"].tolist()
        prompt_ids, prompt_mask = inputs["prompt_ids"].tolist(), inputs["prompt_mask"].tolist()
        for row, (completion, n) in enumerate(zip(completions, self.lengths(completions))):
            key = _key(prompt_ids[row], prompt_mask[row], completion[:n], values["advantage"][row])
            places = self.places.get(key)
            if not places:  # not from the round this capture knows (cannot happen with TRL's buffering)
                continue
            # identical rows have identical values: take them in order, so each record is used once per pass
            round_step, index = places.pop(0)
            places.append((round_step, index))
            self.pending.append(
                _record(
                    values,
                    row,
                    n,
                    completion[:n],
                    trainer,
                    dict(
                        step=step,
                        round=round_step,
                        index=index,
                        group=index // self.num_generations,
                        micro_batch=micro_batch,
                    ),
                )
            )

    def take(self) -> list[dict]:
        """The records captured since the last call, sorted as the round's completions are."""
        records, self.pending = self.pending, []
        return sorted(records, key=lambda r: (r["step"], r["round"], r["index"]))


def loss_terms(trainer, inputs: dict, logps, entropies) -> dict:
    """The per-token tensors of TRL 1.16's `_compute_loss` for this micro-batch, recomputed elementwise from
    the policy's log-probabilities and entropies it computed (same formulas, same order)."""
    import torch

    mask = inputs["completion_mask"]
    if "tool_mask" in inputs:
        mask = mask * inputs["tool_mask"]
    advantages = inputs["advantages"]
    advantages = advantages.unsqueeze(1) if advantages.dim() == 1 else advantages
    old = inputs.get("old_per_token_logps")
    on_policy = old is None  # TRL then takes per_token_logps.detach(): the ratio is exactly 1
    old = logps if on_policy else old.float()
    log_ratio = logps - old
    if trainer.importance_sampling_level == "sequence":
        log_ratio = ((log_ratio * mask).sum(-1) / mask.sum(-1).clamp(min=1.0)).unsqueeze(-1)
    coef_1 = torch.exp(log_ratio).expand_as(logps)
    kl, ref = None, old
    if trainer.beta != 0.0:
        ref = inputs["ref_per_token_logps"].float()
        kl = torch.exp(ref - logps) - (ref - logps) - 1
        if trainer.args.use_bias_correction_kl:
            kl = kl * coef_1
    low = torch.zeros_like(logps, dtype=torch.bool)
    high = torch.zeros_like(logps, dtype=torch.bool)
    if trainer.loss_type in TWO_SIDED_CLIP:
        low = (coef_1 < 1 - trainer.epsilon_low) & (advantages < 0)
        high = (coef_1 > 1 + trainer.epsilon_high) & (advantages > 0)
    elif trainer.loss_type == "cispo":
        high = (coef_1 > trainer.epsilon_high) & (advantages > 0)
    return {
        "logprob": logps.tolist(),
        "ref_logprob": ref.tolist(),
        "entropy": entropies.tolist(),
        "kl": None if kl is None else kl.tolist(),
        "ratio": None if on_policy else coef_1.tolist(),
        "low": low.expand_as(logps).tolist(),
        "high": high.expand_as(logps).tolist(),
        "masked": (mask == 0).tolist(),
        "advantage": advantages[:, 0].tolist(),
        "ref": REFERENCE if trainer.beta != 0.0 else OLD_POLICY,
        **engine_terms(trainer, inputs, logps, on_policy),
    }


def engine_terms(trainer, inputs: dict, logps, on_policy: bool) -> dict:
    """The generation engine's per-token log-probabilities, the trainer's minus them (TRL's old log-probabilities,
    which its weight is taken against; the policy's own on-policy) and the importance-sampling weight TRL's loss
    applies; empty when the round was not generated by vLLM."""
    engine = inputs.get("sampling_per_token_logps")
    if engine is None:
        return {}
    engine = engine.float()
    trainer_side = logps if on_policy else inputs["old_per_token_logps"].float()
    weight = inputs.get("importance_sampling_ratio")
    mode = trainer.vllm_importance_sampling_mode
    if weight is not None:
        weight = weight.float()[:, 0].tolist() if is_sequence_mode(mode) else weight.float().tolist()
    return {
        "engine_logprob": engine.tolist(),
        "engine_diff": (trainer_side - engine).tolist(),
        "is_weight": weight,
        "is_mode": mode,
    }


def _record(values: dict, row: int, n: int, ids: list[int], trainer, place: dict) -> dict:
    def cut(name):
        return None if values[name] is None else rounded_list(values[name][row][:n])

    return {
        **place,
        "advantage": rounded(values["advantage"][row]),
        "ref": values["ref"],
        "ids": ids,
        "tokens": library_compat.trl_tokenizer(trainer).batch_decode([[token] for token in ids]),
        "logprob": cut("logprob"),
        "ref_logprob": cut("ref_logprob"),
        "kl": cut("kl"),
        "entropy": cut("entropy"),
        "ratio": cut("ratio"),
        "clipped": [clip_code(lo, hi) for lo, hi in zip(values["low"][row][:n], values["high"][row][:n])],
        "masked": [int(m) for m in values["masked"][row][:n]],
        **_engine_fields(values, row, n),
    }


def _engine_fields(values: dict, row: int, n: int) -> dict:
    if "engine_logprob" not in values:
        return {}  # a run without vLLM: its records carry no engine fields
    weight = values["is_weight"]
    if weight is not None:
        weight = rounded(weight[row]) if is_sequence_mode(values["is_mode"]) else rounded_list(weight[row][:n])
    return {
        "engine_logprob": rounded_list(values["engine_logprob"][row][:n]),
        "engine_diff": rounded_list(values["engine_diff"][row][:n]),
        "is_weight": weight,
        "is_mode": values["is_mode"],
    }
