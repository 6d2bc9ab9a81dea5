"""Where a run's data lies, as `datasets` reads it: a hub id, a hub-layout folder, a `save_to_disk` folder, a file.

`dataset_name` (TRL's name) may be

- a data file (JSONL, JSON, CSV, Parquet): one split, read by `sources/dataset_reading.py`;
- a folder written by `Dataset.save_to_disk` / `DatasetDict.save_to_disk`;
- a folder laid out as the hub lays out a dataset repository (a README.md whose
  YAML front matter names `configs:` with `data_files` per split, or data files
  whose names say their split): `datasets.load_dataset(folder, config)` reads it;
- a hub id (`openai/gsm8k`): read from its snapshot in the hub cache when one is
  there (`hf download --repo-type dataset ID` puts it there), else downloaded by
  `datasets` where the hub can be reached.

`dataset_train_split` may be a slice (`train[:200]`): `datasets` reads only
those rows into the training set, so a large dataset never loads whole into
memory for a short run.

The cheap checks (`first_rows`, `config_names`) read a README and the first
rows of one data file; nothing here loads a model or converts a whole split.
A hub id that is neither cached nor reachable is refused with how to fetch it
(`hub_problem`), after at most `HUB_TIMEOUT_S`.
"""

from __future__ import annotations

import functools
import os
import re
import time
from collections.abc import Iterator
from dataclasses import dataclass
from itertools import islice
from pathlib import Path

import yaml

from workbench.sources import columnar_bounds, dataset_reading, read_budget
from workbench.sources.dataset_reading import DatasetError
from workbench.sources.read_budget import Budget

HUB_TIMEOUT_S = 4.0  # the longest a check waits for the hub before saying it cannot be reached
HUB_ANSWER_KEPT_S = 60  # how long the hub's answer about one id is reused
# `owner/name` as the hub spells a dataset repository (a local path of that form is a path).
HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/(?!\.{1,2}$)[\w.-]+$")
# `train`, `train[:200]`, `train[100:200]`, `train[:10%]`: datasets' split slices, one range.
SPLIT = re.compile(r"^(?P<name>[\w.-]+)(\[(?P<start>-?\d+%?)?:(?P<stop>-?\d+%?)?\])?$")
SAVED_MARKERS = ("dataset_info.json", "state.json", "dataset_dict.json")  # what save_to_disk writes
CARD_FILES = ("README.md", ".huggingface.yaml")  # what datasets reads a folder's configs from, whole
FILE, SAVED, FOLDER, HUB = "file", "save_to_disk folder", "dataset folder", "hub dataset"


def download_hint(hub_id: str) -> str:
    """How to fetch a hub dataset where the hub can be reached, and point the run at the copy."""
    return (
        f"download it where the hub can be reached: `hf download --repo-type dataset {hub_id} --local-dir DIR`, "
        "then set dataset_name=DIR (a folder laid out as the hub lays it out)"
    )


@dataclass(frozen=True)
class Split:
    """A split name and the slice of it to read (datasets' syntax, e.g. `train[:200]`)."""

    text: str
    name: str
    start: str | None = None
    stop: str | None = None

    @property
    def first_row(self) -> int:
        """The row the slice starts at when it says so in rows (a percentage or a negative start reads as 0)."""
        return int(self.start) if self.start and not self.start.endswith("%") and int(self.start) > 0 else 0

    def rows(self, total: int) -> range:
        """The rows of a split of `total` rows this slice keeps (as datasets counts them)."""

        def bound(value: str | None, default: int) -> int:
            if value is None:
                return default
            number = round(total * int(value[:-1]) / 100) if value.endswith("%") else int(value)
            return max(0, min(total, total + number if number < 0 else number))

        return range(bound(self.start, 0), bound(self.stop, total))


def parse_split(text: str, field: str = "dataset_train_split") -> Split:
    """`train`, `train[:200]`, `test[10:20]`, `train[:5%]` as a Split; DatasetError naming the field otherwise."""
    found = SPLIT.match((text or "").strip())
    if not found:
        raise DatasetError(
            f"{field}: {text!r} is not a split name or a slice of one; write e.g. train, "
            "train[:200] (the first 200 rows) or train[:10%]"
        )
    return Split(text.strip(), found["name"], found["start"], found["stop"])


@dataclass(frozen=True)
class Source:
    """What `dataset_name` names: its kind, where it is read from, and the hub id when it is one."""

    kind: str
    path: str  # a local file or folder (a hub id's cached snapshot), or the hub id itself when not cached
    hub_id: str = ""

    @property
    def cached(self) -> bool:
        """Whether it can be read here without the hub (every kind but an uncached hub id)."""
        return self.kind != HUB or self.path != self.hub_id


def cached_snapshot(hub_id: str) -> Path | None:
    """The hub cache's newest snapshot folder of dataset `hub_id`, when a README of it is there (no network)."""
    from huggingface_hub import try_to_load_from_cache

    found = try_to_load_from_cache(hub_id, "README.md", repo_type="dataset")
    return Path(found).parent if isinstance(found, str) else None


def locate(name: str, field: str = "dataset_name") -> Source:
    """What `name` is (file, save_to_disk folder, hub-layout folder, hub id); DatasetError when it is none."""
    name = (name or "").strip()
    path = Path(name).expanduser()
    if path.is_file():
        dataset_reading.existing(path, field)  # a supported, non-empty file
        return Source(FILE, str(path))
    if path.is_dir():
        saved = any((path / marker).is_file() for marker in SAVED_MARKERS)
        return Source(SAVED if saved else FOLDER, str(path))
    if HUB_ID.match(name) and not os.path.lexists(name):
        snapshot = cached_snapshot(name)
        return Source(HUB, str(snapshot) if snapshot else name, name)
    raise DatasetError(
        f"{field}: no file or folder at '{path}', and it is not a hub id like openai/gsm8k; give a "
        f"{'/'.join(dataset_reading.SUPPORTED)} file, a dataset folder (README.md with `configs:`, or "
        "`save_to_disk`), or a hub id"
    )


def hub_problem(hub_id: str, timeout_s: float = HUB_TIMEOUT_S) -> str | None:
    """Why an uncached hub dataset cannot be fetched from here (offline, unknown, unreachable), or None.

    Asks the hub once, waiting at most `timeout_s`; HF_HUB_OFFLINE / HF_DATASETS_OFFLINE skip the asking.
    """
    if any(
        os.environ.get(flag, "").upper() in ("1", "ON", "YES", "TRUE")
        for flag in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE")
    ):
        reason = "this process is offline (HF_HUB_OFFLINE)"
    else:
        # the Setup tab checks on every change: the hub's answer is kept for a minute, not asked per keystroke
        reason = _hub_answer(hub_id, timeout_s, int(time.monotonic() // HUB_ANSWER_KEPT_S))
        if reason is None or reason.startswith("dataset_name:"):
            return reason
    return f"dataset_name: {hub_id!r} is not in the hub cache and {reason}; {download_hint(hub_id)}"


@functools.lru_cache(maxsize=64)
def _hub_answer(hub_id: str, timeout_s: float, _period: int) -> str | None:
    """None when the hub has dataset `hub_id`; else why not (a whole problem for an unknown id, a reason otherwise)."""
    from huggingface_hub import HfApi
    from huggingface_hub.errors import RepositoryNotFoundError

    try:
        HfApi().dataset_info(hub_id, timeout=timeout_s)
        return None
    except RepositoryNotFoundError:
        return (
            f"dataset_name: no dataset {hub_id!r} on the hub (or it is private); check the id on "
            "huggingface.co/datasets, or give a local copy's folder"
        )
    except Exception as exc:  # no network, DNS, timeout, a proxy: all mean "cannot be fetched from here"
        return f"the hub cannot be reached ({type(exc).__name__})"


def downloaded_bytes(hub_id: str) -> int:
    """Bytes of dataset `hub_id` in the hub cache so far (finished files and those still arriving)."""
    from huggingface_hub import constants

    blobs = Path(constants.HF_HUB_CACHE) / f"datasets--{hub_id.replace('/', '--')}" / "blobs"
    return sum(f.stat().st_size for f in blobs.iterdir() if f.is_file()) if blobs.is_dir() else 0


def repo_bytes(hub_id: str, timeout_s: float = HUB_TIMEOUT_S) -> int | None:
    """The size of every file of dataset `hub_id` on the hub (what a full download fetches), or None if unknown."""
    from huggingface_hub import HfApi

    info = HfApi().dataset_info(hub_id, timeout=timeout_s, files_metadata=True)
    sizes = [sibling.size for sibling in info.siblings or [] if sibling.size is not None]
    return sum(sizes) if sizes else None


# ---------------------------------------------------------------- configs, splits and rows


def _builder(source: Source, config: str, field: str = "dataset_config"):
    """datasets' builder of a folder or cached hub dataset (reads the README; converts nothing)."""
    import datasets

    read_budget.check_small_files([Path(source.path, name) for name in CARD_FILES], Budget.from_env())
    try:
        return datasets.load_dataset_builder(source.path, config or None)
    except ValueError as exc:
        text = str(exc)
        if "not found" in text and "Available" in text or "Please pick one" in text:
            found = ", ".join(config_names(source)) or "none"
            raise DatasetError(
                f"{field}: {config!r} is not a config of {source.hub_id or source.path} (configs: "
                f"{found}); set dataset_config to one of them"
            ) from None
        raise DatasetError(
            f"dataset_name '{source.path}': datasets cannot read it ({text}); lay it out as the hub "
            "does (README.md with `configs:`, data files per split)"
        ) from None
    except FileNotFoundError as exc:
        raise DatasetError(
            f"dataset_name '{source.path}': no data files found ({exc}); lay it out as the hub does "
            "(README.md with `configs:`, data files per split)"
        ) from None
    except yaml.YAMLError as exc:  # the README's front matter, which datasets reads first
        raise DatasetError(
            f"dataset_name '{source.path}': its README.md's YAML front matter cannot be read "
            f'({" ".join(str(exc).split())[:200]}); fix it (quote a glob: path: "*.jsonl")'
        ) from None


def config_names(source: Source) -> list[str]:
    """The configs a folder or cached hub dataset declares (['default'] when it declares none)."""
    if source.kind not in (FOLDER, HUB):
        return []
    import datasets

    try:
        read_budget.check_small_files([Path(source.path, name) for name in CARD_FILES], Budget.from_env())
    except DatasetError:  # the readers name it
        return []
    try:
        return list(datasets.get_dataset_config_names(source.path))
    except (ValueError, FileNotFoundError, yaml.YAMLError):  # the readers name the problem
        return []


def split_names(source: Source, config: str = "") -> list[str]:
    """The splits there are to choose from (a data file holds one: train)."""
    if source.kind == FILE:
        return ["train"]
    if source.kind == SAVED:
        loaded = _load_saved(source.path, Budget.from_env())
        return list(loaded) if hasattr(loaded, "keys") else ["train"]
    return list(data_files(source, config))


def data_files(source: Source, config: str = "") -> dict[str, list[str]]:
    """The files each split of a folder or cached hub dataset's config reads, as `datasets` resolves them (its
    README's `data_files` patterns and globs; nothing is read but the README and the folder's listing)."""
    return {split: list(files) for split, files in (_builder(source, config).config.data_files or {}).items()}


def first_rows(source: Source, config: str, split: Split, count: int) -> list[dict]:
    """The first `count` rows of the split's slice as stored (no mapping); DatasetError naming what is wrong.

    Read within one `read_budget.Budget` (the admin's WORKBENCH_MAX_DATA_READ_MB) for every file together.
    """
    budget = Budget.from_env()
    if source.kind == FILE:
        _file_split(source, split)
        rows = dataset_reading.iter_rows(Path(source.path), budget)
        return list(islice(rows, split.first_row, split.first_row + count))
    if source.kind == SAVED:
        dataset = _saved_split(source.path, split, budget)
        return dataset_reading.saved_rows(dataset, split.rows(len(dataset))[:count], Path(source.path), budget)
    files = data_files(source, config)
    if split.name not in files:
        raise DatasetError(
            f"dataset_train_split: {split.name!r} is not a split of {source.hub_id or source.path}"
            f"{f' (config {config})' if config else ''}; its splits: {', '.join(files) or 'none'}"
        )
    rows = (row for path in files[split.name] for row in _unless_stopped(Path(path), budget))
    return list(islice(rows, split.first_row, split.first_row + count))


def _unless_stopped(path: Path, budget: Budget) -> Iterator[dict]:
    """The rows of one data file of a split, none once the budget stopped the read in an earlier one."""
    if not budget.stopped:
        yield from dataset_reading.iter_rows(path, budget)


def _file_split(source: Source, split: Split) -> None:
    """A data file is one split, `train` (as `datasets` names a file's rows); another name is refused."""
    if split.name != "train":
        raise DatasetError(
            f"dataset_train_split: {split.name!r} is not a split of '{source.path}': a data file is one "
            "split, train (a slice such as train[:200] works)"
        )


def _load_saved(path: str, budget: Budget | None = None):
    """The save_to_disk folder `path` as datasets opens it; with a budget, its files are checked first."""
    from datasets import load_from_disk

    if budget:
        columnar_bounds.check_saved_folder(Path(path), budget)
    try:
        return load_from_disk(path)
    except FileNotFoundError:
        raise DatasetError(
            f"dataset_name '{path}': not a folder `save_to_disk` wrote; save it again, or lay it out as the hub does"
        ) from None


def _saved_split(path: str, split: Split, budget: Budget | None = None):
    loaded = _load_saved(path, budget)
    if not hasattr(loaded, "keys"):  # one Dataset saved alone: it is the split asked for
        return loaded
    if split.name not in loaded:
        raise DatasetError(
            f"dataset_train_split: {split.name!r} is not a split of '{path}'; its splits: {', '.join(loaded)}"
        )
    return loaded[split.name]


def load_split(source: Source, config: str, split: Split):
    """The split's slice as a `datasets.Dataset`, through `datasets.load_dataset` (the HF cache) for folders and
    hub ids; a data file or a save_to_disk folder is read directly."""
    if source.kind == FILE:
        _file_split(source, split)
        dataset = dataset_reading.load_user_dataset(source.path, check_prompt=False)
        return dataset.select(split.rows(len(dataset)))
    if source.kind == SAVED:
        dataset = _saved_split(source.path, split)
        return dataset.select(split.rows(len(dataset)))
    import datasets

    _builder(source, config)  # an unknown config, or no data, refused in words before datasets raises
    return datasets.load_dataset(source.path, config or None, split=split.text)
