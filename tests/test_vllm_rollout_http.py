"""The vLLM rollout inside a real GRPOTrainer, against a stand-in server speaking vLLM's HTTP API.

The stand-in answers /health, /v1/load_lora_adapter, /v1/unload_lora_adapter
and /v1/completions as vLLM does (token ids, sampled-token logprobs), so these
tests prove the coupling to TRL (rollout_func, the per-step sync, the
importance-sampling correction, the metrics) on the tiny model in seconds, and
each failure path. tests/test_vllm_rollout.py does the same with the real vLLM.
"""

from __future__ import annotations

import json
import math
import random
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from workbench.runstore import runfolder
from workbench.spec.config import RunConfig
from workbench.spec.engine_records import importance_weight
from workbench.spec.token_records import token_problem
from workbench.trainer.training import run_training

pytestmark = pytest.mark.slow


class StandIn:
    """What the stand-in server saw, and how it should misbehave."""

    def __init__(self):
        self.requests: list[tuple[str, dict]] = []
        self.refuse_adapters = False
        self.eos = 2

    def handle(self, path: str, body: dict) -> tuple[int, dict | str]:
        self.requests.append((path, body))
        if path == "/v1/load_lora_adapter":
            if self.refuse_adapters:
                return 400, "The lora rank 16 is greater than max_lora_rank 8."
            assert Path(body["lora_path"], "adapter_model.safetensors").is_file()
            return 200, "Success: LoRA adapter loaded"
        if path == "/v1/unload_lora_adapter":
            return 200, "Success"
        if path == "/v1/completions":
            rng = random.Random(0)
            choices = []
            for prompt in body["prompt"]:
                for _ in range(body["n"]):
                    ids = [rng.randrange(3, 200) for _ in range(rng.randrange(1, body["max_tokens"]))] + [self.eos]
                    choices.append(
                        {
                            "prompt_token_ids": prompt,
                            "token_ids": ids,
                            "logprobs": {
                                "tokens": [f"token_id:{i}" for i in ids],
                                "token_logprobs": [-1.0] * len(ids),
                                "top_logprobs": [None] * len(ids),
                            },
                        }
                    )
            return 200, {"choices": choices}
        return 404, "not found"


@pytest.fixture
def stand_in():
    state = StandIn()

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args):  # quiet
            pass

        def do_GET(self):
            self._answer(200 if self.path == "/health" else 404, "")

        def do_POST(self):
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            self._answer(*state.handle(self.path, body))

        def _answer(self, code, payload):
            data = (json.dumps(payload) if isinstance(payload, dict) else payload).encode()
            self.send_response(code)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    state.url = f"http://127.0.0.1:{server.server_address[1]}"
    state.server = server
    yield state
    server.shutdown()


def config(url: str, **changes) -> RunConfig:
    settings = dict(
        model="tiny",
        generation="vllm-server",
        vllm_server_base_url=url,
        max_steps=2,
        per_device_train_batch_size=4,
        num_generations=4,
        max_completion_length=8,
        save_steps=1,
        vllm_server_timeout=20,
    )
    return RunConfig.for_task("demo", **{**settings, **changes})


def test_each_step_hot_loads_the_adapter_then_generates_its_groups(stand_in, tmp_path):
    code = run_training(config(stand_in.url, temperature=0.7, top_k=5, repetition_penalty=1.1), tmp_path)
    status = runfolder.read_status(tmp_path)
    assert code == 0, status.get("error")
    paths = [path for path, _ in stand_in.requests]
    # step 0's adapter, then step 1's replacing it: load, generate, load, unload the old one, generate
    assert paths == [
        "/v1/load_lora_adapter",
        "/v1/completions",
        "/v1/load_lora_adapter",
        "/v1/unload_lora_adapter",
        "/v1/completions",
    ]
    load, generate = stand_in.requests[0][1], stand_in.requests[1][1]
    assert load["lora_name"] == f"{tmp_path.name}-step0"
    assert generate["model"] == load["lora_name"] and generate["n"] == 4 and len(generate["prompt"]) == 1
    assert (generate["temperature"], generate["top_k"], generate["repetition_penalty"]) == (0.7, 5, 1.1)
    assert generate["max_tokens"] == 8 and generate["logprobs"] == 0 and generate["return_token_ids"] is True
    assert stand_in.requests[3][1]["lora_name"] == f"{tmp_path.name}-step0"
    assert status["vllm"]["state"] == "ready" and status["vllm"]["external"] is True
    steps = [m for m in runfolder.read_jsonl(tmp_path / runfolder.METRICS_FILE) if "loss" in m]
    assert len(steps) == 2
    for m in steps:
        assert m["vllm/completions_per_second"] > 0 and "vllm/adapter_sync_seconds" in m
        assert "sampling/sampling_logp_difference/mean" in m  # TRL's importance-sampling correction ran
    assert len(runfolder.read_jsonl(tmp_path / runfolder.COMPLETIONS_FILE)) == 8
    assert not (tmp_path / ".vllm_adapters").exists()
    # the token records carry the server's logprobs (all -1 here), the trainer's minus them, and TRL's weight
    records = runfolder.read_jsonl(tmp_path / runfolder.TOKENS_FILE)
    assert len(records) == 8 and all(token_problem(r) is None for r in records)
    for r in records:
        assert set(r["engine_logprob"]) == {-1.0} and r["is_mode"] == "sequence_mask"
        # the trainer's side is TRL's old log-probability: the loss's own over its ratio to it
        old = [lp - math.log(ratio) for lp, ratio in zip(r["logprob"], r["ratio"])]
        assert r["engine_diff"] == pytest.approx([o + 1.0 for o in old], abs=2e-3)  # values rounded to 5 digits
        assert r["is_weight"] == pytest.approx(importance_weight(r["engine_diff"], r["masked"]), rel=2e-3)
    for m in steps:
        assert m["engine/logprob_mismatch_mean"] == pytest.approx(m["sampling/sampling_logp_difference/mean"], rel=1e-3)
        assert m["engine/is_weight_mean"] == pytest.approx(m["sampling/importance_sampling_ratio/mean"], rel=2e-3)


def test_an_adapter_the_server_refuses_fails_the_run_with_its_reason(stand_in, tmp_path):
    stand_in.refuse_adapters = True
    assert run_training(config(stand_in.url), tmp_path) == 1
    status = runfolder.read_status(tmp_path)
    assert status["state"] == "failed" and status["vllm"]["state"] == "failed"
    assert "answered 400" in status["error"]["message"] and "max_lora_rank 8" in status["error"]["message"]
    assert "--max-lora-rank" in status["error"]["hint"]


def test_a_server_that_never_answers_fails_after_the_timeout(tmp_path):
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    assert run_training(config(f"http://127.0.0.1:{port}", vllm_server_timeout=2), tmp_path) == 1
    status = runfolder.read_status(tmp_path)
    assert "not ready after 2 s" in status["error"]["message"] and "vllm_server_timeout" in status["error"]["hint"]


def test_a_prompt_longer_than_the_server_takes_is_refused_with_the_length_to_set(stand_in, tmp_path):
    assert run_training(config(stand_in.url, vllm_max_model_len=12), tmp_path) == 1
    status = runfolder.read_status(tmp_path)
    assert "longer than the server's vllm_max_model_len 12" in status["error"]["message"]
    assert "Raise vllm_max_model_len to at least" in status["error"]["hint"]
