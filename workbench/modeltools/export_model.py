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

The output folder lies in a run's folder, which the run's code writes and may
swap a folder of for a link: below `ExportPlan.within` every check, mkdir,
listing, write, read and removal goes through descriptors opened without
following a link (runstore/safe_files.py `open_folder`), never a path checked
first and used later.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import stat
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
    # Every folder below this one on the way to `out` is opened without following a link, relative to the one
    # above it (runstore/safe_files.py `open_folder`): the run folder on a shared dashboard, the runs folder on
    # an open one, else the nearest folder above `out` that existed when planned.
    within: Path | None = None

    @property
    def root(self) -> Path:
        return self.within if self.within is not None else self.out.parent

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
    """The folder (one of the run folder's own) holds a PEFT adapter: its config and its weights, regular files
    of a real folder (`folder` a link is no adapter, and nothing is followed to tell)."""
    names = ("adapter_config.json",), checkpoint_integrity.ADAPTER_WEIGHTS_FILES
    return all(any(safe_files.is_file(folder / name, root=folder.parent) for name in group) for group in names)


def default_out(run_dir: Path, checkpoint: int | None = None) -> Path:
    """Where the dashboard writes by default: `<run>/merged`, or `<run>/merged-checkpoint-N` for a checkpoint."""
    return run_dir / (MERGED_DIR if checkpoint is None else f"{MERGED_DIR}-checkpoint-{checkpoint}")


def out_within(out: str | os.PathLike, within: str | os.PathLike | None = None) -> tuple[Path, Path]:
    """(the output folder, absolute and without `..`; the folder it is opened from): `within` when given (`out`
    must lie below it), else the nearest folder above `out` that exists, its links resolved (once, here: a CLI
    user's own links above `out`); ExportError otherwise."""
    text = str(out).strip()
    if not text:
        raise ExportError(field="out", rule="no output folder given", fix="name a new folder, e.g. runs/RUN/merged")
    path = Path(os.path.normpath(Path(text).expanduser().absolute()))
    if within is None:
        base = next((p for p in path.parents if p.is_dir()), Path(path.anchor))
        within = base.resolve()
        path = within.joinpath(*path.relative_to(base).parts)
    within = Path(os.path.normpath(Path(within).absolute()))
    if within not in path.parents:
        raise ExportError(field="out", rule=f"{path} is outside {within}", fix=f"name a new folder inside {within}")
    return path, within


def check_out(out: str | os.PathLike, within: str | os.PathLike | None = None) -> Path:
    """The output folder, absolute: it may not exist yet, or be empty; anything else is refused.

    Each folder on the way below `within` (`out_within`) is looked at through its parent's descriptor, never
    through a link: a folder a run's code swaps for a link is refused, never listed, never told apart by what
    lies behind it.
    """
    path, within = out_within(out, within)
    parts = path.relative_to(within).parts
    try:
        for depth in range(1, len(parts) + 1):
            here = within.joinpath(*parts[:depth])
            info = safe_files.lstat(here, root=within)
            if info is None:  # made by the export (or a link on the way: the export's own open refuses it)
                break
            if stat.S_ISLNK(info.st_mode):
                raise ExportError(field="out", rule=f"{here} is a link; an export never follows one", fix=_NEW)
            if not stat.S_ISDIR(info.st_mode):
                raise ExportError(field="out", rule=f"{here} is a file", fix=_NEW)
        held = safe_files.listing(path, within) if info is not None else []
    except OSError as exc:  # NotPlainFile: a folder on the way swapped for a link since it was looked at
        raise ExportError(field="out", rule=f"cannot look into {path} ({exc.strerror or exc})", fix=_NEW) from None
    if held:
        raise ExportError(
            field="out",
            rule=f"{path} already holds files ({', '.join(held[:4])})",
            fix="choose a new folder, or delete that one first",
        )
    with safe_files.open_folder(within, within) as fd:
        writable = os.access(".", os.W_OK | os.X_OK, dir_fd=fd)
    if not writable:
        raise ExportError(field="out", rule=f"cannot create {path}: {within} is not writable", fix=_WRITABLE)
    return path


_NEW = "name a new folder"
_WRITABLE = "choose a folder you can write to"


def plan_export(
    run: str | os.PathLike,
    checkpoint: int | None,
    out: str | os.PathLike,
    runs_dir: str | os.PathLike | None = None,
    within: str | os.PathLike | None = None,
    config: dict | None = None,
) -> ExportPlan:
    """Everything an export needs, checked before any model loads; ExportError (field, rule, fix) otherwise.

    `within`: see ExportPlan. `config`: the run's config as the launcher recorded it (a dashboard's; else the
    run's config.json, which its code can rewrite).
    """
    from workbench.sources.model_files import ModelError, check_model

    run_dir = run_folder(run, runs_dir)
    config = runfolder.read_config(run_dir) if config is None else config
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
    out, within = out_within(out, within)
    return ExportPlan(
        run_dir=run_dir,
        model=model.strip(),
        adapter=adapter,
        step=checkpoint,
        out=check_out(out, within),
        bf16=bool(config.get("bf16")),
        within=within,
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
    has_tokenizer = safe_files.is_file(plan.adapter / "tokenizer_config.json", root=plan.run_dir)
    tokenizer = AutoTokenizer.from_pretrained(plan.adapter if has_tokenizer else base_path)
    model = PeftModel.from_pretrained(base, str(plan.adapter))
    report("merging")
    merged = model.merge_and_unload()
    report("saving")
    # The folder `out` goes into is opened once, each folder on the way without following a link, and every
    # write, mkdir, removal and the final rename is relative to it: a folder of the run swapped for a link
    # meanwhile never redirects one.
    with safe_files.open_folder(plan.out.parent, plan.root, create=True) as parent:
        partial = plan.partial.name
        shutil.rmtree(partial, dir_fd=parent, ignore_errors=True)  # from an export killed earlier
        try:
            os.mkdir(partial, dir_fd=parent)
            size = _save_into(parent, partial, merged, tokenizer, plan)
            try:
                os.rmdir(plan.out.name, dir_fd=parent)  # empty (check_out), so the rename can take its place
            except FileNotFoundError:
                pass
            os.rename(partial, plan.out.name, src_dir_fd=parent, dst_dir_fd=parent)
        except BaseException:
            shutil.rmtree(partial, dir_fd=parent, ignore_errors=True)
            raise
    return {"done": True, "out": str(plan.out), "bytes": size, "seconds": round(time.monotonic() - started, 1)}


_FOLDER = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def _save_into(parent: int, name: str, merged, tokenizer, plan: ExportPlan) -> int:
    """The model, tokenizer and EXPORT_INFO_FILE written into folder `name` of `parent`, held open; its bytes.

    The libraries take a path: `/proc/self/fd/N` names the held folder itself, whatever its path holds now.
    """
    fd = os.open(name, _FOLDER, dir_fd=parent)
    try:
        held = f"/proc/self/fd/{fd}"
        merged.save_pretrained(held, safe_serialization=True)
        tokenizer.save_pretrained(held)
        info = {
            "run": plan.run_dir.name,
            "run_dir": str(plan.run_dir),
            "base_model": plan.model,
            "adapter": str(plan.adapter),
            "step": plan.step,
            "dtype": "bfloat16" if plan.bf16 else "float32",
            "exported_at": time.time(),
        }
        made = os.open(EXPORT_INFO_FILE, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644, dir_fd=fd)
        with os.fdopen(made, "w", encoding="utf-8") as handle:
            handle.write(json.dumps(info, indent=2) + "\n")
        return _bytes_at(fd)
    finally:
        os.close(fd)


def _bytes_at(fd: int) -> int:
    """The bytes of the regular files in the open folder `fd` and below (links not followed)."""
    total = 0
    for _, _, files, folder_fd in os.fwalk(".", dir_fd=fd, follow_symlinks=False):
        for name in files:
            info = os.stat(name, dir_fd=folder_fd, follow_symlinks=False)
            total += info.st_size if stat.S_ISREG(info.st_mode) else 0
    return total


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

    with safe_files.open_folder(plan.out.parent, plan.root, create=True):
        pass  # made through descriptors (the progress file goes beside `out`)
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
        "--within",
        str(plan.root),
    ]
    # named either way: without --checkpoint the command would merge the best evaluated checkpoint
    return command + ["--checkpoint", "final" if plan.step is None else str(plan.step)]


def start_export(plan: ExportPlan, confine=None) -> subprocess.Popen:
    """Start the export in its own process (its own session, so Cancel ends it whole); returns at once.

    Progress goes to `plan.progress_path` (replaced) and the output to the `.log` beside it.
    `confine`: a sandbox to start it in (`workbench.jobs.sandbox.confinement`; a dashboard with accounts gives one).
    """
    # In the run folder on a dashboard, whose code may swap any folder of it for a link: each folder on the way
    # is made and opened relative to the one above it, and the files beside `out` through it (safe_files).
    with safe_files.open_folder(plan.out.parent, plan.root, create=True):
        pass
    safe_files.unlink(plan.progress_path, root=plan.root)
    command, env = export_command(plan), processes.job_env()
    if confine is not None:
        command, env = confine(command, env)
    # under its wall-time limit (WORKBENCH_EXPORT_TIME_LIMIT_S): the clock ends the whole sandbox past it
    command = job_clock.clocked(command, "export")
    with safe_files.open_for_writing(plan.progress_path.with_suffix(".log"), append=False, root=plan.root) as log:
        # reaped on a thread: the dashboard drops the handle once the export reports it is done
        return processes.spawn(command, log, env, reap=True)


def read_export(
    progress_path: str | os.PathLike, process: subprocess.Popen | None = None, root: str | os.PathLike | None = None
) -> dict:
    """Progress of an export: `{"stage", "done", "error", "out", "bytes", "seconds"}`.

    With `process`, one that exited without its final line is reported done,
    with an error carrying the exit code and the end of its log. `root`: the plan's, below which nothing on
    the way to the files is followed (`plan.root`).
    """
    progress_path = Path(progress_path)
    records = runfolder.read_jsonl(progress_path, root=root)
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
        try:
            _, end = safe_files.read_tail(progress_path.with_suffix(".log"), 1500, root=root)
        except (OSError, ValueError):  # none, or no plain file there (never followed)
            end = b""
        tail = end.decode("utf-8", errors="replace")
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
    try:
        with safe_files.open_folder(plan.out.parent, plan.root) as parent:
            shutil.rmtree(plan.partial.name, dir_fd=parent, ignore_errors=True)
    except OSError:  # no folder there, or a link in its place: nothing of it is touched
        pass
