"""The Setup tab's hub dataset download, as words: what is happening to the named dataset. No gradio, no I/O."""

from __future__ import annotations

from dataclasses import dataclass
from html import escape

DOWNLOADING, DONE, FAILED = "downloading", "done", "failed"


@dataclass(frozen=True)
class Download:
    """One hub dataset's download into the hub cache, as the panel last saw it."""

    hub_id: str
    state: str
    done_bytes: int = 0
    total_bytes: int | None = None  # None: the hub did not say
    error: str = ""


def size_text(count: int) -> str:
    """Bytes in the unit a person reads (kB, MB, GB)."""
    for unit, scale in (("GB", 10**9), ("MB", 10**6), ("kB", 10**3)):
        if count >= scale:
            return f"{count / scale:.1f} {unit}"
    return f"{count} B"


def download_html(download: Download | None, note: str = "") -> str:
    """A line about the download (progress, done, or why it failed), or `note` when there is none."""
    if download is None:
        return f"<p class='wb-note' id='wb-download'>{escape(note)}</p>" if note else ""
    name = escape(download.hub_id)
    if download.state == FAILED:
        return f"<p class='wb-warn-line' id='wb-download'>Download of {name} failed: {escape(download.error)}</p>"
    if download.state == DONE:
        return (
            f"<p class='wb-ok-line' id='wb-download'>{name} is in the hub cache "
            f"({size_text(download.done_bytes)}): its rows show above.</p>"
        )
    total = download.total_bytes
    share = f" of {size_text(total)} ({min(100, 100 * download.done_bytes // max(total, 1))}%)" if total else ""
    return (
        f"<p class='wb-note' id='wb-download'>Downloading {name} into the hub cache: "
        f"{size_text(download.done_bytes)}{share} ...</p>"
    )
