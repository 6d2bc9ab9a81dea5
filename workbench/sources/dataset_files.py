"""Every file a dataset name makes a reader open, checked against a rule before a single row is read.

A dataset folder names more files than itself. A hub-layout folder's README.md
(and `.huggingface.yaml`) lists, per config, a `data_dir` and `data_files`
patterns that may climb out (`../../uploads/carol/secret.jsonl`), be absolute or
be globs; a `save_to_disk` folder's dataset_dict.json names its split folders
and each split's state.json its arrow files; and any file in a folder may be a
link to anywhere. On a dashboard with accounts the path rule
(workbench/access/paths.py) decides only the path typed, so `outside(source,
allowed)` goes through everything the readers (`hub_datasets.first_rows`,
`split_names`, `load_split`, `dataset_reading`) would open and names the first file
`allowed` refuses, in this order, so that nothing outside is even listed:

1. the folder's own entries: a link must lead somewhere allowed, and nothing
   may be a FIFO, a socket or a device (opening a FIFO would hang the server);
2. the patterns and folders the dataset's own files name (README configs,
   save_to_disk's JSON files), resolved without globbing: a URL is refused,
   and a glob's fixed part must lie inside;
3. the files `datasets` resolves each config's patterns to, each followed to
   where it really is (a glob through a linked folder).

A cached hub dataset is held to its own download (the repository's folder in
the hub cache, where its snapshot's links lead), whatever `allowed` says.
Reads only names, links, the README's front matter and save_to_disk's small
JSON files, each once it is known to be an allowed regular file.
"""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Callable, Iterator
from pathlib import Path

from workbench.sources import hub_datasets, read_budget
from workbench.sources.dataset_reading import DatasetError

GLOB_CHARS = "*?["  # where a datasets (fsspec) pattern stops being a fixed path
CARD_FILES = hub_datasets.CARD_FILES  # where datasets reads a folder's `configs:` (datasets.config)
SPLITS_FILE, STATE_FILE = "dataset_dict.json", "state.json"  # what save_to_disk writes (datasets.config)

Allowed = Callable[[Path], bool]


def outside(source: hub_datasets.Source, allowed: Allowed) -> str | None:
    """What of `source` lies outside `allowed` (a resolved path -> whether it may be read), in words; None if nothing.

    An uncached hub id names no file here yet: None (the run downloads it into the hub cache, and the check
    applies once it is there).
    """
    if not source.cached:
        return None
    root = Path(source.path)
    if source.kind == hub_datasets.HUB:  # the hub's README decides its files: they stay in its own download
        repo = Path(os.path.realpath(root)).parents[1]
        allowed = lambda path: path.is_relative_to(repo)  # noqa: E731
    for what, target in _named(source, root):
        problem = _problem(what, target, allowed)
        if problem:
            return problem
    return None


def folder_outside(root: str | os.PathLike, allowed: Allowed) -> str | None:
    """What of the local file or folder `root` (a model folder a user names) leads outside `allowed`: a link in it
    to elsewhere, a FIFO, a socket or a device; None if nothing (and for a name that is no local path: a bundled
    model's name, a hub id). A run's own code may have written the folder."""
    if not os.path.isabs(root) or not os.path.lexists(root):
        return None
    for what, target in _entries(Path(root)):
        problem = _problem(what, target, allowed)
        if problem:
            return problem
    return None


def _problem(what: str, target: str, allowed: Allowed) -> str | None:
    """Why `target` (a path or pattern named by `what`) may not be read, or None."""
    if "://" in target or "::" in target:  # fsspec's URLs and chained URLs (zip://...::): not this machine's files
        return f"{what} is a URL ({target[:120]}), not a file of the dataset"
    real = Path(os.path.realpath(target))
    if not allowed(real):
        return f"{what} leads to {real}"
    try:
        mode = os.stat(real).st_mode
    except OSError:  # not there (yet): nothing to read; the reader says it is missing
        return None
    if not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):
        return f"{what} is not a regular file (a FIFO, a socket or a device)"
    return None


def _named(source: hub_datasets.Source, root: Path) -> Iterator[tuple[str, str]]:
    """(what names it, the path or pattern) for each thing a reader of `source` may open, outermost first."""
    yield from _entries(root)
    if source.kind in (hub_datasets.FOLDER, hub_datasets.HUB):
        yield from _card_patterns(root)
        yield from _resolved_files(source)
    elif source.kind == hub_datasets.SAVED:
        yield from _saved_files(root)


def _entries(root: Path) -> Iterator[tuple[str, str]]:
    """The folder's entries, links and all, never following a linked folder (or the file itself)."""
    if not root.is_dir():
        yield f"the file {root.name}", str(root)
        return
    for folder, dirs, files in os.walk(root):  # followlinks=False: a linked folder is one entry, checked
        for name in [*dirs, *files]:
            path = os.path.join(folder, name)
            try:
                mode = os.lstat(path).st_mode
            except OSError:  # gone since the listing: nothing there to read
                continue
            if stat.S_ISLNK(mode) or not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):
                yield f"{os.path.relpath(path, root)} (in the folder)", path


def _card_patterns(root: Path) -> Iterator[tuple[str, str]]:
    """Each config's `data_dir` and the fixed part of each `data_files` pattern, as the README names them."""
    from datasets.data_files import sanitize_patterns

    for config, params in _metadata_configs(root).items():
        base = os.path.join(root, params.get("data_dir") or "")
        if params.get("data_dir"):
            yield f"README.md's data_dir {params['data_dir']!r} (config {config})", base
        try:
            patterns = sanitize_patterns(params.get("data_files") or [])
        except (ValueError, TypeError):  # datasets refuses the same entry before reading a row
            continue
        for split_patterns in patterns.values():
            for pattern in split_patterns:
                yield (
                    f"README.md's data_files entry {str(pattern)[:120]!r} (config {config})",
                    os.path.join(base, _fixed_part(str(pattern))),
                )


def _fixed_part(pattern: str) -> str:
    """The part of a glob before its first wildcard, up to a whole folder (`data/*.jsonl` -> `data`)."""
    cut = min((pattern.index(char) for char in GLOB_CHARS if char in pattern), default=None)
    return pattern if cut is None else os.path.dirname(pattern[:cut])


def _metadata_configs(root: Path) -> dict:
    """The `configs:` the folder's README.md and .huggingface.yaml declare, read as `datasets` reads them."""
    import yaml
    from datasets.utils.metadata import MetadataConfigs
    from huggingface_hub import DatasetCard, DatasetCardData

    readme, standalone = (root / name for name in CARD_FILES)
    try:
        read_budget.check_small_files([readme, standalone], read_budget.Budget.from_env())
        data = DatasetCard.load(readme).data.to_dict() if readme.is_file() else {}
        if standalone.is_file():
            data.update(yaml.safe_load(standalone.read_text(encoding="utf-8")) or {})
        return dict(MetadataConfigs.from_dataset_card_data(DatasetCardData(**data)))
    except (ValueError, TypeError, AttributeError, OSError, yaml.YAMLError):  # datasets cannot read it either
        # (DatasetError, a file past the read budget, is a ValueError: the reader refuses it in words)
        return {}


def _resolved_files(source: hub_datasets.Source) -> Iterator[tuple[str, str]]:
    """Every file `datasets` resolves each config's patterns to (globs expanded), for every config."""
    for config in hub_datasets.config_names(source) or [""]:
        try:
            files = hub_datasets.data_files(source, config)
        except (DatasetError, ValueError, OSError):  # no builder: the readers stop at the same point, unread
            continue
        for split, paths in files.items():
            for path in paths:
                yield f"the data file {Path(path).name} (config {config or 'default'}, split {split})", str(path)


def _saved_files(root: Path) -> Iterator[tuple[str, str]]:
    """The split folders dataset_dict.json names, and the arrow files each (or the one) state.json names."""
    splits = _json(root / SPLITS_FILE).get("splits")
    folders = [os.path.join(root, str(split)) for split in splits] if isinstance(splits, list) else [str(root)]
    for folder in folders:
        yield f"{SPLITS_FILE}'s split {os.path.relpath(folder, root)!r}", folder
        yield f"the split's {STATE_FILE}", os.path.join(folder, STATE_FILE)  # read just below: checked first
        files = _json(Path(folder) / STATE_FILE).get("_data_files")
        for entry in files if isinstance(files, list) else []:
            name = str(entry.get("filename", "")) if isinstance(entry, dict) else ""
            yield f"{STATE_FILE}'s data file {name[:120]!r}", os.path.join(folder, name)


def _json(path: Path) -> dict:
    """A small JSON file save_to_disk wrote, once its place is checked ({} when it is not a readable object)."""
    try:
        read_budget.check_small_files([path], read_budget.Budget.from_env())  # past it: the reader refuses it
        data = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}
    except (OSError, ValueError, RecursionError):  # RecursionError: nested deeper than Python parses
        return {}
    return data if isinstance(data, dict) else {}
