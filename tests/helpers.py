"""What several test files share, so that tests import helpers and fixtures, never other tests.

- `poll_until(predicate)`: wait on a condition, not for a fixed time;
- `TINY`, `tiny_settings()`, `tiny_config()`: the smallest real run (the tiny model on the CPU,
  4 completions of at most 8 tokens a step), written once for every test that trains;
- `write_checkpoint(run_dir, step)`: a checkpoint folder as the Trainer writes it;
- `append_step(run_dir, step)`: one step of a long run as the trainer writes it (no training);
- `fill_disk(folder)`: write until the disk is full;
- `make_certificate(folder)`: a self-signed certificate for 127.0.0.1, made as the README says;
- `HOSTILE`, `default_values()`: hostile input values and the Setup form as the page first shows it;
- `file_lock(path)`: a lock the pytest-xdist workers of one run share;
- `write_hub_dataset(folder, configs)`, `gsm8k_like_rows(n)`: a dataset folder laid out as the hub lays one out.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import math
import os
import subprocess
import time
from pathlib import Path

# ---------------------------------------------------------------- waiting


def poll_until(predicate, timeout: float = 180.0, poll: float = 0.2):
    """The first true value of `predicate()`, asked every `poll` seconds; AssertionError after `timeout`."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(poll)
    raise AssertionError(f"condition not met within {timeout} s")


# ---------------------------------------------------------------- the smallest real run


def launched_threads(processes: int) -> int:
    """OMP_NUM_THREADS a run of `processes` CPU processes started from this test gets: the caller's own setting
    when it has one (a parallel run of the suite sets 1, tests/parallel.py), else its share of the cores."""
    from workbench.sources.gpus import cpu_threads

    return int(os.environ.get("OMP_NUM_THREADS") or 0) or cpu_threads(processes)


TINY = dict(model="tiny", device="cpu", max_completion_length=8, per_device_train_batch_size=4, num_generations=4)


def tiny_settings(**changes) -> dict:
    """`TINY` with `changes`: the settings of a run that trains in seconds on a 2-core CPU."""
    return {**TINY, **changes}


def tiny_config(**changes):
    """A `RunConfig` of `tiny_settings(**changes)`."""
    from workbench.spec.config import RunConfig

    return RunConfig(**tiny_settings(**changes))


# A run a test keeps going only so that it is live while the test acts (a dashboard watching it, a stop)
# trains step after step for as long as the test lasts, a core's worth of work nobody waits for; beside the
# other tests on this 2-core machine it slows them all. At this niceness it trains on what they leave, and
# a step still lands every few seconds.
BACKGROUND_NICENESS = 10


def in_background(runs_dir, run_id: str, timeout: float = 120.0) -> None:
    """Lower the CPU priority of a run's process (and those it has started; later ones inherit it)."""
    import psutil

    from workbench.jobs import run_state

    pid = poll_until(lambda: run_state.status(run_id, runs_dir).get("pid"), timeout=timeout)
    with contextlib.suppress(psutil.Error):
        trainer = psutil.Process(pid)
        for process in (trainer, *trainer.children(recursive=True)):
            with contextlib.suppress(psutil.Error):
                process.nice(BACKGROUND_NICENESS)


# ---------------------------------------------------------------- files a run writes


def write_checkpoint(run_dir, step):
    """A `checkpoint-<step>` folder with the files transformers' Trainer writes for a LoRA run, each whole."""
    import torch
    from safetensors.torch import save_file

    path = run_dir / f"checkpoint-{step}"
    path.mkdir(parents=True)
    save_file(
        {"lora_A.weight": torch.ones(4, 16), "lora_B.weight": torch.zeros(16, 4)},
        str(path / "adapter_model.safetensors"),
    )
    (path / "adapter_config.json").write_text(json.dumps({"r": 4, "peft_type": "LORA"}))
    torch.save({"state": {}, "param_groups": []}, path / "optimizer.pt")
    torch.save({"last_epoch": step}, path / "scheduler.pt")
    (path / "trainer_state.json").write_text(json.dumps({"global_step": step}))
    return path


G = 4  # completions per group in `append_step`'s runs
STEPS = 40  # the length of such a run: `append_step` writes total_steps = 2 * STEPS


def append_step(run_dir: Path, step: int) -> None:
    """One step as the trainer writes it: its round of completions, its metric row, the status."""
    from workbench.runstore import runfolder

    runfolder.append_jsonl(
        run_dir / runfolder.COMPLETIONS_FILE,
        [
            {
                "step": step,
                "group": i // G,
                "prompt": f"question {i // G}",
                "completion": f"answer {step}.{i} " * (i + 1),
                "rewards": {"brevity": i / 10},
                "reward": i / 10,
                "advantage": (i % G - 1.5) / 1.29,
                "length": i + 1,
                "truncated": False,
            }
            for i in range(2 * G)
        ],
    )
    runfolder.append_jsonl(
        run_dir / runfolder.METRICS_FILE,
        [
            {
                "step": step,
                "loss": 0.01,
                "reward": step / STEPS,
                "reward_std": 0.2,
                "kl": 0.01 * step,
                "frac_reward_zero_std": 0.0,
                "completions/mean_length": 8.0,
                "step_time": 2.0,
            }
        ],
    )
    runfolder.update_status(run_dir, state="training", step=step, total_steps=STEPS * 2)


# ---------------------------------------------------------------- the machine


def fill_disk(folder) -> None:
    """Write into `folder` until the disk is full (ENOSPC), as a filling disk would."""
    with open(os.path.join(folder, "filler"), "wb", buffering=0) as handle:  # nothing left in a buffer
        try:
            while True:
                handle.write(b"x" * 65536)
        except OSError as exc:
            if exc.errno != errno.ENOSPC:
                raise


def make_certificate(folder: Path) -> tuple[Path, Path]:
    """A self-signed certificate for 127.0.0.1 and localhost, made the way the README says."""
    cert, key = folder / "cert.pem", folder / "key.pem"
    subprocess.run(
        [
            "openssl",
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "1",
            "-keyout",
            str(key),
            "-out",
            str(cert),
            "-subj",
            "/CN=localhost",
            "-addext",
            "subjectAltName=IP:127.0.0.1,DNS:localhost",
        ],
        check=True,
        capture_output=True,
        timeout=60,
    )
    return cert, key


@contextlib.contextmanager
def file_lock(path: Path, shared: bool = False):
    """Hold an flock on `path` (exclusive, or `shared` with other shared holders) for the `with` block.

    The lock belongs to the open file, so it is released when the block ends or the process dies.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_SH if shared else fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


# ---------------------------------------------------------------- hostile input

HOSTILE = {
    "huge": 10**30,
    "nan": math.nan,
    "inf": math.inf,
    "negative": -7,
    "blank": None,
    "10 MB": "x" * 10_000_000,
    "unicode": "名前 ∑ 🙂 \u202e",
    "markup": "<script>alert(1)</script><img src=x onerror=alert(2)>",
    "list": ["a", 1],
}


def default_values() -> dict:
    """The Setup form as the page first shows it for the demo task, on a CPU machine."""
    from workbench.spec.config import RunConfig
    from workbench.spec.rewards import REWARDS
    from workbench.spec.tasks import get_task
    from workbench.ui import setup_tab

    config = RunConfig.for_task("demo").to_dict()
    form = {key: config.get(key) for key in setup_tab.FORM_KEYS}
    weights = dict(zip(get_task("demo").reward_names, get_task("demo").reward_weights))
    form.update({f"use_{name}": name in weights for name in REWARDS})
    form.update({f"weight_{name}": weights.get(name, 1.0) for name in REWARDS})
    form.update(cpu_processes=1, gpu_ids=[], vllm_gpu_ids=[])
    return form


# ---- a shared dashboard's accounts and its Setup form

PASSWORD = "a-long-password"  # every test account's password


def accounts_text() -> str:
    """A users file with alice and bob (users) and root (admin), all with PASSWORD.

    Few PBKDF2 iterations: these accounts guard nothing, and each sign-in should be quick.
    """
    from workbench.access import users

    lines = [
        f"{name} {role} {users.hash_password(PASSWORD, iterations=1000)}"
        for name, role in [("alice", "user"), ("bob", "user"), ("root", "admin")]
    ]
    return "\n".join(lines) + "\n"


def app_handler(app, module: str, name: str):
    """The event handler `name` of `workbench.ui.<module>` that `app` (a built Blocks) wired."""
    return next(
        f.fn
        for f in app.fns.values()
        if f.fn is not None and f.fn.__module__ == f"workbench.ui.{module}" and f.fn.__name__ == name
    )


def setup_form_values(**changes) -> list:
    """The Setup form's values (ctx.config_inputs order, hardware last) on a CPU machine, with `changes`."""
    from workbench.ui import setup_tab

    values = setup_tab.benchmark_values()
    form = dict(zip(setup_tab.FORM_KEYS, values))
    form.update(changes)
    return [form[key] for key in setup_tab.FORM_KEYS] + [values[-1]]


# ---------------------------------------------------------------- datasets laid out as the hub lays them out


def gsm8k_like_rows(count: int, start: int = 0) -> list[dict]:
    """GSM8K's shape: a `question` and an `answer` whose final number follows `####` (with a thousands comma)."""
    return [
        {
            "question": f"Tom has {n} apples and buys {n + 2} more. How many apples does he have?",
            "answer": f"He has {n} + {n + 2} = {2 * n + 2} apples.\n#### {2 * n + 2 + 1000:,}",
        }
        for n in range(start, start + count)
    ]


def write_hub_dataset(
    folder: Path, configs: dict[str, dict[str, list[dict]]], fmt: str = "parquet", default: str | None = None
) -> Path:
    """A dataset repository as the hub lays it out: README.md whose YAML front matter names each config's
    `data_files` per split, and one data file per split (`<config>/<split>-00000-of-00001.<fmt>`)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    folder.mkdir(parents=True, exist_ok=True)
    lines = ["---", "configs:"]
    for config, splits in configs.items():
        lines += [f"- config_name: {config}", "  data_files:"]
        for split, rows in splits.items():
            name = f"{config}/{split}-00000-of-00001.{fmt}"
            (folder / config).mkdir(exist_ok=True)
            if fmt == "parquet":
                pq.write_table(pa.Table.from_pylist(rows), folder / name)
            else:
                (folder / name).write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
            lines += [f"  - split: {split}", f"    path: {name}"]
        if config == (default or next(iter(configs))):
            lines.append("  default: true")
    (folder / "README.md").write_text("\n".join([*lines, "---", "", "# A test dataset", ""]), encoding="utf-8")
    return folder


def sandboxed_run_with_a_live_process(run_dir: Path) -> subprocess.Popen:
    """A run folder the launcher recorded as alice's sandboxed run, its process a sleeper the caller ends: what a
    run's code does to its own folder can then be tried against the server's decisions, with no model loaded."""
    from workbench.runstore import launch_records, runfolder

    run_dir.mkdir(parents=True)
    config = tiny_config()
    config.save(run_dir / runfolder.CONFIG_FILE)
    process = subprocess.Popen(["sleep", "300"], start_new_session=True)
    launch_records.write_record(
        run_dir, launch_records.LaunchRecord(owner="alice", sandboxed=True, policy={}, config=config.to_dict())
    )
    launch_records.record_started(run_dir, process.pid)
    return process
