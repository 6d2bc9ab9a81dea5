"""The Setup tab's files: the reward file's code, shown before launch, and on a shared dashboard "Your files".

- Below `reward_file`, the file's code in a read-only code box with the
  reward functions it defines, read from its source and never imported: on a
  shared dashboard the code runs only in the training process.
- With accounts, "Your files" (a closed group of the Setup tab): upload dataset (.jsonl, .json, .csv, .parquet)
  and reward (.py) files into the user's own folder
  (`<runs folder>/uploads/<user>/`, at most 50 MB each); an upload fills
  `dataset_name` or `reward_file` with its path there, the only place those
  fields may point to (ui/uploads_view.py, workbench/access/uploads.py).

Layout, events and the reads and copies they make (`store_files`,
`uploads_html`, `reward_source_view`); the HTML lives in ui/uploads_view.py.
"""

from __future__ import annotations

import os
from pathlib import Path

import gradio as gr

from workbench.access import uploads
from workbench.access.paths import UserScope
from workbench.access.uploads import DATASET_SUFFIXES, MAX_UPLOAD_TEXT, REWARD_SUFFIXES, UPLOAD_SUFFIXES
from workbench.errors import WorkbenchError
from workbench.jobs import user_disk
from workbench.spec.rewards import read_reward_names
from workbench.ui import browser_files, uploads_view
from workbench.ui.context import UIContext
from workbench.ui.paths_view import confine_path


def store_files(paths: list[str], folder: Path, upload_folder: str) -> tuple[list[Path], list[str]]:
    """Copy uploaded files (gradio's temporary copies, named as sent) into `folder`: (stored, refusals).

    Only a file inside `upload_folder` (where gradio's upload route puts what
    the browser sends) is copied: every event is already checked so
    (ui/browser_files.py); this keeps the rule where the copy is made.
    """
    stored, refused = [], []
    for path in paths:
        try:
            if not uploads.is_inside(path, [upload_folder]):
                raise uploads.not_uploaded(path)
            # the user's runs, uploads and helper folders together (WORKBENCH_USER_DISK_GB): folder is uploads/<user>
            user_disk.check_room(
                folder.parent.parent, folder.name, f"the upload of {Path(path).name[:60]!r}", os.path.getsize(path)
            )
            stored.append(uploads.store_upload(path, Path(path).name, folder))
        except WorkbenchError as exc:
            refused.append(str(exc))
        except OSError as exc:  # a full disk, a vanished temporary file
            refused.append(
                f"upload: {Path(path).name[:60]!r} could not be stored ({exc.strerror or exc}); "
                "try again, or ask whoever runs the server"
            )
    return stored, refused


def uploads_html(folder: Path, refused: list[str] = ()) -> str:
    """The user's uploads folder as listed now, with their sizes, and any refusals (uploads_view.uploads_html)."""
    files = [(path, path.stat().st_size) for path in uploads.list_uploads(folder)]
    return uploads_view.uploads_html(folder, files, refused)


def reward_source_view(value: str, scope: UserScope | None) -> tuple[str, str]:
    """(note HTML, code) for the reward file `value` names: its functions and its source, read, never run.

    `scope`: what the user may name on a shared dashboard (only a file the
    rule of access/paths.py allows is shown); None on an open dashboard.
    ("", "") when no reward file is set.
    """
    if not value or not value.strip():
        return "", ""
    try:
        path = Path(confine_path("reward_file", value.strip(), scope) if scope else value.strip())
        names = read_reward_names(path)
        with open(path, encoding="utf-8", errors="replace") as handle:
            source = handle.read(uploads_view.MAX_SHOWN_CHARS + 1)
    except WorkbenchError as exc:
        return uploads_view.refusal_html(str(exc)), ""
    except OSError as exc:
        return uploads_view.refusal_html(f"reward_file: cannot be read ({exc.strerror or exc})"), ""
    return uploads_view.reward_source_html(path, names, source, scope)


class FilesPanel:
    """The panel's event handlers, over the context."""

    def __init__(self, ctx: UIContext):
        self.ctx = ctx

    def show_reward_code(self, request: gr.Request, value):
        note, source = reward_source_view(value if isinstance(value, str) else "", self.ctx.scope_for(request))
        return note, gr.Code(value=source, visible=bool(source))

    def on_upload(self, request: gr.Request, files):
        folder = self.ctx.uploads_for(request)
        files = files if isinstance(files, list) else [files] if files else []
        stored, refused = store_files(
            [str(f) for f in files if isinstance(f, str)], folder, browser_files.upload_folder()
        )
        dataset = uploads_view.newest_of(stored, DATASET_SUFFIXES)
        reward = uploads_view.newest_of(stored, REWARD_SUFFIXES)
        return (None, uploads_html(folder, refused), dataset if dataset else gr.skip(), reward if reward else gr.skip())

    def list_uploads(self, request: gr.Request) -> str:
        return uploads_html(self.ctx.uploads_for(request))


def build(ctx: UIContext, reward_file: gr.Textbox) -> None:
    """The reward code box under the Setup tab's reward_file field."""
    panel = FilesPanel(ctx)
    reward_note = gr.HTML("", elem_id="wb-reward-note")
    # Read-only text, never imported here; a code box shows it as text, markup and all.
    reward_code = gr.Code(
        value="",
        language="python",
        interactive=False,
        visible=False,
        label="reward_file's code (read-only)",
        elem_id="wb-reward-code",
    )
    reward_file.change(
        panel.show_reward_code,
        inputs=[reward_file],
        outputs=[reward_note, reward_code],
        show_progress="hidden",
        trigger_mode="always_last",
    )


def build_uploads(ctx: UIContext) -> tuple | None:
    """On a shared dashboard, "Your files" (closed until opened); its parts for `wire_uploads` once the fields it
    fills exist. None on an open dashboard."""
    if not ctx.shared:
        return None
    panel = FilesPanel(ctx)
    with gr.Accordion("Your files: upload datasets and reward code", open=False, elem_id="wb-uploads"):
        gr.HTML(uploads_view.UPLOADS_NOTE)
        upload = gr.File(
            label=f"Upload dataset or reward files (at most {MAX_UPLOAD_TEXT} each)",
            file_count="multiple",
            file_types=list(UPLOAD_SUFFIXES),
            elem_id="wb-upload",
        )
        uploads_box = gr.HTML("", elem_id="wb-uploads-list")
    ctx.blocks.load(panel.list_uploads, outputs=[uploads_box], show_progress="hidden")
    return upload, uploads_box, panel


def wire_uploads(parts: tuple | None, dataset_name: gr.Textbox, reward_file: gr.Textbox):
    """An upload fills dataset_name or reward_file with its path; returns its event, for the Setup tab to follow
    with the verdict of what it filled (None without uploads)."""
    if parts is None:
        return None
    upload, uploads_box, panel = parts
    return upload.upload(
        panel.on_upload,
        inputs=[upload],
        outputs=[upload, uploads_box, dataset_name, reward_file],
        show_progress="minimal",
    )
