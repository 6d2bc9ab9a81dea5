"""The Setup tab's files on a shared dashboard, and the reward code it shows before launch. No gradio here.

On a dashboard with accounts, uploads land in the user's own folder
(workbench/access/uploads.py), one of the places the path rule of
workbench/access/paths.py lets `dataset_path` and `reward_file` name
(ui/paths_view.py applies it). The reward file's code is shown as text
(`reward_source_html`) and its functions are found by reading the source,
never by running it: on a shared dashboard it runs only in the training
process. No file is read or written here: ui/files_panel.py stores the
uploads, lists them and reads the reward file.
"""

from __future__ import annotations

from html import escape
from pathlib import Path

from workbench.access import uploads
from workbench.access.paths import UserScope

# The most of a reward file the Setup tab shows (a reward file is at most 1 MB; its start says what it is).
MAX_SHOWN_CHARS = 200_000

UPLOADS_NOTE = (
    "<p class='wb-note'>On this shared dashboard a run's dataset and reward files come from <b>your uploads "
    "folder</b> (or your own runs and the folders the admin shares). Upload a dataset "
    f"({', '.join(uploads.DATASET_SUFFIXES)}, with a <code>prompt</code> column) or "
    f"a reward file (.py), at most {uploads.MAX_UPLOAD_TEXT} each; the field above fills in with its path. "
    "<b>A reward file is Python code</b>: it runs during training, in a sandbox that sees only your uploads and "
    "your run's folder and no network (unless a warning at the top of the page says otherwise); read it before you "
    "launch (it is shown below once chosen).</p>"
)


def newest_of(stored: list[Path], suffixes: tuple[str, ...]) -> str | None:
    """The path of the last stored file with one of `suffixes` (what a field fills in with), or None."""
    return next((str(path) for path in reversed(stored) if path.suffix in suffixes), None)


def uploads_html(folder: Path, files: list[tuple[Path, int]], refused: list[str] = ()) -> str:
    """The user's uploaded files (path, size in bytes) with their paths (to paste into dataset_path or
    reward_file), and any refusals."""
    items = "".join(f"<li><code>{escape(str(path))}</code> ({size / 1024:,.1f} KB)</li>" for path, size in files)
    listing = (
        f"<p class='wb-note'>Your uploads ({escape(str(folder))}):</p><ul>{items}</ul>"
        if files
        else "<p class='wb-note'>No uploads yet.</p>"
    )
    warnings = "".join(f"<p class='wb-warn-line'>{escape(text)}</p>" for text in refused)
    return warnings + listing


def reward_source_html(path: Path, names: list[str], source: str, scope: UserScope | None) -> tuple[str, str]:
    """(note HTML, code) for the reward file at `path`: the functions it defines (`names`) and its source,
    cut at MAX_SHOWN_CHARS. `scope`: set on a shared dashboard (the code runs in a sandbox there)."""
    cut = len(source) > MAX_SHOWN_CHARS
    where = (
        "in the training process only, with the rights of the account serving this dashboard, confined to "
        "the run's sandbox (your uploads and the run's folder, no network) unless a warning at the top of the "
        "page says otherwise"
        if scope
        else "in the training process"
    )
    note = (
        f"<p class='wb-note'>Reward functions in <code>{escape(path.name)}</code>: "
        f"{', '.join(f'<code>{escape(name)}</code>' for name in names)}. The run scores with the rewards "
        f"ticked above; a function here named like one of them replaces it. This code runs {where}; read it "
        "before you launch." + (f" Showing its first {MAX_SHOWN_CHARS:,} characters." if cut else "") + "</p>"
    )
    return note, source[:MAX_SHOWN_CHARS]


def refusal_html(text: str) -> str:
    """A refusal (field, rule, fix) as the warning line under reward_file."""
    return f"<p class='wb-warn-line'>{escape(text)}</p>"
