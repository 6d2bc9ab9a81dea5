"""What the page spends on each event: Gradio's run history off (the dashboard's default) against on.

    .venv/bin/python benchmarks/bench_page_events.py [--rounds 6] [--seconds 20]

Gradio 6 records every event's inputs and outputs in the page's localStorage (its "run history"): at each
event's start, status updates and end the page reads, parses, extends and writes back a JSON list of the
last 100. The dashboard turns it off (workbench/ui/server.py); `GRADIO_RUN_HISTORY=true` turns it back on.
This starts app.py both ways and drives one Chromium page (the browser tests' settings) through the same
gestures: on the Setup tab, `--rounds` times, choose a task, wait until its presets land in the form, choose
the tiny model and type a max_completion_length; then it opens the Train tab and leaves it `--seconds`
(its refresh ticks are events too). For each it prints the seconds a Setup round took (median), the page's
main-thread busy seconds over the rounds (Chromium's TaskDuration) and the part in scripts, the browser's
CPU seconds per second on the Train tab, and the bytes of run history left in localStorage.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))  # the browser tests' app server, Chromium settings and gestures
sys.path.insert(0, str(ROOT / "benchmarks"))

from bench_idle import cpu_seconds  # noqa: E402  (same folder)
from browser_fixtures import CHROMIUM, CHROMIUM_ARGS, UI, VIEWPORT, start_app  # noqa: E402

from workbench.spec.config import RunConfig  # noqa: E402
from workbench.spec.tasks import TASKS  # noqa: E402

# tasks in turn, each with a max_completion_length preset unlike the one before, so its arrival shows
ROUND_TASKS = ("arithmetic", "demo", "gsm8k", "reward_hacking")
HISTORY_BYTES_JS = (
    "() => Object.keys(localStorage).filter(k => k.startsWith('gradio:run-history'))"
    ".reduce((n, k) => n + localStorage.getItem(k).length, 0)"
)


def main_thread_seconds(cdp) -> tuple[float, float]:
    """The page's main-thread busy seconds so far, and the part spent in scripts (Chromium's own counters)."""
    metrics = {m["name"]: m["value"] for m in cdp.send("Performance.getMetrics")["metrics"]}
    return metrics["TaskDuration"], metrics["ScriptDuration"]


def setup_round(ui: UI, task: str) -> float:
    """One person's round on the Setup tab; the seconds it took until the page had answered it."""
    from playwright.sync_api import expect

    setup = ui.panel("Setup")
    started = time.monotonic()
    ui.choose("task", f"{task}: {TASKS[task].title}", setup)
    if hasattr(ui, "reveal"):  # the field sits in a closed group of the Setup tab: opened as a person would
        ui.reveal("max_completion_length", setup)
    preset = RunConfig.for_task(task).max_completion_length
    expect(ui.number("max_completion_length", setup)).to_have_value(str(preset), timeout=120_000)
    ui.choose("model", "tiny", setup)
    ui.set_number("max_completion_length", 8, setup)
    expect(ui.number("max_completion_length", setup)).to_have_value("8", timeout=120_000)
    return time.monotonic() - started


def measure(browser, server, chromium, rounds: int, seconds: float) -> dict:
    page = browser.new_context(viewport=VIEWPORT).new_page()
    page.set_default_timeout(120_000)
    ui = UI(page, server)
    ui.open("Setup")
    page.wait_for_timeout(3000)
    cdp = page.context.new_cdp_session(page)
    cdp.send("Performance.enable")
    busy_before, script_before = main_thread_seconds(cdp)
    times = [setup_round(ui, ROUND_TASKS[i % len(ROUND_TASKS)]) for i in range(rounds)]
    busy, script = main_thread_seconds(cdp)
    ui.open("Train")
    page.wait_for_timeout(3000)
    browser_before = cpu_seconds(chromium, True)
    page.wait_for_timeout(seconds * 1000)
    train_cpu = (cpu_seconds(chromium, True) - browser_before) / seconds
    history = page.evaluate(HISTORY_BYTES_JS)
    page.context.close()
    return {
        "round": statistics.median(times),
        "busy": busy - busy_before,
        "script": script - script_before,
        "train": train_cpu,
        "history": history,
    }


def main(argv: list[str] | None = None) -> int:
    import psutil
    from playwright.sync_api import sync_playwright

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=6, help="Setup-tab rounds per row (default 6)")
    parser.add_argument("--seconds", type=float, default=20.0, help="seconds on the Train tab (default 20)")
    args = parser.parse_args(argv)
    if not CHROMIUM.exists():
        raise SystemExit("this needs Debian's chromium: `make browser` installs it")
    rows = {
        "run history off (the dashboard)": {"GRADIO_RUN_HISTORY": ""},
        "run history on (GRADIO_RUN_HISTORY=true)": {"GRADIO_RUN_HISTORY": "true"},
    }
    results = {}
    with tempfile.TemporaryDirectory(prefix="bench-page-") as tmp, sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS, headless=True)
        chromium = next(p for p in psutil.Process().children(recursive=True) if "chrom" in p.name().lower())
        for index, (name, env) in enumerate(rows.items()):
            server = start_app(Path(tmp) / f"runs{index}", log_dir=Path(tmp), extra_env=env)
            try:
                results[name] = measure(browser, server, chromium, args.rounds, args.seconds)
            finally:
                server.stop()
        browser.close()
    print(
        f"\n{'row':<42} {'Setup round':>12} {'page busy':>10} {'scripts':>8} {'Train tab CPU':>14} "
        f"{'history':>9}   ({args.rounds} rounds; busy and scripts: seconds over all rounds; "
        f"Train tab: browser CPU s per s over {args.seconds:.0f} s)"
    )
    for name, r in results.items():
        print(
            f"{name:<42} {r['round']:>10.2f} s {r['busy']:>8.2f} s {r['script']:>6.2f} s {r['train']:>14.3f} "
            f"{r['history'] / 1e3:>7.0f} kB"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
