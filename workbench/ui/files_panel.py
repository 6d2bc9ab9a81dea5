"""The Setup tab's files: the reward file's code, shown before launch, and on a shared dashboard "Your files".

- Below `reward_file`, the file's code in a read-only code box with the
  reward functions it defines, read from its source and never imported: on a
  shared dashboard the code runs only in the training process.
- With accounts, "Your files": upload dataset (.jsonl, .json, .csv, .parquet)
  and reward (.py) files into the user's own folder
  (`<runs folder>/uploads/<user>/`, at most 50 MB each); an upload fills
  `dataset_path` or `reward_file` with its path there, the only place those
  fields may point to (ui/uploads_view.py, workbench/access/uploads.py).

Layout and events only; the pure parts live in ui/uploads_view.py.
"""

from __future__ import annotations

import gradio as gr

from workbench.access.uploads import DATASET_SUFFIXES, MAX_UPLOAD_TEXT, REWARD_SUFFIXES, UPLOAD_SUFFIXES
from workbench.ui import browser_files, uploads_view
from workbench.ui.context import UIContext


def build(ctx: UIContext, dataset_path: gr.Textbox, reward_file: gr.Textbox) -> None:
    """The reward code box (and, on a shared dashboard, the uploads) under the Setup tab's reward_file field."""
    reward_note = gr.HTML("", elem_id="wb-reward-note")
    # Read-only text, never imported here; a code box shows it as text, markup and all.
    reward_code = gr.Code(value="", language="python", interactive=False, visible=False,
                          label="reward_file's code (read-only)", elem_id="wb-reward-code")

    def show_reward_code(request: gr.Request, value):
        note, source = uploads_view.reward_source_view(value if isinstance(value, str) else "",
                                                       ctx.scope_for(request))
        return note, gr.Code(value=source, visible=bool(source))

    reward_file.change(show_reward_code, inputs=[reward_file], outputs=[reward_note, reward_code],
                       show_progress="hidden", trigger_mode="always_last")
    if not ctx.shared:
        return

    with gr.Accordion("Your files", open=True, elem_id="wb-uploads"):
        gr.HTML(uploads_view.UPLOADS_NOTE)
        upload = gr.File(label=f"Upload dataset or reward files (at most {MAX_UPLOAD_TEXT} each)",
                         file_count="multiple", file_types=list(UPLOAD_SUFFIXES), elem_id="wb-upload")
        uploads_box = gr.HTML("", elem_id="wb-uploads-list")

    def on_upload(request: gr.Request, files):
        folder = ctx.uploads_for(request)
        files = files if isinstance(files, list) else [files] if files else []
        stored, refused = uploads_view.store_files([str(f) for f in files if isinstance(f, str)], folder,
                                                   browser_files.upload_folder())
        dataset = uploads_view.newest_of(stored, DATASET_SUFFIXES)
        reward = uploads_view.newest_of(stored, REWARD_SUFFIXES)
        return (None, uploads_view.uploads_html(folder, refused),
                dataset if dataset else gr.skip(), reward if reward else gr.skip())

    def list_uploads(request: gr.Request) -> str:
        return uploads_view.uploads_html(ctx.uploads_for(request))

    upload.upload(on_upload, inputs=[upload], outputs=[upload, uploads_box, dataset_path, reward_file],
                  show_progress="minimal")
    ctx.blocks.load(list_uploads, outputs=[uploads_box], show_progress="hidden")
