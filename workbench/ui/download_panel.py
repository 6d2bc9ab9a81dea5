"""The Setup tab's download of a hub dataset into the hub cache, with its progress.

Naming a hub id that is not cached yet, a person may fetch it here rather than
at the run's start: "Download dataset" runs `huggingface_hub.snapshot_download`
in a thread of the app, and a timer shows the bytes in the hub cache against
the size the hub gives (ui/download_view.py words it). Offline, or for a
dataset the hub does not have, it says why and how to download it elsewhere.
Only hub ids are fetched: a path is never read here. The downloads are the
app's (one hub cache): two people asking for the same dataset share one.
"""

from __future__ import annotations

import threading

import gradio as gr

from workbench.sources import hub_datasets
from workbench.ui.download_view import DONE, DOWNLOADING, FAILED, Download, download_html
from workbench.ui.setup_view import form_text

NOT_A_HUB_ID = "Download fetches a hub id (owner/name) into the hub cache; a folder or file is read where it is."


class DownloadPanel:
    """The download button's and timer's handlers, over the app's downloads (hub id -> its record)."""

    def __init__(self):
        self.downloads: dict[str, dict] = {}
        self.lock = threading.Lock()

    def start(self, dataset_name) -> tuple:
        name = form_text(dataset_name)
        if not hub_datasets.HUB_ID.match(name):
            return download_html(None, NOT_A_HUB_ID), gr.Timer(active=False)
        try:
            source = hub_datasets.locate(name)
        except hub_datasets.DatasetError as exc:  # a local path of that shape that is nothing usable
            return download_html(None, str(exc)), gr.Timer(active=False)
        if source.cached and name not in self.downloads:
            return download_html(Download(name, DONE, hub_datasets.downloaded_bytes(name))), gr.Timer(active=False)
        with self.lock:
            if self.downloads.get(name, {}).get("state") in (None, FAILED):
                record = {"state": DOWNLOADING, "total": None, "error": ""}
                self.downloads[name] = record
                threading.Thread(target=self._fetch, args=(name, record), daemon=True).start()
        return self.poll(name)

    def _fetch(self, hub_id: str, record: dict) -> None:
        from huggingface_hub import snapshot_download

        try:
            record["total"] = hub_datasets.repo_bytes(hub_id)
            snapshot_download(hub_id, repo_type="dataset")
            record["state"] = DONE
        except Exception as exc:  # offline, unknown id, gated, a full disk: shown with how to fetch it elsewhere
            record["error"] = f"{type(exc).__name__}: {str(exc)[:300]}; {hub_datasets.download_hint(hub_id)}"
            record["state"] = FAILED

    def poll(self, dataset_name) -> tuple:
        name = form_text(dataset_name)
        record = self.downloads.get(name)
        if record is None:
            return gr.skip(), gr.Timer(active=False)
        shown = Download(name, record["state"], hub_datasets.downloaded_bytes(name), record["total"], record["error"])
        return download_html(shown), gr.Timer(active=shown.state == DOWNLOADING)


def build(dataset_name: gr.Textbox) -> None:
    """The button and the progress line, under the data preview."""
    panel = DownloadPanel()
    with gr.Row():
        button = gr.Button("Download dataset (a hub id) into the hub cache", size="sm", elem_id="wb-download-button")
    progress = gr.HTML("")
    timer = gr.Timer(1.0, active=False)
    button.click(panel.start, inputs=[dataset_name], outputs=[progress, timer], show_progress="hidden")
    timer.tick(panel.poll, inputs=[dataset_name], outputs=[progress, timer], show_progress="hidden")
