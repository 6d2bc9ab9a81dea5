"""Attack: the completions explorer's cache itself (issue 46): whose rows an entry can hold, whether entries of
two runs collide, whether it follows links, and whether it grows without end.

- two runs, or two runs folders with runs of the same name (held: each file has its own folder, named by a
  hash of its folder's real path and its name);
- a link planted in the cache's place of a run, or in the cache root (held: the root is the server's, 0700, and
  a run's sandbox never sees it, tests/test_attack_explorer_cache_leak.py; a link there is never followed by
  the pruning);
- a run deleted (broke: its parts stayed in the cache for good, a deleted student's completions on the server,
  and a run written, read, deleted and made again grew the cache without end; fixed: `completion_cache.prune`
  deletes the folders of deleted runs, and the least recently read runs' beyond MAX_CACHE_BYTES, each time a
  run is read for the first time).
"""

from __future__ import annotations

import json
import os
import shutil
import time

from helpers import tiny_config

from workbench.insight import completion_cache
from workbench.insight.completion_search import CompletionQuery, search_completions
from workbench.runstore import runfolder


def make_run(runs, name: str, text: str, count: int = 1):
    run_dir = runs / name
    run_dir.mkdir(parents=True)
    tiny_config().save(run_dir / runfolder.CONFIG_FILE)
    records = [{"step": s, "group": 0, "prompt": "p", "completion": text, "reward": 1.0} for s in range(count)]
    runfolder.append_jsonl(run_dir / runfolder.COMPLETIONS_FILE, records)
    return run_dir


def texts(run_dir, cache) -> set[str]:
    return {row["completion"] for row in search_completions(run_dir, CompletionQuery(), cache_dir=cache).rows}


def test_runs_of_the_same_name_in_two_runs_folders_never_share_an_entry(tmp_path):
    cache = tmp_path / "cache"
    one = make_run(tmp_path / "a" / "runs", "20260101-000001-x", "first")
    two = make_run(tmp_path / "b" / "runs", "20260101-000001-x", "second")
    assert texts(one, cache) == {"first"} and texts(two, cache) == {"second"}
    assert len(list(cache.iterdir())) == 2
    # a runs folder reached through a link is the same file, the same entry
    (tmp_path / "alias").symlink_to(tmp_path / "a", target_is_directory=True)
    assert texts(tmp_path / "alias" / "runs" / one.name, cache) == {"first"}
    assert len(list(cache.iterdir())) == 2


def test_a_deleted_runs_parts_leave_the_cache(tmp_path):
    cache, runs = tmp_path / "cache", tmp_path / "runs"
    gone = make_run(runs, "20260101-000001-x", "deleted student's answer")
    assert texts(gone, cache) == {"deleted student's answer"}
    shutil.rmtree(gone)
    make_run(runs, "20260101-000002-y", "other")
    assert texts(runs / "20260101-000002-y", cache) == {"other"}  # a first look prunes
    left = b"".join(p.read_bytes() for p in cache.rglob("*") if p.is_file())
    assert b"deleted student" not in left and len(list(cache.iterdir())) == 1


def test_the_cache_stays_under_its_size_the_least_recently_read_going_first(tmp_path, monkeypatch):
    cache, runs = tmp_path / "cache", tmp_path / "runs"
    first = make_run(runs, "20260101-000001-x", "x" * 1000, count=50)
    texts(first, cache)
    size = sum(p.stat().st_size for p in cache.rglob("*") if p.is_file())
    monkeypatch.setattr(completion_cache, "MAX_CACHE_BYTES", int(size * 2.5))
    second = make_run(runs, "20260101-000002-y", "y" * 1000, count=50)
    texts(second, cache)
    time.sleep(0.01)
    texts(first, cache)  # read again: now the most recent
    for number in range(3, 6):
        texts(make_run(runs, f"20260101-00000{number}-z", "z" * 1000, count=50), cache)
        total = sum(p.stat().st_size for p in cache.rglob("*") if p.is_file())
        assert total <= size * 2.5 + size, total  # at most one run over while it is being read
    assert texts(first, cache) == {"x" * 1000}  # still right, read again if it went


def test_a_link_in_the_cache_root_is_never_followed_by_the_pruning(tmp_path, monkeypatch):
    cache, runs = tmp_path / "cache", tmp_path / "runs"
    victim = tmp_path / "elsewhere"
    victim.mkdir()
    (victim / "keep.txt").write_text("kept")
    (victim / completion_cache.MANIFEST).write_text(json.dumps({"source": str(tmp_path / "gone" / "c.jsonl")}))
    cache.mkdir(mode=0o700)
    (cache / ("0" * 32)).symlink_to(victim, target_is_directory=True)
    monkeypatch.setattr(completion_cache, "MAX_CACHE_BYTES", 0)
    texts(make_run(runs, "20260101-000001-x", "x"), cache)
    assert (victim / "keep.txt").read_text() == "kept"
    assert oct(os.stat(cache).st_mode & 0o777) == "0o700"
