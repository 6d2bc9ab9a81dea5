"""Following a run as it trains: what its folder holds that is new since the last look.

One API for every reader of a live run: the dashboard's Train tab (each
browser session keeps a `Seen` in its `gr.State`), `python -m workbench
watch` and the notebooks (`RunFollower`, `follow`).

- `Seen`: what one reader has read of a run: the byte offsets it read up to
  in `metrics.jsonl` and `completions.jsonl` (and which file they are in: a
  resume writes the files anew), the metric records as they count (one per
  step, `resumed.merge_metrics`) and their table (`metric_frames.metrics_frame`,
  extended a row a step), the steps that have completions and the records of
  the newest one, the status, the config, and the lines found unreadable.
- `start(run_dir)` a fresh `Seen` (the run's config read); `look(seen,
  run_dir)` reads only the bytes written since and says what changed
  (`Changes`), so a page redraws only that. The first look at a file takes
  what this process has already read of it (`runstore.jsonl_cache`): a page
  opening a run of 640,000 completions parses only its newest step's lines.
- `change_signature`: a short hash of what a redraw depends on (a few `stat`
  calls), so a page asks for a look only when something changed.
- `RunFollower` / `follow(run_dir)`: the same for a terminal or a notebook:
  each look returns `News` (the steps new since the last one, the health
  alarms that appeared, the state when it changed); `follow` yields them
  until the run reaches a final state.
- `completion_steps`, `completions_of_step`, `read_metrics`: one step's
  completions and the metrics of a run read as it grows (the Runs tab's).

This module reads the run folder through `runstore.runfolder` and
`runstore.jsonl_cache` (the one contract between a training process and its
readers); the architecture test lets `insight` import those two only.
No gradio and no torch.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, TypeVar

from workbench.insight.eval_results import read_evals
from workbench.insight.health import Alarm, check_health
from workbench.insight.metric_frames import metrics_frame
from workbench.insight.resumed import latest_round, merge_metrics
from workbench.runstore import jsonl_cache, kept_records, launch_records, runfolder, safe_files
from workbench.spec.run_records import Skipped

StatusReader = Callable[[Path], dict]


@dataclass
class Seen:
    """What one reader has read of a run so far (nothing but the config, at the start)."""

    metrics_offset: int = 0
    completions_offset: int = 0
    # Which file the offsets are in (runfolder.file_identity): a resume replaces the files.
    metrics_file: tuple | None = None
    completions_file: tuple | None = None
    metrics: list[dict] = field(default_factory=list)
    # metric_frames.metrics_frame(metrics), kept beside them so a new step adds one row instead of building it anew.
    frame: Any = field(default=None, compare=False, repr=False)
    # Steps that have completions, ascending, and the records of the newest one.
    completion_steps: list[int] = field(default_factory=list)
    newest_completions: list[dict] = field(default_factory=list)
    status: dict = field(default_factory=dict)
    config: dict = field(default_factory=dict)
    # Lines of metrics.jsonl and completions.jsonl that could not be taken ({file name: Skipped}).
    skipped: dict = field(default_factory=dict)
    # Of metrics.jsonl's read through the process's cache (`jsonl_cache.records`): which read of the file and how
    # many of its records this reader took, and what it leaves out, when the newest only are kept ({name: note}).
    metrics_generation: int = 0
    metrics_count: int = 0
    left_out: dict = field(default_factory=dict)


S = TypeVar("S", bound=Seen)


@dataclass(frozen=True)
class Changes:
    """What a look found new, so a reader redraws only that."""

    metrics: bool = False
    completions: bool = False
    status: bool = False
    skipped: bool = False  # more lines found unreadable: the alarms' note changes

    @property
    def anything(self) -> bool:
        return self.metrics or self.completions or self.status or self.skipped


def is_over(status: dict) -> bool:
    """Whether the run has reached a final state (finished, failed, stopped, unreadable, lost)."""
    return status.get("state") in runfolder.FINAL_STATES


def start(run_dir: str | Path, seen: S | None = None) -> S:
    """`seen` (a fresh `Seen` by default; a subclass keeps its own fields) with the run's config read."""
    return replace(seen if seen is not None else Seen(), config=launch_records.recorded_config(Path(run_dir)))


def look(seen: S, run_dir: str | Path, read_status: StatusReader = runfolder.read_shown_status) -> tuple[S, Changes]:
    """Read what the run wrote since `seen`; return what is seen now and what changed.

    `read_status(run_dir)` is injectable so a reader can use the launcher's
    status, which also notices a process that died without saying so.
    Nothing new returns `seen` itself.
    """
    run_dir = Path(run_dir)
    original = seen
    seen, metrics_replaced, completions_replaced = _forget_replaced_files(seen, run_dir)
    read = _metrics_read(seen, run_dir)
    if seen.metrics_offset and (read.generation != seen.metrics_generation or read.count < seen.metrics_count):
        seen, metrics_replaced = replace(seen, metrics_offset=0, metrics=[], frame=None, metrics_count=0), True
    new_metrics = read.since(seen.metrics_count) if seen.metrics_offset else read.records
    completions = _read_completions(seen, run_dir)
    skipped = {**seen.skipped}
    if read.skipped.count:  # the cache counts the lines of its read of the file
        skipped[runfolder.METRICS_FILE] = read.skipped
    if completions["skipped"].count:
        skipped[runfolder.COMPLETIONS_FILE] = (
            skipped.get(runfolder.COMPLETIONS_FILE, Skipped()) + completions["skipped"]
        )
    status = read_status(run_dir) or {}
    metrics, frame, left_out = seen.metrics, seen.frame, seen.left_out
    if new_metrics or frame is None:
        metrics, frame, left_out = _merged(seen, new_metrics, read)
    changes = Changes(
        metrics=bool(new_metrics) or metrics_replaced,
        completions=completions["any"] or completions_replaced,
        skipped=skipped != seen.skipped or left_out != seen.left_out,
        status=status_signature(status) != status_signature(seen.status),
    )
    if not changes.anything:
        return original, changes
    return replace(
        seen,
        metrics_offset=read.offset,
        metrics_generation=read.generation,
        metrics_count=read.count,
        left_out=left_out,
        completions_offset=completions["offset"],
        metrics_file=read.identity or seen.metrics_file,
        completions_file=completions["file"],
        metrics=metrics,
        frame=frame,
        completion_steps=completions["steps"],
        newest_completions=completions["newest"],
        status=status,
        skipped=skipped,
    ), changes


def _metrics_read(seen: Seen, run_dir: Path) -> jsonl_cache.RecordsRead:
    """The process's read of metrics.jsonl (`jsonl_cache.records`); when the file is the one `seen` read and no
    longer, what `seen` took of it, with no byte read (a page's refresh with nothing new reads nothing)."""
    path = run_dir / runfolder.METRICS_FILE
    info = safe_files.lstat(path) if seen.metrics_offset else None
    if info is not None and info.st_size == seen.metrics_offset and (info.st_dev, info.st_ino) == seen.metrics_file:
        kept = kept_records.Kept(dropped=seen.metrics_count)
        return jsonl_cache.RecordsRead(
            seen.metrics_file, seen.metrics_offset, kept=kept, generation=seen.metrics_generation
        )
    return jsonl_cache.records(path)


def _merged(seen: Seen, new: list, read: jsonl_cache.RecordsRead) -> tuple[list, Any, dict]:
    """The reader's metric records with `new` merged in, their frame, and what it leaves out ({name: note}).

    A reader keeps at most the admin's number of records (`kept_records.limits`) as the cache does: past it by a
    quarter, the oldest are let go at once (the frame is built anew then, not at every step)."""
    bounds = kept_records.limits()
    metrics = merge_metrics(seen.metrics, new) if new else seen.metrics
    frame = metrics_frame(metrics, previous=(seen.metrics, seen.frame))
    kept = read.kept
    if len(metrics) > bounds.most_records + bounds.most_records // 4:
        kept = replace(kept, dropped=kept.dropped + len(metrics) - bounds.most_records)
        metrics = metrics[-bounds.most_records :]
        frame = metrics_frame(metrics)
    if not kept.left_out:
        return metrics, frame, {}
    note = kept_records.left_out_note(runfolder.METRICS_FILE, replace(kept, records=metrics), bounds)
    return metrics, frame, {runfolder.METRICS_FILE: note}


def _read_completions(seen: Seen, run_dir: Path) -> dict:
    """The completions since `seen`: steps with completions, the newest step's records, offset, file, skipped,
    and whether any were read."""
    path = run_dir / runfolder.COMPLETIONS_FILE
    num_generations = seen.config.get("num_generations")
    info = safe_files.lstat(path) if seen.completions_offset else None
    # more appended since the last look than a reader parses at once (`kept_records`): as a first look, the newest
    # step only, from the process's index of the file (which parses no line)
    far = info is not None and info.st_size - seen.completions_offset > kept_records.limits().most_bytes
    if seen.completions_offset == 0 or far:
        steps, newest, offset, identity, skipped = read_completions(path, num_generations)
        return {
            "steps": steps,
            "newest": newest,
            "offset": offset,
            "file": identity or seen.completions_file,
            "skipped": skipped,
            "any": bool(steps),
        }
    new, offset, skipped = runfolder.read_records_from(path, seen.completions_offset)
    steps, newest = seen.completion_steps, seen.newest_completions
    if new:
        steps, newest = merge_completions(steps, newest, new, num_generations)
    return {
        "steps": steps,
        "newest": newest,
        "offset": offset,
        "file": seen.completions_file,
        "skipped": skipped,
        "any": bool(new),
    }


def _forget_replaced_files(seen: S, run_dir: Path) -> tuple[S, bool, bool]:
    """`seen` with what it read of a file forgotten when that file was replaced, and which were.

    A resumed run cuts its files back to the checkpoint's step by writing them
    anew: the bytes read past may be gone, so it reads again from 0.
    """
    metrics_id = runfolder.file_identity(run_dir / runfolder.METRICS_FILE)
    completions_id = runfolder.file_identity(run_dir / runfolder.COMPLETIONS_FILE)
    metrics_replaced = seen.metrics_offset > 0 and metrics_id != seen.metrics_file
    completions_replaced = seen.completions_offset > 0 and completions_id != seen.completions_file
    if metrics_replaced:
        seen = replace(
            seen,
            metrics_offset=0,
            metrics=[],
            metrics_count=0,
            skipped={k: v for k, v in seen.skipped.items() if k != runfolder.METRICS_FILE},
        )
    if completions_replaced:
        seen = replace(
            seen,
            completions_offset=0,
            completion_steps=[],
            newest_completions=[],
            skipped={k: v for k, v in seen.skipped.items() if k != runfolder.COMPLETIONS_FILE},
        )
    if (metrics_id, completions_id) != (seen.metrics_file, seen.completions_file):
        seen = replace(seen, metrics_file=metrics_id, completions_file=completions_id)
    return seen, metrics_replaced, completions_replaced


def status_signature(status: dict) -> tuple:
    """The parts of a status that change what a reader shows (not the heartbeat)."""
    error = status.get("error")
    return (
        status.get("state"),
        status.get("step"),
        status.get("total_steps"),
        status.get("pid"),
        repr(error) if error else None,
        repr(status.get("vllm")),
        status.get("queue_position"),
        status.get("waits_for"),
        status.get("speed_probe"),
    )


# ------------------------------------------------------------------ completions


def merge_completions(
    steps: list[int], newest: list[dict], new: list[dict], num_generations: int | None = None
) -> tuple[list[int], list[dict]]:
    """Fold new completion records into (steps with completions, records of the newest step)."""
    steps = list(steps)
    newest = list(newest)
    for record in new:
        step = record.get("step")
        if step is None:
            continue
        if steps and step == steps[-1]:
            newest.append(record)
            continue
        steps = _fold_step(steps, step)
        newest = [record]
    # the newest step written twice in a row (a resume right after it was generated): its last round counts
    return steps, (latest_round(newest, steps[-1], num_generations) if steps else newest)


def _fold_step(steps: list, step) -> list:
    """`steps` after lines of a step other than the last: a resumed run generates earlier steps again."""
    if steps and step < steps[-1]:
        steps = [s for s in steps if s < step]  # forget the later ones
    steps.append(step)
    return steps


def read_completions(
    path: Path, num_generations: int | None = None
) -> tuple[list, list[dict], int, tuple | None, Skipped]:
    """(steps with completions, records of the newest step, offset read up to, file identity, lines skipped)
    of a whole file.

    The same as `merge_completions` over every record of the file, read from
    the process's step index (`jsonl_cache.step_index`): only the newest
    step's lines are parsed (so only those can be found unreadable).
    """
    index = jsonl_cache.step_index(path)
    steps: list = []
    for step, _, _ in index.stretches:
        if not steps or step != steps[-1]:
            steps = _fold_step(steps, step)
    newest: list[dict] = []
    skipped = Skipped()
    if index.stretches:
        step, start_at, end = index.stretches[-1]
        newest, skipped = jsonl_cache.read_span(path, start_at, end)
        newest = latest_round(newest, step, num_generations)
    return steps, newest, index.offset, index.identity, skipped


def completion_steps(run_dir: str | Path) -> list:
    """The steps that have completions, ascending, from the process's index of completions.jsonl."""
    return jsonl_cache.step_index(Path(run_dir) / runfolder.COMPLETIONS_FILE).steps


def records_of_step(run_dir: str | Path, step) -> list[dict]:
    """The completion records of one step's last stretch of lines (which holds its newest round)."""
    return jsonl_cache.records_of_step(Path(run_dir) / runfolder.COMPLETIONS_FILE, step)


def completions_of_step(run_dir: str | Path, step: int) -> list[dict]:
    """All completion records of one step's newest round (for an earlier step picked on a slider).

    Only that step's lines are read, found in the process's index of the file.
    """
    # A resumed run may have logged the step twice: the later round is the one that counts.
    return latest_round(
        records_of_step(run_dir, step), step, launch_records.recorded_config(Path(run_dir)).get("num_generations")
    )


# ------------------------------------------------------------------ a page's question: anything new?


def change_signature(
    runs_dir: str | Path,
    run_id: str | None,
    read_status: StatusReader = runfolder.read_shown_status,
    run_dirs: list[Path] | None = None,
) -> str:
    """A short hash of what a view of `run_id` depends on; it changes when a redraw is due (`signature_and_status`)."""
    return signature_and_status(runs_dir, run_id, read_status, run_dirs)[0]


def signature_and_status(
    runs_dir: str | Path,
    run_id: str | None,
    read_status: StatusReader = runfolder.read_shown_status,
    run_dirs: list[Path] | None = None,
) -> tuple[str, dict]:
    """A short hash of what a view of `run_id` depends on, and the status it read ({} for no run).

    It covers the newest run in the folder (a run started elsewhere), the size
    and identity of the run's metrics and completions files (new lines, a
    resume's rewrite) and the parts of its status a reader shows. A few
    `stat` calls and one small JSON read: cheap enough to ask every second.
    A run id that is not a run folder of `runs_dir` (deleted, or not a plain
    name) reads as gone, never as a path. `run_dirs`: the run folders the
    reader may see (default all of them), so another user's run moves no
    one else's signature.
    """
    run_dirs = runfolder.list_run_dirs(runs_dir) if run_dirs is None else run_dirs
    parts = [run_dirs[0].name if run_dirs else ""]
    run_dir = next((path for path in run_dirs if path.name == run_id), None) if run_id else None
    status: dict = {}
    if run_dir is None:
        parts.append("gone" if run_id else "none")
    else:
        for name in (runfolder.METRICS_FILE, runfolder.COMPLETIONS_FILE):
            info = safe_files.lstat(run_dir / name)  # the name's own, never a link's target
            parts.append("-" if info is None else f"{info.st_ino}:{info.st_size}")
        status = read_status(run_dir) or {}
        parts.append(repr(status_signature(status)))
    return hashlib.sha1("|".join(parts).encode()).hexdigest()[:16], status


# ------------------------------------------------------------------ metrics of a run, read as it grows


@dataclass(frozen=True)
class RunMetrics:
    """What a reader has of one run's metrics: the records as they count and their metric_frames.metrics_frame.

    `read` is how many of the records of the cache's read of the file (`jsonl_cache.records`, its `generation`)
    they hold, so the next read folds in only the records after them; `left_out` says what the reader left out
    (the newest records only are kept: `kept_records`), or "".
    """

    records: list = field(default_factory=list)
    frame: Any = None
    read: int = 0
    generation: int = 0
    left_out: str = ""


def read_metrics(run_dir: str | Path, previous: RunMetrics | None = None) -> RunMetrics:
    """The run's metrics, folding into `previous` (this reader's last read of the run) only the new records.

    The file is read through the process's cache (`jsonl_cache.records`): an overlay redrawn while a run
    goes parses only the lines appended since, and adds only their rows to the frame. A file read anew
    (a resume's rewrite) starts over.
    """
    read = jsonl_cache.records(Path(run_dir) / runfolder.METRICS_FILE)
    if previous is None or previous.generation != read.generation or read.count < previous.read:
        previous = RunMetrics(generation=read.generation)
    if previous.frame is not None and read.count == previous.read:
        return previous
    seen = Seen(metrics=previous.records, frame=previous.frame)
    records, frame, left_out = _merged(seen, read.since(previous.read), read)
    return RunMetrics(records, frame, read.count, read.generation, left_out.get(runfolder.METRICS_FILE, ""))


# ------------------------------------------------------------------ a terminal's or a notebook's follower


@dataclass(frozen=True)
class News:
    """What one look of a `RunFollower` found: new steps, new alarms, a new state."""

    steps: list[dict]  # metric records of steps not reported before (or trained again after a resume)
    alarms: list[Alarm]  # health alarms raised now that were not at the last look
    state: str | None  # the run's state when it changed since the last look, else None
    seen: Seen  # everything read so far: seen.metrics, seen.frame (for figures), seen.status

    @property
    def anything(self) -> bool:
        return bool(self.steps or self.alarms or self.state)


class RunFollower:
    """One reader following one run: each `look()` returns the `News` since the one before.

        follower = RunFollower(run_dir)
        news = follower.look()       # everything so far, at first
        news.steps, news.alarms, news.state, follower.over

    A step counts as new the first time it is seen, and again when a resume
    trains it anew (its values change); the end-of-run summary TRL merges into
    the last step's record does not make that step new. An alarm counts as new
    when its kind was not raised at the look before.
    """

    def __init__(self, run_dir: str | Path, read_status: StatusReader = runfolder.read_shown_status):
        self.run_dir = Path(run_dir)
        self.read_status = read_status
        self.seen: Seen = start(self.run_dir)
        self._reported: dict = {}  # step -> the record reported for it
        self._alarm_kinds: set[str] = set()
        self._state: str | None = None

    @property
    def over(self) -> bool:
        """The run has reached a final state."""
        return is_over(self.seen.status)

    def look(self) -> News:
        self.seen, changes = look(self.seen, self.run_dir, self.read_status)
        steps = self._new_steps() if changes.metrics else []
        alarms = self._new_alarms() if changes.metrics else []
        state = self.seen.status.get("state")
        new_state = state if state != self._state else None
        self._state = state
        return News(steps, alarms, new_state, self.seen)

    def _new_steps(self) -> list[dict]:
        new = []
        for record in self.seen.metrics:
            step = record.get("step")
            if step is None:
                continue
            before = self._reported.get(step)
            if before is record:  # read before, unchanged (merge_metrics keeps the records it had)
                continue
            if before is None or not before.items() <= record.items():
                new.append(record)
            self._reported[step] = record
        return new

    def _new_alarms(self) -> list[Alarm]:
        alarms = check_health(
            self.seen.frame if self.seen.frame is not None else self.seen.metrics,
            self.seen.config,
            read_evals(self.run_dir),
        )  # eval.jsonl: only the lines added since are parsed
        kinds = {alarm.kind or alarm.title for alarm in alarms}
        new = [alarm for alarm in alarms if (alarm.kind or alarm.title) not in self._alarm_kinds]
        self._alarm_kinds = kinds
        return new


def follow(
    run_dir: str | Path,
    interval: float = 2.0,
    read_status: StatusReader = runfolder.read_shown_status,
    sleep: Callable[[float], Any] = time.sleep,
) -> Iterator[News]:
    """Look at the run every `interval` seconds and yield the `News` of each look that found any (the first
    look always), until the run reaches a final state (the `News` that saw it carries it in `state`).

    After the final state is seen the folder is read once more, so lines
    written just before the status said so are not missed.
    """
    follower = RunFollower(run_dir, read_status)
    first = True
    while True:
        news = follower.look()
        if news.anything or first:
            yield news
        first = False
        if follower.over:
            last = follower.look()
            if last.anything:
                yield last
            return
        sleep(interval)
