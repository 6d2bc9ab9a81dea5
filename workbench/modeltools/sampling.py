"""Answers of a model (and of a LoRA checkpoint) to probe prompts, for side-by-side comparison.

In a notebook: `sample_answers("tiny", ["What is 2 + 2?"], adapter_dir="runs/x/adapter")`.

From the UI: `start_sampling(...)` runs `python -m workbench sample` as a
separate process (the page never waits on a model), which appends to an
answers file one JSON line per event, flushed as it goes:

    {"total": 4, "model": "...", "adapter": null}                  first
    {"index": 0, "prompt": ..., "answer": "...", "seconds": 0.8}  one per prompt
    {"done": true}                       last; {"done": true, "error": "..."} on failure

`read_sampling(path, process)` turns that file into progress, and
`cancel_sampling(process)` ends the job (killing its process group). A prompt
is text or chat messages; text goes through the model's chat template as one
user message when the tokenizer has a template.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from workbench import startup
from workbench.errors import WorkbenchError
from workbench.jobs import job_clock, processes
from workbench.runstore import safe_files
from workbench.runstore.runfolder import append_jsonl, read_jsonl, read_log_tail

DEFAULT_MAX_NEW_TOKENS = 64


class SamplingError(WorkbenchError):
    """Bad sampling input (prompts file, adapter folder, settings); the message says how to fix it."""


# ---------------------------------------------------------------- prompts


def check_prompts(prompts: Any) -> list:
    """The prompts as a list, each text or a list of chat messages; SamplingError otherwise."""
    if isinstance(prompts, dict) and "prompts" in prompts:
        prompts = prompts["prompts"]
    if isinstance(prompts, str) or not isinstance(prompts, (list, tuple)) or not prompts:
        raise SamplingError('prompts: give a non-empty list of prompts, e.g. ["What is 2 + 2?"]')
    for i, prompt in enumerate(prompts):
        is_text = isinstance(prompt, str) and prompt.strip()
        is_chat = isinstance(prompt, list) and prompt and all(isinstance(m, dict) and "content" in m for m in prompt)
        if not (is_text or is_chat):
            raise SamplingError(
                f"prompts: item {i} is {prompt!r:.60}; each prompt must be non-empty text or "
                f'chat messages like [{{"role": "user", "content": "Hi"}}]'
            )
    return list(prompts)


def read_prompts_file(path: str | Path) -> list:
    """Prompts from a JSON file holding a list (or `{"prompts": [...]}`)."""
    path = Path(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise SamplingError(f"--prompts-file: no file at '{path}'; write a JSON list of prompts there") from None
    except json.JSONDecodeError as exc:
        raise SamplingError(
            f"--prompts-file '{path}': not valid JSON ({exc.msg}, line {exc.lineno}); fix the file"
        ) from None
    try:
        return check_prompts(data)
    except SamplingError as exc:
        raise SamplingError(f"--prompts-file '{path}': {exc}") from None


def check_adapter_dir(adapter_dir: str | Path) -> Path:
    """A folder holding a PEFT adapter (adapter_config.json), or SamplingError."""
    path = Path(adapter_dir).expanduser().absolute()
    # the adapter folder itself is not followed if it is a link (a run's code may swap its checkpoint-N for one:
    # following it would tell whether any folder holds an adapter_config.json)
    if not safe_files.is_file(path / "adapter_config.json", root=path.parent):
        raise SamplingError(
            f"adapter: '{path}' holds no adapter_config.json; point to a run's `adapter/` or `checkpoint-N/` folder"
        )
    return path


def format_prompt(tokenizer, prompt: str | list) -> str:
    """The text the model sees: chat template with the generation prompt, or the plain text."""
    messages = [{"role": "user", "content": prompt}] if isinstance(prompt, str) else prompt
    if getattr(tokenizer, "chat_template", None):
        return tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    if isinstance(prompt, str):
        return prompt
    return "\n".join(f"{m.get('role', 'user')}: {m['content']}" for m in messages) + "\nassistant: "


# ---------------------------------------------------------------- generating in this process


def load_for_sampling(model: str, adapter_dir: str | Path | None = None, device: str | None = None):
    """(model, tokenizer) ready to generate: a model name or folder, plus an optional LoRA adapter."""
    from workbench.sources.model_files import ModelError, hub_unreachable_message, resolve_model

    # bad names fail here, before the slow imports
    adapter = check_adapter_dir(adapter_dir) if adapter_dir else None
    path = resolve_model(model)

    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    device = device or ("cuda" if torch.cuda.is_available() else "cpu")
    try:
        tokenizer = AutoTokenizer.from_pretrained(path)
        loaded = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32)
    except OSError:
        if Path(path).is_dir():
            raise
        raise ModelError(hub_unreachable_message(path)) from None  # a hub id this machine cannot download
    if adapter is not None:
        from peft import PeftModel

        loaded = PeftModel.from_pretrained(loaded, str(adapter))
    startup.resume_collection()  # a `workbench sample` process's libraries and model are in
    return loaded.to(device).eval(), tokenizer


def iter_answers(
    model: str,
    prompts: list,
    adapter_dir: str | Path | None = None,
    max_new_tokens: int = DEFAULT_MAX_NEW_TOKENS,
    temperature: float = 0.0,
    seed: int = 0,
    device: str | None = None,
) -> Iterator[dict]:
    """Yield `{"index", "prompt", "answer", "seconds"}` per prompt as each answer is ready.

    temperature 0 means greedy decoding (the same answer every time), which is
    what a before/after comparison wants; above 0 it samples, seeded.
    """
    prompts = check_prompts(prompts)
    check_generation_settings(max_new_tokens, temperature)
    loaded, tokenizer = load_for_sampling(model, adapter_dir, device)
    import torch

    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    sampling = {"do_sample": True, "temperature": temperature} if temperature > 0 else {"do_sample": False}
    for index, prompt in enumerate(prompts):
        started = time.perf_counter()
        torch.manual_seed(seed + index)  # each answer reproducible on its own
        inputs = tokenizer(format_prompt(tokenizer, prompt), return_tensors="pt", add_special_tokens=False)
        inputs = inputs.to(loaded.device)
        with torch.inference_mode():
            output = loaded.generate(**inputs, max_new_tokens=max_new_tokens, pad_token_id=pad_id, **sampling)
        new_tokens = output[0, inputs["input_ids"].shape[1] :]  # (T_new,) ids after the prompt
        answer = tokenizer.decode(new_tokens, skip_special_tokens=True).strip()
        yield {"index": index, "prompt": prompt, "answer": answer, "seconds": round(time.perf_counter() - started, 3)}


def sample_answers(model_dir: str, prompts: list, adapter_dir: str | Path | None = None, **settings) -> list[dict]:
    """All answers at once (for notebooks): see `iter_answers` for the settings."""
    return list(iter_answers(model_dir, prompts, adapter_dir=adapter_dir, **settings))


def check_generation_settings(max_new_tokens: int, temperature: float) -> None:
    if not isinstance(max_new_tokens, int) or max_new_tokens < 1:
        raise SamplingError(f"max_new_tokens: must be a whole number >= 1, got {max_new_tokens!r}; use e.g. 64")
    if temperature < 0:
        raise SamplingError(f"temperature: must be >= 0 (0 = greedy), got {temperature}; use 0 or e.g. 0.7")


def write_answers(out_path: str | Path, model: str, prompts: list, adapter_dir=None, **settings) -> None:
    """Run `iter_answers`, appending the header, each answer and the final line to `out_path`."""
    append_jsonl(
        out_path, [{"total": len(prompts), "model": model, "adapter": str(adapter_dir) if adapter_dir else None}]
    )
    for answer in iter_answers(model, prompts, adapter_dir=adapter_dir, **settings):
        append_jsonl(out_path, [answer])
    append_jsonl(out_path, [{"done": True}])


# ---------------------------------------------------------------- as a background process


def sample_command(
    model: str,
    prompts_file: Path,
    out_path: Path,
    adapter_dir=None,
    max_new_tokens: int = DEFAULT_MAX_NEW_TOKENS,
    temperature: float = 0.0,
) -> list[str]:
    """The argument list `start_sampling` runs (never through a shell)."""
    command = [
        sys.executable,
        "-m",
        "workbench",
        "sample",
        "--model",
        str(model),
        "--prompts-file",
        str(prompts_file),
        "--out",
        str(out_path),
        "--max-new-tokens",
        str(max_new_tokens),
        "--temperature",
        str(temperature),
    ]
    if adapter_dir:
        command += ["--adapter", str(adapter_dir)]
    return command


def start_sampling(
    model: str,
    prompts: list,
    out_path: str | Path,
    adapter_dir=None,
    max_new_tokens: int = DEFAULT_MAX_NEW_TOKENS,
    temperature: float = 0.0,
    confine=None,
) -> subprocess.Popen:
    """Start a sampling process writing to `out_path` (replaced); returns at once.

    The prompts go to `<out>.prompts.json` and the process's output to
    `<out>.log` beside it. The process has its own group, so `cancel_sampling`
    ends it and anything it started. `confine`: a sandbox to start it in
    (`workbench.jobs.sandbox.confinement`; a dashboard with accounts gives one).
    """
    prompts = check_prompts(prompts)
    check_generation_settings(max_new_tokens, temperature)
    if adapter_dir:
        check_adapter_dir(adapter_dir)
    out_path = Path(out_path)
    out_path.parent.mkdir(parents=True, exist_ok=True)
    # The folder may be a run's (probes/), where the run's own code can plant links: nothing here follows one.
    safe_files.unlink(out_path)
    prompts_file = out_path.with_suffix(".prompts.json")
    safe_files.write_file(prompts_file, json.dumps(prompts, ensure_ascii=False).encode("utf-8"))
    command = sample_command(model, prompts_file, out_path, adapter_dir, max_new_tokens, temperature)
    env = processes.job_env()
    if confine is not None:
        command, env = confine(command, env)
    # under its wall-time limit (WORKBENCH_SAMPLING_TIME_LIMIT_S): the clock ends the whole sandbox past it
    return processes.spawn(job_clock.clocked(command, "sampling"), out_path.with_suffix(".log"), env)


def read_sampling(out_path: str | Path, process: subprocess.Popen | None = None) -> dict:
    """Progress of a sampling job: `{"total", "answers", "done", "error"}`.

    With `process`, a job that exited without its final line is reported done,
    with an error carrying the exit code and the tail of its log.
    """
    out_path = Path(out_path)
    records = read_jsonl(out_path)
    header = next((r for r in records if "total" in r), {})
    final = next((r for r in records if r.get("done")), None)
    progress = {
        "total": header.get("total"),
        "answers": [r for r in records if "answer" in r],
        "done": final is not None,
        "error": final.get("error") if final else None,
    }
    if final is None and process is not None and process.poll() is not None:
        log = out_path.with_suffix(".log")
        tail = read_log_tail(log.parent, 1500, name=log.name)
        ended = job_clock.ended_message("sampling", process.returncode)
        progress.update(
            done=True, error=ended or f"sampling stopped with exit code {process.returncode}. {tail}".strip()
        )
    return progress


def cancel_sampling(process: subprocess.Popen, timeout: float = 5.0) -> None:
    """End a sampling job: SIGTERM to its process tree, SIGKILL after `timeout` seconds."""
    if process.poll() is not None:
        return
    processes.end_tree(process.pid, grace=timeout)
    process.wait(timeout=timeout)
