"""Each user's own files on a shared dashboard: dataset and reward files, uploaded into one folder per user.

On a dashboard with accounts each user uploads dataset and reward files into
`<runs folder>/uploads/<user>/`, one of the places the path rule of
access/paths.py lets them name (a bare file name means that file there).

Uploaded files keep a cleaned name (letters, digits, `.`, `_`, `-`; no
folders, no leading dot), one of the accepted suffixes, at most
MAX_UPLOAD_BYTES; one user keeps at most 200 files and 500 MB in all
(WORKBENCH_MAX_UPLOAD_FILES, WORKBENCH_MAX_UPLOADS_MB). A reward file is
Python code that the training process runs with the server's rights; the
dashboard process only reads its text.
On an open dashboard (loopback, no accounts) none of this applies: paths
work as typed.

A file the browser sends is read only where the browser's upload put it
(`is_inside` the upload folder; ui/browser_files.py checks every event):
`not_uploaded` is the refusal of any other path. Pure standard library.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from collections.abc import Mapping
from pathlib import Path

from workbench.errors import WorkbenchError

UPLOADS_DIR = "uploads"
MAX_UPLOAD_BYTES = 50 * 1024 * 1024
MAX_UPLOAD_TEXT = "50 MB"
# The formats workbench.sources.dataset_reading reads (a test keeps the two lists equal), and reward code.
DATASET_SUFFIXES = (".jsonl", ".json", ".csv", ".parquet")
REWARD_SUFFIXES = (".py",)
UPLOAD_SUFFIXES = DATASET_SUFFIXES + REWARD_SUFFIXES
MAX_NAME_CHARS = 100
# What one user may keep in their uploads folder, all files together.
MAX_UPLOAD_FILES = 200
MAX_UPLOADS_MB = 500
MAX_FILES_ENV = "WORKBENCH_MAX_UPLOAD_FILES"
MAX_TOTAL_ENV = "WORKBENCH_MAX_UPLOADS_MB"
UNSAFE_CHARACTERS = re.compile(r"[^A-Za-z0-9_.-]+")


class UploadError(WorkbenchError):
    """An upload or an uploads path that is refused; the message names the field, the rule and a fix."""


def uploads_dir(runs_dir: str | os.PathLike, user: str) -> Path:
    """The folder of `user`'s uploads: `<runs_dir>/uploads/<user>` (not created here)."""
    if not isinstance(user, str) or not user.strip(".") or any(c in user for c in "/\\\0"):
        raise UploadError(
            field="user",
            rule=f"{user!r:.40} cannot name an uploads folder",
            fix="sign in with an account whose name holds letters or digits",
        )
    return Path(runs_dir) / UPLOADS_DIR / user


def safe_file_name(name: str) -> str:
    """The name an upload is stored under: its last path part, cleaned, with an accepted suffix."""
    base = re.split(r"[\\/]", name if isinstance(name, str) else "")[-1]
    clean = UNSAFE_CHARACTERS.sub("_", base).lstrip(".-")
    stem, suffix = os.path.splitext(clean)
    if suffix.lower() not in UPLOAD_SUFFIXES:
        raise UploadError(
            field="upload",
            rule=f"{base[:60]!r} is not a dataset or reward file",
            fix=f"upload a {', '.join(DATASET_SUFFIXES)} dataset or a .py reward file",
        )
    return stem.rstrip(".")[: MAX_NAME_CHARS - len(suffix)] + suffix.lower()


def is_inside(path: str | os.PathLike, roots) -> bool:
    """Whether `path`, resolved (`..` and links followed), lies inside one of the folders `roots`."""
    try:
        resolved = Path(path).resolve()
        return any(resolved.is_relative_to(Path(root).resolve()) for root in roots)
    except (OSError, ValueError, RuntimeError):  # a NUL byte, a name no file system holds, a link loop
        return False


def not_uploaded(path: str) -> UploadError:
    """The refusal of a file the browser names that its upload did not put in the upload folder."""
    name = re.split(r"[\\/]", path if isinstance(path, str) else "")[-1]
    return UploadError(
        field="upload",
        rule=f"{name[:60]!r} was not uploaded through this page",
        fix="upload the file with the upload box under 'Your files' in the Setup tab",
    )


def store_upload(source: str | os.PathLike, name: str, folder: str | os.PathLike) -> Path:
    """Copy the uploaded file `source` into `folder` as `safe_file_name(name)`; returns where it landed.

    A file of the same name is replaced (atomically: the copy goes to a
    temporary file first, and replacing a link replaces the link, never what
    it points to).
    """
    target_name = safe_file_name(name)
    size = Path(source).stat().st_size
    if size > MAX_UPLOAD_BYTES:
        raise UploadError(
            field="upload",
            rule=f"{target_name} is {size / 2**20:.1f} MB, over the {MAX_UPLOAD_TEXT} limit",
            fix="upload a smaller file (a sample of the rows)",
        )
    folder = Path(folder)
    check_room(folder, target_name, size)
    folder.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=folder, prefix=".upload-")
    os.close(handle)
    try:
        shutil.copyfile(source, temporary)
        os.replace(temporary, folder / target_name)
    finally:
        Path(temporary).unlink(missing_ok=True)
    return folder / target_name


def upload_caps(environ: Mapping[str, str] | None = None) -> tuple[int, int]:
    """(files, bytes) one user may keep: WORKBENCH_MAX_UPLOAD_FILES and WORKBENCH_MAX_UPLOADS_MB, or the defaults."""
    environ = os.environ if environ is None else environ
    caps = []
    for name, default, scale in ((MAX_FILES_ENV, MAX_UPLOAD_FILES, 1), (MAX_TOTAL_ENV, MAX_UPLOADS_MB, 2**20)):
        text = (environ.get(name) or "").strip()
        if text and not text.isdigit():
            raise UploadError(
                field=name,
                rule=f"{text[:40]!r} is not a whole number",
                fix=f"set it to a whole number, or unset it for the default {default}",
            )
        caps.append(int(text or default) * scale)
    return caps[0], caps[1]


def check_room(folder: str | os.PathLike, name: str, size: int) -> None:
    """Refuse an upload of `size` bytes stored as `name` that would take the user past their caps.

    A file replacing one of the same name frees that file's room first.
    """
    max_files, max_bytes = upload_caps()
    kept = {path.name: path.stat().st_size for path in list_uploads(folder) if path.name != name}
    if len(kept) + 1 > max_files:
        raise UploadError(
            field="upload",
            rule=f"{name} would be your upload number {len(kept) + 1}, over the {max_files} files each user may keep",
            fix="delete uploads you no longer need, or ask whoever runs the server",
        )
    if sum(kept.values()) + size > max_bytes:
        raise UploadError(
            field="upload",
            rule=f"{name} would take your uploads to "
            f"{(sum(kept.values()) + size) / 2**20:.1f} MB, over the {max_bytes / 2**20:.0f} MB each "
            "user may keep",
            fix="delete uploads you no longer need, or ask whoever runs the server",
        )


def list_uploads(folder: str | os.PathLike) -> list[Path]:
    """The user's uploaded files, by name ([] before the first upload)."""
    folder = Path(folder)
    if not folder.is_dir():
        return []
    return sorted(
        path
        for path in folder.iterdir()
        if path.is_file() and not path.name.startswith(".") and path.suffix in UPLOAD_SUFFIXES
    )
