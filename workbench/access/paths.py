"""What a user of a shared dashboard may name as a path: one rule for every path field, in one place.

On a dashboard with accounts, a path typed in the browser (the model, the
dataset file or folder, the reward file) is allowed only when it is

- a bundled model's name (the model only), or a hub id `owner/name` that names
  no local path (the model and dataset_name);
- inside the user's own uploads folder (`<runs folder>/uploads/<user>/`);
- inside a folder the admin shares with everyone: `--models-dir` or
  WORKBENCH_MODELS_DIR, `--data-dir` or WORKBENCH_DATA_DIR (both optional);
- inside one of the user's own runs: a run folder directly in the runs folder
  whose owner is the user (an admin: any run), e.g. its merged model or its
  adapter.

The value is resolved first (`..` and links followed; a relative value is
taken inside the uploads folder), and deciding looks names up only (and
reads a run folder's status.json for its owner): a refused path is never
read, by this check or by anything after it. Everything else is refused naming the field, the rule and a fix.
On an open dashboard (loopback, no accounts) none of this applies: paths work
as typed. Pure standard library.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from workbench.errors import WorkbenchError

MODELS_DIR_ENV = "WORKBENCH_MODELS_DIR"
DATA_DIR_ENV = "WORKBENCH_DATA_DIR"
# What each path field must name once resolved.
FOLDER, FILE, FILE_OR_FOLDER = "folder", "file", "file or folder"
FIELD_KINDS = {
    "model": FOLDER,
    "dataset_name": FILE_OR_FOLDER,
    "dataset_path": FILE_OR_FOLDER,
    "reward_file": FILE,
    "reward_model": FOLDER,
}
# Fields that may also name a hub id (fetched into the shared hub cache before a sandboxed run starts):
# the policy, a reward model, a dataset.
HUB_FIELDS = ("model", "reward_model", "dataset_name")
# The hub's `owner/name` (as sources/model_files.py reads a model name), with no `.` or `..` part.
HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/(?!\.{1,2}$)[\w.-]+$")


class PathError(WorkbenchError):
    """A path a user may not name on a shared dashboard; the message names the field, the rule and a fix."""


@dataclass(frozen=True)
class UserScope:
    """What one signed-in user may name: paths in their uploads, their runs and the admin's shared folders,
    and vLLM hosts besides loopback (`vllm_hosts`, access/hosts.py).

    `own_run(folder)` says whether a folder directly inside `runs_dir` is a
    run this user may use (the caller applies the owner rule of owners.py).
    """

    uploads: Path
    runs_dir: Path
    own_run: Callable[[Path], bool]
    shared: tuple[Path, ...] = ()
    vllm_hosts: frozenset[str] = frozenset()


def shared_folders(
    models_dir: str | None = None, data_dir: str | None = None, environ: Mapping[str, str] | None = None
) -> tuple[Path, ...]:
    """The admin's shared folders: the arguments, else WORKBENCH_MODELS_DIR / WORKBENCH_DATA_DIR; () for none.

    A folder that does not exist is refused here, when the app starts, rather
    than leaving every user to wonder why their paths are refused.
    """
    environ = os.environ if environ is None else environ
    folders = []
    for option, value in (
        ("--models-dir", models_dir or environ.get(MODELS_DIR_ENV)),
        ("--data-dir", data_dir or environ.get(DATA_DIR_ENV)),
    ):
        if not value:
            continue
        folder = Path(value).expanduser()
        if not folder.is_dir():
            raise PathError(
                field=option,
                rule=f"{value} is not a folder",
                fix="create it and put the models or data to share in it, or leave the option out",
            )
        folders.append(folder.resolve())
    return tuple(folders)


def is_hub_id(value: str) -> bool:
    """`owner/name` that names nothing on this machine's disk (a local path of that form is a path)."""
    return bool(HUB_ID.match(value)) and not os.path.lexists(value)


def _in_own_run(path: Path, scope: UserScope) -> bool:
    """Whether `path` lies in a run folder of `scope.runs_dir` that the user may use."""
    runs = scope.runs_dir.resolve()
    if not path.is_relative_to(runs) or path == runs:
        return False
    return scope.own_run(runs / path.relative_to(runs).parts[0])


def _is_kind(path: Path, kind: str) -> bool:
    return path.is_dir() if kind == FOLDER else path.is_file() if kind == FILE else path.exists()


def allowed(path: Path, scope: UserScope) -> bool:
    """Whether the resolved `path` lies in the user's uploads, one of their runs or a shared folder."""
    return (
        path.is_relative_to(scope.uploads.resolve())
        or any(path.is_relative_to(f) for f in scope.shared)
        or _in_own_run(path, scope)
    )


def _refusal(field: str, value: str, kind: str, scope: UserScope, names: tuple[str, ...]) -> PathError:
    shared = "".join(f", {folder}" for folder in scope.shared)
    rule = f"{repr(value)[:80]} is not a {kind} in your uploads folder {scope.uploads}, one of your runs" + (
        f" or a shared folder ({shared[2:]})" if shared else ""
    )
    if field == "model":
        fix = (
            f"on a shared dashboard use {' or '.join(names) or 'a bundled model'}, a hub id like "
            "Qwen/Qwen2-0.5B-Instruct, a model folder in a shared folder, or a merged model of one of your "
            "runs (Runs tab: merged model)"
        )
    elif field == "reward_model":
        fix = (
            "on a shared dashboard use a hub id of a sequence-classification model, or its folder in a shared "
            "folder or your uploads"
        )
    else:
        fix = (
            "on a shared dashboard dataset and reward files come only from your uploads, your runs and the "
            "shared folders (a dataset may also be a hub id): upload the file under 'Your files' in the Setup "
            "tab, then use the path it shows"
        )
    return PathError(field=field, rule=rule, fix=fix)


def confine(field: str, value: str, scope: UserScope, names: tuple[str, ...] = ()) -> str:
    """The value path field `field` may keep under the rule (an absolute path, a name or a hub id), or PathError.

    `names`: the bundled models' names (the model field only). "" (the field
    left empty) stays "". Nothing the value names is opened: names are looked
    up, and only a run folder's own status.json is read, to learn its owner.
    """
    if not value:
        return ""
    kind = FIELD_KINDS.get(field, FILE_OR_FOLDER)
    if field in HUB_FIELDS and (value in names or is_hub_id(value)):
        return value
    try:
        path = Path(value)
        resolved = (path if path.is_absolute() else scope.uploads / path).resolve()
        ok = allowed(resolved, scope) and _is_kind(resolved, kind)
    except (OSError, ValueError, RuntimeError):  # a NUL byte, a name no file system can hold, a link loop
        ok = False
    if not ok:
        raise _refusal(field, value, kind, scope, names)
    return str(resolved)
