"""What one browser session knows about the run it watches, and the pure steps of a poll.

The Train tab keeps a `RunWatch` in a `gr.State` (one per browser session,
never a process global): which run it shows, the byte offsets it has read up
to in `metrics.jsonl` and `completions.jsonl`, the metric records read so far
(and their table, `figures.metrics_frame`, extended row by row) and the
completions of the newest step. Every refresh calls `poll_run`, which reads
only the bytes written since the last one and says what changed, so the tab
can skip redrawing what did not. The first read of a file takes what this
process has already read of it (`jobs.jsonl_cache`): the metric records, and
for completions an index of where each step's lines lie, so a page opening
a run of 640,000 completions parses only those of its newest step.

Which run a freshly loaded page shows is `choose_run`: the one this browser
watched before (kept in `gr.BrowserState`) unless a newer run is live, else
the newest live run, else the newest run.

The page does not ask the server to poll: its script (`WATCH_JS`) fetches
`change_signature` of the run it shows, a short hash of what a redraw depends
on, and asks for a redraw only when it differs from the one the progress bar
was drawn from. Between steps that costs a few file stats, not an event.

Also here: the progress numbers (step, total, elapsed, remaining) and their
HTML, whose clock the page's script keeps moving (for a run waiting in the GPU
queue: its position and what it waits for), and the failure panel (hint,
error, tail of train.log). No gradio import.
"""

from __future__ import annotations

import hashlib
import html
import os
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass, field, replace
from pathlib import Path
from statistics import mean
from typing import Any, Callable

from workbench.insight.figures import metrics_frame
from workbench.insight.health import Alarm
from workbench.insight.resumed import latest_round, merge_metrics
from workbench.jobs import jsonl_cache, runfolder
from workbench.spec.numbers import format_duration
from workbench.spec.run_records import Skipped

# How many of the latest step_time values the remaining-time estimate averages.
RECENT_STEPS = 5


@dataclass
class RunWatch:
    """The run one browser session shows and what it has read of it."""

    run_id: str | None = None
    metrics_offset: int = 0
    completions_offset: int = 0
    # Which file the offsets are in (runfolder.file_identity): a resume replaces the files.
    metrics_file: tuple | None = None
    completions_file: tuple | None = None
    metrics: list[dict] = field(default_factory=list)
    # figures.metrics_frame(metrics), kept beside them so a new step adds one row instead of building it anew.
    frame: Any = field(default=None, compare=False, repr=False)
    # Steps that have completions, ascending, and the records of the newest one.
    completion_steps: list[int] = field(default_factory=list)
    newest_completions: list[dict] = field(default_factory=list)
    status: dict = field(default_factory=dict)
    config: dict = field(default_factory=dict)
    # The newest run id this session has seen, to notice runs started elsewhere.
    newest_known: str | None = None
    # The pace the page's timer polls at now (seconds; 0 before the first draw).
    poll_seconds: float = 0.0
    # Whether the "More metrics" section is open: its figures are drawn only then.
    more_metrics_open: bool = False
    # change_signature of the run folder, taken before the reads the page now shows.
    signature: str = ""
    # What the page's panels and buttons show (failure and server panels, Stop, Resume, the picker's runs):
    # a refresh sends them again only when that changed. Each update costs Gradio a component built anew.
    controls_shown: tuple | None = None
    picker_shown: tuple | None = None
    # Lines of metrics.jsonl and completions.jsonl this watch read and could not take ({file name: Skipped}).
    skipped: dict = field(default_factory=dict)


@dataclass(frozen=True)
class Changes:
    """What a poll found new, so the tab redraws only that."""

    metrics: bool = False
    completions: bool = False
    status: bool = False
    skipped: bool = False  # more lines found unreadable: the alarms' note changes

    @property
    def anything(self) -> bool:
        return self.metrics or self.completions or self.status or self.skipped


class Drawn:
    """What refreshes drew, kept by what they were drawn from: a small cache shared by every page of the process.

    Every page that shows a run at the same read of its files (file identity
    and offset) draws the same figures, alarms and groups. With a class of 20
    watching one run, the first page to refresh after a step draws them and
    the others take them as drawn; a page asking while the first is drawing
    waits for it instead of drawing too. The `size` newest drawings are kept.
    """

    def __init__(self, size: int = 32):
        self.size = size
        self.lock = threading.Lock()
        self.entries: OrderedDict = OrderedDict()  # key -> [lock, drawn, done]

    def get(self, key: tuple, draw: Callable[[], Any]) -> Any:
        with self.lock:
            entry = self.entries.get(key)
            if entry is None:
                entry = self.entries[key] = [threading.Lock(), None, False]
            self.entries.move_to_end(key)
            while len(self.entries) > self.size:
                self.entries.popitem(last=False)
        with entry[0]:
            if not entry[2]:
                entry[1], entry[2] = draw(), True
            return entry[1]


def metrics_read(watch: "RunWatch") -> tuple:
    """What the watch's metrics were read from (run, file, offset): the same for every page at that point."""
    return watch.run_id, watch.metrics_file, watch.metrics_offset


def completions_read(watch: "RunWatch") -> tuple:
    """What the watch's completions were read from (run, file, offset)."""
    return watch.run_id, watch.completions_file, watch.completions_offset


def is_live(status: dict) -> bool:
    """A run that has started and not reached a final state."""
    return bool(status) and status.get("state") not in runfolder.FINAL_STATES


def choose_run(runs: list[tuple[str, dict]], remembered: str | None) -> str | None:
    """The run a freshly loaded page shows.

    `runs` are (run_id, status) pairs, newest first (run ids sort by start
    time). The remembered run wins unless it has ended and a newer run is live
    (a run started meanwhile, from another tab or the CLI).
    """
    ids = [run_id for run_id, _ in runs]
    live = [run_id for run_id, status in runs if is_live(status)]
    if remembered in ids:
        remembered_status = dict(runs)[remembered]
        newer_live = [run_id for run_id in live if run_id > remembered]
        if is_live(remembered_status) or not newer_live:
            return remembered
        return newer_live[0]
    if live:
        return live[0]
    return ids[0] if ids else None


def start_watching(runs_dir: str | Path, run_id: str | None, newest_known: str | None = None) -> RunWatch:
    """A fresh watch of `run_id` (nothing read yet but its config)."""
    config = {}
    if run_id:
        config = runfolder.read_config(Path(runs_dir) / run_id)
    newest = max(filter(None, (run_id, newest_known)), default=None)
    return RunWatch(run_id=run_id, config=config, newest_known=newest)


def new_run_to_follow(run_ids: list[str], watch: RunWatch) -> tuple[str | None, str | None]:
    """(run to switch to or None, newest run id now known) after listing the runs, newest first.

    A run started since this session last looked (in another tab, from the
    CLI) is followed only while the run shown is not live, so a person
    watching one training run is never pulled away from it; either way the
    newcomer counts as seen, so it does not pull the page later either.
    """
    newest = run_ids[0] if run_ids else None
    if newest is None or (watch.newest_known is not None and newest <= watch.newest_known):
        return None, watch.newest_known
    if watch.run_id and is_live(watch.status):
        return None, newest
    return newest, newest


def merge_completions(steps: list[int], newest: list[dict], new: list[dict],
                      num_generations: int | None = None) -> tuple[list[int], list[dict]]:
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


def read_completions(path: Path, num_generations: int | None = None
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
        step, start, end = index.stretches[-1]
        newest, skipped = jsonl_cache.read_span(path, start, end)
        newest = latest_round(newest, step, num_generations)
    return steps, newest, index.offset, index.identity, skipped


def poll_run(watch: RunWatch, runs_dir: str | Path,
             read_status: Callable[[Path], dict] = runfolder.read_status) -> tuple[RunWatch, Changes]:
    """Read what the run wrote since the last poll; return the new watch and what changed.

    `read_status(run_dir)` is injectable so the tab can use the launcher's
    status, which also notices a process that died without saying so.
    """
    if not watch.run_id:
        return watch, Changes()
    run_dir = Path(runs_dir) / watch.run_id
    original = watch
    watch, metrics_replaced, completions_replaced = _forget_replaced_files(watch, run_dir)
    metrics_path, completions_path = run_dir / runfolder.METRICS_FILE, run_dir / runfolder.COMPLETIONS_FILE
    metrics_file, completions_file = watch.metrics_file, watch.completions_file
    if watch.metrics_offset == 0:  # nothing read of this file yet: what this process has read of it
        read = jsonl_cache.records(metrics_path)
        new_metrics, metrics_offset, metrics_file = read.records, read.offset, read.identity or metrics_file
        metrics_skipped = read.skipped
    else:
        new_metrics, metrics_offset, metrics_skipped = runfolder.read_records_from(metrics_path, watch.metrics_offset)
    new_completions: list[dict] = []
    if watch.completions_offset == 0:  # the newest step only, from the process's index of the file
        steps, newest, completions_offset, identity, completions_skipped = read_completions(
            completions_path, watch.config.get("num_generations"))
        completions_file = identity or completions_file
        read_any = bool(steps)
    else:
        new_completions, completions_offset, completions_skipped = runfolder.read_records_from(
            completions_path, watch.completions_offset)
        read_any = bool(new_completions)
    skipped = {**watch.skipped}
    for name, more in ((runfolder.METRICS_FILE, metrics_skipped), (runfolder.COMPLETIONS_FILE, completions_skipped)):
        if more.count:
            skipped[name] = skipped.get(name, Skipped()) + more
    status = read_status(run_dir) or {}
    changes = Changes(metrics=bool(new_metrics) or metrics_replaced,
                      completions=read_any or completions_replaced, skipped=skipped != watch.skipped,
                      status=status_signature(status) != status_signature(watch.status))
    if not changes.anything:
        return original, changes
    if watch.completions_offset != 0:
        steps, newest = merge_completions(watch.completion_steps, watch.newest_completions, new_completions,
                                          watch.config.get("num_generations"))
    metrics, frame = watch.metrics, watch.frame
    if new_metrics or frame is None:
        metrics = merge_metrics(watch.metrics, new_metrics) if new_metrics else watch.metrics
        frame = metrics_frame(metrics, previous=(watch.metrics, watch.frame))
    updated = replace(
        watch,
        metrics_offset=metrics_offset,
        completions_offset=completions_offset,
        metrics_file=metrics_file,
        completions_file=completions_file,
        metrics=metrics,
        frame=frame,
        completion_steps=steps,
        newest_completions=newest,
        status=status,
        skipped=skipped,
    )
    return updated, changes


def _forget_replaced_files(watch: RunWatch, run_dir: Path) -> tuple[RunWatch, bool, bool]:
    """The watch with what it read of a file forgotten when that file was replaced, and which were.

    A resumed run cuts its files back to the checkpoint's step by writing them
    anew: the bytes this watch has read past may be gone, so it reads again from 0.
    """
    metrics_id = runfolder.file_identity(run_dir / runfolder.METRICS_FILE)
    completions_id = runfolder.file_identity(run_dir / runfolder.COMPLETIONS_FILE)
    metrics_replaced = watch.metrics_offset > 0 and metrics_id != watch.metrics_file
    completions_replaced = watch.completions_offset > 0 and completions_id != watch.completions_file
    if metrics_replaced:
        watch = replace(watch, metrics_offset=0, metrics=[],
                        skipped={k: v for k, v in watch.skipped.items() if k != runfolder.METRICS_FILE})
    if completions_replaced:
        watch = replace(watch, completions_offset=0, completion_steps=[], newest_completions=[],
                        skipped={k: v for k, v in watch.skipped.items() if k != runfolder.COMPLETIONS_FILE})
    if (metrics_id, completions_id) != (watch.metrics_file, watch.completions_file):
        watch = replace(watch, metrics_file=metrics_id, completions_file=completions_id)
    return watch, metrics_replaced, completions_replaced


def status_signature(status: dict) -> tuple:
    """The parts of a status that change what the page shows (not the heartbeat)."""
    error = status.get("error")
    return (status.get("state"), status.get("step"), status.get("total_steps"),
            status.get("pid"), repr(error) if error else None, repr(status.get("vllm")),
            status.get("queue_position"), status.get("waits_for"))


def change_signature(runs_dir: str | Path, run_id: str | None,
                     read_status: Callable[[Path], dict] = runfolder.read_status,
                     run_dirs: list[Path] | None = None) -> str:
    """A short hash of what the Train tab's view of `run_id` depends on; it changes when a redraw is due.

    It covers the newest run in the folder (a run started elsewhere), the size
    and identity of the run's metrics and completions files (new lines, a
    resume's rewrite) and the parts of its status the page shows. A few
    `stat` calls and one small JSON read: cheap enough to ask every second.
    A run id that is not a run folder of `runs_dir` (deleted, or not a plain
    name) reads as gone, never as a path. `run_dirs`: the run folders the
    page may see (owners_view.visible_run_dirs; default all of them), so
    another user's run moves no one else's signature.
    """
    run_dirs = runfolder.list_run_dirs(runs_dir) if run_dirs is None else run_dirs
    parts = [run_dirs[0].name if run_dirs else ""]
    run_dir = next((path for path in run_dirs if path.name == run_id), None) if run_id else None
    if run_dir is None:
        parts.append("gone" if run_id else "none")
    else:
        for name in (runfolder.METRICS_FILE, runfolder.COMPLETIONS_FILE):
            try:
                info = os.stat(run_dir / name)
                parts.append(f"{info.st_ino}:{info.st_size}")
            except OSError:
                parts.append("-")
        parts.append(repr(status_signature(read_status(run_dir) or {})))
    return hashlib.sha1("|".join(parts).encode()).hexdigest()[:16]


def completions_of_step(runs_dir: str | Path, run_id: str, step: int) -> list[dict]:
    """All completion records of one step (for an earlier step picked on the slider).

    Only that step's lines are read, found in the process's index of the file.
    """
    path = Path(runs_dir) / run_id
    records = jsonl_cache.records_of_step(path / runfolder.COMPLETIONS_FILE, step)
    # A resumed run may have logged the step twice: the later round is the one that counts.
    return latest_round(records, step, runfolder.read_config(path).get("num_generations"))


def nearest_step(steps: list[int], wanted: int | float | None) -> int | None:
    """The step with completions closest to `wanted`, preferring the earlier one on a tie."""
    if not steps:
        return None
    if wanted is None:
        return steps[-1]
    return min(steps, key=lambda s: (abs(s - wanted), s))


# ------------------------------------------------------------------ progress


@dataclass(frozen=True)
class Progress:
    """Where a run stands, in numbers a progress bar shows."""

    state: str
    step: int
    total_steps: int | None
    elapsed_s: float | None
    remaining_s: float | None
    # A queued run's place in the GPU queue and what it waits for (launcher.status_with_queue_place).
    queue_position: int | None = None
    waits_for: str = ""

    @property
    def fraction(self) -> float:
        if not self.total_steps:
            return 0.0
        return max(0.0, min(1.0, self.step / self.total_steps))


def measure_progress(status: dict, metrics: list[dict], now: float | None = None) -> Progress:
    """Step, total, elapsed and an estimate of the time left.

    The estimate uses the recent steps' `step_time` as TRL logs it; before any
    is logged it divides the time since training began by the steps done.
    """
    now = time.time() if now is None else now
    state = status.get("state") or "unknown"
    step = int(status.get("step") or (metrics[-1].get("step", 0) if metrics else 0) or 0)
    total = status.get("total_steps")
    total = int(total) if total else None
    started = status.get("started_at")
    end = now if is_live(status) else (status.get("updated_at") or now)
    elapsed = max(0.0, end - started) if started else None
    remaining = None
    if total and is_live(status) and step < total:  # an ended run has no time left to show
        per_step = seconds_per_step(metrics)
        if per_step is None and elapsed and step > 0:
            per_step = elapsed / step
        if per_step is not None:
            remaining = per_step * (total - step)
    return Progress(state, step, total, elapsed, remaining, status.get("queue_position"), status.get("waits_for") or "")


def seconds_per_step(metrics: list[dict]) -> float | None:
    """Mean `step_time` of the latest logged steps, or None before any (read from the end: a long run costs no more)."""
    times = []
    for record in reversed(metrics):
        if isinstance(record.get("step_time"), (int, float)):
            times.append(record["step_time"])
            if len(times) == RECENT_STEPS:
                break
    return mean(reversed(times)) if times else None


# Polling pace: about four looks per training step, never faster than once a second
# (the page's clock) and never slower than every 5 s (a new step shows within 5 s).
MIN_POLL_SECONDS = 1.0
MAX_POLL_SECONDS = 5.0
POLLS_PER_STEP = 4


def poll_seconds(status: dict, metrics: list[dict]) -> float:
    """How often the Train tab should look at the run: tied to its step time.

    A finished or failed run is looked at rarely (it changes only if resumed);
    a run still loading its model, every 2 s.
    """
    if not is_live(status):
        return MAX_POLL_SECONDS
    per_step = seconds_per_step(metrics)
    if per_step is None:
        return 2.0
    return round(min(MAX_POLL_SECONDS, max(MIN_POLL_SECONDS, per_step / POLLS_PER_STEP)), 1)


STATE_WORDS = {
    "queued": "queued",
    "starting": "starting",
    "loading_model": "loading the model",
    "training": "training",
    "saving": "saving a checkpoint or the adapter",
    "finished": "finished",
    "failed": "failed",
    "stopped": "stopped",
    "unreadable": "unreadable",
}
STATE_COLOURS = {"queued": "#64748b", "finished": "#059669", "failed": "#dc2626", "stopped": "#d97706",
                 "unreadable": "#dc2626"}

PROGRESS_CSS = """
.wb-progress { font-size: 0.92rem; color: #1e293b; }
.wb-progress .wb-progress-head { display: flex; flex-wrap: wrap; gap: 4px 18px; align-items: baseline; margin-bottom: 6px; }
.wb-progress .wb-progress-run { font-weight: 700; }
.wb-progress .wb-progress-state { font-weight: 600; }
.wb-progress .wb-progress-track { height: 12px; border-radius: 6px; background: #e2e8f0; overflow: hidden; }
.wb-progress .wb-progress-fill { height: 100%; border-radius: 6px; transition: width 0.6s ease; }
.wb-progress .wb-progress-nums { color: #475569; font-variant-numeric: tabular-nums; }
"""


def progress_html(run_id: str | None, progress: Progress | None, signature: str = "",
                  poll_seconds: float = MAX_POLL_SECONDS) -> str:
    """A progress bar with the run's name, state, step / total, elapsed and remaining time.

    Its data attributes drive the page's script (WATCH_JS): which run to ask
    about and how often, the signature this drawing reflects, and, for a live
    run, the clock to keep moving between redraws.
    """
    attributes = (f'data-run="{html.escape(run_id or "")}" data-signature="{html.escape(signature)}" '
                  f'data-poll="{poll_seconds:g}"')
    if not run_id or progress is None:
        return (f'<div class="wb-progress" {attributes}><span class="wb-empty">No run yet: set up a run in the '
                'Setup tab and press Launch.</span></div>')
    live = progress.state not in runfolder.FINAL_STATES
    clock = ""
    if live and progress.elapsed_s is not None and progress.state != runfolder.QUEUED:
        clock = f' data-elapsed="{progress.elapsed_s:.1f}"'
        if progress.remaining_s is not None:
            clock += f' data-remaining="{progress.remaining_s:.1f}"'
    colour = STATE_COLOURS.get(progress.state, "#4f46e5")
    total = progress.total_steps if progress.total_steps else "?"
    words = STATE_WORDS.get(progress.state, progress.state)
    left = "" if progress.remaining_s is None else \
        f' · about <span class="wb-progress-left">{format_duration(progress.remaining_s)}</span> left'
    nums = (f'step {progress.step} / {total}'
            f' · elapsed <span class="wb-progress-elapsed">{format_duration(progress.elapsed_s)}</span>{left}')
    if progress.state == runfolder.QUEUED:  # nothing has run yet: where it stands in the queue instead
        words += f", position {progress.queue_position}" if progress.queue_position else ""
        nums = html.escape(f"waits for {progress.waits_for}; starts by itself when that is free"
                           if progress.waits_for else "starts by itself when its devices are free")
    return (
        f'<div class="wb-progress" {attributes}{clock}>'
        '<div class="wb-progress-head">'
        f'<span class="wb-progress-run">{html.escape(run_id)}</span>'
        f'<span class="wb-progress-state" style="color:{colour}">{html.escape(words)}</span>'
        f'<span class="wb-progress-nums">{nums}</span>'
        '</div>'
        f'<div class="wb-progress-track" role="progressbar" aria-valuemin="0" '
        f'aria-valuemax="{progress.total_steps or 0}" aria-valuenow="{progress.step}">'
        f'<div class="wb-progress-fill" style="width:{100 * progress.fraction:.1f}%;background:{colour}"></div>'
        '</div></div>'
    )


REFRESH_BUTTON_ID = "wb-train-refresh"
MORE_BUTTON_ID = "wb-train-refresh-more"
MORE_SECTION_ID = "wb-train-more"
CHANGES_ROUTE = "workbench/changes"

# Runs once in the page. While the Train tab's progress bar is on screen and the
# browser tab visible, it asks CHANGES_ROUTE for the shown run's signature every
# `data-poll` seconds and clicks the hidden refresh button when it differs from
# the one the bar was drawn from; every second it moves a live run's clock on
# (format as `format_duration`) and, while More metrics is open, clicks the other
# hidden button once for each signature the bar shows, so those figures follow.
# A hidden page or another open tab costs nothing.
WATCH_JS = f"""
() => {{
  const bar = () => document.querySelector("#wb-train-progress .wb-progress");
  const duration = (seconds) => {{
    seconds = Math.max(0, Math.round(seconds));
    if (seconds < 60) return `${{seconds}} s`;
    const minutes = Math.floor(seconds / 60), hours = Math.floor(minutes / 60);
    const two = (n) => String(n).padStart(2, "0");
    return minutes < 60 ? `${{minutes}} min ${{two(seconds % 60)}} s` : `${{hours}} h ${{two(minutes % 60)}} min`;
  }};
  const click = (id) => {{
    const button = document.getElementById(id);
    (button && button.tagName === "BUTTON" ? button : button?.querySelector("button"))?.click();
  }};
  let asked = null;  // the signature a redraw was last asked for
  const look = async () => {{
    const el = bar();
    let wait = 2000;
    if (el && el.offsetParent !== null && !document.hidden) {{
      wait = 1000 * (parseFloat(el.dataset.poll) || 5);
      try {{
        const answer = await fetch(`{CHANGES_ROUTE}?run=${{encodeURIComponent(el.dataset.run || "")}}`);
        const {{ signature }} = await answer.json();
        // Ask once per new signature; ask again if the redraw has not come 10 s later.
        if (signature !== el.dataset.signature && (signature !== asked || Date.now() - look.askedAt > 10000)) {{
          asked = signature; look.askedAt = Date.now();
          click("{REFRESH_BUTTON_ID}");
        }}
      }} catch (error) {{ /* the server restarts or is gone: look again later */ }}
    }}
    setTimeout(look, wait);
  }};
  let moreDrawn = null;  // the signature More metrics' figures were last asked for
  const tick = () => {{
    const el = bar();
    const more = document.querySelector("#{MORE_SECTION_ID} .js-plotly-plot, #{MORE_SECTION_ID} .plot-container");
    if (el && more && more.offsetParent !== null && !document.hidden && el.dataset.signature !== moreDrawn) {{
      if (moreDrawn !== null) click("{MORE_BUTTON_ID}");  // opening the section draws them by itself
      moreDrawn = el.dataset.signature;
    }}
    // Closed (on a shown tab): opening it draws its figures, so nothing is asked for the signature then shown.
    if (el && el.offsetParent !== null && (!more || more.offsetParent === null)) moreDrawn = null;
    if (el && el.dataset.elapsed !== undefined && el.offsetParent !== null && !document.hidden) {{
      if (el.wbDrawnAt === undefined) el.wbDrawnAt = Date.now();
      const since = (Date.now() - el.wbDrawnAt) / 1000;
      const elapsed = el.querySelector(".wb-progress-elapsed"), left = el.querySelector(".wb-progress-left");
      if (elapsed) elapsed.textContent = duration(parseFloat(el.dataset.elapsed) + since);
      if (left && el.dataset.remaining !== undefined) left.textContent = duration(parseFloat(el.dataset.remaining) - since);
    }}
  }};
  setTimeout(look, 1000);
  setInterval(tick, 1000);
}}
"""


# ------------------------------------------------------------------ failure


FAILURE_CSS = """
.wb-failure { border: 1px solid #fca5a5; background: #fef2f2; border-radius: 10px; padding: 12px 16px; color: #7f1d1d; }
.wb-failure .wb-failure-title { font-weight: 700; font-size: 1.05rem; margin-bottom: 4px; }
.wb-failure .wb-failure-hint { color: #1e293b; margin: 6px 0; }
.wb-failure code { white-space: pre-wrap; word-break: break-word; background: transparent; }
.wb-failure pre { max-height: 280px; overflow: auto; background: #fff; border: 1px solid #fecaca; border-radius: 6px;
  padding: 8px; font-size: 0.8rem; white-space: pre-wrap; word-break: break-word; color: #334155; }
"""


def failure_html(status: dict, log_tail: str) -> str:
    """The panel a failed run shows: the hint first, then the error, then the end of train.log.

    Empty for a run that has not failed (or that cannot be read: the same panel says why).
    """
    if status.get("state") not in ("failed", runfolder.UNREADABLE):
        return ""
    error = status.get("error") or {}
    if not isinstance(error, dict):
        error = {"message": str(error)}
    kind = error.get("type") or "Error"
    message = error.get("message") or "The training process ended without saying why."
    hint = error.get("hint")
    parts = ['<div class="wb-failure">', '<div class="wb-failure-title">The run failed</div>']
    if hint:
        parts.append(f'<div class="wb-failure-hint"><b>What to do:</b> {html.escape(str(hint))}</div>')
    parts.append(f"<div><code>{html.escape(str(kind))}: {html.escape(str(message))}</code></div>")
    if log_tail.strip():
        parts.append("<details open><summary>End of train.log</summary>"
                     f"<pre>{html.escape(log_tail)}</pre></details>")
    parts.append("</div>")
    return "".join(parts)


# ------------------------------------------------------------------ health alarms


ALARMS_CSS = """
.wb-alarms { display: flex; flex-direction: column; gap: 8px; font-size: 0.88rem; }
.wb-alarm { border-radius: 8px; padding: 8px 10px; border-left: 4px solid; background: #f8fafc; color: #1e293b; }
.wb-alarm b { display: block; margin-bottom: 2px; }
.wb-alarm small { color: #64748b; }
.wb-alarm-error { border-color: #dc2626; background: #fef2f2; }
.wb-alarm-warning { border-color: #d97706; background: #fffbeb; }
.wb-alarm-info { border-color: #2563eb; background: #eff6ff; }
.wb-alarms-ok { color: #047857; background: #ecfdf5; border-radius: 8px; padding: 8px 10px; }
.wb-alarms-wait { color: #94a3b8; font-style: italic; }
"""


def skipped_alarms(skipped: dict) -> list[Alarm]:
    """A note for each run file with lines the page could not read ({file name: Skipped}), to show with the alarms."""
    return [Alarm("warning", "Unreadable lines skipped", lines.note(name), None, kind="skipped_lines")
            for name, lines in sorted(skipped.items()) if lines.count]


def alarms_html(alarms: list, has_metrics: bool) -> str:
    """Health alarms as coloured notes (title, plain-words message, step); a calm line when all is well.

    `alarms` are workbench.insight.health.Alarm objects (level, title, message, step).
    """
    if not has_metrics and not alarms:
        return '<div class="wb-alarms"><span class="wb-alarms-wait">Health checks start with the first logged step.</span></div>'
    if not alarms:
        return ('<div class="wb-alarms"><div class="wb-alarms-ok">No alarms: the run has a learning signal '
                'and nothing unusual in KL, loss or lengths.</div></div>')
    notes = []
    for alarm in alarms:
        step = f" <small>(step {alarm.step})</small>" if alarm.step is not None else ""
        notes.append(f'<div class="wb-alarm wb-alarm-{html.escape(alarm.level)}">'
                     f"<b>{html.escape(alarm.title)}{step}</b>{html.escape(alarm.message)}</div>")
    return f'<div class="wb-alarms">{"".join(notes)}</div>'
