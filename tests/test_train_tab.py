"""The Train tab's own Gradio events, run through the real app (no browser): what opening a run and a
refresh read from the run folder.

A page watching a long run must cost the server what the run appended, not
what it holds: the events are run as Gradio runs them (`Blocks.process_api`,
one session state per page) while every byte read from metrics.jsonl and
completions.jsonl is counted. No timing: the speed is measured by
benchmarks/bench_big_run.py.
"""

import builtins
import io
import json
import os
from collections import Counter

import pytest
from app_events import Page, find_event
from helpers import STEPS, G, append_step

from workbench.runstore import jsonl_cache, runfolder, safe_files

WATCHED = (runfolder.METRICS_FILE, runfolder.COMPLETIONS_FILE)


@pytest.fixture
def run_dir(tmp_path):
    """A live run (its pid is this process) of STEPS steps."""
    path = tmp_path / "runs" / "20260101-000000-demo"
    path.mkdir(parents=True)
    (path / runfolder.CONFIG_FILE).write_text(json.dumps({"model": "tiny", "task": "demo", "num_generations": G}))
    runfolder.update_status(path, state="training", step=0, total_steps=STEPS * 2, started_at=1000.0, pid=os.getpid())
    for step in range(1, STEPS + 1):
        append_step(path, step)
    return path


@pytest.fixture
def bytes_read(monkeypatch):
    """Bytes read from each run file (by name) through `open`, counted from the moment it is used."""
    counts: Counter = Counter()
    real_open = builtins.open

    class Counted:
        def __init__(self, handle, name):
            self.handle, self.name = handle, name

        def read(self, *size):
            data = self.handle.read(*size)
            counts[self.name] += len(data)
            return data

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            self.handle.close()

        def __getattr__(self, attribute):
            return getattr(self.handle, attribute)

    def counting_open(file, *args, **kwargs):
        handle = real_open(file, *args, **kwargs)
        name = os.path.basename(os.fsdecode(file)) if isinstance(file, (str, bytes, os.PathLike)) else ""
        return Counted(handle, name) if name in WATCHED else handle

    real_open_file = safe_files.open_file

    def counting_open_file(path, **kwargs):  # how the run folder's readers open its files (never following a link)
        handle = real_open_file(path, **kwargs)
        name = os.path.basename(os.fsdecode(path))
        return Counted(handle, name) if name in WATCHED else handle

    monkeypatch.setattr(builtins, "open", counting_open)
    monkeypatch.setattr(io, "open", counting_open)
    monkeypatch.setattr(safe_files, "open_file", counting_open_file)
    return counts


class TrainPage(Page):
    """A page on the Train tab."""

    def __init__(self, app):
        super().__init__(app)
        self.on_load = find_event(app, "workbench.ui.train_tab", "on_load")
        self.on_refresh = find_event(app, "workbench.ui.train_tab", "on_refresh")

    def open(self) -> dict:
        return self.run(self.on_load, [None, 0.5])  # nothing remembered, smoothing 0.5

    def refresh(self) -> dict:
        return self.run(self.on_refresh, [None, None, 0.5])  # the watch and the pin come from the session


@pytest.fixture
def app(run_dir):
    from workbench.ui.app import build_app

    jsonl_cache.forget()
    yield build_app(run_dir.parent)
    jsonl_cache.forget()


def test_a_refresh_reads_only_what_the_run_appended(app, run_dir, bytes_read):
    page = TrainPage(app)
    page.open()
    bytes_read.clear()
    assert page.refresh()["data"] is not None
    assert bytes_read == Counter(), "nothing new: a refresh reads no byte of the run's files"

    sizes = {name: (run_dir / name).stat().st_size for name in WATCHED}
    append_step(run_dir, STEPS + 1)
    result = page.refresh()
    appended = {name: (run_dir / name).stat().st_size - sizes[name] for name in WATCHED}
    # metrics.jsonl is read through the process's cache, which checks the bytes before what it read up to
    appended[runfolder.METRICS_FILE] += jsonl_cache.FINGERPRINT_BYTES
    assert dict(bytes_read) == appended
    assert f"step {STEPS + 1} / {2 * STEPS}" in json.dumps(page.output(page.on_refresh, result, "wb-train-progress"))


def test_a_second_page_opening_the_run_parses_only_its_newest_step(app, run_dir, bytes_read):
    TrainPage(app).open()  # the first page in this process indexes completions.jsonl once
    start, end = jsonl_cache.step_index(run_dir / runfolder.COMPLETIONS_FILE).span_of(STEPS)
    bytes_read.clear()
    TrainPage(app).open()
    fingerprint = jsonl_cache.FINGERPRINT_BYTES
    assert bytes_read[runfolder.COMPLETIONS_FILE] == fingerprint + (end - start)
    assert bytes_read[runfolder.METRICS_FILE] == fingerprint
