"""A run's LoRA adapter merged into its base model: a standard transformers folder that vLLM loads too.

    python -m workbench export-model RUN [--checkpoint N|best|final] --out DIR

`plan_export` checks everything cheaply, before any model loads (no torch
import, so the dashboard can call it): the run (a folder path, or a run id
inside the runs folder), the adapter (the final `adapter/`, or
`checkpoint-N/`), and the output folder (new or empty). `merge_into` does the
work, in the process that runs the command: it loads the base model in the
run's dtype, applies the adapter with PEFT, `merge_and_unload()`s it, and
writes the model (`model.safetensors`), its config, the tokenizer with its
chat template, and `workbench_export.json` (where it came from) into a hidden
`.<out>.partial` folder beside DIR, renamed to DIR only once everything is
written: an export cut short never looks complete.

From the dashboard, `start_export` runs the command as a separate process
(the page never imports torch) that appends its progress to a JSON-lines file
beside DIR, one line per stage, flushed as it goes:

    {"stage": "loading", "model": "...", "adapter": "...", "out": "..."}
    {"stage": "merging"}   {"stage": "saving"}
    {"done": true, "out": "...", "bytes": 538000000, "seconds": 9.1}   or {"done": true, "error": "..."}

`read_export(path, process)` turns it into progress; `cancel_export` ends the
process tree and removes the half-written folder.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from workbench.errors import WorkbenchError
from workbench.jobs import job_clock, processes
from workbench.runstore import checkpoint_integrity, runfolder, safe_files

# What a merge goes through, in order; the UI shows "stage i of n".
STAGES = ("loading", "merging", "saving")
STAGE_TEXT = {
    "loading": "loading the base model and the adapter",
    "merging": "merging the adapter into the base weights",
    "saving": "writing safetensors, config and tokenizer",
}
MERGED_DIR = "merged"
EXPORT_INFO_FILE = "workbench_export.json"


class ExportError(WorkbenchError):
    """An export that cannot start; the message names the field, the rule and a fix."""


@dataclass(frozen=True)
class ExportPlan:
    """What one export merges and where it writes; every path absolute."""

    run_dir: Path
    model: str  # the base model as the run's config names it
    adapter: Path  # the run's adapter/ or checkpoint-N/
    step: int | None  # the checkpoint's step; None for the final adapter
    out: Path
    bf16: bool  # the run trained in bfloat16: merge and save in it too

    @property
    def partial(self) -> Path:
        """The hidden folder the export writes before it is renamed to `out`."""
        return self.out.parent / f".{self.out.name}.partial"

    @property
    def progress_path(self) -> Path:
        """The progress file of a background export, beside `out` (never inside it)."""
        return self.out.parent / f".{self.out.name}.export.jsonl"


# ---------------------------------------------------------------- checks (cheap, no torch)


def run_folder(run: str | os.PathLike, runs_dir: str | os.PathLike | None = None) -> Path:
    """The run's folder: `run` itself when it is a run folder, else the run id `run` inside the runs folder."""
    path = Path(run).expanduser()
    if str(run).strip() and runfolder.is_run_dir(path) and path.is_dir():
        return path.resolve()
    try:
        return runfolder.run_dir_in(runs_dir, str(run))
    except runfolder.RunIdError:
        known = [p.name for p in runfolder.list_run_dirs(runs_dir)[:5]]
        raise ExportError(
            field="RUN",
            rule=f"{str(run)[:200]!r} is neither a run folder nor a run in {runfolder.runs_root(runs_dir)}",
            fix=f"give a run id ({', '.join(known)})"
            if known
            else "give the path of a run folder (it holds config.json)",
        ) from None


def checkpoint_steps(run_dir: Path) -> list[int]:
    """Steps of the run's complete checkpoints, oldest first."""
    return checkpoint_integrity.checkpoint_steps(run_dir)


def adapter_for(run_dir: Path, checkpoint: int | None = None) -> Path:
    """The adapter to merge: `checkpoint-N/` when a step is given, else the final `adapter/`."""
    steps = checkpoint_steps(run_dir)
    listed = ", ".join(map(str, steps))
    final = run_dir / runfolder.ADAPTER_DIR
    if checkpoint is not None:
        if checkpoint in steps:
            return run_dir / f"checkpoint-{checkpoint}"
        if steps:
            fix = f"use one of {listed}, or leave it out for the final adapter"
        elif has_adapter(final):
            fix = "leave it out to merge the final adapter"
        else:
            fix = "the run has saved no checkpoint yet; wait for its first one"
        raise ExportError(
            field="checkpoint", rule=f"run {run_dir.name} has no complete checkpoint-{checkpoint}", fix=fix
        )
    if has_adapter(final):
        return final
    status = runfolder.read_run_status(run_dir)
    state = f"it is {status.state or 'not started'}, step {status.step or 0}"
    if steps:
        raise ExportError(
            field="checkpoint",
            rule=f"run {run_dir.name} has no final adapter yet ({state})",
            fix=f"pass a checkpoint: one of {listed}; or wait for the run to end (Stop saves it)",
        )
    save_steps = runfolder.read_config(run_dir).get("save_steps")
    raise ExportError(
        field="RUN",
        rule=f"run {run_dir.name} has no adapter yet ({state})",
        fix=f"wait for its first checkpoint (every {save_steps} steps) or for the run to end"
        if save_steps
        else "wait for its first checkpoint or for the run to end",
    )


def has_adapter(folder: Path) -> bool:
    """The folder holds a PEFT adapter: its config and its weights."""
    return (folder / "adapter_config.json").is_file() and any(
        (folder / name).is_file() for name in checkpoint_integrity.ADAPTER_WEIGHTS_FILES
    )


def default_out(run_dir: Path, checkpoint: int | None = None) -> Path:
    """Where the dashboard writes by default: `<run>/merged`, or `<run>/merged-checkpoint-N` for a checkpoint."""
    return run_dir / (MERGED_DIR if checkpoint is None else f"{MERGED_DIR}-checkpoint-{checkpoint}")


def check_out(out: str | os.PathLike) -> Path:
    """The output folder, absolute: it may not exist yet, or be empty; anything else is refused."""
    text = str(out).strip()
    if not text:
        raise ExportError(field="out", rule="no output folder given", fix="name a new folder, e.g. runs/RUN/merged")
    path = Path(text).expanduser().absolute()
    if path.is_file():
        raise ExportError(field="out", rule=f"{path} is a file", fix="name a new folder")
    if path.is_dir() and any(path.iterdir()):
        held = ", ".join(sorted(p.name for p in path.iterdir())[:4])
        raise ExportError(
            field="out",
            rule=f"{path} already holds files ({held})",
            fix="choose a new folder, or delete that one first",
        )
    parent = next((p for p in [path.parent, *path.parent.parents] if p.exists()), None)
    if parent is None or not parent.is_dir() or not os.access(parent, os.W_OK | os.X_OK):
        raise ExportError(
            field="out",
            rule=f"cannot create {path}: {parent} is not a writable folder",
            fix="choose a folder you can write to",
        )
    return path


def plan_export(
    run: str | os.PathLike, checkpoint: int | None, out: str | os.PathLike, runs_dir: str | os.PathLike | None = None
) -> ExportPlan:
    """Everything an export needs, checked before any model loads; ExportError (field, rule, fix) otherwise."""
    from workbench.sources.model_files import ModelError, check_model

    run_dir = run_folder(run, runs_dir)
    config = runfolder.read_config(run_dir)
    model = config.get("model")
    if not isinstance(model, str) or not model.strip():
        raise ExportError(
            field="RUN",
            rule=f"{run_dir / runfolder.CONFIG_FILE} names no base model",
            fix="export a run whose config.json names its model",
        )
    try:
        check_model(model)
    except ModelError as exc:
        raise ExportError(f"RUN: the run's base model cannot be loaded ({exc})", field="RUN") from None
    adapter = adapter_for(run_dir, checkpoint)
    return ExportPlan(
        run_dir=run_dir,
        model=model.strip(),
        adapter=adapter,
        step=checkpoint,
        out=check_out(out),
        bf16=bool(config.get("bf16")),
    )


# ---------------------------------------------------------------- the merge (in the exporting process)


def merge_into(plan: ExportPlan, report=lambda stage: None) -> dict:
    """Merge `plan.adapter` into its base model and write the folder `plan.out`; returns the summary line.

    `report(stage)` is called as each of STAGES begins. Written into
    `plan.partial` first and renamed at the end.
    """
    started = time.monotonic()
    report("loading")
    import torch
    from peft import PeftModel
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from workbench.sources.model_files import resolve_model

    base_path = resolve_model(plan.model)
    base = AutoModelForCausalLM.from_pretrained(base_path, dtype=torch.bfloat16 if plan.bf16 else torch.float32)
    # The Trainer saves the tokenizer it trained with beside the adapter; a bare adapter folder has none.
    has_tokenizer = (plan.adapter / "tokenizer_config.json").is_file()
    tokenizer = AutoTokenizer.from_pretrained(plan.adapter if has_tokenizer else base_path)
    model = PeftModel.from_pretrained(base, str(plan.adapter))
    report("merging")
    merged = model.merge_and_unload()
    report("saving")
    shutil.rmtree(plan.partial, ignore_errors=True)  # from an export killed earlier
    try:
        merged.save_pretrained(plan.partial, safe_serialization=True)
        tokenizer.save_pretrained(plan.partial)
        info = {
            "run": plan.run_dir.name,
            "run_dir": str(plan.run_dir),
            "base_model": plan.model,
            "adapter": str(plan.adapter),
            "step": plan.step,
            "dtype": "bfloat16" if plan.bf16 else "float32",
            "exported_at": time.time(),
        }
        (plan.partial / EXPORT_INFO_FILE).write_text(json.dumps(info, indent=2) + "\n", encoding="utf-8")
        if plan.out.is_dir():
            plan.out.rmdir()  # empty (check_out), so the rename can take its place
        os.rename(plan.partial, plan.out)
    except BaseException:
        shutil.rmtree(plan.partial, ignore_errors=True)
        raise
    return {
        "done": True,
        "out": str(plan.out),
        "bytes": folder_bytes(plan.out),
        "seconds": round(time.monotonic() - started, 1),
    }


def folder_bytes(folder: Path) -> int:
    return sum(path.stat().st_size for path in Path(folder).rglob("*") if path.is_file())


def write_export(plan: ExportPlan, progress_path: str | os.PathLike | None = None) -> dict:
    """`merge_into` with each stage and the outcome appended to `progress_path` (when given).

    SIGTERM (Cancel) ends it like Ctrl-C, so the half-written folder is removed on the way out.
    """

    def record(line: dict) -> None:
        if progress_path:
            runfolder.append_jsonl(progress_path, [line])

    def report(stage: str) -> None:
        extra = {"model": plan.model, "adapter": str(plan.adapter), "out": str(plan.out)} if stage == STAGES[0] else {}
        record({"stage": stage, **extra})

    def interrupted(signum, frame):
        raise KeyboardInterrupt

    plan.out.parent.mkdir(parents=True, exist_ok=True)
    previous = signal.signal(signal.SIGTERM, interrupted)
    try:
        summary = merge_into(plan, report)
    except BaseException as exc:
        record({"done": True, "error": f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__})
        raise
    finally:
        signal.signal(signal.SIGTERM, previous)
    record(summary)
    return summary


# ---------------------------------------------------------------- as a background process


def export_command(plan: ExportPlan) -> list[str]:
    """The argument list `start_export` runs (never through a shell)."""
    command = [
        sys.executable,
        "-m",
        "workbench",
        "export-model",
        str(plan.run_dir),
        "--out",
        str(plan.out),
        "--progress",
        str(plan.progress_path),
    ]
    # named either way: without --checkpoint the command would merge the best evaluated checkpoint
    return command + ["--checkpoint", "final" if plan.step is None else str(plan.step)]


def start_export(plan: ExportPlan, confine=None) -> subprocess.Popen:
    """Start the export in its own process (its own session, so Cancel ends it whole); returns at once.

    Progress goes to `plan.progress_path` (replaced) and the output to the `.log` beside it.
    `confine`: a sandbox to start it in (`workbench.jobs.sandbox.confinement`; a dashboard with accounts gives one).
    """
    plan.out.parent.mkdir(parents=True, exist_ok=True)
    safe_files.unlink(plan.progress_path)  # in the run folder by default: never through a planted link
    command, env = export_command(plan), processes.job_env()
    if confine is not None:
        command, env = confine(command, env)
    # reaped on a thread: the dashboard drops the handle once the export reports it is done; under its
    # wall-time limit (WORKBENCH_EXPORT_TIME_LIMIT_S): the clock ends the whole sandbox past it
    command = job_clock.clocked(command, "export")
    return processes.spawn(command, plan.progress_path.with_suffix(".log"), env, reap=True)


def read_export(progress_path: str | os.PathLike, process: subprocess.Popen | None = None) -> dict:
    """Progress of an export: `{"stage", "done", "error", "out", "bytes", "seconds"}`.

    With `process`, one that exited without its final line is reported done,
    with an error carrying the exit code and the end of its log.
    """
    progress_path = Path(progress_path)
    records = runfolder.read_jsonl(progress_path)
    stages = [r["stage"] for r in records if r.get("stage") in STAGES]
    final = next((r for r in records if r.get("done")), None) or {}
    progress = {
        "stage": stages[-1] if stages else None,
        "done": bool(final),
        "error": final.get("error"),
        "out": final.get("out"),
        "bytes": final.get("bytes"),
        "seconds": final.get("seconds"),
    }
    if not final and process is not None and process.poll() is not None:
        log = progress_path.with_suffix(".log")
        tail = runfolder.read_log_tail(log.parent, 1500, name=log.name)
        ended = job_clock.ended_message("export", process.returncode)
        progress.update(
            done=True, error=ended or f"the export stopped with exit code {process.returncode}. {tail}".strip()
        )
    return progress


def cancel_export(process: subprocess.Popen, plan: ExportPlan, timeout: float = 5.0) -> None:
    """End an export: its process tree (SIGTERM, then SIGKILL), and whatever it had half written."""
    if process.poll() is None:
        processes.end_tree(process.pid, grace=timeout)
        process.wait(timeout=timeout)
    shutil.rmtree(plan.partial, ignore_errors=True)
