"""The training process: one RunConfig -> TRL's GRPOTrainer with a PEFT LoRA adapter.

Run as `python -m workbench train --run-dir DIR --config DIR/config.json`
(the launcher starts exactly that, or `accelerate launch ... -m workbench
train ...` for several processes). Everything it does lands in the run folder
(see workbench/runstore/runfolder.py): status.json with a heartbeat, metrics.jsonl with
every metric TRL logs, completions.jsonl with each generation round's groups,
tokens.jsonl with their values token by token at logging steps (trainer/token_capture.py),
LoRA checkpoints every `save_steps`, and the final adapter in `adapter/`.

With several processes only the global main one (RANK 0, on machine 0 of a
multi-machine run) writes the run folder; the others write nothing, not even
the folder itself.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import sys
import time
import traceback
from pathlib import Path
from functools import partial
from typing import Callable

from workbench import library_compat, startup
from workbench.jobs import allocator
from workbench.runstore import checkpoint_integrity, run_locks, runfolder
from workbench.spec.config import RunConfig, reward_names_for
from workbench.spec.config_checks import check_config
from workbench.spec.generation import SERVER_GENERATIONS
from workbench.spec import trackers
from workbench.spec.trl_settings import grpo_settings, trl_reward_weights, trl_vllm_settings
from workbench.trainer.generation_copy import GenerationCopy
from workbench.trainer.token_capture import TokenCapture
from workbench.sources.gpus import runs_on_cpu
from workbench.tuning.choice import LEVER_FIELDS
from workbench.trainer import gpu_metrics, levers, speed_choice, vllm_rollout
from workbench.trainer.prompt_sharing import shared_prompt_logps
from workbench.trainer.recorder import (
    StatusWriter,
    completion_records,
    failure_hint,
    make_run_folder_callback,
    traceback_tail,
)

# ---------------------------------------------------------------- pieces of a run


def load_model_and_tokenizer(cfg: RunConfig):
    """The base model (float32, or bfloat16 when cfg.bf16) and its tokenizer."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from workbench.sources.model_files import (
        ModelError,
        hub_unreachable_message,
        looks_like_path,
        resolve_model,
    )

    path = resolve_model(cfg.model)
    try:
        tokenizer = AutoTokenizer.from_pretrained(path)
        model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.bfloat16 if cfg.bf16 else torch.float32)
    except OSError as exc:
        if not Path(path).is_dir() and not looks_like_path(path):
            raise ModelError(hub_unreachable_message(cfg.model)) from exc
        raise
    if tokenizer.pad_token is None:  # GRPO pads completions; many base models ship without a pad token
        tokenizer.pad_token = tokenizer.eos_token
    return model, tokenizer


def load_dataset_for(cfg: RunConfig, has_chat_template: bool = True):
    """The prompts to train on, as TRL reads them: the named data's split (or the task's own rows), its columns
    mapped (`prompt`, `solution`) and text prompts rendered as the config's chat_template says
    (`has_chat_template`: whether the model's tokenizer has one)."""
    from workbench.spec.config import ConfigError, ConfigProblem, column_mapping, data_field
    from workbench.spec.data_mapping import map_row, resolve_chat_template

    field_name, name = data_field(cfg)
    if name:
        from workbench.sources import hub_datasets

        source = hub_datasets.locate(name, field_name)
        dataset = hub_datasets.load_split(source, cfg.dataset_config, hub_datasets.parse_split(cfg.dataset_train_split))
    else:
        from workbench.spec.tasks import load_task_dataset

        dataset = load_task_dataset(cfg.task, seed=cfg.seed)
    rule = resolve_chat_template(cfg.chat_template, has_chat_template)[1]
    if rule:  # a hub model's tokenizer is read only now: check_config could not see it
        raise ConfigError([ConfigProblem("chat_template", rule, "set chat_template=auto, or choose a chat model")])
    mapping = column_mapping(cfg, has_chat_template)
    return dataset.map(lambda row: map_row(row, mapping))


def build_reward_funcs(cfg: RunConfig) -> list:
    """TRL's `reward_funcs` for the run: its reward functions, each guarded, then its reward model's folder or
    hub id (a str, which TRL loads as AutoModelForSequenceClassification with num_labels=1 and its own tokenizer)."""
    from functools import partial

    from workbench.sources.model_files import resolve_model
    from workbench.spec.rewards import resolve_rewards
    from workbench.trainer.trl_reward_builders import build_trl_reward

    funcs = resolve_rewards(reward_names_for(cfg), cfg.reward_file or None, timeout_s=cfg.reward_timeout_s or None,
                            training=True, build_trl=partial(build_trl_reward, cfg), errors=cfg.reward_errors,
                            failure_score=cfg.reward_failure_score)
    return funcs + ([resolve_model(cfg.reward_model.strip())] if cfg.reward_model.strip() else [])


def build_lora_config(cfg: RunConfig):
    from peft import LoraConfig

    targets = cfg.lora_target_modules.strip()
    return LoraConfig(
        r=cfg.lora_r,
        lora_alpha=cfg.lora_alpha,
        lora_dropout=cfg.lora_dropout,
        target_modules=targets if targets == "all-linear" else [t.strip() for t in targets.split(",") if t.strip()],
        task_type="CAUSAL_LM",
    )


def build_grpo_config(cfg: RunConfig, run_dir: Path, show_progress: bool = False, server_url: str | None = None):
    """GRPOConfig from the RunConfig: same names, plus the run folder's fixed choices.

    `server_url`: the vLLM server the run started, for generation=trl-server.
    """
    import torch
    from trl import GRPOConfig

    return GRPOConfig(
        output_dir=str(run_dir),
        # the run folder is the record; trackers the config names get TRL's metrics too, written inside it
        report_to=list(cfg.report_to) or "none",
        run_name=run_dir.name,
        project=trackers.TRACKIO_PROJECT,
        trackio_static_space_id=False,  # trackio stays local: no Space is made or synced, ever
        disable_tqdm=not show_progress,
        **grpo_settings(cfg),
        # held-out evaluation is the run's own callback (trainer/evaluator.py): TRL's eval loop never runs beside it
        eval_strategy="no",
        use_cpu=runs_on_cpu(cfg.device, gpus_present=torch.cuda.is_available()),
        **trl_vllm_settings(cfg, server_url),
    )


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

    class WorkbenchGRPOTrainer(library_compat.GRPOHooks, GRPOTrainer):
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
            if _machine_rank() == 0:
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
                self._unwritten_completions = [*self._unwritten_completions, *completion_records(
                    library_compat.round_logs(self), step=self.state.global_step + 1,
                    num_generations=self.num_generations, reward_weights=self.reward_weights_list, lengths=lengths,
                    truncated=truncated,
                )]

        def generate_turn(self, *args, **kwargs):
            copy = self.generation_copy  # None unless generation=transformers (attach_generation_copy)
            if copy is None:
                return super().generate_turn(*args, **kwargs)
            with copy.swapped_in(self):
                seconds = copy.take_sync_seconds()  # this step's refresh, here or in held-out evaluation before it
                if seconds is not None:
                    library_compat.step_metrics(self, "train" if self.model.training else "eval")[
                        "merged_generation/sync_seconds"].append(seconds)
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

        def token_logps_and_entropies(self, model, input_ids, attention_mask, logits_to_keep, batch_size=None,
                                      compute_entropy=False, compute_aux_loss=False, **multimodal):
            # (a prompt of one token leaves nothing to share: the prefix is the prompt less its last token)
            if (self.shared_prompt_pass and not compute_aux_loss and all(v is None for v in multimodal.values())
                    and input_ids.size(1) - logits_to_keep >= 2):
                output = (*shared_prompt_logps(model, input_ids, attention_mask, logits_to_keep, batch_size,
                                               compute_entropy, self.accelerator.autocast), None)
            else:
                output = super().token_logps_and_entropies(
                    model, input_ids, attention_mask, logits_to_keep, batch_size, compute_entropy, compute_aux_loss,
                    **multimodal)
            inputs, self._tokens_of = self._tokens_of, None
            if inputs is not None and output[1] is not None:
                self.token_capture.capture(self, inputs, output[0], output[1], self.state.global_step + 1)
            return output

        def log(self, logs, *args, **kwargs) -> None:
            # A step's completions land with its metrics (written by the run folder callback's on_log, inside
            # this call): the run folder changes once a step, so each page watching it refreshes once a step.
            self.write_completions()
            self.write_tokens()
            super().log(logs, *args, **kwargs)

        def write_tokens(self) -> None:
            if self.token_capture is None:
                return
            records = self.token_capture.take()
            if self.accelerator.num_processes > 1:  # every process logs at the same step: a collective call
                from accelerate.utils import gather_object

                records = sorted(gather_object(records), key=lambda r: (r["step"], r["round"], r["index"]))
            if self.accelerator.is_main_process and records and self.completions_path is not None:
                runfolder.append_jsonl(self.completions_path.parent / runfolder.TOKENS_FILE, records)

        def write_completions(self) -> None:
            if self._unwritten_completions:
                records, self._unwritten_completions = self._unwritten_completions, []
                runfolder.append_jsonl(self.completions_path, records)

    return WorkbenchGRPOTrainer


def _stop_decider(accelerator):
    """All processes must stop at the same step: the main process decides, the others follow."""
    if accelerator.num_processes == 1:
        return lambda wish: wish

    def decide(wish: bool) -> bool:
        from accelerate.utils import broadcast_object_list

        decision = [wish]
        broadcast_object_list(decision, from_process=0)
        return bool(decision[0])

    return decide


def copy_reward_source(cfg: RunConfig, run_dir: Path) -> None:
    """Keep the user's reward file with the run, so the run can be understood and repeated later."""
    if cfg.reward_file and Path(cfg.reward_file).is_file():
        target = run_dir / runfolder.REWARD_SOURCE_FILE
        if Path(cfg.reward_file).resolve() != target.resolve():
            shutil.copyfile(cfg.reward_file, target)


def probe_progress(status, line: str) -> None:
    """A speed probe's progress line: in the log, and in status.json, which the Train tab's bar shows."""
    print(f"[workbench] speed probe: {line}", flush=True)
    status.set(speed_probe=line)


def check_library_ties(cfg: RunConfig, status: StatusWriter) -> bool:
    """The private ties of workbench/library_compat.py against the installed libraries, before the model loads: a
    version other than the one written for, or a tie that no longer holds, is said once in the log and status.json
    (`library_ties`). A broken tie this run needs refuses it, naming the tie (status.json's error, no traceback):
    returns True then."""
    verdict = library_compat.verdict(cfg)
    warning, refused = verdict.warning(), verdict.refusal()
    if warning:
        status.set(library_ties=verdict.record())
        print(f"[workbench] private library ties: {warning}", flush=True)
    if refused:
        print(f"[workbench] refused: {refused}", file=sys.stderr, flush=True)
        status.set(state="failed", finished_at=time.time(), error={
            "type": "LibraryTiesBroken", "message": refused, "traceback_tail": "",
            "hint": "Install the library versions the workbench was written for (make setup), or turn off what "
                    "needs the broken tie; `python -m workbench ties` lists every tie and whether it holds."})
    return bool(refused)


def report_idle_levers(status: StatusWriter, speed_record: dict, problems: list[str]) -> None:
    """Say in status.json and the log that a lever attached for speed did not run (trainer/levers.not_taking_effect)."""
    status.set(speed_choice={**speed_record, "not_taking_effect": problems})
    print("[workbench] a speed lever did not take effect: " + "; ".join(problems), flush=True)


def probe_trainer(cfg: RunConfig, folder: Path):
    """A trainer built as a run's, writing nothing but into `folder`, for the speed probe (trainer/speed_probe.py)."""
    model, tokenizer = load_model_and_tokenizer(cfg)
    dataset = load_dataset_for(cfg, has_chat_template=tokenizer.chat_template is not None)
    trainer = make_trainer_class()(
        model=model, reward_funcs=build_reward_funcs(cfg), args=build_grpo_config(cfg, folder), train_dataset=dataset,
        processing_class=tokenizer, peft_config=build_lora_config(cfg))
    trainer.completions_path = folder / runfolder.COMPLETIONS_FILE  # its rounds' records are kept, never written
    return trainer


# ---------------------------------------------------------------- the run


def _machine_rank() -> int:
    # torchrun's GROUP_RANK is the machine's rank in a multi-machine run; absent on one machine
    return int(os.environ.get("GROUP_RANK", "0"))


def _is_main_process() -> bool:
    # set by accelerate launch / torchrun; absent in a single plain process
    return int(os.environ.get("RANK", "0")) == 0


def run_training(cfg: RunConfig, run_dir: str | os.PathLike, resume: bool = False,
                 show_progress: bool = False) -> int:
    """Train `cfg` writing `run_dir`; returns the process exit code (0 finished or stopped, 1 failed)."""
    run_dir = Path(run_dir).resolve()
    point_trackers_at(cfg.report_to, run_dir)  # before TRL loads: it imports trackio, which reads TRACKIO_DIR once
    is_main = _is_main_process()
    if is_main:  # the other ranks write nothing: on another machine the folder may not even be shared
        run_dir.mkdir(parents=True, exist_ok=True)
    cfg = cfg.with_absolute_paths()  # the config.json it saves must work from any folder (a resume)
    status = StatusWriter(run_dir, enabled=is_main)
    # `host`: readers on other machines judge the run by its heartbeat, not by this pid;
    # in a sandbox the pid is `sandbox_pid` (its own PID namespace), `pid` is the host's, written outside
    status.set(state="starting", **runfolder.own_pid_fields(), host=socket.gethostname(), step=status.status.step or 0,
               started_at=status.status.started_at or time.time(),
               num_processes=int(os.environ.get("WORLD_SIZE", "1")),
               # how this process was started, so a slow or large run can be read back to its settings
               allocator=allocator.applied() or "glibc (not chosen by the workbench)",
               cpu_threads=int(os.environ.get("OMP_NUM_THREADS") or 0) or None)
    status.start_heartbeat()
    callback = None
    trainer = None
    previous_handler = None
    try:
        check_config(cfg)
        if is_main:
            run_locks.clear_stop_request(run_dir)
            if not (run_dir / runfolder.CONFIG_FILE).is_file():
                cfg.save(run_dir / runfolder.CONFIG_FILE)
            copy_reward_source(cfg, run_dir)
        checkpoint = checkpoint_integrity.last_checkpoint(run_dir) if resume else None
        if resume and checkpoint is None:
            print("No checkpoint to resume from; starting from step 0.", flush=True)
        if resume and is_main:
            # the steps after the checkpoint are trained again: their old records must not stay beside the new
            resumed_step = int(checkpoint.name.split("-")[-1]) if checkpoint else 0
            for name in (runfolder.METRICS_FILE, runfolder.COMPLETIONS_FILE, runfolder.EVAL_FILE, runfolder.TOKENS_FILE):
                runfolder.keep_steps_up_to(run_dir / name, resumed_step)

        if check_library_ties(cfg, status):  # refused before the model loads: status.json says why
            return 1
        # before the run's model loads: a probe loads its own, and frees it, when this machine has no choice yet
        status.set(state="tuning")
        _, speed_record = speed_choice.choose(cfg, lambda line: probe_progress(status, line), probe_trainer)
        status.set(state="loading_model", speed_choice=speed_record, speed_probe=None)
        reward_funcs = build_reward_funcs(cfg)
        model, tokenizer = load_model_and_tokenizer(cfg)
        dataset = load_dataset_for(cfg, has_chat_template=tokenizer.chat_template is not None)
        link = wait_for_server(cfg, run_dir, status) if is_main else None
        server_url = (runfolder.read_run_status(run_dir).vllm or {}).get("url")
        trainer_class = make_trainer_class()
        trainer = trainer_class(
            model=model,
            reward_funcs=reward_funcs,
            args=build_grpo_config(cfg, run_dir, show_progress, server_url),
            train_dataset=dataset,
            processing_class=tokenizer,
            peft_config=build_lora_config(cfg),
        )
        check_trackers_point_at(cfg.report_to, run_dir)
        if cfg.generation == "vllm-server":
            vllm_rollout.attach(trainer, cfg, run_dir, link)
        gpu_metrics.attach(trainer, cfg.generation)
        trainer.completions_path = run_dir / runfolder.COMPLETIONS_FILE
        trainer.reward_weights_list = trl_reward_weights(cfg)
        lever_cfg = cfg.with_changes(**{k: v for k, v in speed_record.items() if k in LEVER_FIELDS})
        attached = levers.attach(trainer, lever_cfg, model.config.model_type, tuned=cfg.merged_generation == "auto")
        status.set(**speed_choice.explained(attached, cfg, speed_record))
        trainer.add_callback(levers.took_effect_check(trainer, partial(report_idle_levers, status, speed_record)))
        if cfg.record_tokens:
            trainer.token_capture = TokenCapture(set(trainer.eos_token_ids), tokenizer.pad_token_id,
                                                 trainer.num_generations)
        callback = make_run_folder_callback(run_dir, status, is_main, _stop_decider(trainer.accelerator))
        trainer.add_callback(callback)
        if cfg.eval_strategy == "steps":
            add_eval_callback(trainer, cfg, dataset, run_dir, is_main, tokenizer.chat_template is not None)
        previous_handler = _stop_on_sigterm(callback)

        status.set(resumed_from=int(checkpoint.name.split("-")[-1]) if checkpoint else None)
        startup.resume_collection()  # libraries, model and trainer are in: collect what the steps make
        trainer.train(resume_from_checkpoint=str(checkpoint) if checkpoint else None)

        status.set(state="saving", step=trainer.state.global_step)
        save_final_adapter(trainer.save_model, run_dir, is_main)
        final = "stopped" if callback.stopped else "finished"
        if is_main:  # before the final state: whoever waits for that state finds the request gone too
            run_locks.clear_stop_request(run_dir)
        status.set(state=final, step=trainer.state.global_step, finished_at=time.time(), summary=callback.summary)
        return 0
    except KeyboardInterrupt:
        if trainer is not None:
            save_final_adapter(trainer.save_model, run_dir, is_main)
        status.set(state="stopped", finished_at=time.time())
        return 130
    except BaseException as exc:  # every failure is recorded in status.json before the process ends
        text = traceback.format_exc()
        try:
            print(text, file=sys.stderr, flush=True)
        except OSError:  # train.log is on the same full disk; status.json has the reserve
            pass
        if isinstance(exc, vllm_rollout.VLLMGenerationError) and status.status.vllm:
            status.set(vllm={**status.status.vllm, "state": "failed"})
        status.set(state="failed", finished_at=time.time(), error={
            "type": type(exc).__name__,
            "message": str(exc),
            "hint": failure_hint(exc, text, run_dir),
            "traceback_tail": traceback_tail(text),
        })
        return 1
    finally:
        if is_main:
            vllm_rollout.cleanup(run_dir)
        status.close()
        if previous_handler is not None:
            signal.signal(signal.SIGTERM, previous_handler)
        end_process_group(trainer)


# What a multi-process run keeps until its process ends: its trainer (end_process_group says why).
KEPT_UNTIL_EXIT: list = []


def end_process_group(trainer) -> None:
    """Close torch.distributed's process group, when the run made one, and keep the trainer until the process
    ends (`end_process`).

    The objects a multi-process run leaves cannot be freed safely. Left to the interpreter's teardown,
    gloo's threads were destroyed while still joinable: the process aborted ("terminate called without an
    active exception", SIGABRT) after a finished run. Freed when `python -m workbench train` returned, the
    DDP model's reducer joined gloo's threads while holding the GIL, and one of them was waiting for the GIL
    to free its last collective's tensors: a deadlock (gdb: `~ProcessGroupGloo` in `thread::join`, a
    `pt_gloo_runloop` thread in `~AsyncAllgatherWork` taking the GIL). Both were seen on the second machine
    of a two-machine run, where torchrun's agent on the first then waited for it until killed.
    """
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        KEPT_UNTIL_EXIT.append(trainer)
        dist.destroy_process_group()


def end_process(exit_code: int) -> int:
    """`exit_code`; a process that ran in a process group instead ends here with it, at once, its output
    flushed and nothing freed (end_process_group says why). Called last, when everything is written."""
    if not KEPT_UNTIL_EXIT:
        return exit_code
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):
            stream.flush()
    os._exit(exit_code)


def add_eval_callback(trainer, cfg: RunConfig, dataset, run_dir: Path, is_main: bool, has_chat_template: bool) -> None:
    """Evaluate the held-out prompts at step 0, every eval_steps and at the end (workbench/trainer/evaluator.py)."""
    from workbench.trainer.evaluator import Evaluator, Policy, load_eval_rows, make_eval_callback

    rows = load_eval_rows(cfg, dataset["prompt"], has_chat_template)
    if not rows:
        from workbench.spec.config import ConfigError, ConfigProblem

        raise ConfigError([ConfigProblem("dataset_test_split", f"{cfg.dataset_test_split!r} holds no prompt that is "
                                         "not also a training prompt", "name a held-out split, e.g. test")])
    evaluator = Evaluator(Policy.of_trainer(trainer), cfg, rows)
    trainer.add_callback(make_eval_callback(evaluator, run_dir / runfolder.EVAL_FILE, cfg.eval_steps, is_main))


def point_trackers_at(report_to: list[str], run_dir: Path) -> None:
    """Send the trackers of `report_to` into the run folder, and trackio nowhere else (this process's environment)."""
    settings, removed = trackers.environment(report_to, run_dir)
    os.environ.update(settings)
    for name in removed:
        os.environ.pop(name, None)


def check_trackers_point_at(report_to: list[str], run_dir: Path) -> None:
    """Refuse a run whose trackio was imported (by an earlier run in this process) with another folder."""
    if "trackio" not in report_to or "trackio.utils" not in sys.modules:
        return
    wanted = run_dir / trackers.TRACKIO_DIR
    found = Path(sys.modules["trackio.utils"].TRACKIO_DIR)
    if found != wanted:
        raise RuntimeError(f"report_to trackio: trackio was loaded in this process with TRACKIO_DIR {found}, not "
                           f"{wanted}; start the run in a process of its own (`python -m workbench train` or the "
                           "launcher)")


def wait_for_server(cfg: RunConfig, run_dir: Path, status: StatusWriter):
    """For a run that generates on a vLLM server: wait until it answers, recording its state; the link, or None."""
    if cfg.generation not in SERVER_GENERATIONS:
        return None
    link = vllm_rollout.link_for_run(cfg, run_dir, status.status)
    server = {"url": link.url, "external": link.guard_pid is None, **(status.status.vllm or {})}
    status.set(vllm={**server, "state": "starting"})
    seconds = link.wait_until_ready()
    status.set(vllm={**server, "state": "ready", "ready_after_s": round(seconds, 1)})
    return link


def _stop_on_sigterm(callback):
    """SIGTERM asks for the same graceful stop as the stop file: finish the step, save, end.

    Returns the handler it replaced (restored when the run ends), or None off the main thread.
    """

    def handle(signum, frame):
        callback.stop_signalled = True

    try:
        return signal.signal(signal.SIGTERM, handle)
    except ValueError:  # signals can only be handled in the main thread
        return None


def save_final_adapter(save: Callable[[str], None], run_dir: Path, is_main: bool = True) -> Path:
    """Write the final adapter with `save(folder)` into a temporary folder, then rename it to `adapter/`.

    A process killed while saving leaves the previous `adapter/` (or none) and a
    `.adapter.partial` folder, never a half-written adapter where readers look.
    Every process calls `save` (the Trainer's save is collective; only rank 0
    writes); only the main process renames.
    """
    target = run_dir / runfolder.ADAPTER_DIR
    partial = run_dir / ".adapter.partial"
    previous = run_dir / ".adapter.previous"
    if is_main:
        for leftover in (partial, previous):  # from a process killed during an earlier save
            shutil.rmtree(leftover, ignore_errors=True)
    save(str(partial))
    if not is_main:
        return target
    # A folder cannot replace a non-empty folder in one rename: move the old one aside first.
    # Between the two renames (microseconds) adapter/ is absent; it is never half-written.
    if target.exists():
        os.rename(target, previous)
    os.rename(partial, target)
    shutil.rmtree(previous, ignore_errors=True)
    return target
