"""`python -m workbench watch RUN`: a run followed in a terminal, run as a real subprocess.

A finished run prints every step, then how it ended (exit 0); a failed run
its error and what to do (exit 1); bad input one line (exit 2). A live run of
the tiny model, launched as the dashboard launches one, prints its steps as
they are trained and the watch ends with the run (stopped); Ctrl-C stops
watching, not the run.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import in_background, poll_until

from workbench.jobs import launcher, run_state
from workbench.runstore import runfolder
from workbench.spec.config import RunConfig

ROOT = Path(__file__).resolve().parents[1]
TINY = dict(
    model="tiny",
    task="demo",
    device="cpu",
    per_device_train_batch_size=4,
    num_generations=4,
    max_completion_length=8,
    logging_steps=1,
    save_steps=1000,
)
LONG_RUN_STEPS = 500
STEP_LINE = re.compile(
    r"^step (\d+)/(\d+)  reward \S+  reward_std \S+  kl \S+  loss \S+  length \S+  "
    r"step_time \S+( s)?$"
)


def watch_command(*args: str) -> list[str]:
    return [sys.executable, "-m", "workbench", "watch", *args]


def environment() -> dict:
    return {**os.environ, "PYTHONPATH": str(ROOT)}  # this checkout's workbench, wherever the venv points


def as_from_a_terminal() -> None:
    """In the child before it runs: SIGINT delivered and not ignored, as a terminal's Ctrl-C reaches a command.
    Both are inherited across exec, and an earlier test in the same worker process may have changed them."""
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
    signal.signal(signal.SIGINT, signal.SIG_DFL)  # Python installs its KeyboardInterrupt handler over SIG_DFL


def signal_state(pid: int) -> str:
    """The kernel's view of a process's blocked and ignored signals, for a failure message."""
    lines = Path(f"/proc/{pid}/status").read_text().splitlines()
    return " ".join(line for line in lines if line.startswith(("SigBlk", "SigIgn", "SigCgt")))


def watch(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run(watch_command(*args), capture_output=True, text=True, timeout=timeout, env=environment())


def written_run(runs_dir: Path, state: str, steps: int, **status) -> Path:
    """A run folder as the trainer leaves it: its config, `steps` metric records and a final status."""
    run_dir = runs_dir / "20260101-000000-demo"
    run_dir.mkdir(parents=True)
    (run_dir / runfolder.CONFIG_FILE).write_text(json.dumps({"model": "tiny", "task": "demo", "num_generations": 4}))
    runfolder.append_jsonl(
        run_dir / runfolder.METRICS_FILE,
        [
            {
                "step": s,
                "reward": 0.1 * s,
                "reward_std": 0.2,
                "kl": 0.001 * s,
                "loss": -0.01 * s,
                "completions/mean_length": 7.5,
                "step_time": 1.25,
                "frac_reward_zero_std": 0.0,
            }
            for s in range(1, steps + 1)
        ],
    )
    runfolder.write_json_atomic(
        run_dir / runfolder.STATUS_FILE,
        {"state": state, "step": steps, "total_steps": 4, "started_at": 1000.0, "updated_at": 1042.0, **status},
    )
    return run_dir


def test_a_finished_run_prints_every_step_then_how_it_ended(tmp_path):
    run_dir = written_run(tmp_path, "finished", 4)
    result = watch(run_dir.name, "--runs-dir", str(tmp_path), "--interval", "0.2")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].startswith(f"Watching {run_dir.name} ")
    assert lines[1:5] == [
        f"step {s}/4  reward {0.1 * s:.3f}  reward_std 0.200  kl {0.001 * s:.4f}  "
        f"loss {-0.01 * s:+.4f}  length 7.5  step_time 1.2 s"
        for s in range(1, 5)
    ]
    assert lines[-1] == f"Run {run_dir.name} finished at step 4/4 after 42 s."
    assert result.stderr == ""


def test_a_failed_run_ends_with_its_error_and_what_to_do(tmp_path):
    run_dir = written_run(
        tmp_path, "failed", 2, error={"type": "ValueError", "message": "bad batch", "hint": "Lower num_generations."}
    )
    result = watch(str(run_dir))  # a run folder's path works as well as its id
    assert result.returncode == 1, result.stderr
    assert [line for line in result.stdout.splitlines() if STEP_LINE.match(line)][-1].startswith("step 2/4")
    assert result.stdout.endswith(
        f"Run {run_dir.name} failed at step 2/4 after 42 s. ValueError: bad batch\nWhat to do: Lower num_generations.\n"
    )


@pytest.mark.parametrize(
    "args, message",
    [
        (["no-such-run"], "error: RUN: no run called 'no-such-run' in"),
        (["20260101-000000-demo", "--interval", "0"], "error: --interval: 0.0 is not a number of seconds from 0.05"),
        (["20260101-000000-demo", "--interval", "nan"], "error: --interval: nan is not a number of seconds"),
    ],
    ids=["unknown-run", "zero-interval", "nan-interval"],
)
def test_bad_input_is_one_line_naming_the_argument(tmp_path, args, message):
    written_run(tmp_path, "finished", 1)
    result = watch(*args, "--runs-dir", str(tmp_path))
    assert result.returncode == 2 and result.stderr.startswith(message) and len(result.stderr.splitlines()) == 1
    assert "Traceback" not in result.stderr


@pytest.mark.slow
def test_a_live_run_is_followed_step_by_step_and_ctrl_c_leaves_it_running(tmp_path):
    runs = tmp_path / "runs"
    # more steps than the test lasts: it is still training when the test stops it (in the background, as it
    # only has to be live: helpers.in_background)
    run_id = launcher.start(RunConfig(**TINY, max_steps=LONG_RUN_STEPS), runs)
    in_background(runs, run_id)
    follower = subprocess.Popen(
        watch_command(run_id, "--runs-dir", str(runs), "--interval", "0.5"),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=environment(),
    )
    # a second watch of the same run, stopped with Ctrl-C once the run is under way
    interrupted = subprocess.Popen(
        watch_command(run_id, "--runs-dir", str(runs), "--interval", "0.5"),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=environment(),
        preexec_fn=as_from_a_terminal,
    )
    seen = []
    try:
        assert interrupted.stdout.readline().startswith(f"Watching {run_id} ")
        assert interrupted.stdout.readline().startswith("state: ")  # it has looked once, as a person would
        poll_until(lambda: run_state.status(run_id, runs)["state"] == "training", timeout=240)
        signals = signal_state(interrupted.pid)
        interrupted.send_signal(signal.SIGINT)
        out, err = interrupted.communicate(timeout=60)
        assert interrupted.returncode == 130, f"{out}{err}\n{signals}"
        assert f"Stopped watching {run_id}; the run goes on" in err and "Traceback" not in err
        assert run_state.status(run_id, runs)["state"] in ("training", "saving")
        # the follower prints steps as they are trained
        while len([line for line in seen if STEP_LINE.match(line)]) < 2:
            line = follower.stdout.readline()
            assert line, follower.stderr.read()
            seen.append(line.rstrip("\n"))
        assert launcher.stop(run_id, runs, timeout=60)["state"] == "stopped"
        # read on through the same buffered reader (communicate() would skip what readline() buffered)
        out = follower.stdout.read()
        follower.wait(timeout=120)
        err = follower.stderr.read()
    finally:
        for process in (follower, interrupted):
            if process.poll() is None:
                process.kill()
        if run_state.is_running(run_id, runs):
            launcher.stop(run_id, runs, timeout=30)
    assert follower.returncode == 0, out + err
    lines = seen + out.splitlines()
    steps = [int(STEP_LINE.match(line).group(1)) for line in lines if STEP_LINE.match(line)]
    assert steps == list(range(1, len(steps) + 1)) and len(steps) >= 2, lines
    assert lines.index("state: training") < lines.index(next(line for line in lines if STEP_LINE.match(line)))
    assert lines[-1].startswith(f"Run {run_id} stopped at step {steps[-1]}/{LONG_RUN_STEPS}"), lines
