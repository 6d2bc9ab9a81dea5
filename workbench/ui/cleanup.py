"""Temporary files the dashboard leaves behind: Gradio's upload cache emptied of what no page used within the
hour, the run reports of a day ago.

Gradio copies every uploaded file (and every file it offers for download)
into its upload cache (GRADIO_TEMP_DIR, else `<system temp>/gradio`) and
never removes the copies of a server that ran before; on a shared dashboard
that folder would grow with every upload of every user (what one user may
hold there at once is capped: access/cache_quota.py). A file an event names
is marked used then (`mark_used`, from ui/browser_files.py's check of every
event), so the cache keeps what an open page still sends, and loses the rest
an hour after its last use (`CACHE_MAX_AGE_SECONDS`, looked at every 10
minutes). The run reports offered for download (ui/run_reports.write_report)
land in a private temporary folder of their own, kept a day. `start_cleaning`
cleans a list of folders when the app starts and then at its pace, in a
daemon thread.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path

MAX_AGE_SECONDS = 24 * 3600
EVERY_SECONDS = 3600.0
CACHE_MAX_AGE_SECONDS = 3600  # Gradio's upload cache: an hour after a file was last uploaded or named by an event
CACHE_EVERY_SECONDS = 600.0


def upload_cache_folder() -> Path:
    """Gradio's upload cache, where it puts files uploaded to this app (and those it serves)."""
    from workbench.ui import gradio_compat

    return Path(gradio_compat.upload_folder())


def mark_used(paths: Iterable[str]) -> None:
    """Mark files of the upload cache used now (their time set to now): the cleaning keeps them another hour."""
    for path in paths:
        try:
            os.utime(path, follow_symlinks=False)
        except OSError:  # gone, or not ours: nothing to keep
            pass


def remove_old_files(folder: str | os.PathLike, max_age: float = MAX_AGE_SECONDS, now: float | None = None) -> int:
    """Remove files (and links) in `folder` last modified more than `max_age` seconds ago, and old folders
    this leaves empty; returns how many files went. Links are removed, never followed."""
    cutoff = (time.time() if now is None else now) - max_age
    removed = 0
    for parent, folders, files in os.walk(folder, topdown=False):
        try:  # a folder last written before the cutoff goes once empty (one written since may be about to fill)
            old_folder = os.lstat(parent).st_mtime < cutoff
        except OSError:
            continue
        for name in files + [f for f in folders if os.path.islink(os.path.join(parent, f))]:
            path = os.path.join(parent, name)
            try:
                if os.lstat(path).st_mtime < cutoff:
                    os.unlink(path)
                    removed += 1
            except OSError:  # gone meanwhile, or not ours to remove: the next round tries again
                pass
        if old_folder and parent != os.fspath(folder):
            try:
                os.rmdir(parent)  # only an empty folder goes
            except OSError:
                pass
    return removed


def start_cleaning(
    folders: Callable[[], Iterable[Path]], every: float = EVERY_SECONDS, max_age: float = MAX_AGE_SECONDS
) -> threading.Thread:
    """Clean `folders()` now, then every `every` seconds, in a daemon thread (it ends with the app)."""

    def clean_forever() -> None:
        while True:
            for folder in folders():
                remove_old_files(folder, max_age)
            time.sleep(every)

    thread = threading.Thread(target=clean_forever, daemon=True, name="workbench-cleanup")
    thread.start()
    return thread
