"""Generation through a vLLM server that hot-loads the LoRA adapter after every optimizer step.

`generation = "vllm-server"`: instead of TRL's own vLLM sync (merge the
adapter, broadcast every weight over NCCL - CUDA only, the whole model each
step), only the adapter moves: the main process saves it (a few MB) and the
server loads it under a new name (`POST /v1/load_lora_adapter`), then the
previous one is unloaded. Generation asks `/v1/completions` with that name,
the prompts as token ids rendered by the trainer's own chat template (so the
ids the server sees are exactly those the trainer scores), `n` = the group
size and the run's sampling settings - the request TRL's VLLMClient sends.

Every tie to TRL 1.16's internals is in this module, its private ones reached through the registry of
workbench/library_compat.py (TRL is pinned; tests cover it):
- GRPOTrainer's `rollout_func(prompts, trainer)` (experimental in TRL) is `VLLMRollout`;
- `trainer.use_vllm = True` after construction (no vLLM import in the trainer)
  so that TRL calls `trainer.vllm_generation.sync_weights()` whenever the step
  changed - `AdapterSync` here - and applies its importance-sampling
  correction with the logprobs the server returned;
- TRL's prompt tokenizing (`library_compat.prompt_ids`) renders prompts exactly as TRL's own generation would;
- TRL's step of the last weight sync is reset (`library_compat.sync_weights_next_round`) and the timings go into
  TRL's metric lists (`library_compat.step_metrics`).

With several training processes, each passes its slice of prompts; the main
process gathers them, syncs the adapter, generates for all, and hands each
process its slice back (as TRL's server mode does). Only the main process
talks to the server.

Every failure (server not ready in time, server gone, adapter refused, a
request timing out, a prompt too long for the server) raises
`VLLMGenerationError` with a plain `hint` and the tail of the server's log;
the run ends `failed` and everything written before stays.
"""

from __future__ import annotations

import shutil
import time
from pathlib import Path

import requests

from workbench import library_compat
from workbench.runstore import runfolder
from workbench.spec.config import RunConfig
from workbench.spec.run_status import RunStatus

ADAPTERS_DIR = ".vllm_adapters"  # in the run folder: the adapter each sync loads, the previous one deleted
LOG_TAIL_BYTES = 3000
POLL_SECONDS = 1.0
GUARD_NOTICE_SECONDS = 5.0  # the guard polls once a second, then logs the server's exit code and ends


class VLLMGenerationError(RuntimeError):
    """Generation through the vLLM server failed; `hint` says what to do, the message ends with the server log."""

    def __init__(self, message: str, hint: str, log_tail: str = ""):
        super().__init__(message + (f"\n--- end of the vLLM server log ---\n{log_tail}" if log_tail else ""))
        self.hint = hint

    def __reduce__(self):  # crosses processes whole (broadcast to every training process)
        return VLLMGenerationError, (str(self), self.hint)


class ServerLink:
    """The run's link to its vLLM server: address, liveness, log, and JSON requests that fail plainly."""

    def __init__(self, url: str, run_dir: Path, timeout: float, guard_pid: int | None = None):
        self.url = url.rstrip("/")
        self.run_dir = run_dir
        self.timeout = timeout
        self.guard_pid = guard_pid  # None for a server the user runs
        self.session = requests.Session()

    def log_tail(self) -> str:
        if self.guard_pid is None:
            return ""
        return runfolder.read_log_tail(self.run_dir, LOG_TAIL_BYTES, name=runfolder.VLLM_LOG_FILE)

    def server_alive(self) -> bool:
        if self.guard_pid is None:
            return True  # not ours to watch; a request to it tells
        import psutil

        try:
            return psutil.Process(self.guard_pid).status() != psutil.STATUS_ZOMBIE
        except psutil.NoSuchProcess:
            return False

    def _ended(self, seconds: float) -> bool:
        """Whether the server is gone, given its guard `seconds` to notice and write why into the log."""
        deadline = time.monotonic() + seconds
        while self.server_alive() and time.monotonic() < deadline:
            time.sleep(0.2)
        return not self.server_alive() or not self.healthy()

    def fail(self, message: str, hint: str) -> VLLMGenerationError:
        return VLLMGenerationError(message, hint, self.log_tail())

    def healthy(self) -> bool:
        try:
            return self.session.get(f"{self.url}/health", timeout=5).status_code == 200
        except requests.RequestException:
            return False

    def wait_until_ready(self) -> float:
        """Seconds until GET /health answered; VLLMGenerationError when the server died or the timeout passed."""
        started = time.monotonic()
        while not self.healthy():
            if not self.server_alive():
                raise self.fail(
                    f"the vLLM server at {self.url} exited before it was ready",
                    "Read the end of its log below (vllm_server.log in the run folder): a model vLLM "
                    "cannot serve, too little memory for its KV cache, or a broken vLLM install "
                    "(run `make vllm` again).",
                )
            if time.monotonic() - started > self.timeout:
                raise self.fail(
                    f"the vLLM server at {self.url} was not ready after {self.timeout:.0f} s",
                    "Raise vllm_server_timeout (a busy CPU loads the model slowly), or check that "
                    "the address is right and the server is running.",
                )
            time.sleep(POLL_SECONDS)
        return time.monotonic() - started

    def post(self, path: str, payload: dict, what: str) -> dict | str:
        """POST JSON; the parsed answer (or text), or VLLMGenerationError saying what failed and why."""
        try:
            response = self.session.post(f"{self.url}{path}", json=payload, timeout=self.timeout)
        except requests.Timeout:
            raise self.fail(
                f"{what}: no answer from the vLLM server within {self.timeout:.0f} s",
                "Raise vllm_server_timeout, or generate less per step (num_generations, "
                "max_completion_length); on CPU vLLM generates slowly.",
            ) from None
        except requests.ConnectionError:
            gone = self._ended(GUARD_NOTICE_SECONDS)
            raise self.fail(
                f"{what}: the vLLM server at {self.url} " + ("is gone" if gone else "refused the connection"),
                "The vLLM server stopped during the run (killed, or out of memory: see its log "
                "below). Resume the run: it starts a new server and continues from the last "
                "checkpoint.",
            ) from None
        if response.status_code != 200:
            raise self.fail(
                f"{what}: the vLLM server answered {response.status_code}: {response.text[:800]}",
                "The server refused the request; its reason is above. For an adapter: the server "
                "needs --enable-lora, a --max-lora-rank of at least lora_r, and "
                "VLLM_ALLOW_RUNTIME_LORA_UPDATING=True.",
            )
        try:
            return response.json()
        except ValueError:
            return response.text


class AdapterSync:
    """What TRL calls as `trainer.vllm_generation.sync_weights()`: save the adapter, hot-load it, drop the old one."""

    def __init__(self, trainer, link: ServerLink | None, run_dir: Path):
        self.trainer = trainer
        self.link = link  # None on every process but the main one
        self.folder = run_dir / ADAPTERS_DIR
        self.run_id = run_dir.name
        self.loaded: tuple[str, Path] | None = None

    @property
    def adapter_name(self) -> str | None:
        return self.loaded[0] if self.loaded else None

    def sync_weights(self) -> None:
        if self.link is None:
            return
        started = time.monotonic()
        step = self.trainer.state.global_step
        name = f"{self.run_id}-step{step}"
        path = self.folder / f"step-{step}"
        shutil.rmtree(path, ignore_errors=True)
        model = self.trainer.accelerator.unwrap_model(self.trainer.model)
        model.save_pretrained(str(path))
        self.link.post(
            "/v1/load_lora_adapter", {"lora_name": name, "lora_path": str(path)}, f"loading the adapter of step {step}"
        )
        previous, self.loaded = self.loaded, (name, path)
        if previous is not None:
            self.link.post(
                "/v1/unload_lora_adapter", {"lora_name": previous[0]}, f"unloading the adapter {previous[0]}"
            )
            shutil.rmtree(previous[1], ignore_errors=True)
        library_compat.step_metrics(self.trainer, "train")["vllm/adapter_sync_seconds"].append(
            time.monotonic() - started
        )


def _completions_request(trainer, model: str, prompt_ids: list[list[int]], n: int) -> dict:
    """The body TRL's VLLMClient.generate sends: token-id prompts, n per prompt, the trainer's sampling settings."""
    return {
        "model": model,
        "prompt": prompt_ids,
        "n": n,
        "temperature": trainer.temperature,
        "top_p": trainer.top_p,
        "top_k": trainer.top_k,
        "min_p": 0.0 if trainer.min_p is None else trainer.min_p,
        "repetition_penalty": trainer.repetition_penalty,
        "max_tokens": trainer.max_completion_length,
        "logprobs": 0,  # the sampled token's logprob only: what the importance-sampling correction needs
        "return_token_ids": True,
        "return_tokens_as_token_ids": True,
        **(trainer.args.generation_kwargs or {}),
    }


class VLLMRollout:
    """GRPOTrainer's `rollout_func`: each process's prompts -> prompt ids, completion ids, sampled-token logprobs."""

    def __init__(self, sync: AdapterSync, max_model_len: int):
        self.sync = sync
        self.max_model_len = max_model_len

    def __call__(self, prompts: list, trainer) -> dict:
        from accelerate.utils import broadcast_object_list, gather_object

        accelerator = trainer.accelerator
        n = trainer.num_generations if trainer.model.training else trainer.num_generations_eval
        prompt_ids = library_compat.prompt_ids(trainer, prompts)
        everyone = gather_object(prompt_ids) if accelerator.num_processes > 1 else prompt_ids
        payload = None
        if accelerator.is_main_process:
            try:
                payload = self._generate(trainer, everyone[::n], n)  # the sampler repeats each prompt n times in a row
            except VLLMGenerationError as exc:
                payload = exc
        if accelerator.num_processes > 1:
            box = [payload]
            broadcast_object_list(box, from_process=0)
            payload = box[0]
        if isinstance(payload, BaseException):  # every process ends with the main one's reason
            raise payload
        completion_ids, logprobs = payload
        mine = slice(accelerator.process_index * len(prompts), (accelerator.process_index + 1) * len(prompts))
        return {"prompt_ids": prompt_ids, "completion_ids": completion_ids[mine], "logprobs": logprobs[mine]}

    def _generate(self, trainer, unique_prompt_ids: list[list[int]], n: int) -> tuple[list, list]:
        from trl.generation.vllm_client import parse_logprobs

        link = self.sync.link
        longest = max(len(ids) for ids in unique_prompt_ids)
        if longest + trainer.max_completion_length > self.max_model_len:
            raise VLLMGenerationError(
                f"a prompt of {longest} tokens plus max_completion_length {trainer.max_completion_length} is longer "
                f"than the server's vllm_max_model_len {self.max_model_len}",
                f"Raise vllm_max_model_len to at least {longest + trainer.max_completion_length}, or shorten the "
                f"prompts or max_completion_length.",
            )
        started = time.monotonic()
        answer = link.post(
            "/v1/completions",
            _completions_request(trainer, self.sync.adapter_name, unique_prompt_ids, n),
            f"generating {len(unique_prompt_ids)} x {n} completions",
        )
        seconds = time.monotonic() - started
        choices = answer["choices"]  # prompt-major: the n completions of a prompt come before the next prompt's
        completion_ids = [choice["token_ids"] for choice in choices]
        logprobs, _ = parse_logprobs([choice["logprobs"] for choice in choices])
        logprobs = [[position[0] for position in sequence] for sequence in logprobs]  # the sampled token's
        tokens = sum(len(ids) for ids in completion_ids)
        metrics = library_compat.step_metrics(trainer, "train" if trainer.model.training else "eval")
        metrics["vllm/generate_seconds"].append(seconds)
        metrics["vllm/completions_per_second"].append(len(completion_ids) / max(seconds, 1e-9))
        metrics["vllm/tokens_per_second"].append(tokens / max(seconds, 1e-9))
        return completion_ids, logprobs


def link_for_run(cfg: RunConfig, run_dir: Path, status: RunStatus) -> ServerLink:
    """The link to the run's server: its own (address and guard in status.json) or the one at vllm_server_base_url."""
    section = status.vllm or {}
    url = cfg.vllm_server_base_url.strip() or section.get("url")
    if not url:
        raise VLLMGenerationError(
            "generation=vllm-server, but the run has no vLLM server: status.json records none and "
            "vllm_server_base_url is empty",
            "Start the run with the launcher (the app, or `python -m workbench train`), which starts the server, "
            "or give vllm_server_base_url of a running server.",
        )
    guard = None if cfg.vllm_server_base_url.strip() else section.get("pid")
    return ServerLink(url, run_dir, cfg.vllm_server_timeout, guard)


def attach(trainer, cfg: RunConfig, run_dir: Path, link: ServerLink | None) -> VLLMRollout:
    """Make `trainer` generate through the server behind `link` (None on processes other than the main one)."""
    sync = AdapterSync(trainer, link, run_dir)
    rollout = VLLMRollout(sync, cfg.vllm_max_model_len)
    trainer.rollout_func = rollout
    trainer.vllm_generation = sync
    trainer.use_vllm = True  # TRL: sync before each step's generation, importance-sampling correction
    trainer.vllm_mode = "server"  # read by TRL's tool loop to find the context length; never colocate here
    library_compat.sync_weights_next_round(trainer)
    return rollout


def cleanup(run_dir: Path) -> None:
    """Remove the adapters saved for the server (the run's own adapter/ and checkpoints stay)."""
    shutil.rmtree(run_dir / ADAPTERS_DIR, ignore_errors=True)
