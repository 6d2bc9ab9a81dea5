"""Browser fixtures (a pytest plugin loaded by conftest.py): a real app server and a real headless Chromium.

- `start_app(runs_dir)` starts `python app.py --port <free> --runs-dir <runs_dir>`
  and returns once it serves; `app_server` is one such server for the whole
  session (runs in a temporary folder), stopped at the end.
- `browser` is Debian's Chromium driven by playwright (browser downloads are
  impossible here); `page` is a fresh 1280x800 page per test, and `ui` wraps
  it with the few gestures the browser tests share (open a tab, open a closed
  group of settings, set a number, wait for text, take a screenshot).

Screenshots land in a temporary folder (the test's `tmp_path` for `ui`), so a
test run leaves assets/ alone; `python tools/screenshots.py` runs the tests
that take the README's and the docs' pictures with WORKBENCH_SCREENSHOTS set
to assets/.

Without Chromium the browser tests are skipped with the reason, except in CI
(`CI=true`), where they fail: a browser test must never vanish silently there.
"""

from __future__ import annotations

import os
import re
import shutil
import socket
import ssl
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
ASSETS = REPO / "assets"
# Where screenshots go when set (tools/screenshots.py sets it to assets/); else a temporary folder.
SCREENSHOTS_ENV = "WORKBENCH_SCREENSHOTS"
CHROMIUM = Path(os.environ.get("WORKBENCH_CHROMIUM", "/usr/bin/chromium"))
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--no-first-run"]
VIEWPORT = {"width": 1280, "height": 800}
# Gradio needs ~3 s to import on this 2-core machine; other work may slow it further.
SERVE_TIMEOUT_S = 60.0
# How long a browser assertion waits for the app to answer; the first page load
# (gradio's frontend, plotly) may take much longer on a busy 2-core machine.
UI_TIMEOUT_MS = 30_000
FIRST_LOAD_TIMEOUT_MS = 90_000


def free_port() -> int:
    """A TCP port nobody listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@dataclass
class AppServer:
    """A running `app.py` process and where it serves."""

    url: str
    runs_dir: Path
    process: subprocess.Popen
    log_path: Path
    seconds_to_serve: float

    def log_tail(self, chars: int = 3000) -> str:
        return self.log_path.read_text(errors="replace")[-chars:]

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=10)


def wait_until_serving(url: str, process: subprocess.Popen, log_path: Path, timeout: float) -> None:
    """Poll `url` until it answers 200; fail with the server's log if it dies or never answers."""
    # An https test server has a self-signed certificate: only whether it answers matters here.
    context = ssl._create_unverified_context() if url.startswith("https:") else None
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(
                f"app.py exited with code {process.returncode} before serving:\n"
                f"{log_path.read_text(errors='replace')[-3000:]}"
            )
        try:
            with urllib.request.urlopen(url, timeout=2, context=context) as response:
                if response.status == 200:
                    return
        except (urllib.error.URLError, ConnectionError, TimeoutError, OSError):
            pass
        time.sleep(0.1)
    raise RuntimeError(
        f"app.py did not serve {url} within {timeout:.0f} s:\n{log_path.read_text(errors='replace')[-3000:]}"
    )


def start_app(
    runs_dir: Path,
    log_dir: Path | None = None,
    extra_env: dict | None = None,
    extra_args: list[str] | tuple = (),
    scheme: str = "http",
) -> AppServer:
    """Start the real app on a free port with `runs_dir` (and `extra_args`); return once it serves.

    `scheme="https"` when `extra_args` give it a certificate (--ssl-certfile, --ssl-keyfile).
    """
    runs_dir = Path(runs_dir)
    runs_dir.mkdir(parents=True, exist_ok=True)
    port = free_port()
    log_path = Path(log_dir or runs_dir.parent) / f"app-{port}.log"
    env = {**os.environ, "GRADIO_ANALYTICS_ENABLED": "False", "PYTHONUNBUFFERED": "1", **(extra_env or {})}
    started = time.monotonic()
    with open(log_path, "wb") as log:
        process = subprocess.Popen(
            [sys.executable, str(REPO / "app.py"), "--port", str(port), "--runs-dir", str(runs_dir), *extra_args],
            cwd=REPO,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    url = f"{scheme}://127.0.0.1:{port}/"
    try:
        wait_until_serving(url, process, log_path, SERVE_TIMEOUT_S)
    except RuntimeError:
        process.kill()
        process.wait(timeout=10)
        raise
    return AppServer(url, runs_dir, process, log_path, time.monotonic() - started)


@pytest.fixture(scope="session")
def app_server(tmp_path_factory):
    """One real app server for the session, with its own empty runs folder."""
    base = tmp_path_factory.mktemp("app")
    server = start_app(base / "runs", log_dir=base)
    yield server
    server.stop()


@pytest.fixture
def app_factory(tmp_path):
    """Start extra app servers (e.g. on a prepared runs folder); all are stopped after the test."""
    servers = []

    def _start(runs_dir: Path | None = None, **kwargs) -> AppServer:
        server = start_app(runs_dir or tmp_path / "runs", log_dir=tmp_path, **kwargs)
        servers.append(server)
        return server

    yield _start
    for server in servers:
        server.stop()


def _require_chromium() -> None:
    if CHROMIUM.exists():
        return
    message = (
        f"Chromium not found at {CHROMIUM}: browser tests need Debian's chromium "
        f"(`make browser` installs it, or set WORKBENCH_CHROMIUM)."
    )
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(message, pytrace=False)
    pytest.skip(message)


@pytest.fixture(scope="session")
def browser():
    """Headless Debian Chromium, shared by the session's browser tests."""
    _require_chromium()
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS, headless=True)
        yield chromium
        chromium.close()


@pytest.fixture
def page(browser):
    """A fresh 1280x800 page; its console errors are kept in `page.console_errors`."""
    context = browser.new_context(viewport=VIEWPORT)
    context.set_default_timeout(UI_TIMEOUT_MS)
    new_page = context.new_page()
    new_page.console_errors = []
    new_page.on("console", lambda msg: msg.type == "error" and new_page.console_errors.append(msg.text))
    yield new_page
    context.close()


def screenshot_folder(default: Path | None = None) -> Path:
    """Where a test's screenshots go: WORKBENCH_SCREENSHOTS when set, else `default` (a test's tmp_path), else a
    new temporary folder."""
    chosen = os.environ.get(SCREENSHOTS_ENV)
    folder = Path(chosen) if chosen else default or Path(tempfile.mkdtemp(prefix="workbench-screenshots-"))
    folder.mkdir(parents=True, exist_ok=True)
    return folder


class UI:
    """The gestures browser tests share, finding elements by what a person sees."""

    def __init__(self, page, server: AppServer, shots: Path | None = None):
        self.page = page
        self.server = server
        self.shots = shots  # the screenshots' folder (screenshot_folder), made when the first is taken

    def open(self, tab: str | None = None) -> None:
        """Load the app (and open `tab`); wait until gradio has rendered it."""
        self.page.goto(self.server.url, timeout=FIRST_LOAD_TIMEOUT_MS)
        self.page.get_by_role("tab", name="Calculator").wait_for(timeout=FIRST_LOAD_TIMEOUT_MS)
        if tab:
            self.open_tab(tab)

    def open_tab(self, name: str) -> None:
        self.page.get_by_role("tab", name=name, exact=True).click()

    def panel(self, tab: str):
        """A tab's panel (`wb-tab-<name>`), so labels repeated in other tabs do not clash."""
        return self.page.locator(f"#wb-tab-{tab.lower()}")

    def open_group(self, title: str, scope=None) -> None:
        """Open the closed group of settings (a gr.Accordion) titled `title` by clicking its header, as a person
        does; an open one stays open. A closed group's fields are not on the page until it opens."""
        from playwright.sync_api import expect

        header = (scope or self.page).locator("button.label-wrap", has_text=title).first
        if "open" not in (header.get_attribute("class") or "").split():
            header.click()
        expect(header).to_have_class(re.compile(r"\bopen\b"))

    def reveal(self, field: str, scope=None) -> None:
        """Show the Setup tab's field `field`: open the closed group that holds it (setup_view.group_of)."""
        from workbench.ui.setup_view import group_of

        title = group_of(field)
        if title is not None:
            self.open_group(title, scope)

    def number(self, label: str, scope=None):
        """The input of the number field labelled `label` (exact label text)."""
        root = scope or self.page
        return root.get_by_label(label, exact=True).locator("visible=true").first

    def choose(self, label: str, option: str, scope=None) -> None:
        """Pick `option` in the dropdown labelled `label`, by clicking like a person does, and wait for its list to
        close (on a busy machine the list of the dropdown picked before may still be open beside it)."""
        from playwright.sync_api import expect

        expect(self.page.get_by_role("option")).to_have_count(0, timeout=UI_TIMEOUT_MS)
        (scope or self.page).get_by_label(label, exact=True).click()
        self.page.get_by_role("option", name=option, exact=True).click()
        expect(self.page.get_by_role("option")).to_have_count(0, timeout=UI_TIMEOUT_MS)

    def set_number(self, label: str, value, scope=None) -> None:
        """Type `value` into a number field like a person does and leave the field."""
        field = self.number(label, scope)
        field.fill(str(value))
        field.press("Tab")

    def expect_text(self, locator, pattern: str, timeout: int = UI_TIMEOUT_MS) -> None:
        """Wait until `locator` contains text matching `pattern` (a regex)."""
        from playwright.sync_api import expect

        expect(locator).to_contain_text(re.compile(pattern), timeout=timeout)

    def settle(self) -> None:
        """Leave the page at rest for a screenshot: no focused field, no hover highlight."""
        self.page.evaluate("document.activeElement && document.activeElement.blur()")
        self.page.mouse.move(0, 0)

    def screenshot(self, name: str, full_page: bool = False) -> Path:
        """Save a screenshot of the viewport as `name` in the screenshots' folder (screenshot_folder: a temporary
        one in a test run, assets/ for tools/screenshots.py, whose pictures the README and the docs show)."""
        self.shots = screenshot_folder(self.shots)
        path = self.shots / name
        self.page.screenshot(path=str(path), full_page=full_page)
        return path


class EventCounter:
    """The page's Gradio events: each is one `queue/join` POST (chained events too), counted from now on, with
    the time the last one left. It waits with `page.wait_for_timeout`: playwright's sync API delivers request
    events only while the test is inside one of its calls."""

    def __init__(self, page):
        self.page = page
        self.count = 0
        self.last = time.monotonic()
        page.on("request", self._seen)

    def _seen(self, request) -> None:
        if request.method == "POST" and "queue/join" in request.url:
            self.count += 1
            self.last = time.monotonic()

    def quiet(self, seconds: float = 2.0, timeout: float = UI_TIMEOUT_MS / 1000) -> None:
        """Wait until no event was sent for `seconds` (and none is awaited: a page waits for each answer before
        it sends the next event of a chain)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() - self.last < seconds and time.monotonic() < deadline:
            self.page.wait_for_timeout(100)

    def during(self, gesture, quiet: float = 2.0) -> int:
        """The events one gesture sends, counted until the page has been quiet for `quiet` seconds."""
        before = self.count
        gesture()
        self.last = time.monotonic()
        self.quiet(quiet)
        return self.count - before


@pytest.fixture
def ui(page, app_server, tmp_path):
    """A page on the session's app server, with the shared gestures (screenshots into tmp_path)."""
    return UI(page, app_server, tmp_path)


def pytest_report_header(config):
    found = "found" if CHROMIUM.exists() else "MISSING"
    return [f"chromium for browser tests: {CHROMIUM} ({found}); chromium on PATH: {shutil.which('chromium')}"]
