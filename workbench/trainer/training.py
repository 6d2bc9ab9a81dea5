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

This module is the run's lifecycle; what it builds from lives beside it: `run_pieces` (model, data, rewards,
configs), `grpo_subclass` (the trainer class over TRL's private hooks), `speed_wiring` (the speed choice and its
levers) and `process_group` (the end of a multi-process run). Their public names stay importable from here.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import sys
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from workbench import startup
from workbench.jobs import allocator
from workbench.runstore import checkpoint_integrity, run_locks, runfolder
from workbench.spec import trackers
from workbench.spec.config import RunConfig
from workbench.spec.config_checks import check_config
from workbench.spec.generation import SERVER_GENERATIONS
from workbench.spec.trl_settings import trl_reward_weights
from workbench.trainer import gpu_metrics, vllm_rollout
from workbench.trainer.grpo_subclass import check_library_ties, make_trainer_class
from workbench.trainer.process_group import KEPT_UNTIL_EXIT, end_process, end_process_group
from workbench.trainer.recorder import StatusWriter, failure_hint, make_run_folder_callback, traceback_tail
from workbench.trainer.run_pieces import (
    build_grpo_config,
    build_lora_config,
    build_reward_funcs,
    load_dataset_for,
    load_model_and_tokenizer,
)
from workbench.trainer.speed_wiring import (
    attach_levers,
    choose_speed,
    probe_progress,
    probe_trainer,
    report_idle_levers,
)
from workbench.trainer.token_capture import TokenCapture

# Names outside scripts, notebooks and the CLI import from here, whose modules are now the pieces above.
__all__ = [
    "KEPT_UNTIL_EXIT",
    "StatusWriter",
    "add_eval_callback",
    "build_grpo_config",
    "build_lora_config",
    "build_reward_funcs",
    "check_library_ties",
    "check_trackers_point_at",
    "copy_reward_source",
    "end_process",
    "end_process_group",
    "load_dataset_for",
    "load_model_and_tokenizer",
    "make_trainer_class",
    "point_trackers_at",
    "probe_progress",
    "probe_trainer",
    "report_idle_levers",
    "run_training",
    "save_final_adapter",
    "wait_for_server",
]


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


def _is_main_process() -> bool:
    # set by accelerate launch / torchrun; absent in a single plain process
    return int(os.environ.get("RANK", "0")) == 0


@dataclass
class _RunObjects:
    """What the end of a run must reach, however it ends: set as the run builds them."""

    trainer: object | None = None
    previous_handler: object | None = None  # the SIGTERM handler the run replaced


def run_training(cfg: RunConfig, run_dir: str | os.PathLike, resume: bool = False, show_progress: bool = False) -> int:
    """Train `cfg` writing `run_dir`; returns the process exit code (0 finished or stopped, 1 failed)."""
    run_dir = Path(run_dir).resolve()
    point_trackers_at(cfg.report_to, run_dir)  # before TRL loads: it imports trackio, which reads TRACKIO_DIR once
    is_main = _is_main_process()
    if is_main:  # the other ranks write nothing: on another machine the folder may not even be shared
        run_dir.mkdir(parents=True, exist_ok=True)
    cfg = cfg.with_absolute_paths()  # the config.json it saves must work from any folder (a resume)
    status = start_status(run_dir, is_main)
    objects = _RunObjects()
    try:
        return _train(cfg, run_dir, resume, show_progress, is_main, status, objects)
    except KeyboardInterrupt:
        saved = {}
        if objects.trainer is not None:
            save_final_adapter(objects.trainer.save_model, run_dir, is_main)
            saved = {"adapter_step": objects.trainer.state.global_step}  # what adapter/ holds now
        status.set(state="stopped", finished_at=time.time(), **saved)
        return 130
    except BaseException as exc:  # every failure is recorded in status.json before the process ends
        record_failure(exc, status, run_dir)
        return 1
    finally:
        if is_main:
            vllm_rollout.cleanup(run_dir)
        status.close()
        if objects.previous_handler is not None:
            signal.signal(signal.SIGTERM, objects.previous_handler)
        end_process_group(objects.trainer)


def start_status(run_dir: Path, is_main: bool) -> StatusWriter:
    """The run's status.json writer, its first fields set (`starting`) and its heartbeat going."""
    status = StatusWriter(run_dir, enabled=is_main)
    # `host`: readers on other machines judge the run by its heartbeat, not by this pid;
    # in a sandbox the pid is `sandbox_pid` (its own PID namespace), `pid` is the host's, written outside
    status.set(
        state="starting",
        **runfolder.own_pid_fields(),
        host=socket.gethostname(),
        step=status.status.step or 0,
        started_at=status.status.started_at or time.time(),
        num_processes=int(os.environ.get("WORLD_SIZE", "1")),
        # how this process was started, so a slow or large run can be read back to its settings
        allocator=allocator.applied_decision(),
        cpu_threads=int(os.environ.get("OMP_NUM_THREADS") or 0) or None,
    )
    status.start_heartbeat()
    return status


def _train(
    cfg: RunConfig,
    run_dir: Path,
    resume: bool,
    show_progress: bool,
    is_main: bool,
    status: StatusWriter,
    objects: _RunObjects,
) -> int:
    """run_training's body, from the config's check to the final state; `objects` gets what the run's end needs."""
    check_config(cfg)
    checkpoint = prepare_folder(cfg, run_dir, resume, is_main)
    if check_library_ties(cfg, status):  # refused before the model loads: status.json says why
        return 1
    speed_record = choose_speed(cfg, status)
    trainer, dataset, tokenizer = build_trainer(cfg, run_dir, status, is_main, show_progress, speed_record)
    objects.trainer = trainer
    callback = make_run_folder_callback(run_dir, status, is_main, _stop_decider(trainer.accelerator))
    trainer.add_callback(callback)
    if cfg.eval_strategy == "steps":
        add_eval_callback(trainer, cfg, dataset, run_dir, is_main, tokenizer.chat_template is not None)
    objects.previous_handler = _stop_on_sigterm(callback)

    status.set(resumed_from=int(checkpoint.name.split("-")[-1]) if checkpoint else None)
    startup.resume_collection()  # libraries, model and trainer are in: collect what the steps make
    trainer.train(resume_from_checkpoint=str(checkpoint) if checkpoint else None)

    status.set(state="saving", step=trainer.state.global_step)
    save_final_adapter(trainer.save_model, run_dir, is_main)
    final = "stopped" if callback.stopped else "finished"
    if is_main:  # before the final state: whoever waits for that state finds the request gone too
        run_locks.clear_stop_request(run_dir)
    status.set(
        state=final,
        step=trainer.state.global_step,
        finished_at=time.time(),
        summary=callback.summary,
        adapter_step=trainer.state.global_step,  # what adapter/ holds: the Compare tab names it by this end
    )
    return 0


def prepare_folder(cfg: RunConfig, run_dir: Path, resume: bool, is_main: bool):
    """The run folder made ready to train into (its config, its reward file, no stop request, on a resume no records
    after the checkpoint); the checkpoint to resume from, or None."""
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
    return checkpoint


def build_trainer(
    cfg: RunConfig, run_dir: Path, status: StatusWriter, is_main: bool, show_progress: bool, speed_record: dict
):
    """The run's trainer, with its generation, GPU metrics, speed levers and token capture attached: (trainer, the
    training dataset, the tokenizer)."""
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
    attach_levers(trainer, cfg, model.config.model_type, status, speed_record)
    if cfg.record_tokens:
        trainer.token_capture = TokenCapture(
            set(trainer.eos_token_ids), tokenizer.pad_token_id, trainer.num_generations
        )
    return trainer, dataset, tokenizer


def record_failure(exc: BaseException, status: StatusWriter, run_dir: Path) -> None:
    """Record the failure being handled in status.json (its type, message, a hint and its traceback's tail) and the
    log."""
    text = traceback.format_exc()
    try:
        print(text, file=sys.stderr, flush=True)
    except OSError:  # train.log is on the same full disk; status.json has the reserve
        pass
    if isinstance(exc, vllm_rollout.VLLMGenerationError) and status.status.vllm:
        status.set(vllm={**status.status.vllm, "state": "failed"})
    status.set(
        state="failed",
        finished_at=time.time(),
        error={
            "type": type(exc).__name__,
            "message": str(exc),
            "hint": failure_hint(exc, text, run_dir),
            "traceback_tail": traceback_tail(text),
        },
    )


def add_eval_callback(trainer, cfg: RunConfig, dataset, run_dir: Path, is_main: bool, has_chat_template: bool) -> None:
    """Evaluate the held-out prompts at step 0, every eval_steps and at the end (workbench/trainer/evaluator.py)."""
    from workbench.trainer.evaluator import Evaluator, Policy, load_eval_rows, make_eval_callback

    rows = load_eval_rows(cfg, dataset["prompt"], has_chat_template)
    if not rows:
        from workbench.spec.config import ConfigError, ConfigProblem

        raise ConfigError(
            [
                ConfigProblem(
                    "dataset_test_split",
                    f"{cfg.dataset_test_split!r} holds no prompt that is not also a training prompt",
                    "name a held-out split, e.g. test",
                )
            ]
        )
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
        raise RuntimeError(
            f"report_to trackio: trackio was loaded in this process with TRACKIO_DIR {found}, not "
            f"{wanted}; start the run in a process of its own (`python -m workbench train` or the "
            "launcher)"
        )


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
