"""Does a run launched from the dashboard, and watched there, train as fast as bare TRL?

    python benchmarks/bench_launch_path.py                 # the four rows, demo task, bundled model, 8 steps
    python benchmarks/bench_launch_path.py --steps 6 --rows bare watched

One command, the same seed and settings (`RunConfig.for_task("demo")` with
`--steps`) started four ways, one after the other:

- bare:       TRL alone (benchmarks/bare_trl.py) in a plain environment: what a user writes without the workbench;
- foreground: `python -m workbench train` (it restarts itself under the launcher's allocator and threads);
- launcher:   `launcher.start(config)`, the background run the UI, the CLI's --background and notebooks use;
- watched:    the real app served by `app.py`, one headless Chromium page that sets the step count in the
              Setup tab, clicks Launch in the Train tab and stays there watching until the run ends.

For each it prints the median step time (TRL's own `step_time`, the first step
left out: it pays one-off costs), its ratio to bare TRL, the peak RSS of the
training process tree (sampled every 0.25 s), and the seconds from the launch
(the click, for the watched row) to the first step whose reward is 0.3 above
the first step's. The watched row also prints the CPU seconds the app server
and the browser used per training step: the cost of watching.

Targets: launcher / bare <= 1.05, watched / bare <= 1.15, peak RSS <= 3 GB,
+0.3 reward within 60 s of the click. Timings depend on what else the machine
does: run it on a quiet machine, and compare rows of one run only.
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
from workbench.jobs import allocator, launcher, run_state  # noqa: E402
from workbench.runstore import runfolder  # noqa: E402
from workbench.spec.config import RunConfig  # noqa: E402

GB = 2**30
ROWS = ("bare", "foreground", "launcher", "watched")
REWARD_RISE = 0.3
SAMPLE_SECONDS = 0.25
# Variables the workbench sets for its own processes; bare TRL starts without them.
WORKBENCH_VARIABLES = (*allocator.ALLOCATOR_VARIABLES, allocator.ALLOCATOR_ENV_VAR, allocator.APPLIED_ENV_VAR,
                       "OMP_NUM_THREADS")


@dataclass
class Timeline:
    """What a watcher saw of one run: when each step's reward appeared, the step times, the memory peak."""

    launched: float
    seen_at: dict[int, float] = field(default_factory=dict)
    rewards: dict[int, float] = field(default_factory=dict)
    step_times: dict[int, float] = field(default_factory=dict)
    peak_rss: int = 0

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


def seconds_to_reward_rise(rewards: dict[int, float], seen_at: dict[int, float], launched: float,
                           rise: float = REWARD_RISE) -> float | None:
    """The first step whose reward is `rise` above the first step's, as seconds after `launched` (pure)."""
    steps = sorted(rewards)
    if not steps:
        return None
    first = rewards[steps[0]]
    for step in steps[1:]:
        if rewards[step] - first >= rise:
            return seen_at[step] - launched
    return None


def follow(timeline: Timeline, log_path: Path, alive, pid_of) -> Timeline:
    """Sample memory and read `log_path` until `alive()` is false; one last read after."""
    offset = 0
    while alive():
        pid = pid_of()
        if pid:
            timeline.peak_rss = max(timeline.peak_rss, tree_rss(pid))
        offset = timeline.read(log_path, offset)
        time.sleep(SAMPLE_SECONDS)
    timeline.read(log_path, offset)
    return timeline


# ---------------------------------------------------------------- the four rows


def run_bare(config: RunConfig, work: Path) -> Timeline:
    settings = {name: getattr(config, name) for name in BARE_SETTINGS}
    env = {k: v for k, v in os.environ.items() if k not in WORKBENCH_VARIABLES}
    env["PYTHONPATH"] = str(ROOT)
    out = work / "bare"
    timeline = Timeline(time.time())
    process = subprocess.Popen([sys.executable, str(ROOT / "benchmarks" / "bare_trl.py"), json.dumps(settings),
                                str(out)], cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    follow(timeline, out / "log.jsonl", lambda: process.poll() is None, lambda: process.pid)
    if process.returncode != 0:
        raise SystemExit(f"bare TRL failed:\n{process.stderr.read().decode()[-2000:]}")
    return timeline


def run_foreground(config: RunConfig, work: Path) -> Timeline:
    run_dir = work / "foreground"
    work.mkdir(parents=True, exist_ok=True)
    config_path = work / "foreground-config.json"
    config.save(config_path)
    env = {k: v for k, v in os.environ.items() if k != allocator.APPLIED_ENV_VAR}
    env["PYTHONPATH"] = str(ROOT)
    timeline = Timeline(time.time())
    process = subprocess.Popen([sys.executable, "-m", "workbench", "train", "--config", str(config_path),
                                "--run-dir", str(run_dir)], cwd=ROOT, env=env,
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    follow(timeline, run_dir / runfolder.METRICS_FILE, lambda: process.poll() is None, lambda: process.pid)
    if process.returncode != 0:
        raise SystemExit(f"foreground run failed:\n{process.stderr.read().decode()[-2000:]}")
    return timeline


def follow_background_run(run_dir: Path, launched: float) -> Timeline:
    """Follow a run the launcher started until it reaches a final state; fail loudly if it did not finish."""
    timeline = Timeline(launched)
    try:
        follow(timeline, run_dir / runfolder.METRICS_FILE,
               lambda: run_state.status_of_dir(run_dir)["state"] not in runfolder.FINAL_STATES,
               lambda: runfolder.read_status(run_dir).get("pgid"))
    except BaseException:  # interrupted: the detached run must not outlive the benchmark
        launcher.stop(run_dir, timeout=0)
        raise
    final = run_state.status_of_dir(run_dir)
    if final["state"] != "finished":
        raise SystemExit(f"{run_dir.name} ended {final['state']}: {final.get('error')}")
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


def run_watched(config: RunConfig, work: Path) -> tuple[Timeline, dict]:
    """Launch from the real dashboard in Chromium and keep the Train tab open until the run ends."""
    import psutil
    from browser_fixtures import CHROMIUM, CHROMIUM_ARGS, FIRST_LOAD_TIMEOUT_MS, UI, VIEWPORT, start_app
    from playwright.sync_api import sync_playwright

    runs_dir = work / "watched-runs"
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
            ui.set_number("max_steps", config.max_steps, setup)
            ui.open_tab("Train")
            # playwright's driver starts Chromium: the first Chromium among this process's descendants is the browser
            browser_process = next(p for p in psutil.Process().children(recursive=True)
                                   if "chrom" in p.name().lower())
            # The app server alone (the training run it starts is its child), the browser with its renderers.
            watchers = {"app": (psutil.Process(server.process.pid), False), "browser": (browser_process, True)}
            cpu_before = {name: process_cpu_seconds(*watched) for name, watched in watchers.items()}
            launched = time.time()
            ui.panel("Train").get_by_role("button", name="Launch", exact=True).click()
            run_dirs = []
            while not run_dirs:
                run_dirs = runfolder.list_run_dirs(runs_dir)
                time.sleep(0.05)
            launched_config = runfolder.read_config(run_dirs[0])
            differing = {k: (launched_config.get(k), v) for k, v in config.to_dict().items()
                         if k in BARE_SETTINGS and launched_config.get(k) != v}
            if differing:
                raise SystemExit(f"the dashboard launched other settings than the other rows: {differing}")
            timeline = follow_background_run(run_dirs[0], launched)
            cpu = {name: process_cpu_seconds(*watched) - cpu_before[name] for name, watched in watchers.items()}
            browser.close()
    finally:
        server.stop()
    return timeline, cpu


def chromium_available() -> bool:
    from browser_fixtures import CHROMIUM

    return CHROMIUM.exists()


# ---------------------------------------------------------------- report


def report(results: dict[str, Timeline], watch_cpu: dict | None, steps: int) -> dict:
    bare = results.get("bare")
    bare_step = bare.median_step() if bare else None
    print(f"\n{'row':<11} {'median step':>11} {'vs bare':>8} {'peak RSS':>9} {'+0.3 reward':>12}"
          f"   (demo task, {steps} steps; first step left out of the median)")
    summary = {}
    for name, timeline in results.items():
        median = timeline.median_step()
        ratio = median / bare_step if bare_step else None
        rise = timeline.seconds_to_rise()
        print(f"{name:<11} {median:>9.2f} s {(f'{ratio:.3f}' if ratio else '-'):>8} "
              f"{timeline.peak_rss / GB:>6.2f} GB {(f'{rise:.0f} s' if rise is not None else 'not reached'):>12}")
        summary[name] = {"median_step_s": round(median, 3), "ratio_to_bare": round(ratio, 3) if ratio else None,
                         "peak_rss_gb": round(timeline.peak_rss / GB, 3),
                         "seconds_to_reward_rise": None if rise is None else round(rise, 1),
                         "rewards": [round(timeline.rewards[s], 3) for s in sorted(timeline.rewards)]}
    if watch_cpu is not None and "watched" in results:
        logged = max(1, len(results["watched"].rewards))
        per_step = {name: seconds / logged for name, seconds in watch_cpu.items()}
        print(f"cost of watching: app server {per_step['app']:.2f} CPU s per step, "
              f"browser {per_step['browser']:.2f} CPU s per step ({logged} steps)")
        summary["watch_cpu_s_per_step"] = {k: round(v, 3) for k, v in per_step.items()}
    targets = []
    if bare_step:
        for name, limit in (("launcher", 1.05), ("watched", 1.15)):
            if name in results:
                ratio = results[name].median_step() / bare_step
                targets.append(f"{name}/bare {ratio:.3f} {'meets' if ratio <= limit else 'misses'} <= {limit}")
    for name, timeline in results.items():
        if name in ("launcher", "watched"):
            targets.append(f"{name} peak {timeline.peak_rss / GB:.2f} GB "
                           f"{'meets' if timeline.peak_rss <= 3 * GB else 'misses'} <= 3 GB")
    if "watched" in results:
        rise = results["watched"].seconds_to_rise()
        targets.append(f"click to +{REWARD_RISE} reward "
                       f"{'not reached' if rise is None else f'{rise:.0f} s'} "
                       f"{'meets' if rise is not None and rise <= 60 else 'misses'} <= 60 s")
    print("targets: " + "; ".join(targets))
    print(json.dumps(summary))
    return summary


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=8, help="optimizer steps per run (default 8)")
    parser.add_argument("--rows", nargs="+", default=list(ROWS), choices=ROWS)
    parser.add_argument("--model", default="smollm2-135m-instruct")
    args = parser.parse_args(argv)
    if "watched" in args.rows and not chromium_available():
        raise SystemExit("the watched row needs Debian's chromium: `make browser` installs it")

    # The Setup tab's own starting point, so the dashboard launches exactly these settings.
    config = RunConfig.for_task("demo", model=args.model, max_steps=args.steps)
    runners = {"bare": run_bare, "foreground": run_foreground, "launcher": run_launcher}
    results: dict[str, Timeline] = {}
    watch_cpu = None
    with tempfile.TemporaryDirectory(prefix="bench-launch-path-") as tmp:
        for row in args.rows:
            print(f"{row}: running {args.steps} steps...", flush=True)
            if row == "watched":
                results[row], watch_cpu = run_watched(config, Path(tmp))
            else:
                results[row] = runners[row](config, Path(tmp))
            timeline = results[row]
            print(f"  load average over the last minute: {os.getloadavg()[0]:.2f}", flush=True)
            print(f"  step times {', '.join(f'{timeline.step_times[s]:.2f}' for s in sorted(timeline.step_times))} s;"
                  f" rewards {', '.join(f'{timeline.rewards[s]:.2f}' for s in sorted(timeline.rewards))}", flush=True)
    report(results, watch_cpu, args.steps)
    return 0


if __name__ == "__main__":
    sys.exit(main())
