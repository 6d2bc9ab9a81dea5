"""Reading and writing the files of a run folder (or a user's uploads folder) without following a link.

Why: a run's folder is writable by the run's own code, which may be hostile
(its reward file runs in the sandbox, the folder bound in), while the server
reads and writes that folder as root. Following what it finds there, the
server showed the users file through a `train.log` linked to it, appended a
resumed run's output to it, made Stop create a root-owned file wherever
`stop.request` pointed, and would hang on a FIFO. So every server-side read or
write of a file there goes through here, and the trainer writes through the
same functions (they cost it one more `open` of the folder):

- The folder is opened once, `O_DIRECTORY|O_NOFOLLOW` (a folder that is a
  link is refused), and the file relative to it (`dir_fd`). A name is one
  path component: a nested one (`checkpoint-3/adapter_config.json`, with
  `root` the run folder) opens each folder on the way the same way, and `..`
  or an empty component is refused (`UnsafeName`).
- Files open with `O_NOFOLLOW|O_NONBLOCK` (a FIFO opens at once instead of
  waiting for a writer) and `fstat` must say regular file. A link, FIFO,
  socket or device where a regular file belongs is never followed: readers
  get `NotPlainFile`, a FileNotFoundError, so they read it as missing and
  return their empty value; the log says so once per file. A folder there
  is IsADirectoryError, as it always was (nothing to follow): readers that
  return their empty value on any OSError do so, and one that says why a
  file cannot be used (`runfolder.read_json_object`) still says it.
- `replace_file` writes an exclusive temporary file (`O_CREAT|O_EXCL`) in the
  same folder and renames it over the name: a rename replaces a link, it
  never follows one. `open_for_writing` (logs, appended JSON lines) and
  `write_file` (small files: `stop.request`) open with `O_NOFOLLOW` too, and
  anything planted in the file's place (a link, a FIFO, a folder, a hard link
  shared with another file) is removed and a fresh file made, so a planted
  link never blocks Resume or Stop.
- `unlink` takes a name away, `lstat` stats the name itself and `folders`
  lists a folder's real folders: none of them follows a link either.
- `open_folder` holds a folder below `root` open (each folder on the way
  made with `mkdirat` when asked), and `listing` lists one on its
  descriptor: for callers that make folders below a run's (the merged-model
  export) or write through a library that takes a path (`/proc/self/fd/N`).

Every function takes the file's `path`. Its folder is `root` when given
(`path` must lie under it, and every folder between is opened as above),
else the path's own parent.

Standard library only.
"""

from __future__ import annotations

import errno
import json
import logging
import os
import secrets
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path, PurePath
from typing import Any, BinaryIO

_FOLDER_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
# O_NONBLOCK: opening a FIFO does not wait for its other end; O_NOCTTY: a terminal never becomes ours.
_FILE_FLAGS = os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOCTTY
# What os.open says when a name is no regular file it may open: a link (O_NOFOLLOW), a FIFO or
# socket with no other end (opened for writing). A folder is IsADirectoryError, as it always was.
_ERRNO_KINDS = {errno.ELOOP: "a link", errno.ENXIO: "a FIFO or socket"}
# A hostile writer could plant its link again between our removal and our open: try a few times, then give up.
_ATTEMPTS = 3
_KINDS = (
    (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISLNK, "a link"),
)

_log = logging.getLogger(__name__)
_said: set[str] = set()  # files already named in the log: each is said once per process


class UnsafeName(ValueError):
    """A file name that is not a plain name inside its folder (`/`, `..`, empty, outside `root`)."""


class NotPlainFile(FileNotFoundError):
    """A link, FIFO, socket or device where a regular file belongs (or a link where a folder belongs): read as
    missing."""


# ---------------------------------------------------------------- where a file is


def _parts(path: PurePath, root: str | os.PathLike) -> list[str]:
    """The names on the way from `root` to `path` ([] for `root` itself); UnsafeName outside it or for `..`."""
    try:
        parts = list(path.relative_to(root).parts)
    except ValueError:
        raise UnsafeName(f"{path} is not inside {root}") from None
    for part in parts:
        if part in ("", ".", "..") or "/" in part or "\0" in part:
            raise UnsafeName(f"{path}: {part!r} is not a plain file name")
    return parts


def _where(path: str | os.PathLike, root: str | os.PathLike | None) -> tuple[str, list[str], str]:
    """(the folder to open first, the folders below it on the way, the file's name)."""
    path = PurePath(path)
    parts = _parts(path, path.parent if root is None else root)
    if not parts:
        raise UnsafeName(f"{path} names its folder, not a file in it")
    return os.fspath(path.parent if root is None else root), parts[:-1], parts[-1]


def _kind(mode: int) -> str:
    return next((name for test, name in _KINDS if test(mode)), "not a regular file")


def _not_plain(path: str | os.PathLike, found: str, done: str, belongs: str = "a regular file") -> NotPlainFile:
    """The error for `path`, logged the first time: `found` there where `belongs` belongs, `done` what came of it."""
    said = f"{found} where {belongs} belongs; {done}, never followed"
    key = os.path.abspath(path)
    if key not in _said:
        _said.add(key)
        _log.warning("%s: %s", key, said)
    return NotPlainFile(errno.ENOENT, said, os.fspath(path))


def _open_folder(top: str, parts: list[str], create: bool = False) -> int:
    """The folder `top`/`parts` opened without following a link at `top` or below (made when `create`);
    NotPlainFile for a link or a file where a folder belongs. The caller closes it."""
    if create:
        Path(top).mkdir(parents=True, exist_ok=True)
    where = top
    try:
        fd = os.open(where, _FOLDER_FLAGS)
        try:
            for part in parts:
                where = os.path.join(where, part)
                if create:
                    try:
                        os.mkdir(part, dir_fd=fd)
                    except FileExistsError:
                        pass  # made already (or something else is there: the open below refuses it)
                inner = os.open(part, _FOLDER_FLAGS, dir_fd=fd)
                os.close(fd)
                fd = inner
        except BaseException:
            os.close(fd)
            raise
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR):
            raise _not_plain(where, "a link (or a file)", "refused", belongs="a folder") from None
        raise
    return fd


@contextmanager
def _folder_of(
    path: str | os.PathLike, root: str | os.PathLike | None, create: bool = False
) -> Iterator[tuple[int, str]]:
    """(the open folder of `path`, the file's name in it), the folder closed when the block ends."""
    top, parts, name = _where(path, root)
    fd = _open_folder(top, parts, create)
    try:
        yield fd, name
    finally:
        os.close(fd)


@contextmanager
def folder(path: str | os.PathLike) -> Iterator[int]:
    """The folder `path` itself, open (`O_DIRECTORY|O_NOFOLLOW`) while the block runs: NotPlainFile for a link."""
    fd = _open_folder(os.fspath(path), [])
    try:
        yield fd
    finally:
        os.close(fd)


@contextmanager
def open_folder(path: str | os.PathLike, root: str | os.PathLike, create: bool = False) -> Iterator[int]:
    """The folder `path` (`root` itself or a folder below it), open while the block runs: every folder from
    `root` down opened relative to the one above it, `O_NOFOLLOW`, and made there (`mkdirat`) when missing and
    `create` (`root` itself is made by path: the caller's own). NotPlainFile for a link or a file on the way, so
    a folder swapped for a link never redirects a listing, a mkdir or a write below it."""
    fd = _open_folder(os.fspath(root), _parts(PurePath(path), root), create)
    try:
        yield fd
    finally:
        os.close(fd)


def listing(path: str | os.PathLike, root: str | os.PathLike) -> list[str]:
    """The names in folder `path` (below `root`, `open_folder`), sorted, listed on its descriptor; OSError
    (NotPlainFile for a link on the way) when it cannot be opened."""
    with open_folder(path, root) as fd:
        return sorted(os.listdir(fd))


# ---------------------------------------------------------------- opening a regular file


class _Found(Exception):
    """What `_open_regular` found at a name instead of a regular file, in words."""


def _open_regular(dir_fd: int, name: str, flags: int, shared_ok: bool = True) -> int:
    """`name` in `dir_fd` opened with `flags`, only if it is a regular file (and, unless `shared_ok`, has
    no other hard link); else _Found, or IsADirectoryError for a folder. Blocking again once checked."""
    try:
        fd = os.open(name, flags | _FILE_FLAGS, 0o666, dir_fd=dir_fd)
    except OSError as exc:
        if exc.errno in _ERRNO_KINDS:
            raise _Found(_ERRNO_KINDS[exc.errno]) from None
        raise
    try:
        info = os.fstat(fd)
        if stat.S_ISDIR(info.st_mode):  # what opening it for writing says, and what a reader was always told
            raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), name)
        if not stat.S_ISREG(info.st_mode):
            raise _Found(_kind(info.st_mode))
        if not shared_ok and info.st_nlink > 1:  # writing would change the other file too
            raise _Found("a hard link shared with another file")
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd


def open_file(path: str | os.PathLike, *, root: str | os.PathLike | None = None) -> BinaryIO:
    """`path` opened for reading ("rb"), a regular file only: NotPlainFile for anything else, never followed.

    For libraries that take a path (zipfile, safetensors, torch.load): hand them this file instead.
    """
    with _folder_of(path, root) as (dir_fd, name):
        try:
            fd = _open_regular(dir_fd, name, os.O_RDONLY)
        except _Found as found:
            raise _not_plain(path, str(found), "read as missing") from None
    return os.fdopen(fd, "rb")


def read_bytes(
    path: str | os.PathLike, offset: int = 0, size: int = -1, *, root: str | os.PathLike | None = None
) -> bytes:
    """The bytes of `path` from `offset` (`size` of them, or to the end); OSError when it cannot be read."""
    with open_file(path, root=root) as handle:
        if offset:
            handle.seek(offset)
        return handle.read(size)


# What a reader holds of one JSON file is bounded, whatever its size: a run's code writes its folder (and a
# sparse file costs the run no disk).
MAX_JSON_BYTES = 4 << 20


def load_json(path: str | os.PathLike, root: str | os.PathLike | None = None) -> Any:
    """The JSON value in the regular file `path` (a link or FIFO there reads as missing; ValueError over
    MAX_JSON_BYTES, or nested deeper than Python parses)."""
    content = read_bytes(path, size=MAX_JSON_BYTES + 1, root=root)
    if len(content) > MAX_JSON_BYTES:
        raise ValueError(f"{Path(path).name} is larger than {MAX_JSON_BYTES >> 20} MiB")
    try:
        return json.loads(content.decode("utf-8"))
    except RecursionError:  # a run's code wrote `[[[[...` in a few KiB: its readers (every listing) say unreadable
        raise ValueError(f"{Path(path).name} is nested deeper than JSON is read") from None


def read_tail(path: str | os.PathLike, max_bytes: int, *, root: str | os.PathLike | None = None) -> tuple[int, bytes]:
    """(where they begin, the last `max_bytes` of `path`); OSError when it cannot be read."""
    with open_file(path, root=root) as handle:
        start = max(0, os.fstat(handle.fileno()).st_size - max_bytes)
        handle.seek(start)
        return start, handle.read()


def lstat(path: str | os.PathLike, *, root: str | os.PathLike | None = None) -> os.stat_result | None:
    """`path`'s own stat (a link's, never its target's); None when missing or its folder cannot be opened."""
    try:
        with _folder_of(path, root) as (dir_fd, name):
            return os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except OSError:
        return None


def is_file(path: str | os.PathLike, *, root: str | os.PathLike | None = None) -> bool:
    """Whether `path` is a regular file (a link to one is not)."""
    info = lstat(path, root=root)
    return info is not None and stat.S_ISREG(info.st_mode)


def folders(path: str | os.PathLike) -> list[str]:
    """The names of the real folders in folder `path` (links to folders left out); [] when it cannot be read."""
    try:
        with folder(path) as fd, os.scandir(fd) as entries:
            return [entry.name for entry in entries if entry.is_dir(follow_symlinks=False)]
    except OSError:
        return []


# ---------------------------------------------------------------- writing


def _remove_planted(dir_fd: int, name: str) -> None:
    """Take away whatever is at `name` (a link itself, never what it points to; a folder is moved aside)."""
    try:
        os.unlink(name, dir_fd=dir_fd)
    except FileNotFoundError:
        pass
    except IsADirectoryError:  # a folder cannot be unlinked, and may hold anything: out of the way with it
        os.rename(name, f".{name[:200]}.not-a-file-{secrets.token_hex(4)}", src_dir_fd=dir_fd, dst_dir_fd=dir_fd)


def _open_writer(path: str | os.PathLike, dir_fd: int, name: str, append: bool) -> int:
    """`name` open for writing, a regular file of its own; anything else there is removed and made afresh."""
    flags = os.O_WRONLY | os.O_CREAT | (os.O_APPEND if append else 0)  # no O_TRUNC before the checks
    for _ in range(_ATTEMPTS):
        try:
            fd = _open_regular(dir_fd, name, flags, shared_ok=False)
        except (_Found, IsADirectoryError) as found:
            _not_plain(
                path,
                "a folder" if isinstance(found, IsADirectoryError) else str(found),
                "removed, and a fresh file made",
            )
            _remove_planted(dir_fd, name)
            continue
        if not append:
            os.ftruncate(fd, 0)
        return fd
    raise _not_plain(path, "something planted again and again", "not written")


def open_for_writing(
    path: str | os.PathLike, append: bool = True, *, root: str | os.PathLike | None = None
) -> BinaryIO:
    """`path` open for appending ("ab"), or emptied ("wb") when not `append`; made when missing (its folder is
    not: a run folder deleted under a writer stays deleted).

    A link, FIFO, folder or shared hard link in its place is removed first and a fresh file made.
    """
    with _folder_of(path, root) as (dir_fd, name):
        fd = _open_writer(path, dir_fd, name, append)
    return os.fdopen(fd, "ab" if append else "wb")


def write_file(path: str | os.PathLike, content: bytes, *, root: str | os.PathLike | None = None) -> None:
    """`path` holding `content` (a small file such as stop.request), a fresh file in place of anything planted."""
    with open_for_writing(path, append=False, root=root) as handle:
        handle.write(content)


# What replace_file makes by default: readable by every uid, since a sandboxed run, which runs as a uid of its
# own, reads what the server writes into its folder (config.json, status.json).
SHARED_MODE = 0o644


def _temporary(dir_fd: int, name: str, mode: int = SHARED_MODE) -> tuple[int, str]:
    """An exclusive new file beside `name` (O_CREAT|O_EXCL) with `mode`."""
    for _ in range(100):
        temporary = f".{name[:200]}.{secrets.token_hex(4)}"
        try:
            fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _FILE_FLAGS, mode, dir_fd=dir_fd)
            os.fchmod(fd, mode)  # `mode` whatever the umask (a server with accounts runs with 077)
            return fd, temporary
        except FileExistsError:
            continue
    raise FileExistsError(errno.EEXIST, "no free temporary name", name)


def replace_file(
    path: str | os.PathLike, content: bytes, *, root: str | os.PathLike | None = None, mode: int = SHARED_MODE
) -> None:
    """Write `content` to a temporary file beside `path`, then rename it over `path` (atomic, made with its
    folder when missing): a reader sees the old file or the new one; a link at `path` is replaced, not followed.
    `mode`: 0o600 for a copy only its owner may read."""
    with _folder_of(path, root, create=True) as (dir_fd, name):
        fd, temporary = _temporary(dir_fd, name, mode)
        try:
            with os.fdopen(fd, "wb") as handle:
                handle.write(content)
                handle.flush()
                os.fsync(handle.fileno())
            try:
                os.replace(temporary, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
            except IsADirectoryError:  # a folder planted where the file belongs
                _not_plain(path, "a folder", "moved aside, and the file written")
                _remove_planted(dir_fd, name)
                os.replace(temporary, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
        except BaseException:
            try:
                os.unlink(temporary, dir_fd=dir_fd)
            except OSError:
                pass
            raise


def unlink(path: str | os.PathLike, *, root: str | os.PathLike | None = None) -> None:
    """Take `path` away when something is there: a file, a link itself (never its target), a FIFO; a folder is
    moved aside under a hidden name (it may hold anything), so a planted one cannot stand in for the file."""
    try:
        with _folder_of(path, root) as (dir_fd, name):
            _remove_planted(dir_fd, name)
    except FileNotFoundError:  # no folder there (or a link in its place: nothing of it is touched)
        pass
