"""The Compare tab's parts: probe prompts answered by the base model and a checkpoint, side by side.

A comparison is a `ProbeJob`: the prompts and two sides (the run's base model,
and one of its checkpoints or its final adapter). Each side is answered by a
`python -m workbench sample` process (workbench.modeltools.sampling), one side after the
other so a CPU shared with a training run is not split three ways. Answers
land in `runs/<run_id>/probes/<side>-<key>.jsonl`, where the key hashes the
model, adapter, prompts and length: the same question asked again is read
back at once instead of sampled again, also after a reload.
`stored_comparisons` reads the finished pairs back (for the run report).

The job (with its process handle) lives in the browser session's `gr.State`;
`advance_job` is called on each timer tick and starts the next side when one
finishes. `cancel_job` kills the running process group. workbench.ui.compare_view
renders a job's progress and answers.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import stat
import subprocess
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

from workbench.errors import WorkbenchError
from workbench.modeltools import sampling
from workbench.runstore import checkpoint_integrity, runfolder, safe_files
from workbench.spec.run_status import RunStatus

PROBES_DIR = "probes"
BASE_LABEL = "base model"
FINAL_LABEL = "final adapter"
MAX_PROMPTS = 12
# The longest answer length looked for when a stored side's file name is matched back to its
# settings: the Compare tab offers 8 to 256 tokens, the `sample` command any number.
MAX_MATCHED_TOKENS = 4096


class ProbeError(WorkbenchError):
    """Bad Compare input; the message names the field and how to fix it."""


@dataclass
class Side:
    """One column of the comparison: who answers, and where the answers go."""

    title: str
    adapter: str | None
    out_path: str


@dataclass
class ProbeJob:
    """A comparison under way in one browser session."""

    model: str
    prompts: list[str]
    sides: list[Side]
    max_new_tokens: int
    running: int | None = None  # index of the side being sampled now
    process: subprocess.Popen | None = field(default=None, repr=False)
    cancelled: bool = False
    confine: Callable[..., tuple] | None = field(default=None, repr=False)  # the sandbox sampling starts in

    @property
    def finished(self) -> bool:
        return (
            self.cancelled
            or (self.running is None and all(side_complete(s) for s in self.sides))
            or self.error is not None
        )

    @property
    def error(self) -> str | None:
        for side in self.sides:
            progress = sampling.read_sampling(side.out_path)
            if progress["error"]:
                return f"{side.title}: {progress['error']}"
        if self.running is not None and self.process is not None:
            progress = sampling.read_sampling(self.sides[self.running].out_path, self.process)
            if progress["error"]:
                return f"{self.sides[self.running].title}: {progress['error']}"
        return None


def list_checkpoints(run_dir: str | Path) -> list[tuple[str, str]]:
    """(label, adapter folder) for each complete checkpoint of a run, by step, then the final adapter."""
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        return []
    choices = [
        (side_label(path), str(path))
        for path in checkpoint_integrity.checkpoint_dirs(run_dir)
        if safe_files.is_file(path / "adapter_config.json", root=run_dir)
    ]
    final = run_dir / runfolder.ADAPTER_DIR
    if safe_files.is_file(final / "adapter_config.json", root=run_dir):  # adapter/ a link (anywhere) is not the run's
        choices.append((adapter_label(runfolder.read_run_status(run_dir)), str(final)))
    return choices


def adapter_label(status: RunStatus) -> str:
    """How the run's adapter/ folder is named, true of what it holds: the final adapter only when the run finished
    with it; the adapter at a stop, with its step; or one saved at an earlier end, before a resume.

    status.json's `adapter_step` is the step adapter/ was saved at; a run from before it was recorded saved its
    adapter at the step it ended at, when it ended finished or stopped.
    """
    state, step = status.state, status.step
    saved = status.adapter_step
    if state is None:  # no status.json: nothing says when it was saved
        return "adapter"
    this_end = state in ("finished", "stopped") and (saved is None or saved == step)
    if this_end and state == "finished":
        return FINAL_LABEL
    if this_end:
        return f"adapter at stop, step {step or 0}"
    if saved is not None:
        return f"adapter saved at step {saved}, at an earlier end of the run"
    return "adapter saved at an earlier end of the run"


def side_label(adapter: str | Path | None) -> str:
    """How a side is named: the base model, `step N (checkpoint-N)`, or the run's adapter (`adapter_label`)."""
    if not adapter:
        return BASE_LABEL
    name = Path(adapter).name
    if name.startswith("checkpoint-"):
        return f"step {name.removeprefix('checkpoint-')} ({name})"
    return adapter_label(runfolder.read_run_status(Path(adapter).parent)) if name == runfolder.ADAPTER_DIR else name


def default_prompts(config: dict) -> list[str]:
    """The probe prompts of the run's task ([] for a run on a user's file or an unknown task; a task that reads
    a named dataset keeps its own, whichever copy of that dataset the run names)."""
    from workbench.spec.tasks import TASKS

    task = TASKS.get(config.get("task") or "")
    if task is None:
        return []
    if not task.dataset_required and (config.get("dataset_name") or config.get("dataset_path")):
        return []
    return list(task.probe_prompts)


def parse_prompts(text: str) -> list[str]:
    """Prompts typed one per line; blank lines are ignored."""
    prompts = [line.strip() for line in (text or "").splitlines() if line.strip()]
    if not prompts:
        raise ProbeError(
            "Probe prompts: the box is empty; type one prompt per line (or pick a run whose task has probe prompts)"
        )
    if len(prompts) > MAX_PROMPTS:
        raise ProbeError(
            f"Probe prompts: {len(prompts)} lines is more than {MAX_PROMPTS}; keep the "
            f"{MAX_PROMPTS} that matter most (each is answered once per side)"
        )
    return prompts


def _answers_key(model: str, adapter: str | None, prompts: list, max_new_tokens: int) -> str:
    key_source = json.dumps([model, adapter and Path(adapter).name, prompts, max_new_tokens])
    return hashlib.sha1(key_source.encode("utf-8")).hexdigest()[:10]


def answers_path(
    run_dir: str | Path, title: str, model: str, adapter: str | None, prompts: list[str], max_new_tokens: int
) -> Path:
    """Where one side's answers are kept: named by side, keyed by everything that changes them."""
    key = _answers_key(model, adapter, prompts, max_new_tokens)
    slug = re.sub(r"[^A-Za-z0-9]+", "-", title).strip("-").lower()
    return Path(run_dir) / PROBES_DIR / f"{slug}-{key}.jsonl"


def side_complete(side: Side) -> bool:
    progress = sampling.read_sampling(side.out_path)
    return progress["done"] and not progress["error"]


def plan_job(
    run_dir: str | Path,
    config: dict,
    checkpoint: tuple[str, str] | None,
    prompts: list[str],
    max_new_tokens: int,
    confine: Callable[..., tuple] | None = None,
) -> ProbeJob:
    """The comparison for one run: its base model, and the chosen checkpoint when there is one.

    `confine`: the sandbox its sampling processes start in (workbench.jobs.sandbox.confinement).
    """
    model = config.get("model")
    if not model:
        raise ProbeError("Run: its config.json names no model; pick another run")
    chosen = [(BASE_LABEL, None)] + ([checkpoint] if checkpoint else [])
    sides = [
        Side(title, adapter, str(answers_path(run_dir, title, model, adapter, prompts, max_new_tokens)))
        for title, adapter in chosen
    ]
    return ProbeJob(model=model, prompts=prompts, sides=sides, max_new_tokens=max_new_tokens, confine=confine)


def advance_job(job: ProbeJob, start: Callable[..., subprocess.Popen] = sampling.start_sampling) -> ProbeJob:
    """Start the next side that still needs answers once the running one has finished."""
    if job.cancelled:
        return job
    if job.running is not None:
        progress = sampling.read_sampling(job.sides[job.running].out_path, job.process)
        if not progress["done"]:
            return job
        job = replace(job, running=None, process=None)
        if progress["error"]:
            return job
    for index, side in enumerate(job.sides):
        if not side_complete(side):
            process = start(
                job.model,
                job.prompts,
                side.out_path,
                adapter_dir=side.adapter,
                max_new_tokens=job.max_new_tokens,
                **({"confine": job.confine} if job.confine else {}),
            )
            return replace(job, running=index, process=process)
    return job


def cancel_job(job: ProbeJob) -> ProbeJob:
    """Kill the running sampling process (its whole group) and mark the job cancelled."""
    if job.process is not None:
        sampling.cancel_sampling(job.process)
    return replace(job, running=None, process=None, cancelled=True)


# ---------------------------------------------------------------- reading stored answers back


@dataclass
class Comparison:
    """The base model and one checkpoint on the same prompts, read back from the probes folder."""

    label: str  # the trained side: "final adapter", "adapter at stop, step 7" or "step 20 (checkpoint-20)"
    max_new_tokens: int
    prompts: list  # text, or chat messages when the `sample` command was given them
    base: list[str]  # the base model's answers, in prompt order
    trained: list[str]  # the checkpoint's answers, in prompt order


def _finished_side(path: Path) -> tuple[dict, list] | None:
    """(header, answers in prompt order) of a side that answered every prompt, else None."""
    records = runfolder.read_jsonl(path)
    header = next((r for r in records if "total" in r), None)
    answers = sorted((r for r in records if "answer" in r), key=lambda r: r.get("index", 0))
    final = next((r for r in records if r.get("done")), None)
    if header is None or final is None or final.get("error") or len(answers) != header.get("total"):
        return None
    return header, answers


def _matched_tokens(path: Path, model: str, adapter: str | None, prompts: list) -> int | None:
    """The answer length a side was asked for, found again from the key in its file name."""
    key = path.stem.rsplit("-", 1)[-1]
    return next(
        (tokens for tokens in range(1, MAX_MATCHED_TOKENS + 1) if _answers_key(model, adapter, prompts, tokens) == key),
        None,
    )


def stored_comparisons(run_dir: str | Path) -> list[Comparison]:
    """Every finished base-vs-checkpoint pair in the run's probes folder, by step, the final adapter last.

    A checkpoint's side pairs with the base model's side that answered the same
    prompts with the same model and answer length (the file the Compare tab
    would read back for it). Sides that were cancelled, failed or are still
    sampling are left out; [] when nothing was compared.
    """
    folder = Path(run_dir) / PROBES_DIR
    # Only regular files of the folder itself (a link anywhere on the way is not followed), by their own times.
    try:  # listed on the folder's descriptor: a `probes` swapped for a link is refused, never listed
        names = [name for name in safe_files.listing(folder, run_dir) if name.endswith(".jsonl")]
    except OSError:
        names = []
    found = [
        (info.st_mtime, path)
        for path in (folder / name for name in names)
        if (info := safe_files.lstat(path, root=run_dir)) and stat.S_ISREG(info.st_mode)
    ]
    paths = [path for _, path in sorted(found)]
    comparisons = []
    for path in paths:
        side = _finished_side(path)
        if side is None or not side[0].get("adapter"):
            continue
        header, answers = side
        model, adapter = header.get("model"), header["adapter"]
        prompts = [answer.get("prompt") for answer in answers]
        tokens = _matched_tokens(path, model, adapter, prompts)
        base = (
            None if tokens is None else _finished_side(answers_path(run_dir, BASE_LABEL, model, None, prompts, tokens))
        )
        if base is not None:
            comparisons.append(
                Comparison(
                    side_label(adapter), tokens, prompts, [a["answer"] for a in base[1]], [a["answer"] for a in answers]
                )
            )
    return sorted(comparisons, key=lambda c: _step_of(c.label))


def _step_of(label: str) -> float:
    """A checkpoint side's step; the final adapter (and any other) after every checkpoint."""
    match = re.match(r"step (\d+) ", label)
    return int(match.group(1)) if match else math.inf
