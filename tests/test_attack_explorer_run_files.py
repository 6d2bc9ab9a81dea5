"""Attack: what a run's own process can put in its folder's `completions.jsonl`, read by the completions explorer
(insight/completion_search over insight/completion_cache's parts) on the shared server (issue 46).

A run writes its folder as it likes; the server reads it when anyone opens the explorer. Each attack here must
leave the server with a clear answer (rows, or none), never a traceback, a hang, another run's rows or a
damaged cache of another run:
- a link in the file's place, pointing at another student's completions (broke: the cache folder was named by
  the link's target, so the server's look at alice's run deleted bob's cached parts, and bob's next look failed);
- a FIFO or a device in its place (held: read as missing, never opened for reading);
- one line longer than a read chunk, JSON nested past Python's parser, bytes that are not UTF-8, strings where
  numbers belong, NaN and infinities, integers past a float (held: skipped or missing, every other row kept);
- the file cut back and regrown (held: read again from the start, no stale rows);
- a new reward-function name on every record (broke: each part kept 32 score columns of its own, and loading
  the run joined every part's columns into one table, a column per name for every row: memory grew with the
  names times the rows).
"""

from __future__ import annotations

import json
import os
import tracemalloc

from helpers import tiny_config

from workbench.insight import completion_cache, completion_search
from workbench.insight.completion_search import CompletionQuery, search_completions
from workbench.runstore import runfolder


def record(step: int, text: str = "c", **more) -> dict:
    return {
        "step": step,
        "group": 0,
        "prompt": "p",
        "completion": text,
        "rewards": {"r": 1.0},
        "reward": 1.0,
        "advantage": 0.0,
        "length": 3,
        "truncated": False,
        **more,
    }


def make_run(runs, name: str, lines: list[bytes] | None = None):
    run_dir = runs / name
    run_dir.mkdir(parents=True)
    tiny_config().save(run_dir / runfolder.CONFIG_FILE)
    if lines is not None:
        (run_dir / runfolder.COMPLETIONS_FILE).write_bytes(b"".join(lines))
    return run_dir


def line(value) -> bytes:
    return json.dumps(value).encode() + b"\n"


def texts(run_dir, cache, **query) -> list[str]:
    page = search_completions(run_dir, CompletionQuery(limit=1000, **query), cache_dir=cache)
    assert page.total == len(page.rows)
    return [row["completion"] for row in page.rows]


def test_a_link_to_another_runs_completions_neither_reads_nor_damages_that_runs_cache(tmp_path):
    cache, runs = tmp_path / "cache", tmp_path / "runs"
    bob = make_run(runs, "20260101-000002-bob", [line(record(1, "bob's answer"))])
    assert texts(bob, cache) == ["bob's answer"]
    alice = make_run(runs, "20260101-000001-alice")
    (alice / runfolder.COMPLETIONS_FILE).symlink_to(bob / runfolder.COMPLETIONS_FILE)
    assert texts(alice, cache) == []  # a link reads as missing
    assert completion_cache.folder_for(alice / runfolder.COMPLETIONS_FILE, cache) != completion_cache.folder_for(
        bob / runfolder.COMPLETIONS_FILE, cache
    )
    completion_search._KEPT.clear()  # a fresh server process
    assert texts(bob, cache) == ["bob's answer"]  # bob's cache is whole
    assert texts(bob, cache, search="answer") == ["bob's answer"]
    # and a cache that lost a part anyway (another reader's update cleared it) is read again, not failed on
    folder = completion_cache.folder_for(bob / runfolder.COMPLETIONS_FILE, cache)
    for part in folder.glob("part-*"):
        part.unlink()
    completion_search._KEPT.clear()
    assert texts(bob, cache) == ["bob's answer"]


def test_a_fifo_or_a_device_in_the_files_place_reads_as_no_completions(tmp_path):
    cache, runs = tmp_path / "cache", tmp_path / "runs"
    fifo = make_run(runs, "20260101-000001-fifo")
    os.mkfifo(fifo / runfolder.COMPLETIONS_FILE)  # opening it for reading would wait for a writer forever
    device = make_run(runs, "20260101-000002-device")
    (device / runfolder.COMPLETIONS_FILE).symlink_to("/dev/zero")  # endless bytes, were it followed
    for run_dir in (fifo, device):
        assert texts(run_dir, cache) == []


def test_hostile_lines_are_skipped_and_every_good_row_kept(tmp_path, monkeypatch):
    monkeypatch.setattr(runfolder, "READ_CHUNK_BYTES", 1 << 16)
    lines = [
        line(record(1, "first")),
        b'{"step": 1, "completion": "' + b"x" * (3 << 16) + b'"}\n',  # longer than a read chunk
        b"[" * 100_000 + b"]" * 100_000 + b"\n",  # deeper than Python's JSON parser goes
        b'{"step": 1, "completion": "\xff\xfe bad utf-8"}\n',
        line(record("1", "step as text")),
        line(record(1, "reward as text", reward="1.0", advantage="NaN", length="40")),
        b'{"step": 1, "group": 0, "prompt": "p", "completion": "nan", "reward": NaN, "advantage": Infinity, '
        b'"length": -Infinity, "rewards": {"r": NaN}}\n',
        line(record(1, "huge", reward=10**400, length=10**30)),
        line({"step": 1, "completion": {"role": "x"}}),
        line([1, 2, 3]),
        b"\x00" * 1000 + b"\n",
        line(record(2, "last")),
    ]
    run_dir = make_run(tmp_path / "runs", "20260101-000001-alice", lines)
    cache = tmp_path / "cache"
    page = search_completions(run_dir, CompletionQuery(limit=1000), cache_dir=cache)
    by_text = {row["completion"]: row for row in page.rows}
    assert "first" in by_text and "last" in by_text
    assert not any(text and "x" * 100 in str(text) for text in by_text)
    # kept or skipped, odd numbers read as missing, never as NaN or a number past a float
    if "nan" in by_text:
        assert by_text["nan"]["reward"] is None and by_text["nan"]["advantage"] is None
    if "huge" in by_text:
        assert by_text["huge"]["reward"] is None
    # a filter or a sort on the odd values: missing never matches, and sorts last
    assert "nan" not in texts(run_dir, cache, where="reward>=0 or reward<0")
    rewards = [
        row["reward"] for row in search_completions(run_dir, CompletionQuery(sort="reward", desc=True), cache).rows
    ]
    assert rewards == sorted(r for r in rewards if r is not None)[::-1] + [None] * rewards.count(None)
    json.dumps([page.rows])  # every value is JSON (no NaN, no bytes)


def test_a_file_cut_back_and_regrown_is_read_again_with_no_stale_rows(tmp_path):
    cache = tmp_path / "cache"
    run_dir = make_run(tmp_path / "runs", "20260101-000001-alice", [line(record(s, f"old {s}")) for s in range(1, 40)])
    path = run_dir / runfolder.COMPLETIONS_FILE
    assert len(texts(run_dir, cache)) == 39
    with open(path, "r+b") as handle:  # the same file (same inode), cut back and regrown past its old size
        handle.truncate(0)
        handle.write(b"".join(line(record(s, f"new {s}")) for s in range(1, 60)))
    rows = texts(run_dir, cache)
    assert rows == [f"new {s}" for s in range(1, 60)]
    path.unlink()  # replaced by another file
    path.write_bytes(line(record(1, "again")))
    assert texts(run_dir, cache) == ["again"]


def test_a_new_reward_name_on_every_record_costs_no_column_per_name_per_row(tmp_path, monkeypatch):
    monkeypatch.setattr(runfolder, "READ_CHUNK_BYTES", 1 << 14)  # many parts, as a big run has
    names = 40
    lines = [line(record(i + 1, f"c{i}", rewards={f"n{i}_{k}": 0.5 for k in range(names)})) for i in range(400)]
    run_dir = make_run(tmp_path / "runs", "20260101-000001-alice", lines)
    cache = tmp_path / "cache"
    folder, manifest = completion_cache.update(run_dir / runfolder.COMPLETIONS_FILE, cache)
    assert len(manifest.parts) > 10
    tracemalloc.start()
    try:
        page = search_completions(run_dir, CompletionQuery(sort="rewards.n0_0"), cache_dir=cache)
    finally:
        columns = completion_search._KEPT.entries[str(folder)][1]["table"].num_columns
        tracemalloc.stop()
    assert page.total == 400
    assert columns <= completion_cache.MAX_REWARD_COLUMNS + 16, f"{columns} columns kept for the run"
    assert page.rows[0]["completion"] == "c0"  # the first names still have their column
    assert len(page.rows[0]["rewards"]) == names  # and every score stays in the row's rewards
