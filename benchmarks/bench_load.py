"""A class watching one live run: the server's time per tick, and what the watchers cost the training step.

    python benchmarks/bench_load.py                 # demo task, bundled model, 10 steps a run, 20 watchers
    python benchmarks/bench_load.py --quick         # smoke check: tiny model, 4 steps, 4 watchers (2 in Chromium)
    python benchmarks/bench_load.py --watchers 20 --browsers 5 --steps 12
    python benchmarks/bench_load.py --rows alone http alone http   # two of each, interleaved: steadier ratios

One real app server (`app.py`, with Gradio's own per-event profiling on:
`GRADIO_PROFILING=1`, which also times the page's `/workbench/changes` route,
see workbench/ui/server.py) and three runs with the same settings, started
by the launcher one after the other:

- alone:    no page open: the run's own step time;
- http:     `--watchers` pages that do over HTTP exactly what the Train tab's
            script does (train_view.WATCH_JS): the page's load event, then
            `GET /workbench/changes` at the pace the page is told, and the
            refresh event through Gradio's queue (`/gradio_api/queue/join`,
            results over `/queue/data`) when the signature moved. No browser:
            the server's own cost of a class. The pages' threads run at the
            lowest priority (nice 19), standing in for browsers on other
            machines; their CPU is still printed;
- chromium: `--browsers` real headless Chromium pages on the Train tab (one
            browser, a context each), the rest of `--watchers` over HTTP.

For each run it prints the median step time (TRL's `step_time`, the first
step left out) and its ratio to the run alone; the server's time per tick
from its own profile: the refresh event (preprocess, handler, postprocess;
and the wait in the queue before it) and the changes route, median and p95;
and CPU seconds per training step of the server, of the browsers and of the
HTTP pages (this process).

Targets: median tick under 50 ms, step slowdown under 10%. On a
machine as small as the reference one (2 cores) the pages of the chromium
row draw their figures on the cores the run trains on: in a class they run
on the students' machines. The http row is the server's share; the browsers'
CPU per step says what the chromium row adds. Compare rows of one run only:
other jobs on the machine change step times.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import sys
import tempfile
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from bench_launch_path import follow_background_run, process_cpu_seconds  # noqa: E402  (same folder)

from workbench.jobs import launcher  # noqa: E402
from workbench.spec.config import RunConfig  # noqa: E402
from workbench.ui.train_view import REFRESH_BUTTON_ID  # noqa: E402

TICK_TARGET_MS = 50.0
SLOWDOWN_TARGET = 1.10
PROGRESS_ID = "wb-train-progress"
# Seconds pages are left to settle after opening, before a run starts.
SETTLE_S = 8.0


def percentile(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))] if ordered else float("nan")


# ---------------------------------------------------------------- pages over HTTP


@dataclass
class AppEvents:
    """What an HTTP page needs from the app's /config: the Train tab's two events and where the bar is."""

    load: int
    refresh: int
    refresh_trigger: int
    progress_index: dict[int, int]  # event id -> index of the progress bar among its outputs

    @classmethod
    def read(cls, http, url: str) -> AppEvents:
        """Found in the page's config by the components they draw: the progress bar and the hidden refresh button."""
        config = http.get(f"{url}config").json()
        ids = {c.get("props", {}).get("elem_id"): c["id"] for c in config["components"]}
        progress, button = ids[PROGRESS_ID], ids[REFRESH_BUTTON_ID]
        draws_bar = [d for d in config["dependencies"] if progress in d["outputs"]]
        load = next(d for d in draws_bar if any(event == "load" for _, event in d["targets"]))
        refresh = next(d for d in draws_bar if [button, "click"] in [list(t) for t in d["targets"]])
        return cls(load["id"], refresh["id"], button, {d["id"]: d["outputs"].index(progress) for d in (load, refresh)})


class HttpPage(threading.Thread):
    """One page on the Train tab, driven over HTTP as its script drives it (train_view.WATCH_JS)."""

    def __init__(self, url: str, events: AppEvents, stop: threading.Event):
        super().__init__(daemon=True)
        self.url, self.events, self.stop = url, events, stop
        self.session = uuid.uuid4().hex
        self.bar = {"run": "", "signature": "", "poll": "5"}
        self.refreshes = self.polls = 0
        self.cpu_seconds = 0.0  # this page's own thread: what a student's browser would spend
        self.error: BaseException | None = None
        self.opened = threading.Event()

    def run(self) -> None:
        import httpx

        # A student's browser runs on the student's machine: here the pages' own work (HTTP, reading the
        # answers) is left to the cores the run does not use, at the lowest priority. Their CPU time is
        # still counted ("HTTP pages"); the server's work is untouched.
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), 19)
        try:
            with httpx.Client(timeout=300) as http:
                self.event(http, self.events.load, [None, 0.5], None)
                self.opened.set()
                asked, asked_at = None, 0.0
                while not self.stop.wait(float(self.bar["poll"] or 5)):
                    answer = http.get(f"{self.url}workbench/changes", params={"run": self.bar["run"]})
                    signature = answer.json()["signature"]
                    self.polls += 1
                    if signature != self.bar["signature"] and (signature != asked or time.time() - asked_at > 10):
                        asked, asked_at = signature, time.time()
                        self.event(http, self.events.refresh, [None, None, 0.5], self.events.refresh_trigger)
                        self.refreshes += 1
        except BaseException as exc:  # reported by the benchmark, which stops
            self.error = exc
            self.opened.set()
        finally:
            self.cpu_seconds = time.thread_time()

    def event(self, http, fn_index: int, data: list, trigger: int | None) -> None:
        """Run one event through Gradio's queue and take in the progress bar it draws."""
        joined = http.post(
            f"{self.url}gradio_api/queue/join",
            json={
                "data": data,
                "event_data": None,
                "fn_index": fn_index,
                "trigger_id": trigger,
                "session_hash": self.session,
            },
        ).json()
        with http.stream("GET", f"{self.url}gradio_api/queue/data", params={"session_hash": self.session}) as stream:
            for line in stream.iter_lines():
                # Only the answer to this event is read whole: a browser elsewhere would read the rest.
                if not line.startswith("data:") or joined["event_id"] not in line or "process_completed" not in line:
                    continue
                message = json.loads(line[5:])
                if message.get("event_id") != joined["event_id"] or message.get("msg") != "process_completed":
                    continue
                if not message.get("success", True):
                    raise RuntimeError(f"event {fn_index} failed: {message.get('output')}")
                self.take_bar(message["output"]["data"][self.events.progress_index[fn_index]])
                return
        raise RuntimeError(f"event {fn_index}: the stream ended before it completed")

    def take_bar(self, value) -> None:
        if isinstance(value, dict):  # an update; a skipped output has no value
            value = value.get("value")
        if isinstance(value, str):
            for name in self.bar:
                found = re.search(rf'data-{name}="([^"]*)"', value)
                if found:
                    self.bar[name] = found.group(1)


# ---------------------------------------------------------------- one run with its watchers


@dataclass
class Row:
    name: str
    watchers: str
    steps: list[float] = field(default_factory=list)
    refresh_ms: list[float] = field(default_factory=list)
    queue_ms: list[float] = field(default_factory=list)
    changes_ms: list[float] = field(default_factory=list)
    cpu: dict[str, float] = field(default_factory=dict)
    load: float = 0.0

    @property
    def median_step(self) -> float:
        return statistics.median(self.steps[1:]) if len(self.steps) > 1 else float("nan")


def server_traces(http, url: str) -> list[dict]:
    return http.get(f"{url}gradio_api/profiling/traces").json()


def run_with_watchers(name: str, config: RunConfig, server, http, http_pages: int, browsers: int, chromium) -> Row:
    """Open the watchers, launch one run, follow it to the end; what the server and the watchers spent."""
    import psutil
    from browser_fixtures import UI, VIEWPORT

    events = AppEvents.read(http, server.url)
    stop = threading.Event()
    pages = [HttpPage(server.url, events, stop) for _ in range(http_pages)]
    contexts = []
    for page in pages:
        page.start()
    for page in pages:
        page.opened.wait(300)
        if page.error:
            raise SystemExit(f"an HTTP page failed: {page.error!r}")
    for _ in range(browsers):
        context = chromium.new_context(viewport=VIEWPORT)
        context.set_default_timeout(120_000)
        UI(context.new_page(), server).open("Train")
        contexts.append(context)
    if contexts:
        print(f"  {browsers} Chromium pages open", flush=True)
    time.sleep(SETTLE_S if pages or contexts else 0)

    app = psutil.Process(server.process.pid)
    browser = next((p for p in psutil.Process().children(recursive=True) if "chrom" in p.name().lower()), None)
    watched = {"server": (app, False)}
    if contexts:
        watched["browsers"] = (browser, True)
    http.post(f"{server.url}gradio_api/profiling/clear")
    before = {key: process_cpu_seconds(*process) for key, process in watched.items()}
    launched = time.time()
    run_id = launcher.start(config, server.runs_dir)
    timeline = follow_background_run(server.runs_dir / run_id, launched)
    spent = {key: process_cpu_seconds(*process) - before[key] for key, process in watched.items()}
    traces = server_traces(http, server.url)
    load = os.getloadavg()[0]
    stop.set()
    for page in pages:
        page.join(30)
    if pages:
        spent["http pages"] = sum(page.cpu_seconds for page in pages)
    for context in contexts:
        context.close()

    steps = [timeline.step_times[s] for s in sorted(timeline.step_times)]
    row = Row(name, f"{http_pages} HTTP + {browsers} Chromium" if browsers else f"{http_pages} HTTP", steps, load=load)
    refreshes = [t for t in traces if "on_refresh" in str(t.get("fn_name"))]
    row.refresh_ms = [t["total_ms"] for t in refreshes]
    row.queue_ms = [t["queue_wait_ms"] for t in refreshes]
    row.changes_ms = [t["total_ms"] for t in traces if t.get("fn_name") == "/workbench/changes"]
    logged = max(1, len(steps))
    row.cpu = {key: seconds / logged for key, seconds in spent.items()}
    print(
        f"  {name}: median step {row.median_step:.2f} s; {len(row.refresh_ms)} refreshes, "
        f"{len(row.changes_ms)} polls; load average {load:.2f}",
        flush=True,
    )
    return row


def report(rows: list[Row], config: RunConfig) -> bool:
    # Step times drift between runs on a shared machine: with several "alone" rows (--rows alone http alone
    # http) each row is compared with the alone rows' median, and the verdict takes each kind's median.
    alones = [row for row in rows if row.name == "alone"]
    alone = Row(
        "alone",
        "0 HTTP",
        steps=[0.0, statistics.median(row.median_step for row in alones)],
        cpu={"server": statistics.median(row.cpu["server"] for row in alones)},
    )
    print(
        f"\n{'run':<9} {'watchers':<21} {'median step':>11} {'vs alone':>8}   {'refresh ms (queue wait)':<27} "
        f"{'changes ms':<15} {'ticks/step':<11} CPU s per step: server (more than alone) / browsers / HTTP pages"
    )
    verdicts = []
    for row in rows:
        ratio = row.median_step / alone.median_step if alone.median_step else float("nan")
        refresh = (
            (
                f"{statistics.median(row.refresh_ms):.1f} p95 {percentile(row.refresh_ms, 0.95):.1f} "
                f"({statistics.median(row.queue_ms):.1f})"
            )
            if row.refresh_ms
            else "-"
        )
        changes = (
            f"{statistics.median(row.changes_ms):.1f} p95 {percentile(row.changes_ms, 0.95):.1f}"
            if row.changes_ms
            else "-"
        )
        steps = max(1, len(row.steps))
        ticks = f"{len(row.refresh_ms) / steps:.1f} + {len(row.changes_ms) / steps:.1f}"
        server = f"{row.cpu['server']:.2f} ({row.cpu['server'] - alone.cpu['server']:+.2f})"
        others = " / ".join(f"{row.cpu[key]:.2f}" if key in row.cpu else "-" for key in ("browsers", "http pages"))
        print(
            f"{row.name:<9} {row.watchers:<21} {row.median_step:9.2f} s {ratio:8.3f}   {refresh:<27} {changes:<15} "
            f"{ticks:<11} {server} / {others}   (load {row.load:.1f})"
        )
        if row.name != "alone":
            verdicts.append(
                (
                    row.name,
                    statistics.median(row.refresh_ms) if row.refresh_ms else float("nan"),
                    statistics.median(row.changes_ms) if row.changes_ms else float("nan"),
                    ratio,
                )
            )
    print(
        f"(model {config.model}, {config.max_steps} steps a run, first step left out of the median; ticks/step: "
        f"refresh events + changes polls of all pages per logged step; {os.cpu_count()} cores)"
    )
    met_all = True
    kinds = {name: [v for v in verdicts if v[0] == name] for name, *_ in verdicts}
    for name, rows_of_kind in kinds.items():
        refresh, changes, ratio = (statistics.median(v[i] for v in rows_of_kind) for i in (1, 2, 3))
        if len(rows_of_kind) > 1:
            name = f"{name} (median of {len(rows_of_kind)} runs)"
        tick_met = refresh < TICK_TARGET_MS and changes < TICK_TARGET_MS
        step_met = ratio < SLOWDOWN_TARGET
        met_all &= tick_met and step_met
        print(
            f"targets, {name}: median tick (refresh {refresh:.1f} ms, changes {changes:.1f} ms) "
            f"{'meets' if tick_met else 'misses'} < {TICK_TARGET_MS:g} ms; step x{ratio:.3f} "
            f"{'meets' if step_met else 'misses'} < x{SLOWDOWN_TARGET:g}"
        )
    return met_all


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="tiny model, 4 steps, 4 watchers of which 2 in Chromium")
    parser.add_argument("--model", default=None, help="default: the bundled SmolLM2-135M-Instruct (tiny with --quick)")
    parser.add_argument("--steps", type=int, default=None, help="optimizer steps a run (default 10; 4 with --quick)")
    parser.add_argument("--watchers", type=int, default=None, help="pages watching (default 20; 4 with --quick)")
    parser.add_argument(
        "--browsers",
        type=int,
        default=None,
        help="of those, real Chromium pages in the chromium run (default all; 2 with --quick)",
    )
    parser.add_argument(
        "--rows", nargs="+", default=["alone", "http", "chromium"], choices=["alone", "http", "chromium"]
    )
    args = parser.parse_args(argv)
    quick = args.quick
    model = args.model or ("tiny" if quick else "smollm2-135m-instruct")
    steps = args.steps or (4 if quick else 10)
    watchers = args.watchers if args.watchers is not None else (4 if quick else 20)
    browsers = min(watchers, args.browsers if args.browsers is not None else (2 if quick else watchers))
    if "alone" not in args.rows:
        args.rows.insert(0, "alone")  # the reference every other row is compared with

    import httpx
    from browser_fixtures import CHROMIUM, CHROMIUM_ARGS, start_app

    config = RunConfig.for_task("demo", model=model, max_steps=steps)
    rows = []
    with tempfile.TemporaryDirectory(prefix="bench-load-") as tmp, httpx.Client(timeout=60) as http:
        server = start_app(Path(tmp) / "runs", log_dir=Path(tmp), extra_env={"GRADIO_PROFILING": "1"})
        playwright = chromium = None
        try:
            for name in args.rows:
                print(f"{name}: {steps} steps of the demo task on {model}...", flush=True)
                if name == "chromium" and chromium is None:
                    if not CHROMIUM.exists():
                        raise SystemExit("the chromium row needs Debian's chromium: `make browser` installs it")
                    from playwright.sync_api import sync_playwright

                    playwright = sync_playwright().start()
                    chromium = playwright.chromium.launch(
                        executable_path=str(CHROMIUM), args=CHROMIUM_ARGS, headless=True
                    )
                http_pages, pages_in_chromium = {
                    "alone": (0, 0),
                    "http": (watchers, 0),
                    "chromium": (watchers - browsers, browsers),
                }[name]
                rows.append(run_with_watchers(name, config, server, http, http_pages, pages_in_chromium, chromium))
        finally:
            if chromium is not None:
                chromium.close()
                playwright.stop()
            server.stop()
    return 0 if report(rows, config) else 1


if __name__ == "__main__":
    sys.exit(main())
