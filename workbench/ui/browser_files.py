"""Files the browser names: an event reads only files the browser uploaded, from Gradio's upload folder.

An event's input may carry a Gradio `FileData` (`{"path": ..., "meta":
{"_type": "gradio.FileData"}}`): Gradio copies the file at `path` into its
cache and hands the copy to the handler (the Setup tab's upload box then
stores it in the user's uploads). The page only ever sends paths that
Gradio's upload route returned, under its upload folder (`GRADIO_TEMP_DIR`,
else `<tmp>/gradio`); a crafted request can send any server path (another
user's uploads, `app.py`, the users file).

Gradio refuses such a path only in an app started by `Blocks.launch()`: it
checks when `blocks.has_launched`, which serving through
`gr.mount_gradio_app` (ui/server.py) never sets. Setting that flag would also
turn on Gradio's check of the files the app itself returns (allowed only under
the working directory or the temporary folder), so instead `guard` puts the
upload-time rule in front of Gradio's reading of every event's inputs
(`Blocks.preprocess_data`, which every event of every route passes through;
the tie to it is ui/gradio_compat/'s patch `browser_files`):
any file object at any depth of any input, of any component (a file sent to
a textbox would be copied into the cache all the same), must resolve (links
followed) inside the upload folder, or the event is refused with a message
before anything is read. Calls from Python (`explicit_call`) are not from a
browser and pass, as in Gradio. The files an accepted event names are marked
used (ui/cleanup.py keeps the upload cache's files used within the hour).
"""

from __future__ import annotations

import gradio as gr

from workbench.access import uploads
from workbench.ui import cleanup, gradio_compat


def named_paths(value) -> list[str]:
    """The `path` of every file object in `value`: each dict with a string "path", at any depth.

    Gradio's own broadest test for a file (`is_file_obj`), so a file its
    reading would act on is never missed. Walked with a stack, not recursion:
    a crafted input can be nested deeper than Python's recursion limit.
    """
    found, stack = [], [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            if isinstance(item.get("path"), str):
                found.append(item["path"])
            stack.extend(item.values())
        elif isinstance(item, (list, tuple)):
            stack.extend(item)
    return found


def foreign_paths(inputs, roots) -> list[str]:
    """The paths named in an event's `inputs` that lie outside every folder of `roots`."""
    return [path for path in named_paths(inputs) if not uploads.is_inside(path, roots)]


def upload_folder() -> str:
    """Where Gradio's upload route puts what the browser sends (the only place a browser's file may be)."""
    return gradio_compat.upload_folder()


def refusal(inputs) -> str | None:
    """The message refusing an event whose inputs name a file the browser did not upload; None when all did
    (they are then marked used: the upload cache's cleaning keeps what an open page still sends)."""
    refused = foreign_paths(inputs, [upload_folder()])
    if refused:
        return str(uploads.not_uploaded(refused[0]))
    cleanup.mark_used(named_paths(inputs))
    return None


def guard(blocks: gr.Blocks, required: bool = True) -> None:
    """Refuse every event whose inputs name a file outside Gradio's upload folder, before Gradio reads it.

    `required`: refuse to build the app (GradioChanged) when the installed
    Gradio cannot be guarded; an open dashboard (one user on loopback) only warns.
    """
    gradio_compat.guard_inputs(blocks, refusal, required)
