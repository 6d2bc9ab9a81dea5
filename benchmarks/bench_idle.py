"""What an open dashboard costs the machine while nothing happens: CPU of the app server and of the browser.

    python benchmarks/bench_idle.py               # server alone, then one Chromium page on each tab
    python benchmarks/bench_idle.py --seconds 30

A training run shares the CPU with the dashboard that watches it, so the
dashboard's idle cost comes straight out of training on a small machine. The
app serves an empty runs folder; each row measures CPU seconds per second
(1.0 = one whole core) over `--seconds`, after the page has settled. The last
column says how many animation frames the page asked for per second, and how
many of those the page's frame throttle slowed (workbench/ui/gradio_compat/gradio_compat_page_scripts.py).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))  # the browser tests' app server and Chromium settings

from browser_fixtures import CHROMIUM, CHROMIUM_ARGS, UI, VIEWPORT, start_app  # noqa: E402

TABS = ("Calculator", "Setup", "Train", "Compare", "Runs")
SETTLE_S = 6.0
# The page's frame counts (zeros on a page served without the throttle, for comparing with older versions).
FRAME_COUNTS_JS = "() => ({frames: 0, slowed: 0, ...(window.wbFrameThrottle || {})})"


def cpu_seconds(process, with_children: bool) -> float:
    """User + system CPU seconds of `process` (and, when asked, its children)."""
    import psutil

    total = 0.0
    for member in (process, *(process.children(recursive=True) if with_children else ())):
        try:
            times = member.cpu_times()
            total += times.user + times.system
        except psutil.NoSuchProcess:
            pass
    return total


def main(argv: list[str] | None = None) -> int:
    import psutil
    from playwright.sync_api import sync_playwright

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=20.0, help="length of each measurement (default 20)")
    args = parser.parse_args(argv)
    if not CHROMIUM.exists():
        raise SystemExit("the browser rows need Debian's chromium: `make browser` installs it")

    with tempfile.TemporaryDirectory(prefix="bench-idle-") as tmp:
        server = start_app(Path(tmp) / "runs", log_dir=Path(tmp))
        app = psutil.Process(server.process.pid)
        try:
            time.sleep(SETTLE_S)
            before = cpu_seconds(app, False)
            time.sleep(args.seconds)
            rows = [("app server, no page open", (cpu_seconds(app, False) - before) / args.seconds, None, "")]
            with sync_playwright() as playwright:
                browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS, headless=True)
                chromium = next(p for p in psutil.Process().children(recursive=True) if "chrom" in p.name().lower())
                for tab in TABS:
                    page = browser.new_context(viewport=VIEWPORT).new_page()
                    page.set_default_timeout(90_000)
                    UI(page, server).open(tab)
                    page.wait_for_timeout(SETTLE_S * 1000)
                    frames_before = page.evaluate(FRAME_COUNTS_JS)
                    app_before, browser_before = cpu_seconds(app, False), cpu_seconds(chromium, True)
                    page.wait_for_timeout(args.seconds * 1000)
                    frames = page.evaluate(FRAME_COUNTS_JS)
                    asked = (frames["frames"] - frames_before["frames"]) / args.seconds
                    slowed = (frames["slowed"] - frames_before["slowed"]) / args.seconds
                    rows.append(
                        (
                            f"one page on the {tab} tab",
                            (cpu_seconds(app, False) - app_before) / args.seconds,
                            (cpu_seconds(chromium, True) - browser_before) / args.seconds,
                            f"{asked:.1f} ({slowed:.1f} slowed)",
                        )
                    )
                    page.context.close()
                browser.close()
        finally:
            server.stop()

    print(
        f"\n{'what is open':<28} {'app server':>11} {'browser':>9}   frames/s asked   "
        f"(CPU s per s; 1.0 = one core; {args.seconds:.0f} s each)"
    )
    for name, app_cpu, browser_cpu, frames in rows:
        shown = "-" if browser_cpu is None else f"{browser_cpu:.3f}"
        print(f"{name:<28} {app_cpu:>11.3f} {shown:>9}   {frames}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
