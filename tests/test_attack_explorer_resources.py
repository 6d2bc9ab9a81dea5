"""Attack: make the server spend unbounded memory or time with one look at a run in the completions explorer
(issue 46).

- Many tiny records (`{"step": N}` lines, valid, within the run's disk limit): every query loaded every row's
  number columns, several times the file's size in the server's memory (broke: a run of 2 GiB of tiny lines
  would cost the server far more memory than it has, killing the dashboard for everyone; fixed: a query loads
  the newest `completion_cache.MAX_ROWS` rows, and the page says how many of the oldest it leaves out);
- a sort or a filter over every row, a search over a large completions text (held: answered in bounded time on
  a file of a few MiB; the big-run benchmark covers the sizes the issue names);
- a sparse file with no line end (held: read a chunk at a time and skipped, no part written);
- a run that changes its file in place before each look: a byte of its last line (the bytes the cache checks),
  or cut a byte shorter and grown back (broke: the cache read the whole file again on every look, up to the
  run's disk limit; fixed: only the newest part is read again, `completion_cache._changed_in_place`).
"""

from __future__ import annotations

import time

import pytest
from helpers import tiny_config

from workbench.insight import completion_cache
from workbench.insight.completion_search import CompletionQuery, search_completions
from workbench.runstore import runfolder


def make_run(tmp_path, body: bytes):
    run_dir = tmp_path / "runs" / "20260101-000001-alice"
    run_dir.mkdir(parents=True)
    tiny_config().save(run_dir / runfolder.CONFIG_FILE)
    (run_dir / runfolder.COMPLETIONS_FILE).write_bytes(body)
    return run_dir


def tiny_records(count: int) -> bytes:
    return b"".join(b'{"step":%d}\n' % step for step in range(count))


def test_many_tiny_records_load_at_most_max_rows_the_newest(tmp_path, monkeypatch):
    monkeypatch.setattr(runfolder, "READ_CHUNK_BYTES", 1 << 12)
    monkeypatch.setattr(completion_cache, "MAX_ROWS", 1000)
    run_dir = make_run(tmp_path, tiny_records(20_000))
    cache = tmp_path / "cache"
    page = search_completions(run_dir, CompletionQuery(sort="step", desc=True, limit=5), cache_dir=cache)
    assert page.total <= 1000 and page.total + page.left_out == 20_000
    assert page.rows[0]["step"] == 19_999  # the newest rows are the ones kept
    oldest = search_completions(run_dir, CompletionQuery(sort="step", limit=1), cache_dir=cache).rows[0]["step"]
    assert oldest == page.left_out
    assert search_completions(run_dir, CompletionQuery(search="x"), cache_dir=cache).total == 0  # text search too
    folder, manifest = completion_cache.update(run_dir / runfolder.COMPLETIONS_FILE, cache)
    kept = completion_cache.read_columns(folder, manifest, lambda name: name == "step")
    assert kept.num_rows <= 1000


def test_a_run_under_the_cap_leaves_nothing_out(tmp_path):
    run_dir = make_run(tmp_path, tiny_records(500))
    page = search_completions(run_dir, CompletionQuery(), cache_dir=tmp_path / "cache")
    assert page.total == 500 and page.left_out == 0


def test_sorts_filters_and_searches_over_a_few_mib_answer_in_bounded_time(tmp_path):
    line = b'{"step": %d, "group": 0, "prompt": "p", "completion": "%s", "reward": %d, "length": %d}\n'
    body = b"".join(line % (i, b"word " * 40 + b"needle" * (i % 997 == 0), i % 7, i % 50) for i in range(40_000))
    run_dir = make_run(tmp_path, body)
    cache = tmp_path / "cache"
    search_completions(run_dir, CompletionQuery(), cache_dir=cache)  # the parts, once
    started = time.monotonic()
    for query in (
        CompletionQuery(sort="reward", desc=True),
        CompletionQuery(where="reward<3 and length>10 or not (step>=100)", sort="length"),
        CompletionQuery(search="NEEDLE", sort="advantage"),
        CompletionQuery(offset=39_990),
    ):
        search_completions(run_dir, query, cache_dir=cache)
    assert time.monotonic() - started < 10
    assert search_completions(run_dir, CompletionQuery(search="needle"), cache_dir=cache).total == 41


def test_a_sparse_file_with_no_line_end_writes_no_part(tmp_path):
    run_dir = make_run(tmp_path, b'{"step": 1, "completion": "')
    with open(run_dir / runfolder.COMPLETIONS_FILE, "r+b") as handle:
        handle.truncate(256 << 20)  # holes: no disk
    cache = tmp_path / "cache"
    assert search_completions(run_dir, CompletionQuery(), cache_dir=cache).total == 0
    folder, manifest = completion_cache.update(run_dir / runfolder.COMPLETIONS_FILE, cache)
    assert manifest.parts == () and not list(folder.glob("part-*"))


def flip_early(handle, size: int, flip: int) -> None:
    handle.seek(8)  # a digit of the first line
    handle.write(b"%d" % flip)


def flip_last_line(handle, size: int, flip: int) -> None:
    handle.seek(size - 3)  # a digit of the last line: inside the bytes the cache checks
    handle.write(b"%d" % flip)


def cut_and_grow(handle, size: int, flip: int) -> None:
    if flip % 2 == 0:
        handle.truncate(size - 1)  # one byte shorter: the cache sees a file cut short
    else:
        handle.seek(size - 1)
        handle.write(b"\n")


@pytest.mark.slow
@pytest.mark.parametrize("change", [flip_early, flip_last_line, cut_and_grow], ids=lambda f: f.__name__)
def test_a_run_rewriting_its_file_before_each_look_costs_bounded_work_per_look(tmp_path, monkeypatch, change):
    body = tiny_records(1_000_000)  # about 14 MiB; a run's disk limit allows far more
    run_dir = make_run(tmp_path, body)
    cache = tmp_path / "cache"
    search_completions(run_dir, CompletionQuery(), cache_dir=cache)
    parsed = []  # the bytes each look parses (counted, not timed: the machine's load says nothing here)
    real = runfolder.parse_lines
    monkeypatch.setattr(
        runfolder, "parse_lines", lambda chunk, *a, **k: parsed.append(len(chunk)) or real(chunk, *a, **k)
    )
    for flip in range(4):
        with open(run_dir / runfolder.COMPLETIONS_FILE, "r+b") as handle:  # the same file, changed in place
            change(handle, len(body), flip)
        parsed.clear()
        page = search_completions(run_dir, CompletionQuery(), cache_dir=cache)
        assert sum(parsed) <= completion_cache.PART_BYTES + completion_cache.SMALL_PART_BYTES < len(body) // 4
        assert page.total in (1_000_000, 999_999)  # the older parts kept, the newest read again
