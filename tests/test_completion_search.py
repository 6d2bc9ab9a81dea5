"""The completions explorer's engine and command: the where-filter, search, sort, paging, export and the cache.

Run folders are written by hand with the trainer's own writer (`runfolder.append_jsonl`) in the record shape of
`recorder.completion_records`; each filter's answer is checked against a plain Python filter over the same rows.
"""

from __future__ import annotations

import csv
import json
import os
import random
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from workbench.errors import WorkbenchError
from workbench.insight import completion_cache, completion_search
from workbench.insight.completion_search import (
    FIELDS,
    CompletionQuery,
    export_completions,
    parse_where,
    search_completions,
)
from workbench.runstore import runfolder
from workbench.spec.config import RunConfig

ROOT = Path(__file__).resolve().parent.parent
G = 4
WORDS = "alpha beta Gamma delta the answer is <answer>7</answer> Paris =SUM(A1) +1 -2 @me".split()


def step_records(rng: random.Random, step: int, groups: int = 2) -> list[dict]:
    records = []
    for i in range(groups * G):
        correct = rng.choice([0.0, 1.0, None])
        brevity = rng.choice([0.0, 0.25, 0.5, 1.0])
        record = {
            "step": step,
            "group": i // G,
            "prompt": f"Question {rng.randrange(5)}: what is {step}?",
            "completion": " ".join(rng.choice(WORDS) for _ in range(rng.randrange(1, 8))),
            "rewards": {"accuracy_reward": correct, "brevity": brevity},
            "reward": None if correct is None else correct + brevity,
            "advantage": rng.uniform(-2, 2),
            "length": rng.choice([None, *range(1, 60)]),
            "truncated": rng.choice([True, False, None]),
        }
        if correct is None:
            record["reward_errors"] = {"accuracy_reward": "ValueError: no answer"}
        records.append(record)
    return records


def write_run(run_dir: Path, steps: range, seed: int = 0) -> list[dict]:
    run_dir.mkdir(parents=True, exist_ok=True)
    RunConfig(reward_names=["accuracy_reward", "brevity"], correctness_reward="accuracy_reward").save(
        run_dir / runfolder.CONFIG_FILE
    )
    rng = random.Random(seed)
    records = [r for step in steps for r in step_records(rng, step)]
    runfolder.append_jsonl(run_dir / runfolder.COMPLETIONS_FILE, records)
    return records


def expected_rows(records: list[dict]) -> list[dict]:
    """The rows the engine should give, computed the plain way."""
    rows, places = [], {}
    for record in records:
        key = (record["step"], record["group"])
        places[key] = places.get(key, -1) + 1
        score = record["rewards"]["accuracy_reward"]
        rows.append(
            {
                **{name: record.get(name) for name in FIELDS},
                "index": places[key],
                "reward_error": bool(record.get("reward_errors")),
                "correct": None if score is None else score >= 1.0,
            }
        )
    return rows


@pytest.fixture
def run(tmp_path):
    records = write_run(tmp_path / "runs" / "r1", range(1, 13))
    return tmp_path / "runs" / "r1", expected_rows(records), tmp_path / "cache"


def everything(run_dir, cache, **query) -> list[dict]:
    page = search_completions(run_dir, CompletionQuery(limit=10_000, **query), cache_dir=cache)
    assert page.total == len(page.rows)
    return page.rows


# ---------------------------------------------------------------- the where-filter


@pytest.mark.parametrize(
    "text",
    [
        "",
        "reward<0.2",
        "reward<0.2 and length>40",
        "not (truncated==true or reward_error==true)",
        "rewards.brevity>=0.5 or advantage<=-1",
        "correct==false and step!=3",
        "prompt=='Question 1: what is 4?' or completion!='Paris'",
        "length>=10 and (rewards.accuracy_reward==1 or not group==0) and index<2",
        "rewards.missing>0 or step==1e0",
        "advantage>-.5 AND advantage<+0.5",
    ],
)
def test_each_filter_gives_what_a_plain_python_filter_gives(run, text):
    run_dir, rows, cache = run
    where = parse_where(text)
    got = everything(run_dir, cache, where=text)
    assert got == [row for row in rows if where.matches(row)]
    assert got == [row for row in rows if plain_filter(text)(row)]


def plain_filter(text: str):
    """The same filters written by hand (None never matches, and stays unknown through not/and/or)."""

    def known(value, test):
        return None if value is None else test(value)

    def both(a, b):
        return False if False in (a, b) else None if None in (a, b) else True

    def either(a, b):
        return True if True in (a, b) else None if None in (a, b) else False

    def negate(a):
        return None if a is None else not a

    filters = {
        "": lambda r: True,
        "reward<0.2": lambda r: known(r["reward"], lambda v: v < 0.2),
        "reward<0.2 and length>40": lambda r: both(
            known(r["reward"], lambda v: v < 0.2), known(r["length"], lambda v: v > 40)
        ),
        "not (truncated==true or reward_error==true)": lambda r: negate(
            either(known(r["truncated"], lambda v: v is True), known(r["reward_error"], lambda v: v is True))
        ),
        "rewards.brevity>=0.5 or advantage<=-1": lambda r: either(
            known(r["rewards"]["brevity"], lambda v: v >= 0.5), known(r["advantage"], lambda v: v <= -1)
        ),
        "correct==false and step!=3": lambda r: both(
            known(r["correct"], lambda v: v is False), known(r["step"], lambda v: v != 3)
        ),
        "prompt=='Question 1: what is 4?' or completion!='Paris'": lambda r: either(
            r["prompt"] == "Question 1: what is 4?", r["completion"] != "Paris"
        ),
        "length>=10 and (rewards.accuracy_reward==1 or not group==0) and index<2": lambda r: both(
            both(
                known(r["length"], lambda v: v >= 10),
                either(known(r["rewards"]["accuracy_reward"], lambda v: v == 1), negate(r["group"] == 0)),
            ),
            r["index"] < 2,
        ),
        "rewards.missing>0 or step==1e0": lambda r: either(None, r["step"] == 1),
        "advantage>-.5 AND advantage<+0.5": lambda r: -0.5 < r["advantage"] < 0.5,
    }
    return lambda row: filters[text](row) is True


@pytest.mark.parametrize(
    "text, named",
    [
        ("__import__('os').system('id')", "__import__"),
        ("reward<0.2; drop table x", "; drop"),
        ("reward<0.2 or 1=1", "1"),
        ("length>'40'", "length"),
        ("truncated>true", "truncated"),
        ("prompt<'a'", "prompt"),
        ("(reward<1", "end"),
        ("reward<", "ends"),
        ("reward<0.2 length>4", "length"),
        ("rewards.x>1 and", "ends"),
        ("reward<0.2 && length>4", "&"),
        ("lambda: 1", "lambda"),
        ("not " * 60 + "reward<1", "nested"),
    ],
)
def test_anything_else_is_refused_naming_what_was_not_understood(text, named):
    with pytest.raises(WorkbenchError) as caught:
        parse_where(text)
    assert caught.value.field == "where"
    assert named in str(caught.value) and caught.value.fix


def test_a_missing_value_never_matches(tmp_path):
    run_dir = tmp_path / "r"
    run_dir.mkdir()
    runfolder.append_jsonl(
        run_dir / runfolder.COMPLETIONS_FILE,
        [{"step": 1, "group": 0, "prompt": "p", "completion": "c", "rewards": {}, "reward": None, "advantage": 0.0}],
    )
    for text in ("reward<1", "reward>=1", "reward!=5", "not reward<1", "length==0", "rewards.a!=1", "truncated!=true"):
        assert everything(run_dir, tmp_path / "c", where=text) == [], text
    assert len(everything(run_dir, tmp_path / "c", where="reward<1 or step==1")) == 1


# ---------------------------------------------------------------- steps, search, sort, paging


def test_steps_search_sort_and_pages(run):
    run_dir, rows, cache = run
    assert everything(run_dir, cache, steps=(3, 5)) == [r for r in rows if 3 <= r["step"] <= 5]
    assert everything(run_dir, cache, steps=(None, 2)) == [r for r in rows if r["step"] <= 2]
    assert everything(run_dir, cache, search="pARis") == [r for r in rows if "paris" in r["completion"].lower()]
    assert everything(run_dir, cache, search="WHAT IS 7") == [r for r in rows if "what is 7" in r["prompt"].lower()]
    by_reward = everything(run_dir, cache, sort="reward", desc=True)
    scored = sorted((r for r in rows if r["reward"] is not None), key=lambda r: -r["reward"])
    assert [r["reward"] for r in by_reward] == [r["reward"] for r in scored] + [None] * (len(rows) - len(scored))
    by_score = everything(run_dir, cache, sort="rewards.brevity")
    assert [r["rewards"]["brevity"] for r in by_score] == sorted(r["rewards"]["brevity"] for r in rows)
    query = CompletionQuery(sort="advantage", offset=10, limit=7)
    page = search_completions(run_dir, query, cache_dir=cache)
    assert page.total == len(rows) and page.fields == FIELDS
    assert page.rows == sorted(rows, key=lambda r: r["advantage"])[10:17]
    assert search_completions(run_dir, CompletionQuery(offset=10_000), cache_dir=cache).rows == []


@pytest.mark.parametrize(
    "query, field",
    [
        (CompletionQuery(sort="prompt; drop"), "sort"),
        (CompletionQuery(sort="rewards."), "sort"),
        (CompletionQuery(steps=(5, 2)), "steps"),
        (CompletionQuery(limit=-1), "limit"),
        (CompletionQuery(where="reward<<1"), "where"),
    ],
)
def test_a_bad_query_names_its_field(run, query, field):
    run_dir, _, cache = run
    with pytest.raises(WorkbenchError) as caught:
        search_completions(run_dir, query, cache_dir=cache)
    assert caught.value.field == field
    if field == "sort":
        assert "rewards.brevity" in str(caught.value) and "advantage" in str(caught.value)


def test_a_step_written_twice_shows_its_last_round_only(tmp_path):
    run_dir = tmp_path / "r"
    first = write_run(run_dir, range(1, 4), seed=1)
    again = [r for r in step_records(random.Random(2), 3)]  # step 3 again after a crash, not cut back
    runfolder.append_jsonl(run_dir / runfolder.COMPLETIONS_FILE, again)
    got = everything(run_dir, tmp_path / "c")
    assert got == expected_rows([r for r in first if r["step"] < 3]) + expected_rows(again)


def test_an_empty_or_missing_file_has_no_rows(tmp_path):
    (tmp_path / "r").mkdir()
    assert search_completions(tmp_path / "r", CompletionQuery(), cache_dir=tmp_path / "c").total == 0
    os.symlink("/etc/passwd", tmp_path / "r" / runfolder.COMPLETIONS_FILE)  # a link is never followed
    assert search_completions(tmp_path / "r", CompletionQuery(), cache_dir=tmp_path / "c").total == 0


# ---------------------------------------------------------------- export


def test_export_writes_every_matching_row_and_escapes_formulas(run, tmp_path):
    run_dir, rows, cache = run
    query = CompletionQuery(where="step<=6", limit=3)
    wanted = [r for r in rows if r["step"] <= 6]
    count = export_completions(run_dir, query, tmp_path / "out.csv", "csv", cache_dir=cache)
    assert count == len(wanted)
    with open(tmp_path / "out.csv", newline="", encoding="utf-8") as handle:
        read = list(csv.DictReader(handle))
    assert [r["completion"] for r in read] == [
        "'" + r["completion"] if r["completion"][0] in "=+-@" else r["completion"] for r in wanted
    ]
    assert any(r["completion"].startswith("'=SUM") for r in read)
    assert all(not cell.startswith(("=", "+", "@")) for r in read for cell in r.values())
    assert [float(r["advantage"]) for r in read] == pytest.approx([r["advantage"] for r in wanted])
    count = export_completions(run_dir, query, tmp_path / "out.parquet", "parquet", cache_dir=cache)
    table = pq.read_table(tmp_path / "out.parquet").to_pylist()
    assert count == len(table) == len(wanted)
    assert [{**r, "rewards": json.loads(r["rewards"])} for r in table] == wanted
    with pytest.raises(WorkbenchError, match="csv or parquet"):
        export_completions(run_dir, query, tmp_path / "out.x", "xlsx", cache_dir=cache)


# ---------------------------------------------------------------- the cache


def test_the_cache_is_reused_when_appended_and_rebuilt_when_cut_back(tmp_path, monkeypatch):
    run_dir, cache = tmp_path / "r", tmp_path / "cache"
    records = write_run(run_dir, range(1, 4))
    path = run_dir / runfolder.COMPLETIONS_FILE
    monkeypatch.setattr(completion_cache, "SMALL_PART_BYTES", 0)  # every append its own part
    assert everything(run_dir, cache) == expected_rows(records)
    _, before = completion_cache.update(path, cache)
    more = [r for step in (4, 5) for r in step_records(random.Random(3), step)]
    runfolder.append_jsonl(path, more)
    assert everything(run_dir, cache) == expected_rows(records + more)
    _, after = completion_cache.update(path, cache)
    assert after.parts[: len(before.parts)] == before.parts and len(after.parts) == len(before.parts) + 1
    assert not (run_dir / "manifest.json").exists() and sorted(os.listdir(run_dir)) == [
        "completions.jsonl",
        "config.json",
    ]

    # a resume from checkpoint-2 cuts the file back (a new file) and writes step 3 again
    assert runfolder.keep_steps_up_to(path, 2) > 0
    redo = step_records(random.Random(4), 3)
    runfolder.append_jsonl(path, redo)
    kept = [r for r in records if r["step"] <= 2]
    assert everything(run_dir, cache) == expected_rows(kept + redo)
    # cut back in place (the same inode), then written past where the cache had read
    inode = path.stat().st_ino
    with open(path, "r+b") as handle:
        handle.truncate(len(b"".join(line for line in path.read_bytes().splitlines(True) if b'"step": 1,' in line)))
    redo = [r for step in (2, 3, 4, 5, 6) for r in step_records(random.Random(5), step)]
    runfolder.append_jsonl(path, redo)
    assert path.stat().st_ino == inode
    assert everything(run_dir, cache) == expected_rows([r for r in records if r["step"] == 1] + redo)
    folder, manifest = completion_cache.update(path, cache)
    assert sorted(p.name for p in folder.glob("part-*")) == sorted(p.file for p in manifest.parts)
    assert oct(folder.stat().st_mode & 0o777) == "0o700"


def test_a_run_cannot_reach_another_runs_cache_and_a_lost_part_is_read_again(tmp_path):
    cache = tmp_path / "cache"
    records = write_run(tmp_path / "a", range(1, 4))
    assert len(everything(tmp_path / "a", cache)) == len(records)
    folder, manifest = completion_cache.update(tmp_path / "a" / runfolder.COMPLETIONS_FILE, cache)
    # run b's file is a link to run a's: read as missing, and run a's cache is left as it was
    (tmp_path / "b").mkdir()
    os.symlink(tmp_path / "a" / runfolder.COMPLETIONS_FILE, tmp_path / "b" / runfolder.COMPLETIONS_FILE)
    assert everything(tmp_path / "b", cache) == []
    assert completion_cache.update(tmp_path / "a" / runfolder.COMPLETIONS_FILE, cache) == (folder, manifest)
    (folder / manifest.parts[0].file).unlink()  # a part removed by hand (or by another process)
    completion_search._KEPT.clear()
    assert everything(tmp_path / "a", cache) == expected_rows(records)


def test_the_cache_lies_beside_the_workbench_cache_where_no_sandbox_sees_it(tmp_path, monkeypatch):
    from workbench.jobs import sandbox

    monkeypatch.setenv("WORKBENCH_CACHE", str(tmp_path / "wb-cache"))
    (tmp_path / "wb-cache").mkdir()
    runs = tmp_path / "runs"
    write_run(runs / "r", range(1, 3))
    assert search_completions(runs / "r", CompletionQuery()).total == 16
    root = tmp_path / "wb-cache-completions"
    assert [p.name for p in root.iterdir()] and oct(root.stat().st_mode & 0o777) == "0o700"
    env = {**os.environ, "HOME": str(tmp_path)}
    exposed = sandbox.exposure(runs / "r", runs, {}, None, env)
    shown = [path for kind, path in exposed.mounts if kind in ("read-only", "read-write")] + list(exposed.shared)
    assert str(tmp_path / "wb-cache") in exposed.paths("read-only")  # the models' cache is shown ...
    assert not [path for path in shown if root.is_relative_to(path)]  # ... the completions' is not
    assert any(root.is_relative_to(path) for path in exposed.paths("empty"))  # under the hidden home


# ---------------------------------------------------------------- the command


def cli(*args, cache: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "WORKBENCH_CACHE": str(cache), "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, "-m", "workbench", "completions", *args], capture_output=True, text=True, env=env, timeout=120
    )


def test_the_command_prints_json_a_table_and_exports(run, tmp_path):
    run_dir, rows, _ = run
    cache = tmp_path / "cli-cache"
    result = cli(
        "r1",
        "--runs-dir",
        str(run_dir.parent),
        "--steps",
        "2:4",
        "--where",
        "reward<1.2 and length>5",
        "--sort",
        "advantage",
        "--desc",
        "--limit",
        "5",
        "--json",
        cache=cache,
    )
    assert result.returncode == 0, result.stderr
    printed = json.loads(result.stdout)
    wanted = sorted((r for r in rows if 2 <= r["step"] <= 4 and plain(r)), key=lambda r: -r["advantage"])[:5]
    assert printed == [
        {
            k: r[k]
            for k in ("step", "group", "prompt", "completion", "rewards", "reward", "advantage", "length", "truncated")
        }
        for r in wanted
    ]


def test_the_command_prints_a_table_and_exports(run, tmp_path):
    run_dir, rows, _ = run
    cache = tmp_path / "cli-cache"
    table = cli(str(run_dir), "--limit", "3", cache=cache)
    assert table.returncode == 0 and f"{len(rows)} completions match" in table.stdout


def test_the_command_exports_every_matching_row(run, tmp_path):
    run_dir, rows, _ = run
    cache = tmp_path / "cli-cache"
    exported = cli(str(run_dir), "--csv", str(tmp_path / "all.csv"), cache=cache)
    assert exported.returncode == 0 and f"wrote {len(rows)}" in exported.stderr


def plain(row: dict) -> bool:
    return row["reward"] is not None and row["reward"] < 1.2 and row["length"] is not None and row["length"] > 5


@pytest.mark.parametrize(
    "args, named",
    [
        (["--where", "__import__('os')"], "--where"),
        (["--where", "reward<0.2; drop"], "--where"),
        (["--steps", "a:b"], "--steps"),
        (["--steps", "9:2"], "--steps"),
        (["--sort", "nope"], "--sort"),
    ],
)
def test_the_command_refuses_bad_input_with_exit_2(run, tmp_path, args, named):
    run_dir, _, _ = run
    result = cli(str(run_dir), *args, cache=tmp_path / "c")
    assert result.returncode == 2
    assert result.stderr.startswith(f"error: {named}") and "Traceback" not in result.stderr


@pytest.mark.slow
def test_a_trained_run_reads_as_its_records_say(tiny_trained_run, tmp_path):
    records, _ = runfolder.read_jsonl_from(tiny_trained_run / runfolder.COMPLETIONS_FILE)
    rows = everything(tiny_trained_run, tmp_path / "c")
    assert len(rows) == len(records) > 0
    assert [(r["step"], r["group"], r["completion"], r["advantage"]) for r in rows] == [
        (r["step"], r["group"], r["completion"], r["advantage"]) for r in records
    ]
    assert all(r["index"] is not None for r in rows)
