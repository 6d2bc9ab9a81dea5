"""What the training process records in its run folder while TRL trains.

- `StatusWriter`: the in-memory status of the run, written atomically to
  status.json on every change and by a heartbeat thread at least every few
  seconds, so a reader can tell a live run from a dead one.
- `completion_records`: pure; one generation round of TRL's `_logs` -> one
  record per completion with its group, rewards and advantage.
- `failure_hint`: pure; a plain-language cause and fix for a failure.
- `RunFolderCallback`: writes every metric TRL logs to metrics.jsonl, keeps
  the step in status.json, and stops the run when a stop is requested.

Only the main process (rank 0) writes; the other ranks take part in the
collective calls and nothing else.
"""

from __future__ import annotations

import errno
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from workbench.runstore import run_locks, runfolder
from workbench.spec.chat import completion_text, prompt_text
from workbench.spec.numbers import finite_number
from workbench.spec.rewards import error_column, weighted_total
from workbench.spec.run_status import RunStatus

HEARTBEAT_SECONDS = 2.0
ERROR_COLUMN_PREFIX = error_column("")
# Space held in the run folder for the last status write on a full disk (a few status.json's worth).
RESERVE_FILE = ".status-reserve"
RESERVE_BYTES = 64 * 1024


def _make_reserve(path: Path) -> None:
    try:
        if not path.is_file() or path.stat().st_size < RESERVE_BYTES:
            with open(path, "wb") as handle:
                handle.write(b"\0" * RESERVE_BYTES)  # written, not sparse: the blocks are really taken
                handle.flush()
                os.fsync(handle.fileno())
    except OSError:
        path.unlink(missing_ok=True)  # already full: nothing to hold back


def _release_reserve(path: Path) -> bool:
    try:
        path.unlink()
        return True
    except OSError:
        return False


class StatusWriter:
    """status.json as a `RunStatus` held by the process; every `set` replaces the file atomically.

    On a full disk the last word must still land: the writer keeps a small
    reserve file in the run folder and gives its space up for the final
    state's write that would otherwise fail (`failed` with its hint). The
    heartbeat never dies of a failed write; it keeps the error for the
    training loop (`raise_write_error`), which ends the run.
    """

    def __init__(self, run_dir: str | os.PathLike, enabled: bool = True, **initial: Any):
        self.run_dir = Path(run_dir)
        self.enabled = enabled
        self._lock = threading.Lock()
        self._status = runfolder.read_run_status(run_dir) if enabled else RunStatus()
        self._status.drop("error")  # a resumed run starts without its old failure
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.write_error: OSError | None = None
        if enabled:
            _make_reserve(self.run_dir / RESERVE_FILE)
        if initial:
            self.set(**initial)

    @property
    def status(self) -> RunStatus:
        """A copy of the status as last set."""
        with self._lock:
            return self._status.copy()

    def set(self, **fields: Any) -> None:
        """Set `fields` (RunStatus's names), stamp `updated_at` and write status.json."""
        if not self.enabled:
            return
        with self._lock:
            self._status.update(**{**fields, "updated_at": time.time()})
            try:
                runfolder.write_run_status(self.run_dir, self._status)
            except OSError as exc:
                # only the final state may spend the reserve: it is the one write that must land
                final = fields.get("state") in runfolder.FINAL_STATES
                if exc.errno != errno.ENOSPC or not final or not _release_reserve(self.run_dir / RESERVE_FILE):
                    raise
                runfolder.write_run_status(self.run_dir, self._status)  # in the space the reserve held

    def raise_write_error(self) -> None:
        """Raise the error that stopped the heartbeat writing status.json, if any (a full disk)."""
        if self.write_error is not None:
            raise self.write_error

    def start_heartbeat(self, every: float = HEARTBEAT_SECONDS) -> None:
        if not self.enabled or self._thread is not None:
            return

        def beat() -> None:
            while not self._stop.wait(every):
                try:
                    self.set()
                except OSError as exc:  # kept for the training loop; the next beat tries again
                    self.write_error = exc

        # a daemon thread: it must never keep a finished or crashed process alive
        self._thread = threading.Thread(target=beat, name="status-heartbeat", daemon=True)
        self._thread.start()

    def stop_heartbeat(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def close(self) -> None:
        """The run's process is done writing: stop the heartbeat and give the reserve back."""
        self.stop_heartbeat()
        if self.enabled:
            _release_reserve(self.run_dir / RESERVE_FILE)


# ---------------------------------------------------------------- completions


def completion_records(
    logs: dict,
    step: int,
    num_generations: int,
    reward_weights: list[float],
    lengths: list[int],
    truncated: list[bool],
) -> list[dict]:
    """One record per completion of a generation round, from TRL's `_logs`.

    TRL lays a round out group by group: the gathered completions are viewed
    as (-1, num_generations) to compute advantages, so completion i belongs to
    group i // num_generations. `reward` is TRL's total: the weighted sum of
    the functions' rewards, skipping those that returned None.
    """
    prompts = list(logs["prompt"])
    completions = list(logs["completion"])
    advantages = list(logs["advantages"])
    per_function = {name: list(values) for name, values in logs["rewards"].items()}
    names = list(per_function)
    # with reward_errors=record each guarded function logs, per completion, why it could not score it
    errors = {
        key.removeprefix(ERROR_COLUMN_PREFIX): list(values)
        for key, values in logs.get("extra", {}).items()
        if key.startswith(ERROR_COLUMN_PREFIX)
    }
    records = []
    for i, (prompt, completion) in enumerate(zip(prompts, completions)):
        rewards = {name: finite_number(per_function[name][i]) for name in names}
        failed = {name: str(values[i]) for name, values in errors.items() if i < len(values) and values[i]}
        record = {
            "step": step,
            "group": i // num_generations,
            "prompt": prompt_text(prompt),
            "completion": completion_text(completion),
            "rewards": rewards,
            "reward": weighted_total(rewards.values(), reward_weights),
            "advantage": float(advantages[i]),
            "length": int(lengths[i]) if i < len(lengths) else None,
            "truncated": bool(truncated[i]) if i < len(truncated) else None,
        }
        if failed:  # the completion and the error of each function that could not score it, kept together
            record["reward_errors"] = failed
        records.append(record)
    return records


# ---------------------------------------------------------------- failures


def disk_full(exc: BaseException, text: str = "") -> bool:
    """True when the error (or one it came from) is a full disk: ENOSPC, or torch's failed file write."""
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, OSError) and seen.errno == errno.ENOSPC:
            return True
        seen = seen.__cause__ or seen.__context__
    message = f"{exc}\n{text}".lower()
    return "no space left on device" in message or "file write failed" in message


def failure_hint(exc: BaseException, text: str = "", run_dir: str | os.PathLike | None = None) -> str:
    """A plain-language cause and fix for a failed run, from the error and its traceback text."""
    from workbench.spec.rewards import RewardFunctionError

    if isinstance(getattr(exc, "hint", None), str) and exc.hint:  # the error already knows its fix
        return exc.hint
    message = f"{type(exc).__name__}: {exc}\n{text}".lower()
    if disk_full(exc, text):
        where = run_dir or "the runs folder"
        return (
            f"The disk is full: free space in {where} (old runs and their checkpoint-* folders, caches), "
            f"then resume the run; a smaller save_total_limit keeps fewer checkpoints."
        )
    if isinstance(exc, RewardFunctionError):
        return (
            f"The reward function `{exc.function_name}` failed ({exc}). Try it on sample completions "
            f"with 'Try rewards' (workbench.spec.rewards.score) and fix it before training again."
        )
    if "divisible" in message:
        return (
            "The batch settings break TRL's rule that every generation batch holds whole groups of "
            "num_generations completions. Open the batch calculator and pick one of its valid settings."
        )
    if "out of memory" in message or "can't allocate memory" in message or "cannot allocate memory" in message:
        return (
            "Out of memory. Lower per_device_train_batch_size (raise gradient_accumulation_steps to keep "
            "the batch), lower num_generations or max_completion_length, or turn on gradient_checkpointing."
        )
    if "chat_template" in message or "chat template" in message:
        return (
            "The model's tokenizer has no chat template, but the prompts are chat messages. Use an "
            "instruct model, or give plain-text prompts in your dataset."
        )
    if "nccl" in message or "gloo" in message or "process group" in message:
        return (
            "The processes could not talk to each other. Check that every chosen GPU is free and "
            "visible, or train with num_processes=1."
        )
    if "hub" in message and ("reach" in message or "connect" in message or "offline" in message):
        return "The model could not be downloaded: no model hub is reachable. Use a local model folder."
    return "See the traceback below and the end of train.log for where it failed."


def traceback_tail(text: str, lines: int = 25) -> str:
    return "\n".join(text.rstrip().splitlines()[-lines:])


# ---------------------------------------------------------------- the callback


def _trainer_callback_base():
    from transformers import TrainerCallback

    return TrainerCallback


def make_run_folder_callback(run_dir: Path, status: StatusWriter, is_main: bool, decide_stop: Callable[[bool], bool]):
    """A TrainerCallback that writes metrics.jsonl and status.json and honours stop requests.

    `decide_stop(local_wish)` turns this process's wish to stop into one answer
    shared by every process (they must all leave the loop at the same step).
    """

    class RunFolderCallback(_trainer_callback_base()):
        def __init__(self) -> None:
            self.metrics_path = run_dir / runfolder.METRICS_FILE
            self.stop_signalled = False
            self.stopped = False
            self.summary: dict = {}

        def on_train_begin(self, args, state, control, **kwargs):
            status.set(state="training", step=state.global_step, total_steps=state.max_steps)

        def on_log(self, args, state, control, logs=None, **kwargs):
            if not is_main or not logs:
                return
            if "train_runtime" in logs:  # the Trainer's end-of-run summary, not a training step
                self.summary = dict(logs)
                return
            runfolder.append_jsonl(self.metrics_path, [{"step": state.global_step, **logs}])

        def on_step_end(self, args, state, control, **kwargs):
            status.raise_write_error()  # status.json cannot be written (a full disk): end the run, say why
            wish = self.stop_signalled or (is_main and run_locks.stop_requested(run_dir))
            if decide_stop(wish):
                self.stopped = True
                control.should_training_stop = True
                control.should_save = True  # a checkpoint at this step, so resume continues from it
            # The Trainer saves right after this when should_save is set (the flow callback, which runs
            # first, set it for save_steps): "saving" tells `launcher.stop` not to kill it halfway.
            if control.should_save:
                status.set(state="saving", step=state.global_step)
            else:
                status.set(step=state.global_step)

        def on_save(self, args, state, control, **kwargs):
            if not self.stopped:  # a stopping run goes on to save its final adapter
                status.set(state="training")

    return RunFolderCallback()
