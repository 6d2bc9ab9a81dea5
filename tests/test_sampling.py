"""Probe sampling: prompt checks, chat templates, and the real `python -m workbench sample` on the tiny model."""

import json
import subprocess
import time
from pathlib import Path

import pytest

from workbench import cli
from workbench.modeltools import sampling
from workbench.modeltools.sampling import SamplingError
from workbench.runstore.runfolder import read_jsonl

REPO = Path(__file__).resolve().parents[1]
PROMPTS = ["What is the capital of France?", [{"role": "user", "content": "Say hi."}]]
# The tiny model's weights are random: greedy decoding repeats one token, so the
# tests sample (temperature 1, seeded) to get varied, non-empty text.
FAST = {"max_new_tokens": 6, "temperature": 1.0}


@pytest.mark.parametrize(
    "prompts,pattern",
    [
        ([], "non-empty list"),
        ("just text", "non-empty list"),
        (["ok", ""], "item 1"),
        ([{"role": "user"}], "item 0"),
        ([["not", "messages"]], "item 0"),
        ([3], "item 0"),
    ],
    ids=["empty", "string", "blank_item", "message_without_content", "list_of_text", "number"],
)
def test_bad_prompts_are_refused(prompts, pattern):
    with pytest.raises(SamplingError, match=pattern):
        sampling.check_prompts(prompts)


def test_prompts_file_accepts_a_list_or_an_object(tmp_path):
    path = tmp_path / "p.json"
    path.write_text(json.dumps({"prompts": PROMPTS}))
    assert sampling.read_prompts_file(path) == PROMPTS


@pytest.mark.parametrize(
    "content,pattern",
    [(None, r"no file at"), ("[1, ", r"not valid JSON"), ('{"questions": []}', r"non-empty list")],
    ids=["missing", "bad_json", "wrong_shape"],
)
def test_bad_prompts_file_names_the_file(tmp_path, content, pattern):
    path = tmp_path / "p.json"
    if content is not None:
        path.write_text(content)
    with pytest.raises(SamplingError, match=pattern) as info:
        sampling.read_prompts_file(path)
    assert str(path) in str(info.value)


@pytest.mark.parametrize(
    "settings,pattern",
    [({"max_new_tokens": 0}, "max_new_tokens"), ({"temperature": -1.0}, "temperature")],
    ids=["tokens", "temperature"],
)
def test_bad_generation_settings_are_refused(settings, pattern):
    with pytest.raises(SamplingError, match=pattern):
        sampling.check_generation_settings(**{"max_new_tokens": 8, "temperature": 0.0, **settings})


def test_folder_without_adapter_is_refused(tmp_path):
    with pytest.raises(SamplingError, match=r"no adapter_config\.json"):
        sampling.start_sampling("tiny", ["hi"], tmp_path / "out.jsonl", adapter_dir=tmp_path)


def test_text_prompts_go_through_the_chat_template(tiny_model):
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tiny_model)
    as_text = sampling.format_prompt(tokenizer, "Say hi.")
    assert as_text == sampling.format_prompt(tokenizer, [{"role": "user", "content": "Say hi."}])
    assert "Say hi." in as_text and as_text.rstrip().endswith("assistant")


@pytest.mark.slow
def test_adapter_changes_the_answers(tiny_model, tiny_adapter):
    base = sampling.sample_answers(tiny_model, PROMPTS, **FAST)
    again = sampling.sample_answers(tiny_model, PROMPTS, **FAST)
    tuned = sampling.sample_answers(tiny_model, PROMPTS, adapter_dir=tiny_adapter, **FAST)
    assert [a["index"] for a in base] == [0, 1] and [a["prompt"] for a in base] == PROMPTS
    assert all(a["answer"] for a in base) and all(a["seconds"] > 0 for a in base)
    assert [a["answer"] for a in base] == [a["answer"] for a in again], "seeded sampling must repeat"
    assert [a["answer"] for a in tuned] != [a["answer"] for a in base]


@pytest.mark.slow
def test_cli_writes_header_answers_and_done(tmp_path, tiny_adapter):
    prompts_file = tmp_path / "probes.json"
    prompts_file.write_text(json.dumps(PROMPTS))
    out = tmp_path / "answers.jsonl"
    command = sampling.sample_command("tiny", prompts_file, out, tiny_adapter, max_new_tokens=6, temperature=1.0)
    result = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    records = read_jsonl(out)
    assert records[0] == {"total": 2, "model": "tiny", "adapter": str(tiny_adapter)}
    assert [r["index"] for r in records[1:-1]] == [0, 1] and all(r["answer"] for r in records[1:-1])
    assert records[-1] == {"done": True}


def test_cli_bad_model_is_reported_in_the_answers_file(tmp_path, capsys):
    prompts_file = tmp_path / "probes.json"
    prompts_file.write_text(json.dumps(["hi"]))
    out = tmp_path / "answers.jsonl"
    code = cli.main(
        ["sample", "--model", str(tmp_path / "no-model"), "--prompts-file", str(prompts_file), "--out", str(out)]
    )
    assert code == 2
    assert "does not exist" in capsys.readouterr().err
    final = read_jsonl(out)[-1]
    assert final["done"] is True and "does not exist" in final["error"]


def test_cli_bad_prompts_file_is_an_argument_error(tmp_path, capsys):
    code = cli.main(
        ["sample", "--model", "tiny", "--prompts-file", str(tmp_path / "nope.json"), "--out", str(tmp_path / "a.jsonl")]
    )
    assert code == 2 and "--prompts-file: no file at" in capsys.readouterr().err


def wait_for(predicate, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.2)
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")


@pytest.mark.slow
def test_background_job_reports_progress_until_done(tmp_path):
    out = tmp_path / "answers.jsonl"
    process = sampling.start_sampling("tiny", PROMPTS, out, max_new_tokens=6, temperature=1.0)
    try:
        progress = wait_for(lambda: (p := sampling.read_sampling(out, process))["done"] and p, 300, "the job to end")
        process.wait(timeout=60)  # the final line is written just before the process exits
    finally:
        sampling.cancel_sampling(process)
    assert progress["error"] is None, progress["error"]
    assert progress["total"] == 2 and [a["index"] for a in progress["answers"]] == [0, 1]
    assert process.returncode == 0


@pytest.mark.slow
def test_background_job_can_be_cancelled(tmp_path):
    out = tmp_path / "answers.jsonl"
    # many long answers: the job would run for minutes unless cancelled
    process = sampling.start_sampling("tiny", ["Tell me a story."] * 200, out, max_new_tokens=200, temperature=1.0)
    try:
        wait_for(lambda: sampling.read_sampling(out, process)["answers"], 300, "a first answer")
    finally:
        started = time.monotonic()
        sampling.cancel_sampling(process, timeout=5)
    assert process.poll() is not None and time.monotonic() - started < 11
    progress = sampling.read_sampling(out, process)
    assert progress["done"] and "exit code" in progress["error"] and len(progress["answers"]) < 200
