"""The Setup tab's files on a shared dashboard, and the reward code it shows before launch. No gradio here.

On a dashboard with accounts, `dataset_path` and `reward_file` must name
files in the user's uploads folder (workbench/access/uploads.py):
`confine_to_uploads` turns the form's values into paths there, or into
problems naming the field, the rule and the fix. The reward file's code is
shown as text (`reward_source_view`) and its functions are found by reading
the source, never by running it: on a shared dashboard it runs only in the
training process.
"""

from __future__ import annotations

from html import escape
from pathlib import Path

from workbench.access import uploads
from workbench.errors import WorkbenchError
from workbench.spec.config import ConfigProblem, RunConfig
from workbench.spec.rewards import read_reward_names

UPLOAD_FIELDS = ("dataset_path", "reward_file")
# The most of a reward file the Setup tab shows (a reward file is at most 1 MB; its start says what it is).
MAX_SHOWN_CHARS = 200_000

UPLOADS_NOTE = (
    "<p class='wb-note'>On this shared dashboard a run's dataset and reward files come only from <b>your uploads "
    f"folder</b>. Upload a dataset ({', '.join(uploads.DATASET_SUFFIXES)}, with a <code>prompt</code> column) or "
    f"a reward file (.py), at most {uploads.MAX_UPLOAD_TEXT} each; the field above fills in with its path. "
    "<b>A reward file is Python code</b>: it runs during training with the rights of the account serving this "
    "dashboard, so read it before you launch (it is shown below once chosen).</p>")


def confine_to_uploads(cfg: RunConfig, folder: Path) -> tuple[RunConfig, list[ConfigProblem]]:
    """`cfg` with dataset_path and reward_file as files of the uploads `folder`, and the problems found.

    A value that names no file inside the folder (`..`, a path elsewhere, a
    link out) becomes a problem naming the field, the rule and the fix, and is
    cleared, so the other checks never read what it points to.
    """
    changes, problems = {}, []
    for name in UPLOAD_FIELDS:
        try:
            changes[name] = uploads.path_in_uploads(getattr(cfg, name), folder, name)
        except uploads.UploadError as exc:
            problems.append(ConfigProblem(name, exc.rule, exc.fix))
            changes[name] = ""
    return cfg.with_changes(**changes), problems


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
            stored.append(uploads.store_upload(path, Path(path).name, folder))
        except WorkbenchError as exc:
            refused.append(str(exc))
        except OSError as exc:  # a full disk, a vanished temporary file
            refused.append(f"upload: {Path(path).name[:60]!r} could not be stored ({exc.strerror or exc}); "
                           "try again, or ask whoever runs the server")
    return stored, refused


def newest_of(stored: list[Path], suffixes: tuple[str, ...]) -> str | None:
    """The path of the last stored file with one of `suffixes` (what a field fills in with), or None."""
    return next((str(path) for path in reversed(stored) if path.suffix in suffixes), None)


def uploads_html(folder: Path, refused: list[str] = ()) -> str:
    """The user's uploaded files with their paths (to paste into dataset_path or reward_file), and any refusals."""
    files = uploads.list_uploads(folder)
    items = "".join(f"<li><code>{escape(str(path))}</code> ({path.stat().st_size / 1024:,.1f} KB)</li>"
                    for path in files)
    listing = (f"<p class='wb-note'>Your uploads ({escape(str(folder))}):</p><ul>{items}</ul>" if files
               else "<p class='wb-note'>No uploads yet.</p>")
    warnings = "".join(f"<p class='wb-warn-line'>{escape(text)}</p>" for text in refused)
    return warnings + listing


def reward_source_view(value: str, folder: Path | None) -> tuple[str, str]:
    """(note HTML, code) for the reward file `value` names: its functions and its source, read, never run.

    `folder`: the user's uploads on a shared dashboard (only a file there is
    shown); None on an open dashboard. ("", "") when no reward file is set.
    """
    if not value or not value.strip():
        return "", ""
    try:
        path = Path(uploads.path_in_uploads(value.strip(), folder, "reward_file") if folder else value.strip())
        names = read_reward_names(path)
        with open(path, encoding="utf-8", errors="replace") as handle:
            source = handle.read(MAX_SHOWN_CHARS + 1)
    except WorkbenchError as exc:
        return f"<p class='wb-warn-line'>{escape(str(exc))}</p>", ""
    except OSError as exc:
        return f"<p class='wb-warn-line'>reward_file: cannot be read ({escape(exc.strerror or str(exc))})</p>", ""
    cut = len(source) > MAX_SHOWN_CHARS
    where = ("in the training process only, with the rights of the account serving this dashboard" if folder
             else "in the training process")
    note = (f"<p class='wb-note'>Reward functions in <code>{escape(path.name)}</code>: "
            f"{', '.join(f'<code>{escape(name)}</code>' for name in names)}. The run scores with the rewards "
            f"ticked above; a function here named like one of them replaces it. This code runs {where}; read it "
            "before you launch."
            + (f" Showing its first {MAX_SHOWN_CHARS:,} characters." if cut else "") + "</p>")
    return note, source[:MAX_SHOWN_CHARS]
