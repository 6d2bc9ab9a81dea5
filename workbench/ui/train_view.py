"""What one browser session knows about the run it watches, and the Train tab's pure view of it.

The Train tab keeps a `RunWatch` in a `gr.State` (one per browser session,
never a process global): what `insight.follow` has read of the run it shows
(a `RunWatch` is a `follow.Seen`: offsets, metric records and their table,
the newest step's completions, status, config), plus what the page shows of
it (which run, the pace of its polling, whether More metrics is open, the
signature its drawing reflects). The tab calls `follow.look` on every
refresh, which reads only the bytes written since the last one and says what
changed, so the tab can skip redrawing what did not.

Which run a freshly loaded page shows is `choose_run`: the one this browser
watched before (kept in `gr.BrowserState`) while it runs, or has data and no
newer run is running; else the newest running run, else the newest run with
data: never an empty run that waits in the queue or was cancelled there while
another has something to show.

The page does not ask the server to poll: its script (`WATCH_JS`) fetches
`follow.change_signature` of the run it shows, a short hash of what a redraw
depends on, and asks for a redraw only when it differs from the one the
progress bar was drawn from, for a live run at most once every `redraw_seconds`
(each redraw is a Gradio event whose drawing takes CPU); meanwhile the bar shows the step from the same answer
(`bar_numbers`). Between steps that costs a few file stats, not an event.

Also here: the progress numbers (step, total, elapsed, remaining) and their
HTML, whose clock the page's script keeps moving (for a run waiting in the GPU
queue: its position and what it waits for), and the failure panel (hint,
error, tail of train.log). No gradio, and no file read: the tab reads.
"""

from __future__ import annotations

import html
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from statistics import mean
from typing import Any

from workbench.insight.follow import Seen
from workbench.insight.health import Alarm
from workbench.runstore.runfolder import FINAL_STATES, QUEUED, UNREADABLE
from workbench.sources.gpus import runs_on_cpu
from workbench.spec.numbers import format_duration
from workbench.spec.run_status import UNREADABLE_FIELDS, running_seconds

# How many of the latest step_time values the remaining-time estimate averages.
RECENT_STEPS = 5


@dataclass
class RunWatch(Seen):
    """The run one browser session shows, what it has read of it (a `follow.Seen`) and what the page shows."""

    run_id: str | None = None
    # The newest run id this session has seen, to notice runs started elsewhere.
    newest_known: str | None = None
    # The pace the page's timer polls at now (seconds; 0 before the first draw).
    poll_seconds: float = 0.0
    # Whether the "More metrics" section is open: its figures are drawn only then.
    more_metrics_open: bool = False
    # follow.change_signature of the run folder, taken before the reads the page now shows.
    signature: str = ""
    # What the page's panels and buttons show (failure and server panels, Stop, Resume, the picker's runs):
    # a refresh sends them again only when that changed. Each update costs Gradio a component built anew.
    controls_shown: tuple | None = None
    picker_shown: tuple | None = None


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


def metrics_read(watch: RunWatch) -> tuple:
    """What the watch's metrics were read from (run, file, offset): the same for every page at that point."""
    return watch.run_id, watch.metrics_file, watch.metrics_offset


def completions_read(watch: RunWatch) -> tuple:
    """What the watch's completions were read from (run, file, offset)."""
    return watch.run_id, watch.completions_file, watch.completions_offset


def is_live(status: dict) -> bool:
    """A run that has started and not reached a final state."""
    return bool(status) and status.get("state") not in FINAL_STATES


def choose_run(
    runs: list[tuple[str, dict]], remembered: str | None, has_data: Callable[[str], bool] = lambda run_id: True
) -> str | None:
    """The run a freshly loaded page shows: a running run, else the newest run with data, never an empty one.

    `runs` are (run_id, status) pairs, newest first (run ids sort by start time); `has_data(run_id)`: whether the
    run logged a step. The remembered run wins while it runs, or while it has data and no newer run is running (a
    run started meanwhile, from another tab or the CLI); then the newest running run; then the newest run with
    data; a run that waits in the queue or was cancelled there shows only when no run has any.
    """
    ids = [run_id for run_id, _ in runs]
    running = [run_id for run_id, status in runs if is_live(status) and status.get("state") != QUEUED]
    if remembered in ids:
        if remembered in running:
            return remembered
        if has_data(remembered):
            newer_running = [run_id for run_id in running if run_id > remembered]
            return newer_running[0] if newer_running else remembered
    if running:
        return running[0]
    with_data = next((run_id for run_id in ids if has_data(run_id)), None)
    if with_data is not None:
        return with_data
    live = [run_id for run_id, status in runs if is_live(status)]
    return live[0] if live else ids[0] if ids else None


def new_watch(run_id: str | None, newest_known: str | None = None) -> RunWatch:
    """A fresh watch of `run_id`, nothing read yet (`follow.start` reads its config)."""
    newest = max(filter(None, (run_id, newest_known)), default=None)
    return RunWatch(run_id=run_id, newest_known=newest)


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


def nearest_step(steps: list[int], wanted: int | float | None) -> int | None:
    """The step with completions closest to `wanted`, preferring the earlier one on a tie."""
    if not steps:
        return None
    if wanted is None:
        return steps[-1]
    return min(steps, key=lambda s: (abs(s - wanted), s))


# ------------------------------------------------------------------ progress


# The probe's line is one candidate's label ("timing 3/5: float32 copy + packed decode + shared prompt pass"); a
# sandboxed run's code can write 4 MiB there, which every redraw of its bar sent to its owner's and each admin's
# page, 16 MiB once escaped (tests/test_attack_speed_status.py)
MAX_PROBE_CHARS = 200


@dataclass(frozen=True)
class Progress:
    """Where a run stands, in numbers a progress bar shows."""

    state: str
    step: int
    total_steps: int | None
    elapsed_s: float | None
    remaining_s: float | None
    # A queued run's place in the GPU queue and what it waits for (gpu_queue.status_with_queue_place).
    queue_position: int | None = None
    waits_for: str = ""
    # While the state is tuning: what the speed probe is timing now (status.json's speed_probe).
    speed_probe: str = ""
    # The fields of status.json that held the wrong type or too much (RunStatus.shown): shown as "unreadable".
    unreadable: tuple[str, ...] = ()

    @property
    def fraction(self) -> float:
        if not self.total_steps:
            return 0.0
        return max(0.0, min(1.0, self.step / self.total_steps))


def measure_progress(status: dict, metrics: list[dict], now: float | None = None) -> Progress:
    """Step, total, elapsed and an estimate of the time left.

    The estimate uses the recent steps' `step_time` as TRL logs it; before any
    is logged it divides the time since training began by the steps done. `status` is as a reader shows it
    (`RunStatus.shown`); a number of the wrong type counts as unknown, and as `unreadable` when status.json held it.
    """
    now = time.time() if now is None else now
    state = _text(status.get("state")) or "unknown"
    step = _count(status.get("step")) or (_count(metrics[-1].get("step")) if metrics else 0) or 0
    total = _count(status.get("total_steps")) or None
    elapsed = running_seconds(status, now, is_live(status))  # the time it was stopped before a resume left out
    remaining = None
    if total and is_live(status) and step < total:  # an ended run has no time left to show
        per_step = seconds_per_step(metrics)
        if per_step is None and elapsed and step > 0:
            per_step = elapsed / step
        if per_step is not None:
            remaining = per_step * (total - step)
    probe = status.get("speed_probe") if state == "tuning" else None
    unreadable = status.get(UNREADABLE_FIELDS)
    return Progress(
        state,
        step,
        total,
        elapsed,
        remaining,
        _count(status.get("queue_position")),
        _text(status.get("waits_for")),
        probe[:MAX_PROBE_CHARS] if isinstance(probe, str) else "",
        tuple(name for name in unreadable if isinstance(name, str)) if isinstance(unreadable, list) else (),
    )


def _count(value: Any) -> int:
    """A whole number of steps or places, or 0 for anything else."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


def _text(value: Any) -> str:
    return value[:MAX_PROBE_CHARS] if isinstance(value, str) else ""


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
# The page asks for a redraw of a live run at most this often (seconds); meanwhile the bar follows each step, and a
# run that changes state is redrawn at once. Each redraw is a Gradio event whose drawing (five figures, the groups)
# takes CPU: a run training on the CPU shares its cores with the app server and, when the browser runs on the same
# machine, with the drawing too, so its redraws are spaced further (benchmarks/bench_launch_path.py measures the cost).
REDRAW_SECONDS = 5
CPU_RUN_REDRAW_SECONDS = 30


def redraw_seconds(state: str, config: dict) -> int:
    """The least time between two redraws of a run in `state` trained as `config` says (0: at once)."""
    if state in FINAL_STATES:
        return 0
    device = config.get("device") if isinstance(config.get("device"), str) else "auto"
    return CPU_RUN_REDRAW_SECONDS if runs_on_cpu(device) else REDRAW_SECONDS


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


def bar_numbers(status: dict) -> dict:
    """What the page's script shows in the bar between redraws: the run's state, step and total steps."""
    step, total = status.get("step"), status.get("total_steps")
    return {
        "state": status.get("state") or "",
        "step": step if isinstance(step, int) else None,
        "total": total if isinstance(total, int) else None,
    }


STATE_WORDS = {
    "queued": "queued",
    "starting": "starting",
    "tuning": "measuring this machine's fastest speed levers (first run of this model and shape here)",
    "loading_model": "loading the model",
    "training": "training",
    "saving": "saving a checkpoint or the adapter",
    "finished": "finished",
    "failed": "failed",
    "stopped": "stopped",
    "unreadable": "unreadable",
}
STATE_COLOURS = {
    "queued": "#64748b",
    "finished": "#059669",
    "failed": "#dc2626",
    "stopped": "#d97706",
    "unreadable": "#dc2626",
}

PROGRESS_CSS = """
.wb-progress { font-size: 0.92rem; color: #1e293b; }
.wb-progress .wb-progress-head { display: flex; flex-wrap: wrap; gap: 4px 18px; align-items: baseline; margin-bottom: 6px; }
.wb-progress .wb-progress-run { font-weight: 700; }
.wb-progress .wb-progress-state { font-weight: 600; }
.wb-progress .wb-progress-track { height: 12px; border-radius: 6px; background: #e2e8f0; overflow: hidden; }
.wb-progress .wb-progress-fill { height: 100%; border-radius: 6px; }  /* no transition: each frame of one took the run's CPU */
.wb-progress .wb-progress-nums { color: #475569; font-variant-numeric: tabular-nums; }
"""


def progress_html(
    run_id: str | None,
    progress: Progress | None,
    signature: str = "",
    poll_seconds: float = MAX_POLL_SECONDS,
    redraw: int = REDRAW_SECONDS,
) -> str:
    """A progress bar with the run's name, state, step / total, elapsed and remaining time.

    Its data attributes drive the page's script (WATCH_JS): which run to ask
    about and how often, the signature this drawing reflects, the state it
    shows and how long to wait between redraws, and, for a live run, the clock
    to keep moving between redraws. `redraw` is `redraw_seconds` for the run.
    """
    attributes = (
        f'data-run="{html.escape(run_id or "")}" data-signature="{html.escape(signature)}" data-poll="{poll_seconds:g}"'
    )
    if run_id and progress is not None:
        redraw = redraw if progress.state not in FINAL_STATES else 0
        attributes += f' data-state="{html.escape(progress.state)}" data-redraw="{redraw}"'
        if redraw:
            attributes += f' title="The bar follows each step; the figures and groups follow every {redraw} s."'
    if not run_id or progress is None:
        return (
            f'<div class="wb-progress" {attributes}><span class="wb-empty">No run yet: set up a run in the '
            "Setup tab and press Launch.</span></div>"
        )
    live = progress.state not in FINAL_STATES
    clock = ""
    if live and progress.elapsed_s is not None and progress.state != QUEUED:
        clock = f' data-elapsed="{progress.elapsed_s:.1f}"'
        if progress.remaining_s is not None:
            clock += f' data-remaining="{progress.remaining_s:.1f}"'
    colour = STATE_COLOURS.get(progress.state, "#4f46e5")
    total = progress.total_steps if progress.total_steps else "?"
    total = UNREADABLE if "total_steps" in progress.unreadable else total
    step = UNREADABLE if "step" in progress.unreadable else progress.step
    elapsed = format_duration(progress.elapsed_s)
    elapsed = UNREADABLE if {"started_at", "updated_at"} & set(progress.unreadable) else elapsed
    words = STATE_WORDS.get(progress.state, progress.state)
    left = (
        ""
        if progress.remaining_s is None
        else f' · about <span class="wb-progress-left">{format_duration(progress.remaining_s)}</span> left'
    )
    nums = f'step {step} / {total} · elapsed <span class="wb-progress-elapsed">{elapsed}</span>{left}'
    if progress.state == QUEUED:  # nothing has run yet: where it stands in the queue instead
        words = f"Queued: #{progress.queue_position} in the queue" if progress.queue_position else "Queued"
        nums = html.escape(
            (
                f"waits for {progress.waits_for}; starts by itself when that is free"
                if progress.waits_for
                else "starts by itself when its devices are free"
            )
            + " (Cancel takes it out of the queue)"
        )
    elif progress.speed_probe:
        words += f": {progress.speed_probe}"
    return (
        f'<div class="wb-progress" {attributes}{clock}>'
        '<div class="wb-progress-head">'
        f'<span class="wb-progress-run">{html.escape(run_id)}</span>'
        f'<span class="wb-progress-state" style="color:{colour}">{html.escape(words)}</span>'
        f'<span class="wb-progress-nums">{nums}</span>'
        "</div>"
        f'<div class="wb-progress-track" role="progressbar" aria-valuemin="0" '
        f'aria-valuemax="{progress.total_steps or 0}" aria-valuenow="{progress.step}">'
        f'<div class="wb-progress-fill" style="width:{100 * progress.fraction:.1f}%;background:{colour}"></div>'
        "</div></div>"
    )


REFRESH_BUTTON_ID = "wb-train-refresh"
MORE_BUTTON_ID = "wb-train-refresh-more"
MORE_SECTION_ID = "wb-train-more"
CHANGES_ROUTE = "workbench/changes"
# How often the page moves a live run's clock on: each move makes the browser draw a frame, so not every second.
CLOCK_SECONDS = 5

# Runs once in the page. While the Train tab's progress bar is on screen and the
# browser tab visible, it asks CHANGES_ROUTE for the shown run's signature every
# `data-poll` seconds and clicks the hidden refresh button when it differs from
# the one the bar was drawn from: at once when the run's state changed, else once
# `data-redraw` seconds have passed since the bar was drawn (until then it writes
# the run's step into the bar's numbers and fill); every CLOCK_SECONDS it moves a live run's clock on
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
  let drawn = null, drawnAt = 0;  // the signature of the bar's drawing, and when the page first saw it
  const showStep = (el, seen) => {{  // between redraws: the step the run has reached, in the bar
    const nums = el.querySelector(".wb-progress-nums"), text = nums && nums.firstChild;
    if (!Number.isInteger(seen.step)) return;
    if (text && text.nodeType === Node.TEXT_NODE)
      text.textContent = text.textContent.replace(/^step \\d+ \\/ \\S+/, `step ${{seen.step}} / ${{seen.total ?? "?"}}`);
    const fill = el.querySelector(".wb-progress-fill");
    if (fill && seen.total) fill.style.width = `${{Math.min(100, 100 * seen.step / seen.total).toFixed(1)}}%`;
  }};
  const look = async () => {{
    const el = bar();
    let wait = 2000;
    if (el && el.offsetParent !== null && !document.hidden) {{
      // Gradio patches the bar in place: a new drawing shows as a new signature, not a new element.
      if (el.dataset.signature !== drawn) {{ drawn = el.dataset.signature; drawnAt = Date.now(); }}
      wait = 1000 * (parseFloat(el.dataset.poll) || 5);
      try {{
        const answer = await fetch(`{CHANGES_ROUTE}?run=${{encodeURIComponent(el.dataset.run || "")}}`);
        const seen = await answer.json();
        const due = seen.state !== el.dataset.state ||
          Date.now() - drawnAt >= 1000 * (parseFloat(el.dataset.redraw) || 0);
        if (seen.signature !== el.dataset.signature && !due) showStep(el, seen);
        // Ask once per new signature; ask again if the redraw has not come 10 s later.
        else if (seen.signature !== el.dataset.signature &&
                 (seen.signature !== asked || Date.now() - look.askedAt > 10000)) {{
          asked = seen.signature; look.askedAt = Date.now();
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
      const drawing = `${{el.dataset.signature}} ${{el.dataset.elapsed}}`;  // the clock counts from each drawing
      if (el.wbDrawing !== drawing) {{ el.wbDrawing = drawing; el.wbDrawnAt = Date.now(); el.wbClockAt = 0; }}
      const since = (Date.now() - el.wbDrawnAt) / 1000;
      if (since - (el.wbClockAt || 0) < {CLOCK_SECONDS}) return;
      el.wbClockAt = since;
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
    if status.get("state") not in ("failed", UNREADABLE):
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
        parts.append(f"<details open><summary>End of train.log</summary><pre>{html.escape(log_tail)}</pre></details>")
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
    return [
        Alarm("warning", "Unreadable lines skipped", lines.note(name), None, kind="skipped_lines")
        for name, lines in sorted(skipped.items())
        if lines.count
    ]


def left_out_alarms(left_out: dict) -> list[Alarm]:
    """A note for each run file of which the page keeps the newest records only ({file name: note}), with the
    limit and the admin's settings that raise it (`runstore.kept_records`)."""
    return [
        Alarm("info", "Older records left out", note, None, kind="left_out") for _, note in sorted(left_out.items())
    ]


def alarms_html(alarms: list, has_metrics: bool) -> str:
    """Health alarms as coloured notes (title, plain-words message, step); a calm line when all is well.

    `alarms` are workbench.insight.health.Alarm objects (level, title, message, step).
    """
    if not has_metrics and not alarms:
        return '<div class="wb-alarms"><span class="wb-alarms-wait">Health checks start with the first logged step.</span></div>'
    if not alarms:
        return (
            '<div class="wb-alarms"><div class="wb-alarms-ok">No alarms: the run has a learning signal '
            "and nothing unusual in KL, loss or lengths.</div></div>"
        )
    notes = []
    for alarm in alarms:
        step = f" <small>(step {alarm.step})</small>" if alarm.step is not None else ""
        notes.append(
            f'<div class="wb-alarm wb-alarm-{html.escape(alarm.level)}">'
            f"<b>{html.escape(alarm.title)}{step}</b>{html.escape(alarm.message)}</div>"
        )
    return f'<div class="wb-alarms">{"".join(notes)}</div>'


# ------------------------------------------------------------------ held-out evaluation
