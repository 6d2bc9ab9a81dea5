"""The workbench's GRPOTrainer: TRL's trainer, with the run folder's records taken from its private hooks.

Each hook is one of TRL's private methods under a workbench name (workbench/library_compat.py's GRPOHooks, and
its registry of the ties); `check_library_ties` holds those ties against the installed libraries before a run's
model loads. The run's lifecycle that builds and trains this class is trainer/training.py.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

from workbench import library_compat
from workbench.runstore import runfolder
from workbench.spec import engine_records
from workbench.spec.config import RunConfig
from workbench.trainer import ties_verdict
from workbench.trainer.generation_copy import GenerationCopy
from workbench.trainer.prompt_sharing import shared_prompt_logps
from workbench.trainer.recorder import StatusWriter, completion_records
from workbench.trainer.token_capture import TokenCapture


def machine_rank() -> int:
    # torchrun's GROUP_RANK is the machine's rank in a multi-machine run; absent on one machine
    return int(os.environ.get("GROUP_RANK", "0"))


class WorkbenchHooks(library_compat.GRPOHooks):
    """What the workbench adds to GRPOTrainer; mixed in before it by `make_trainer_class` (which says what each
    hook does), so that TRL is imported only when a trainer is built."""

    completions_path: Path | None = None
    reward_weights_list: list[float] = []
    _unwritten_completions: list[dict] = []  # this generation round's records, until its step logs
    token_capture: TokenCapture | None = None  # record_tokens: the per-token values at logging steps
    _tokens_of: dict | None = None  # the inputs of the loss computation whose tokens are being recorded
    generation_copy: GenerationCopy | None = None  # merged_generation: the plain model rounds are sampled from
    shared_prompt_pass: bool = False  # score each prompt once per group (trainer/prompt_sharing.py)

    def save_rng_state(self, output_dir: str) -> None:
        # Every process saves its random state into each checkpoint (the Trainer's own, for an exact
        # resume). Those on machines other than machine 0 write nothing into the run folder, which that
        # machine may not share: on a resume they start from fresh random states (the Trainer says so).
        if machine_rank() == 0:
            super().save_rng_state(output_dir)

    def generate_and_score_round(self, inputs):
        output = super().generate_and_score_round(inputs)
        if self.model.training:
            self.record_completions(output)
        return output

    def record_completions(self, output) -> None:
        from accelerate.utils import gather_object

        if self.token_capture is not None:  # rows in TRL's order, before it shuffles them: keyed by their ids
            offset = self.accelerator.process_index * len(output["completion_ids"])
            self.token_capture.remember_round(output, self.state.global_step + 1, offset)
        lengths = output["completion_mask"].sum(dim=1).tolist()
        ends = set(self.eos_token_ids) | {library_compat.trl_tokenizer(self).pad_token_id}
        rows = output["completion_ids"].tolist()
        truncated = [n == 0 or row[n - 1] not in ends for row, n in zip(rows, lengths)]
        if self.accelerator.num_processes > 1:
            lengths, truncated = gather_object(lengths), gather_object(truncated)
        if self.accelerator.is_main_process and self.completions_path is not None:
            self._unwritten_completions = [
                *self._unwritten_completions,
                *completion_records(
                    library_compat.round_logs(self),
                    step=self.state.global_step + 1,
                    num_generations=self.num_generations,
                    reward_weights=self.reward_weights_list,
                    lengths=lengths,
                    truncated=truncated,
                ),
            ]

    def generate_turn(self, *args, **kwargs):
        copy = self.generation_copy  # None unless generation=transformers (attach_generation_copy)
        if copy is None:
            return super().generate_turn(*args, **kwargs)
        with copy.swapped_in(self):
            seconds = copy.take_sync_seconds()  # this step's refresh, here or in held-out evaluation before it
            if seconds is not None:
                library_compat.step_metrics(self, "train" if self.model.training else "eval")[
                    "merged_generation/sync_seconds"
                ].append(seconds)
            return super().generate_turn(*args, **kwargs)

    def grpo_loss(self, model, inputs):
        # the first call of token_logps_and_entropies below is the policy's, with its entropies
        step = self.state.global_step + 1
        recording = self.token_capture is not None and self.model.training and step % self.args.logging_steps == 0
        self._tokens_of = inputs if recording else None
        try:
            return super().grpo_loss(model, inputs)
        finally:
            self._tokens_of = None

    def token_logps_and_entropies(
        self,
        model,
        input_ids,
        attention_mask,
        logits_to_keep,
        batch_size=None,
        compute_entropy=False,
        compute_aux_loss=False,
        **multimodal,
    ):
        # (a prompt of one token leaves nothing to share: the prefix is the prompt less its last token)
        if (
            self.shared_prompt_pass
            and not compute_aux_loss
            and all(v is None for v in multimodal.values())
            and input_ids.size(1) - logits_to_keep >= 2
        ):
            output = (
                *shared_prompt_logps(
                    model,
                    input_ids,
                    attention_mask,
                    logits_to_keep,
                    batch_size,
                    compute_entropy,
                    self.accelerator.autocast,
                ),
                None,
            )
        else:
            output = super().token_logps_and_entropies(
                model,
                input_ids,
                attention_mask,
                logits_to_keep,
                batch_size,
                compute_entropy,
                compute_aux_loss,
                **multimodal,
            )
        inputs, self._tokens_of = self._tokens_of, None
        if inputs is not None and output[1] is not None:
            self.token_capture.capture(self, inputs, output[0], output[1], self.state.global_step + 1)
        return output

    def log(self, logs, *args, **kwargs) -> None:
        # A step's completions land with its metrics (written by the run folder callback's on_log, inside
        # this call): the run folder changes once a step, so each page watching it refreshes once a step.
        self.write_completions()
        # a vLLM run's step summary of its engine's log-probabilities and weights (engine/*), from its token records
        logs = {**logs, **engine_records.step_metrics(self.write_tokens())}
        super().log(logs, *args, **kwargs)

    def write_tokens(self) -> list[dict]:
        """Append the records captured since the last log to tokens.jsonl (main process); every process's records,
        gathered."""
        if self.token_capture is None:
            return []
        records = self.token_capture.take()
        if self.accelerator.num_processes > 1:  # every process logs at the same step: a collective call
            from accelerate.utils import gather_object

            records = sorted(gather_object(records), key=lambda r: (r["step"], r["round"], r["index"]))
        if self.accelerator.is_main_process and records and self.completions_path is not None:
            runfolder.append_jsonl(self.completions_path.parent / runfolder.TOKENS_FILE, records)
        return records

    def write_completions(self) -> None:
        if self._unwritten_completions:
            records, self._unwritten_completions = self._unwritten_completions, []
            runfolder.append_jsonl(self.completions_path, records)


def make_trainer_class():
    """GRPOTrainer that also writes each generation round's completions to the run folder, with its step's metrics.

    It reads TRL's round logs right after each generation round (`generate_and_score_round`) filled them
    (deques sized to one generation batch, so they hold exactly this round, gathered from every process in
    group order). Token lengths and truncation come from the round's own completion ids and are gathered the
    same way.

    With `record_tokens` it also overrides the loss (`grpo_loss`) and the log-probabilities
    (`token_logps_and_entropies`) to hand the loss's own per-token tensors to `token_capture` at logging
    steps (its docstring lists those ties). With `shared_prompt_pass` the latter computes TRL's values with
    each prompt run once per group (`prompt_sharing`); `generate_turn` samples from `merged_generation`'s copy
    when there is one. Each of these is one of TRL's private hooks under a workbench name
    (workbench/library_compat.py's GRPOHooks, and its registry of the ties).
    """
    from trl import GRPOTrainer

    class WorkbenchGRPOTrainer(WorkbenchHooks, GRPOTrainer):
        pass

    return WorkbenchGRPOTrainer


def check_library_ties(cfg: RunConfig, status: StatusWriter) -> bool:
    """The private ties of workbench/library_compat.py against the installed libraries, before the model loads: a
    version other than the one written for, or a tie that no longer holds, is said once in the log and status.json
    (`library_ties`). A broken tie this run needs refuses it, naming the tie (status.json's error, no traceback):
    returns True then."""
    verdict = ties_verdict.verdict(cfg)
    warning, refused = verdict.warning(), verdict.refusal()
    if warning:
        status.set(library_ties=verdict.record())
        print(f"[workbench] private library ties: {warning}", flush=True)
    if refused:
        print(f"[workbench] refused: {refused}", file=sys.stderr, flush=True)
        status.set(
            state="failed",
            finished_at=time.time(),
            error={
                "type": "LibraryTiesBroken",
                "message": refused,
                "traceback_tail": "",
                "hint": "Install the library versions the workbench was written for (make setup), or turn off what "
                "needs the broken tie; `python -m workbench ties` lists every tie and whether it holds.",
            },
        )
    return bool(refused)
