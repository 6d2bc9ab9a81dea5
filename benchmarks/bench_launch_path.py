"""Does a run launched from the dashboard, and watched there, train as fast as bare TRL, and as unwatched?

    python benchmarks/bench_launch_path.py                 # the five rows, demo task, bundled model, 8 steps
    python benchmarks/bench_launch_path.py --steps 12 --rows unwatched watched unwatched watched
    python benchmarks/bench_launch_path.py --steps 10 --rows foreground launcher foreground launcher

One command, the same seed and settings (`RunConfig.for_task("demo")` with
`--steps`) started five ways, one after the other (a row named twice runs twice,
in the order given: alternate them on a busy machine):

- bare:       TRL alone (benchmarks/bare_trl.py) in a plain environment: what a user writes without the workbench;
- foreground: `python -m workbench train` (it restarts itself under the launcher's allocator and threads);
- launcher:   `launcher.start(config)`, the background run the UI, the CLI's --background and notebooks use;
- unwatched:  the real app served by `app.py`, one headless Chromium page that sets the step count in the
              Setup tab and clicks Launch in the Train tab; once the launch has answered the browser is
              closed and the run trains beside the app server alone;
- watched:    the same, but the page stays on the Train tab watching until the run ends;
- explored:   the same, but once the first step's completions are in, the page opens the Explore tab on the run
              (its first page of completions) and stays there until the run ends.

For each it prints the median step time (TRL's own `step_time`, the first step
left out: it pays one-off costs), its ratio to bare TRL, the peak RSS of the
training process tree (sampled every 0.25 s), and the seconds from the launch
(the click, for the dashboard rows) to the first step whose reward is 0.3 above
the first step's. The dashboard rows also print the CPU seconds the app server
(without the run) and the browser used per training step from the first step
to the end: the difference between them is the cost of watching. Then
watched / unwatched: the median of the watched runs' step times (each run's
first step left out) over the unwatched runs'. The figures are appended to
benchmarks/results/bench_launch_path.jsonl with the machine and the load average.

With foreground and launcher rows it prints launcher / foreground: the pooled medians, and each pair's (the
n-th launcher run over the n-th foreground run), which is what a launched run adds to `workbench train` in a
terminal (the same environment, threads and allocator: benchmarks/process_setting.py prints both). Each run
prints the levers `auto` took and where from (measured at its start, or kept on this machine and handed over):
rows compare only when those agree, so measure the choice once first (`python -m workbench tune`), or set
WORKBENCH_SPEED_PROBE=off for every row to take TRL's path.

Targets: launcher / bare <= 1.05, launcher / foreground <= 1.05, watched / bare <= 1.15, watched / unwatched
<= 1.10 (explored / unwatched too), peak RSS <= 3 GB, +0.3 reward within 60 s of the click. Timings depend
on what else the machine does: it names the CPU, the load average and other processes' share of the CPU at
the start and the end (benchmarks/quiet_machine.py), and each run's share of others while it trained; it refuses
to start on a machine that is not quiet unless `--busy-ok` is given, and then marks the figures noisy. Compare
rows of one command only, alternate them, and read the CPU seconds per step beside the ratio (they change
little with the load).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))  # the browser tests' app server and Chromium settings

from bare_trl import SETTINGS as BARE_SETTINGS  # noqa: E402  (same folder)
from bench_training import tree_rss  # noqa: E402
from quiet_machine import describe, look, require_quiet, warning  # noqa: E402
from results_file import record  # noqa: E402

from workbench.jobs import allocator, launcher, run_state  # noqa: E402
from workbench.runstore import runfolder  # noqa: E402
from workbench.sources import cpu_busy  # noqa: E402
from workbench.spec.config import RunConfig  # noqa: E402

GB = 2**30
ROWS = ("bare", "foreground", "launcher", "unwatched", "watched", "explored")
DASHBOARD_ROWS = ("unwatched", "watched", "explored")
REWARD_RISE = 0.3
SAMPLE_SECONDS = 0.25
# Variables the workbench sets for its own processes; bare TRL starts without them.
WORKBENCH_VARIABLES = (
    *allocator.ALLOCATOR_VARIABLES,
    allocator.ALLOCATOR_ENV_VAR,
    allocator.APPLIED_ENV_VAR,
    "OMP_NUM_THREADS",
)


@dataclass
class Timeline:
    """What a watcher saw of one run: when each step's reward appeared, the step times, the memory peak."""

    launched: float
    seen_at: dict[int, float] = field(default_factory=dict)
    rewards: dict[int, float] = field(default_factory=dict)
    step_times: dict[int, float] = field(default_factory=dict)
    peak_rss: int = 0
    others_share: float | None = None  # other processes' share of the CPU while it ran (this process's tree: ours)
    speed_choice: str = ""  # the levers `auto` took, and whether the run measured them or was handed them

    def read(self, path: Path, offset: int) -> int:
        """Take in the lines `path` gained since `offset`; returns the new offset."""
        if not path.is_file():
            return offset
        with open(path, "rb") as handle:
            handle.seek(offset)
            chunk = handle.read()
        complete = chunk[: chunk.rfind(b"\n") + 1]
        for line in complete.splitlines():
            record = json.loads(line)
            step = int(record.get("step", 0))
            if "reward" in record and step not in self.seen_at:
                self.seen_at[step] = time.time()
                self.rewards[step] = float(record["reward"])
                if record.get("step_time") is not None:
                    self.step_times[step] = float(record["step_time"])
        return offset + len(complete)

    def median_step(self) -> float:
        times = [self.step_times[s] for s in sorted(self.step_times)][1:]
        return statistics.median(times) if times else float("nan")

    def seconds_to_rise(self) -> float | None:
        """Seconds from launch until a step's reward stood REWARD_RISE above the first step's (None: never)."""
        return seconds_to_reward_rise(self.rewards, self.seen_at, self.launched)


def seconds_to_reward_rise(
    rewards: dict[int, float], seen_at: dict[int, float], launched: float, rise: float = REWARD_RISE
) -> float | None:
    """The first step whose reward is `rise` above the first step's, as seconds after `launched` (pure)."""
    steps = sorted(rewards)
    if not steps:
        return None
    first = rewards[steps[0]]
    for step in steps[1:]:
        if rewards[step] - first >= rise:
            return seen_at[step] - launched
    return None


def follow(timeline: Timeline, log_path: Path, alive, pid_of, sample=None) -> Timeline:
    """Sample memory and read `log_path` until `alive()` is false; one last read after. `sample(timeline)`, when
    given, is called after each read."""
    offset = 0
    while alive():
        pid = pid_of()
        if pid:
            timeline.peak_rss = max(timeline.peak_rss, tree_rss(pid))
        offset = timeline.read(log_path, offset)
        if sample is not None:
            sample(timeline)
        time.sleep(SAMPLE_SECONDS)
    timeline.read(log_path, offset)
    return timeline


# ---------------------------------------------------------------- the four rows


def run_bare(config: RunConfig, work: Path) -> Timeline:
    settings = {name: getattr(config, name) for name in BARE_SETTINGS}
    env = {k: v for k, v in os.environ.items() if k not in WORKBENCH_VARIABLES}
    env["PYTHONPATH"] = str(ROOT)
    out = work / f"bare-{time.time_ns()}"  # a row named twice: a folder each, never the last run's log
    timeline = Timeline(time.time())
    process = subprocess.Popen(
        [sys.executable, str(ROOT / "benchmarks" / "bare_trl.py"), json.dumps(settings), str(out)],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    follow(timeline, out / "log.jsonl", lambda: process.poll() is None, lambda: process.pid)
    if process.returncode != 0:
        raise SystemExit(f"bare TRL failed:\n{process.stderr.read().decode()[-2000:]}")
    return timeline


def run_foreground(config: RunConfig, work: Path) -> Timeline:
    run_dir = work / f"foreground-{time.time_ns()}"  # a row named twice: a run folder each
    work.mkdir(parents=True, exist_ok=True)
    config_path = work / f"{run_dir.name}-config.json"
    config.save(config_path)
    env = {k: v for k, v in os.environ.items() if k != allocator.APPLIED_ENV_VAR}
    env["PYTHONPATH"] = str(ROOT)
    timeline = Timeline(time.time())
    process = subprocess.Popen(
        [sys.executable, "-m", "workbench", "train", "--config", str(config_path), "--run-dir", str(run_dir)],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    follow(timeline, run_dir / runfolder.METRICS_FILE, lambda: process.poll() is None, lambda: process.pid)
    if process.returncode != 0:
        raise SystemExit(f"foreground run failed:\n{process.stderr.read().decode()[-2000:]}")
    timeline.speed_choice = speed_choice_of(run_dir)
    return timeline


def speed_choice_of(run_dir: Path) -> str:
    """What the run's `auto` levers became and where that came from (status.json's speed_choice record)."""
    record = runfolder.read_status(run_dir).get("speed_choice") or {}
    return f"{record.get('chosen') or 'TRL path'} ({record.get('source') or 'no record'})"


def follow_background_run(run_dir: Path, launched: float, sample=None) -> Timeline:
    """Follow a run the launcher started until it reaches a final state; fail loudly if it did not finish."""
    timeline = Timeline(launched)
    try:
        follow(
            timeline,
            run_dir / runfolder.METRICS_FILE,
            lambda: run_state.status_of_dir(run_dir)["state"] not in runfolder.FINAL_STATES,
            lambda: runfolder.read_status(run_dir).get("pgid"),
            sample,
        )
    except BaseException:  # interrupted: the detached run must not outlive the benchmark
        launcher.stop(run_dir, timeout=0)
        raise
    final = run_state.status_of_dir(run_dir)
    if final["state"] != "finished":
        raise SystemExit(f"{run_dir.name} ended {final['state']}: {final.get('error')}")
    timeline.speed_choice = speed_choice_of(run_dir)
    return timeline


def run_launcher(config: RunConfig, work: Path) -> Timeline:
    runs_dir = work / "launcher-runs"
    launched = time.time()
    run_id = launcher.start(config, runs_dir)
    return follow_background_run(runs_dir / run_id, launched)


def process_cpu_seconds(process, with_children: bool) -> float:
    """User + system CPU seconds of `process` (and, when asked, of its live children)."""
    import psutil

    total = 0.0
    try:
        for member in (process, *(process.children(recursive=True) if with_children else ())):
            times = member.cpu_times()
            total += times.user + times.system
    except psutil.NoSuchProcess:
        pass
    return total


class CpuFromFirstStep:
    """CPU seconds `processes` ({name: (psutil process, with children)}) use from a run's first logged step on."""

    def __init__(self, processes: dict):
        self.processes = processes
        self.at_first: dict | None = None
        self.first_step: int | None = None

    def now(self) -> dict:
        return {name: process_cpu_seconds(*watched) for name, watched in self.processes.items()}

    def sample(self, timeline: Timeline) -> None:
        if self.at_first is None and timeline.rewards:
            self.at_first, self.first_step = self.now(), min(timeline.rewards)

    def per_step(self, timeline: Timeline) -> dict:
        """CPU seconds per step after the first, for each process."""
        steps = len([s for s in timeline.rewards if s != self.first_step])
        if self.at_first is None or not steps:
            return {}
        now = self.now()
        return {name: (now[name] - self.at_first[name]) / steps for name in self.processes}


def open_explorer(ui, page, run_dir: Path) -> None:
    """The Explore tab on the run, once its first step's completions are in: its first page shown."""
    completions = run_dir / runfolder.COMPLETIONS_FILE
    while not (completions.is_file() and completions.stat().st_size):
        time.sleep(0.05)
    ui.open_tab("Explore")
    ui.choose("Run", run_dir.name, scope=page.locator("#wb-tab-explore"))
    ui.expect_text(page.locator("#wb-explore-note"), "that match")


def run_dashboard(config: RunConfig, work: Path, row: str) -> tuple[Timeline, dict]:
    """Launch from the real dashboard in Chromium; keep the Train tab (`watched`) or the Explore tab on the run
    (`explored`) open until the run ends, or close the browser once the launch has answered (`unwatched`). Returns
    the run and the CPU seconds per step (after the first) of the app server and the browser."""
    watched = row != "unwatched"
    import psutil
    from browser_fixtures import CHROMIUM, CHROMIUM_ARGS, FIRST_LOAD_TIMEOUT_MS, UI, VIEWPORT, start_app
    from playwright.sync_api import sync_playwright

    runs_dir = work / f"{row}-runs-{time.time_ns()}"
    server = start_app(runs_dir, log_dir=work)
    try:
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS, headless=True)
            page = browser.new_context(viewport=VIEWPORT).new_page()
            page.set_default_timeout(FIRST_LOAD_TIMEOUT_MS)
            ui = UI(page, server)
            ui.open("Setup")
            setup = ui.panel("Setup")
            if config.model != RunConfig().model:
                ui.choose("model", config.model, setup)
            ui.reveal("max_steps", setup)  # in a closed group of the Setup tab
            ui.set_number("max_steps", config.max_steps, setup)
            ui.open_tab("Train")
            # playwright's driver starts Chromium: the first Chromium among this process's descendants is the browser
            browser_process = next(p for p in psutil.Process().children(recursive=True) if "chrom" in p.name().lower())
            # The app server alone (the training run it starts is its child), the browser with its renderers.
            cpu = CpuFromFirstStep(
                {"app": (psutil.Process(server.process.pid), False), "browser": (browser_process, True)}
            )
            launched = time.time()
            ui.panel("Train").get_by_role("button", name="Launch", exact=True).click()
            run_dirs = []
            while not run_dirs:
                run_dirs = runfolder.list_run_dirs(runs_dir)
                time.sleep(0.05)
            launched_config = runfolder.read_config(run_dirs[0])
            differing = {
                k: (launched_config.get(k), v)
                for k, v in config.to_dict().items()
                if k in BARE_SETTINGS and launched_config.get(k) != v
            }
            if differing:
                raise SystemExit(f"the dashboard launched other settings than the other rows: {differing}")
            if not watched:  # the launch's answer shows the run; then no page is left open
                ui.expect_text(page.locator("#wb-train-progress"), run_dirs[0].name)
                browser.close()
                del cpu.processes["browser"]
            if row == "explored":
                open_explorer(ui, page, run_dirs[0])
            timeline = follow_background_run(run_dirs[0], launched, cpu.sample)
            per_step = {"browser": 0.0, **cpu.per_step(timeline)}
            if watched:
                browser.close()
    finally:
        server.stop()
    return timeline, per_step


def chromium_available() -> bool:
    from browser_fixtures import CHROMIUM

    return CHROMIUM.exists()


# ---------------------------------------------------------------- report


def share_text(share: float | None) -> str:
    return "-" if share is None else f"{share:.0%}"


def launched_over_foreground(by_row: dict[str, list[Timeline]], medians: dict, summary: dict) -> list[str]:
    """Print launcher / foreground, pooled and pair by pair (the n-th of each row); its target, when both ran."""
    if not ("launcher" in medians and "foreground" in medians):
        return []
    pairs = [
        round(launched.median_step() / foreground.median_step(), 3)
        for foreground, launched in zip(by_row["foreground"], by_row["launcher"])
    ]
    ratio = medians["launcher"] / medians["foreground"]
    summary["launcher_over_foreground"] = round(ratio, 3)
    summary["launcher_over_foreground_by_pair"] = pairs
    print(
        f"launcher / foreground: {medians['launcher']:.2f} s / {medians['foreground']:.2f} s = {ratio:.3f} "
        f"(median step over {len(by_row['launcher'])} and {len(by_row['foreground'])} run(s)); pair by pair: "
        + ", ".join(f"{pair:.3f}" for pair in pairs)
    )
    return [f"launcher/foreground {ratio:.3f} {'meets' if ratio <= 1.05 else 'misses'} <= 1.05"]


def pooled_median(timelines: list[Timeline]) -> float:
    """The median step time over several runs of one row, each run's first step left out."""
    times = [timeline.step_times[s] for timeline in timelines for s in sorted(timeline.step_times)[1:]]
    return statistics.median(times) if times else float("nan")


def report(results: list[tuple[str, Timeline, dict | None]], steps: int) -> dict:
    """Print each run, then each row's pooled median and the targets; returns the figures (JSON-able)."""
    by_row: dict[str, list[Timeline]] = {}
    for name, timeline, _ in results:
        by_row.setdefault(name, []).append(timeline)
    medians = {name: pooled_median(timelines) for name, timelines in by_row.items()}
    bare_step = medians.get("bare")
    print(
        f"\n{'row':<11} {'median step':>11} {'vs bare':>8} {'peak RSS':>9} {'+0.3 reward':>12}"
        f"   {'app, browser CPU s/step':>24} {'others':>7}   (demo task, {steps} steps; first step left out of "
        f"the median; others: other processes' share of the CPU during the run)"
    )
    runs = []
    for name, timeline, cpu in results:
        median = timeline.median_step()
        ratio = median / bare_step if bare_step else None
        rise = timeline.seconds_to_rise()
        cpu_text = f"{cpu['app']:.3f}, {cpu['browser']:.3f}" if cpu and "app" in cpu else "-"
        print(
            f"{name:<11} {median:>9.2f} s {(f'{ratio:.3f}' if ratio else '-'):>8} "
            f"{timeline.peak_rss / GB:>6.2f} GB {(f'{rise:.0f} s' if rise is not None else 'not reached'):>12}"
            f"   {cpu_text:>24} {share_text(timeline.others_share):>7}"
        )
        runs.append(
            {
                "row": name,
                "median_step_s": round(median, 3),
                "ratio_to_bare": round(ratio, 3) if ratio else None,
                "peak_rss_gb": round(timeline.peak_rss / GB, 3),
                "seconds_to_reward_rise": None if rise is None else round(rise, 1),
                "step_times_s": [round(timeline.step_times[s], 3) for s in sorted(timeline.step_times)],
                "rewards": [round(timeline.rewards[s], 3) for s in sorted(timeline.rewards)],
                "others_share": None if timeline.others_share is None else round(timeline.others_share, 3),
                "speed_choice": timeline.speed_choice,
                **({"cpu_s_per_step": {k: round(v, 3) for k, v in cpu.items()}} if cpu else {}),
            }
        )
    summary: dict = {"steps": steps, "runs": runs, "median_step_s": {k: round(v, 3) for k, v in medians.items()}}
    cpu_rows: dict[str, list[dict]] = {}
    for name, _, cpu in results:
        if cpu and "app" in cpu:
            cpu_rows.setdefault(name, []).append(cpu)
    for name, rows in cpu_rows.items():
        mean = {key: statistics.mean(row[key] for row in rows) for key in rows[0]}
        print(
            f"{name}: app server {mean['app']:.3f} + browser {mean['browser']:.3f} = "
            f"{mean['app'] + mean['browser']:.3f} CPU s per step (mean of {len(rows)} run(s), after the first step)"
        )
        summary.setdefault("cpu_s_per_step", {})[name] = {k: round(v, 3) for k, v in mean.items()}
    targets = launched_over_foreground(by_row, medians, summary)
    if "watched" in medians and "unwatched" in medians:
        ratio = medians["watched"] / medians["unwatched"]
        summary["watched_over_unwatched"] = round(ratio, 3)
        print(
            f"watched / unwatched: {medians['watched']:.2f} s / {medians['unwatched']:.2f} s = {ratio:.3f} "
            f"(median step over {len(by_row['watched'])} and {len(by_row['unwatched'])} run(s))"
        )
        targets.append(f"watched/unwatched {ratio:.3f} {'meets' if ratio <= 1.10 else 'misses'} <= 1.10")
    if "explored" in medians and "unwatched" in medians:
        ratio = medians["explored"] / medians["unwatched"]
        summary["explored_over_unwatched"] = round(ratio, 3)
        print(f"explored / unwatched: {medians['explored']:.2f} s / {medians['unwatched']:.2f} s = {ratio:.3f}")
        targets.append(f"explored/unwatched {ratio:.3f} {'meets' if ratio <= 1.10 else 'misses'} <= 1.10")
    if bare_step:
        for name, limit in (("launcher", 1.05), ("watched", 1.15)):
            if name in medians:
                ratio = medians[name] / bare_step
                targets.append(f"{name}/bare {ratio:.3f} {'meets' if ratio <= limit else 'misses'} <= {limit}")
    for name, timelines in by_row.items():
        if name in ("launcher", *DASHBOARD_ROWS):
            peak = max(timeline.peak_rss for timeline in timelines)
            targets.append(f"{name} peak {peak / GB:.2f} GB {'meets' if peak <= 3 * GB else 'misses'} <= 3 GB")
    if "watched" in by_row:
        rises = [timeline.seconds_to_rise() for timeline in by_row["watched"]]
        rise = None if None in rises else max(rises)
        targets.append(
            f"click to +{REWARD_RISE} reward "
            f"{'not reached' if rise is None else f'{rise:.0f} s'} "
            f"{'meets' if rise is not None and rise <= 60 else 'misses'} <= 60 s"
        )
    print("targets: " + "; ".join(targets))
    summary["targets"] = targets
    return summary


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=8, help="optimizer steps per run (default 8)")
    parser.add_argument(
        "--rows",
        nargs="+",
        default=list(ROWS),
        choices=ROWS,
        help="the rows to run, in this order (a row named twice runs twice)",
    )
    parser.add_argument("--model", default="smollm2-135m-instruct")
    parser.add_argument(
        "--busy-ok",
        action="store_true",
        help="measure even when the machine is not quiet (the figures are marked noisy)",
    )
    parser.add_argument(
        "--no-record",
        action="store_true",
        help="do not append the figures to benchmarks/results/bench_launch_path.jsonl",
    )
    args = parser.parse_args(argv)
    if set(args.rows) & set(DASHBOARD_ROWS) and not chromium_available():
        raise SystemExit("the dashboard rows need Debian's chromium: `make browser` installs it")

    # The Setup tab's own starting point, so the dashboard launches exactly these settings.
    config = RunConfig.for_task("demo", model=args.model, max_steps=args.steps)
    runners = {"bare": run_bare, "foreground": run_foreground, "launcher": run_launcher}
    results: list[tuple[str, Timeline, dict | None]] = []
    loads = []
    start = require_quiet(args.busy_ok)
    with tempfile.TemporaryDirectory(prefix="bench-launch-path-") as tmp:
        for row in args.rows:
            print(f"{row}: running {args.steps} steps...", flush=True)
            cpu = None
            before = cpu_busy.read_sample()  # the runs, the app and the browser are this process's tree
            if row in DASHBOARD_ROWS:
                timeline, cpu = run_dashboard(config, Path(tmp), row)
            else:
                timeline = runners[row](config, Path(tmp))
            timeline.others_share = cpu_busy.busy_between(before, cpu_busy.read_sample()).others_share
            results.append((row, timeline, cpu))
            loads.append(round(os.getloadavg()[0], 2))
            print(
                f"  load average over the last minute: {loads[-1]:.2f}; other processes took "
                f"{timeline.others_share:.0%} of the CPU during the run; speed levers: {timeline.speed_choice or '-'}",
                flush=True,
            )
            watching = (
                f"; CPU s per step: app {cpu['app']:.3f}, browser {cpu['browser']:.3f}" if cpu and "app" in cpu else ""
            )
            print(
                f"  step times {', '.join(f'{timeline.step_times[s]:.2f}' for s in sorted(timeline.step_times))} s;"
                f" rewards {', '.join(f'{timeline.rewards[s]:.2f}' for s in sorted(timeline.rewards))}{watching}",
                flush=True,
            )
    summary = report(results, args.steps)
    summary["load_average_after_each_row"] = loads
    end = look()
    print(describe(start, "at the start") + "\n" + describe(end, "at the end"))
    summary["machine"] = {"start": start, "end": end}
    noisy = start["not_quiet"] or end["not_quiet"] or any(t.others_share > 0.10 for _, t, _ in results)
    if noisy:
        print(warning(start["not_quiet"] or end["not_quiet"] or "other processes took the CPU during a run"))
    print(json.dumps(summary))
    if not args.no_record:
        note = "NOT QUIET: noisy figures, not to quote as the figure" if noisy else ""
        print(f"recorded in {record('bench_launch_path', summary, note=note).relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
