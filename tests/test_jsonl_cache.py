"""Readers that never read a byte twice: the step index of completions.jsonl and the records of metrics.jsonl.

Every answer is checked against reading the whole file the plain way
(`runfolder.read_jsonl` with `resumed.latest_round` / `merge_completions`);
what a reader read is checked in bytes, never in seconds.
"""

import json
import os

import pytest

from workbench.insight import follow
from workbench.insight.resumed import latest_round
from workbench.runstore import jsonl_cache, runfolder

G = 2


def completion(step, group=0, reward=0.5, text="c"):
    return {"step": step, "group": group, "prompt": "p", "completion": text, "reward": reward}


def round_of(step, reward=0.5, groups=2):
    return [completion(step, group, reward, f"answer {step}.{group}.{i}") for group in range(groups) for i in range(G)]


def write_lines(path, lines):
    with open(path, "a", encoding="utf-8") as handle:
        handle.writelines(line + "\n" for line in lines)


FILES = {
    "steps-in-order": [json.dumps(r) for s in (1, 2, 3) for r in round_of(s)],
    "resumed-from-step-1": [json.dumps(r) for s in (1, 2, 3) for r in round_of(s)]
    + [json.dumps(r) for s in (2, 3) for r in round_of(s, reward=0.9)],
    "newest-step-twice-in-a-row": [json.dumps(r) for r in round_of(1) + round_of(1, reward=0.9)],
    "other-key-order-and-floats": [json.dumps({"group": 0, "step": 1, "reward": 0.1})] * 2
    + [json.dumps({"step": 2.0, "group": 0, "reward": 0.2})] * 2
    + [json.dumps(r) for r in round_of(3)],
    "junk-and-stepless-lines": [json.dumps(r) for r in round_of(1)]
    + ["not json", '{"no": "step"}']
    + [json.dumps(r) for r in round_of(2)]
    + ['{"step": true}']
    + [json.dumps(r) for r in round_of(3)],
    "skipped-steps": [json.dumps(r) for s in (2, 5, 9) for r in round_of(s)],
}


@pytest.fixture(params=list(FILES), ids=list(FILES))
def written(request, tmp_path):
    path = tmp_path / runfolder.COMPLETIONS_FILE
    write_lines(path, FILES[request.param])
    return path


def test_each_step_reads_as_from_the_whole_file(written):
    everything = runfolder.read_jsonl(written)
    index = jsonl_cache.index_steps(written)
    expected_steps = sorted({r["step"] for r in everything if train_view_step(r) is not None})
    assert index.steps == expected_steps
    for step in expected_steps:
        expected = latest_round(everything, step, G)
        assert latest_round(jsonl_cache.records_of_step(written, step), step, G) == expected, step
    assert index.offset == written.stat().st_size


def train_view_step(record):
    step = record.get("step")
    return step if isinstance(step, (int, float)) and not isinstance(step, bool) else None


def test_the_train_tab_s_first_read_is_the_fold_of_every_record(written):
    everything = [r for r in runfolder.read_jsonl(written) if train_view_step(r) is not None]
    steps, newest = follow.merge_completions([], [], everything, G)
    read_steps, read_newest, offset, identity, _ = follow.read_completions(written, G)
    assert (read_steps, read_newest) == (steps, newest)
    assert offset == written.stat().st_size and identity == runfolder.file_identity(written)


def test_an_index_reads_only_what_was_appended(tmp_path):
    path = tmp_path / "c.jsonl"
    runfolder.append_jsonl(path, round_of(1) + round_of(2))
    first = jsonl_cache.index_steps(path)
    assert first.bytes_read == path.stat().st_size
    size = path.stat().st_size
    runfolder.append_jsonl(path, round_of(2, reward=0.7)[:1] + round_of(3))
    again = jsonl_cache.index_steps(path, first)
    assert again.bytes_read == path.stat().st_size - size + jsonl_cache.FINGERPRINT_BYTES
    assert again == jsonl_cache.index_steps(path)  # the same as indexing the whole file
    unchanged = jsonl_cache.index_steps(path, again)
    assert unchanged.bytes_read == jsonl_cache.FINGERPRINT_BYTES and unchanged.stretches == again.stretches


def test_a_half_written_line_waits_for_its_newline(tmp_path):
    path = tmp_path / "c.jsonl"
    runfolder.append_jsonl(path, round_of(1))
    with open(path, "a") as handle:
        handle.write('{"step": 2, "group": 0, "rew')  # the trainer is mid-line
    index = jsonl_cache.index_steps(path)
    assert index.steps == [1] and index.offset < path.stat().st_size
    with open(path, "a") as handle:
        handle.write('ard": 0.3}\n')
    index = jsonl_cache.index_steps(path, index)
    assert index.steps == [1, 2] and jsonl_cache.records_of_step(path, 2) == [{"step": 2, "group": 0, "reward": 0.3}]


@pytest.mark.parametrize("change", ["resume-rewrite", "cut-shorter", "rewritten-in-place"])
def test_a_file_that_is_not_the_one_read_before_is_read_again(tmp_path, change):
    path = tmp_path / "c.jsonl"
    runfolder.append_jsonl(path, round_of(1) + round_of(2) + round_of(3))
    index = jsonl_cache.index_steps(path)
    records = jsonl_cache.read_records(path)
    if change == "resume-rewrite":
        runfolder.keep_steps_up_to(path, 1)  # a new file (another inode) in its place
        runfolder.append_jsonl(path, round_of(2, reward=0.9))
    elif change == "cut-shorter":
        os.truncate(path, path.stat().st_size // 2)
    else:  # same inode and length, other lines (another file where a deleted one was): the fingerprint tells
        with open(path, "r+b") as handle:
            handle.write(path.read_bytes().replace(b'"reward": 0.5', b'"reward": 0.9'))
    assert jsonl_cache.index_steps(path, index) == jsonl_cache.index_steps(path)
    assert jsonl_cache.read_records(path, records).records == runfolder.read_jsonl(path)


def test_stretches_run_across_chunks(tmp_path, monkeypatch):
    path = tmp_path / "c.jsonl"
    runfolder.append_jsonl(path, round_of(1, groups=5) + round_of(2, groups=5))
    whole = jsonl_cache.index_steps(path)
    monkeypatch.setattr(jsonl_cache, "CHUNK_BYTES", 50)  # shorter than one line
    assert (
        jsonl_cache.index_steps(path).stretches
        == whole.stretches
        == ((1, 0, whole.last[1][1]), (2, whole.last[1][1], whole.offset))
    )


def test_records_read_only_what_was_appended(tmp_path):
    path = tmp_path / "m.jsonl"
    runfolder.append_jsonl(path, [{"step": 1, "reward": 0.1}])
    first = jsonl_cache.read_records(path)
    size = path.stat().st_size
    runfolder.append_jsonl(path, [{"step": 2, "reward": 0.2}])
    again = jsonl_cache.read_records(path, first)
    assert again.records == [{"step": 1, "reward": 0.1}, {"step": 2, "reward": 0.2}]
    # the fingerprint: the bytes before the offset read up to, at most FINGERPRINT_BYTES
    assert again.bytes_read == path.stat().st_size - size + min(size, jsonl_cache.FINGERPRINT_BYTES)
    assert first.records == [{"step": 1, "reward": 0.1}], "an earlier result is never changed"


def test_missing_file_reads_as_empty(tmp_path):
    assert jsonl_cache.index_steps(tmp_path / "none.jsonl").steps == []
    assert jsonl_cache.read_records(tmp_path / "none.jsonl").records == []
    assert jsonl_cache.records_of_step(tmp_path / "none.jsonl", 1) == []


def test_the_process_keeps_each_file_s_result_and_extends_it(tmp_path):
    path = tmp_path / "c.jsonl"
    runfolder.append_jsonl(path, round_of(1))
    jsonl_cache.forget()
    assert jsonl_cache.step_index(path).bytes_read == path.stat().st_size
    assert jsonl_cache.step_index(path).bytes_read == jsonl_cache.FINGERPRINT_BYTES
    size = path.stat().st_size
    runfolder.append_jsonl(path, round_of(2))
    index = jsonl_cache.step_index(path)
    assert index.steps == [1, 2] and index.bytes_read == path.stat().st_size - size + jsonl_cache.FINGERPRINT_BYTES
    jsonl_cache.forget()
    assert jsonl_cache.step_index(path).bytes_read == path.stat().st_size


def test_what_json_writes_and_orjson_refuses_is_read_all_the_same(tmp_path):
    path = tmp_path / "m.jsonl"
    runfolder.append_jsonl(path, [{"step": 1, "loss": float("nan"), "big": 2**70}, {"step": 2, "loss": 0.5}])
    first, second = jsonl_cache.read_records(path).records
    assert first["loss"] != first["loss"] and first["big"] == 2**70 and second == {"step": 2, "loss": 0.5}
    assert jsonl_cache.index_steps(path).steps == [1, 2]
