"""What each user holds in Gradio's upload cache, under the same caps as their uploads folder.

Every file a page sends goes first through Gradio's own upload route into
its cache (the Setup tab's upload box then copies it into the user's uploads
folder, where access/uploads.py caps it). The route itself takes any number
of files from any signed-in user, 50 MB each: eleven 48 MB files in three
seconds. `CacheLedger` holds each user to the caps of their uploads folder
(WORKBENCH_MAX_UPLOAD_FILES files, WORKBENCH_MAX_UPLOADS_MB in all), counted
on its own: the files the route gave that user that are still in the cache
(ui/cleanup.py removes what no page used within the hour), and the bytes of
that user's uploads still arriving. A request's size is reserved before its
body is read, so parallel uploads cannot each pass a check the others are not
yet counted in. In memory: a restarted server starts counting afresh, and
what was left from before goes within the hour. Pure standard library;
ui/server.py's `UploadQuota` keeps one per app.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterable

from workbench.access.uploads import UploadError, upload_caps

FIX = (
    "wait for files no page used within the hour to leave the upload cache (uploads stored under 'Your files' "
    "stay there), upload fewer or smaller files, or ask whoever runs the server"
)


class CacheLedger:
    """Per user: the cache files the upload route returned to them, and the bytes of their uploads in flight."""

    def __init__(self, caps: Callable[[], tuple[int, int]] = upload_caps):
        self.caps = caps
        self.lock = threading.Lock()
        self.files: dict[str, dict[str, int]] = {}  # user -> cache path -> bytes
        self.pending: dict[str, int] = {}  # user -> bytes of requests whose files are still arriving

    def held(self, user: str) -> tuple[int, int]:
        """(files, bytes) `user` holds in the cache now; files gone from it (cleaned) are forgotten."""
        with self.lock:
            kept = {path: size for path, size in self.files.get(user, {}).items() if os.path.lexists(path)}
            self.files[user] = kept
            return len(kept), sum(kept.values())

    def reserve(self, user: str, size: int) -> None:
        """Count an upload of at most `size` bytes as `user`'s while it arrives; UploadError when over a cap."""
        max_files, max_bytes = self.caps()
        files, held = self.held(user)
        with self.lock:
            pending = self.pending.get(user, 0)
            if files >= max_files:
                raise too_many_files(files + 1, max_files)
            if held + pending + size > max_bytes:
                raise UploadError(
                    field="upload",
                    rule=f"{size / 2**20:.1f} MB more would take what you uploaded "
                    f"to {(held + pending + size) / 2**20:.1f} MB, over the {max_bytes / 2**20:.0f} MB "
                    "each user may hold",
                    fix=FIX,
                )
            self.pending[user] = pending + size

    def release(self, user: str, size: int) -> None:
        """The upload `reserve` counted has ended (its files, if any, are then `admit`ted)."""
        with self.lock:
            self.pending[user] = max(0, self.pending.get(user, 0) - size)

    def admit(self, user: str, paths: Iterable[str]) -> None:
        """Count the files an upload of `user`'s left in the cache (`paths`, as the route answered them).

        Files past the files cap are removed again (unless another user's upload left the same file: the cache
        names a file by its content) and the upload refused (UploadError).
        """
        max_files, _ = self.caps()
        self.held(user)
        with self.lock:
            mine, over = self.files.setdefault(user, {}), []
            for path in paths:
                if path in mine or len(mine) < max_files:
                    mine[path] = _size(path)
                else:
                    over.append(path)
            theirs = {path for other, files in self.files.items() if other != user for path in files}
        for path in over:
            if path not in theirs:
                _remove(path)
        if over:
            raise too_many_files(len(mine) + len(over), max_files)


def too_many_files(files: int, max_files: int) -> UploadError:
    """The refusal of an upload that would leave a user more than `max_files` files in the cache."""
    return UploadError(
        field="upload",
        rule=f"that would leave you {files} files in the upload cache, over the {max_files} each user may hold",
        fix=FIX,
    )


def _remove(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:  # gone already
        pass


def _size(path: str) -> int:
    try:
        return os.lstat(path).st_size
    except OSError:  # gone already: it holds no room
        return 0
