"""The Setup tab as a newcomer meets it: how tall it is, and what one choice costs the page.

    .venv/bin/python benchmarks/bench_setup_page.py [--repeats 2] [--record]

Starts app.py on an empty runs folder and drives one Chromium page (Debian's, as the browser tests) at 1400x1000:
- the height of the Setup tab on first open (the page's `document.documentElement.scrollHeight`, and the Setup
  panel's own height), once its verdict has landed;
- for each gesture - choose a task, choose a preset (a recipe), type into a field - the `queue/join` requests
  the page sends (Gradio sends one per event, chained ones included) and the seconds from the gesture to the page's
  last change (a MutationObserver over the whole page), waiting until the page has been quiet for `QUIET_S`;
- the verdict the page shows afterwards.
Figures are the median (and the most) over `--repeats` rounds of the three gestures. `--record` appends them to
benchmarks/results/bench_setup_page.jsonl (results_file.py) with the machine's CPU and the command.
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

from browser_fixtures import CHROMIUM, CHROMIUM_ARGS, UI, start_app  # noqa: E402

VIEWPORT = {"width": 1400, "height": 1000}
# the page counts as done once nothing changed and no request left for this long
QUIET_S = 3.0
TIMEOUT_S = 90.0
# Every change of the page's DOM, and every click, stamped with the page's clock.
WATCH_JS = """() => {
  window.wbLastChange = performance.now();
  window.wbLastClick = 0;
  new MutationObserver(() => { window.wbLastChange = performance.now(); })
    .observe(document.body, {subtree: true, childList: true, attributes: true, characterData: true});
  document.addEventListener("click", () => { window.wbLastClick = performance.now(); }, true);
  document.addEventListener("input", () => { window.wbLastClick = performance.now(); }, true);
}"""
HEIGHTS_JS = """() => ({page: document.documentElement.scrollHeight,
  setup: Math.round(document.querySelector('#wb-tab-setup').getBoundingClientRect().height)})"""
# (label of the gesture, how to make it)
TASK_CHOICES = ("arithmetic: Arithmetic with a tagged answer", "demo: Answer briefly and right (demo)")
RECIPES = ("DAPO: dapo", "none (your own settings)")


class Requests:
    """The page's `queue/join` POSTs (one per Gradio event) and when the last one left."""

    def __init__(self, page):
        self.count, self.last = 0, time.monotonic()
        page.on("request", self._seen)

    def _seen(self, request) -> None:
        if request.method == "POST" and "queue/join" in request.url:
            self.count += 1
            self.last = time.monotonic()


def settle(page, requests: Requests) -> float:
    """Wait until the page has neither changed nor sent a request for QUIET_S; the seconds from the gesture to
    its last change."""
    deadline = time.monotonic() + TIMEOUT_S
    while time.monotonic() < deadline:
        page.wait_for_timeout(250)
        quiet_page = page.evaluate("() => (performance.now() - window.wbLastChange) / 1000")
        if quiet_page >= QUIET_S and time.monotonic() - requests.last >= QUIET_S:
            break
    return page.evaluate("() => Math.max(0, window.wbLastChange - window.wbLastClick) / 1000")


def gesture(page, requests: Requests, act) -> tuple[int, float, str]:
    """(requests, seconds to settle, verdict) of one gesture."""
    before = requests.count
    act()
    seconds = settle(page, requests)
    verdict = page.locator("#wb-tab-setup .wb-badge").first.inner_text().splitlines()[0]
    return requests.count - before, seconds, verdict


def open_setup(ui: UI, requests: Requests) -> dict:
    ui.open("Setup")
    setup = ui.panel("Setup")
    setup.locator(".wb-badge").first.wait_for(timeout=TIMEOUT_S * 1000)
    ui.page.evaluate(WATCH_JS)
    settle(ui.page, requests)
    ui.settle()
    return ui.page.evaluate(HEIGHTS_JS)


def measure(browser, server, repeats: int) -> dict:
    page = browser.new_context(viewport=VIEWPORT).new_page()
    page.set_default_timeout(TIMEOUT_S * 1000)
    requests = Requests(page)
    ui = UI(page, server)
    heights = open_setup(ui, requests)
    setup = ui.panel("Setup")
    rows: dict[str, list] = {"task": [], "preset": [], "field": []}
    for round_ in range(repeats):
        rows["task"].append(gesture(page, requests, lambda r=round_: ui.choose("task", TASK_CHOICES[r % 2], setup)))
        rows["preset"].append(gesture(page, requests, lambda r=round_: choose_recipe(ui, RECIPES[r % 2])))
        rows["field"].append(gesture(page, requests, lambda r=round_: type_field(ui, 3 if r % 2 == 0 else 4)))
    page.context.close()
    figures = {"height_px": heights["page"], "setup_panel_px": heights["setup"]}
    for name, results in rows.items():
        figures[f"{name}_requests"] = statistics.median(r[0] for r in results)
        figures[f"{name}_requests_max"] = max(r[0] for r in results)
        figures[f"{name}_settle_s"] = round(statistics.median(r[1] for r in results), 2)
        figures[f"{name}_settle_max_s"] = round(max(r[1] for r in results), 2)
        figures[f"{name}_verdicts"] = [r[2] for r in results]
    return figures


def choose_recipe(ui: UI, option: str) -> None:
    setup = ui.panel("Setup")
    if hasattr(ui, "reveal"):  # the field may sit in a closed group: open it as a person would
        ui.reveal("recipe", setup)
    ui.choose("recipe", option, setup)


def type_field(ui: UI, value: int) -> None:
    setup = ui.panel("Setup")
    if hasattr(ui, "reveal"):
        ui.reveal("num_generations", setup)
    ui.set_number("num_generations", value, setup)


def main(argv: list[str] | None = None) -> int:
    from playwright.sync_api import sync_playwright

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=2, help="rounds of the three gestures (default 2)")
    parser.add_argument("--record", action="store_true", help="append the figures to benchmarks/results/")
    parser.add_argument("--note", default="", help="a note recorded with the figures")
    args = parser.parse_args(argv)
    if not CHROMIUM.exists():
        raise SystemExit("this needs Debian's chromium: `make browser` installs it")
    with tempfile.TemporaryDirectory(prefix="bench-setup-") as tmp, sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS, headless=True)
        server = start_app(Path(tmp) / "runs", log_dir=Path(tmp))
        try:
            figures = measure(browser, server, args.repeats)
        finally:
            server.stop()
            browser.close()
    print(
        f"Setup tab at {VIEWPORT['width']}x{VIEWPORT['height']}: page {figures['height_px']} px tall "
        f"(Setup panel {figures['setup_panel_px']} px)"
    )
    for name in ("task", "preset", "field"):
        print(
            f"{name:<7} {figures[f'{name}_requests']:>4} requests (at most {figures[f'{name}_requests_max']}), "
            f"settled {figures[f'{name}_settle_s']:.2f} s after the gesture (at most "
            f"{figures[f'{name}_settle_max_s']:.2f} s); verdicts {figures[f'{name}_verdicts']}"
        )
    if args.record:
        from results_file import record

        print(f"recorded in {record('bench_setup_page', figures, note=args.note)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
