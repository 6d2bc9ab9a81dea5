"""The Setup tab's hub dataset download: its words (progress, done, failed), and its handlers on a cached id, a
path and, offline, an uncached id (no network here: a real download is not tested)."""

from __future__ import annotations

import huggingface_hub.constants
import pytest
from helpers import gsm8k_like_rows, poll_until, write_hub_dataset

from workbench.ui import download_panel
from workbench.ui.download_view import DONE, DOWNLOADING, FAILED, Download, download_html


@pytest.mark.parametrize(
    "download, words",
    [
        (
            Download("o/d", DOWNLOADING, 2_500_000, 10_000_000),
            "Downloading o/d into the hub cache: 2.5 MB of 10.0 MB (25%)",
        ),
        (Download("o/d", DOWNLOADING, 900), "Downloading o/d into the hub cache: 900 B ..."),
        (Download("o/d", DONE, 3_000), "o/d is in the hub cache (3.0 kB)"),
        (Download("o/<b>", FAILED, error="<offline>"), "Download of o/&lt;b&gt; failed: &lt;offline&gt;"),
    ],
    ids=["progress", "size-unknown", "done", "failed-escaped"],
)
def test_the_download_is_worded(download, words):
    assert words in download_html(download)


@pytest.fixture
def hub_cache(tmp_path, monkeypatch):
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(tmp_path / "hub"))
    return tmp_path / "hub"


def test_a_path_is_never_downloaded(hub_cache, tmp_path):
    (tmp_path / "data.jsonl").write_text('{"prompt": "hi"}\n')
    html, _ = download_panel.DownloadPanel().start(str(tmp_path / "data.jsonl"))
    assert download_panel.NOT_A_HUB_ID in html


def test_a_cached_hub_id_is_already_there(hub_cache):
    repo = hub_cache / "datasets--openai--gsm8k"
    write_hub_dataset(repo / "snapshots" / "abc", {"main": {"train": gsm8k_like_rows(2)}})
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text("abc")
    (repo / "blobs").mkdir()
    (repo / "blobs" / "f00d").write_bytes(b"x" * 2048)
    html, _ = download_panel.DownloadPanel().start("openai/gsm8k")
    assert "openai/gsm8k is in the hub cache (2.0 kB)" in html


def test_offline_an_uncached_hub_id_fails_saying_how_to_fetch_it(hub_cache, monkeypatch):
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
    panel = download_panel.DownloadPanel()
    panel.start("someone/some-data")
    html = poll_until(lambda: (text := panel.poll("someone/some-data")[0]) and "failed" in text and text, timeout=30)
    assert "Download of someone/some-data failed:" in html
    assert "hf download --repo-type dataset someone/some-data --local-dir DIR" in html
