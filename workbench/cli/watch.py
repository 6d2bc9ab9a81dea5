"""`python -m workbench watch RUN [--runs-dir D] [--interval S]`: follow a run in a terminal.

    python -m workbench watch 20261122-031502-demo
    python -m workbench watch runs/20261122-031502-demo --interval 1

Prints one line per new step (step / total, reward, reward_std, KL, loss,
mean completion length, step time), the health alarms as they appear
(workbench/insight/health.py), and the run's state as it changes; it ends
when the run does, with its final state: exit 0 for a finished or stopped
run, 1 for a failed one (or one whose folder cannot be read, or that went
silent on another machine). A finished run prints all its steps, then ends.
Ctrl-C stops watching, not the run (exit 130). The run is read through
workbench/insight/follow.py, the API the dashboard's Train tab and the
notebooks use: only the bytes written since the last look are read.
Bad input exits 2 with one line naming the argument, the rule and a fix.
"""

from __future__ import annotations

import math
import sys

from workbench.cli import ArgumentError
from workbench.cli.report_command import add_run_arguments

DEFAULT_INTERVAL = 2.0
# The run states that end a watch with exit 0; every other final state exits 1.
GOOD_ENDINGS = ("finished", "stopped")
# (label, metric record key, format) of a step line, in order.
STEP_FIELDS = (
    ("reward", "reward", "{:.3f}"),
    ("reward_std", "reward_std", "{:.3f}"),
    ("kl", "kl", "{:.4f}"),
    ("loss", "loss", "{:+.4f}"),
    ("length", "completions/mean_length", "{:.1f}"),
    ("step_time", "step_time", "{:.1f} s"),
)


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser(
        "watch",
        help="follow a run in the terminal: a line per step, health alarms, its state, until it ends",
        description="Follow a run as it trains: one line per new step (reward, reward_std, KL, loss, completion "
        "length, step time), the health alarms as they appear and the run's state as it changes. "
        "Ends with the run: exit 0 when it finished or was stopped, 1 when it failed. Ctrl-C stops "
        "watching, not the run.",
    )
    add_run_arguments(parser)
    parser.add_argument(
        "--interval",
        type=float,
        default=DEFAULT_INTERVAL,
        metavar="S",
        help=f"seconds between looks at the run folder (default {DEFAULT_INTERVAL:g})",
    )
    parser.set_defaults(run=run)


def check_interval(value: float) -> float:
    if not (isinstance(value, float) and math.isfinite(value) and 0.05 <= value <= 3600):
        raise ArgumentError(
            f"--interval: {value!r} is not a number of seconds from 0.05 to 3600; e.g. --interval {DEFAULT_INTERVAL:g}"
        )
    return value


def step_line(record: dict, total_steps: int | None) -> str:
    """`step 3/10  reward 0.412  reward_std 0.118  kl 0.0021  loss -0.0134  length 23.5  step_time 4.1 s`."""
    total = f"/{total_steps}" if total_steps else ""
    parts = [f"step {record.get('step')}{total}"]
    for label, key, form in STEP_FIELDS:
        value = record.get(key)
        shown = (
            form.format(value)
            if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
            else "—"
        )
        parts.append(f"{label} {shown}")
    return "  ".join(parts)


def alarm_line(alarm) -> str:
    """A health alarm (insight.health.Alarm) in one line: level, step, title, what it means."""
    step = f" at step {alarm.step}" if alarm.step is not None else ""
    return f"! {alarm.level}{step}: {alarm.title}. {alarm.message}"


def state_line(status: dict) -> str:
    """The run's state as it changes; a queued run with its place and what it waits for."""
    state = status.get("state") or "unknown"
    if state == "queued" and status.get("queue_position"):
        waits = f", waits for {status['waits_for']}" if status.get("waits_for") else ""
        return f"state: queued (position {status['queue_position']}{waits})"
    return f"state: {state}"


def final_line(run_id: str, status: dict) -> str:
    """How the run ended: its state, the step it reached, and for a failure the error and what to do."""
    from workbench.spec.numbers import format_duration
    from workbench.spec.run_status import running_seconds

    state = status.get("state") or "unknown"
    total = f"/{status['total_steps']}" if status.get("total_steps") else ""
    ran = running_seconds(status, 0.0, live=False) if status.get("updated_at") else None
    took = f" after {format_duration(ran)}" if ran is not None else ""  # the time it was stopped left out
    line = f"Run {run_id} {state} at step {status.get('step') or 0}{total}{took}."
    error = status.get("error")
    if state not in GOOD_ENDINGS and error:
        error = error if isinstance(error, dict) else {"message": str(error)}
        line += f" {error.get('type') or 'Error'}: {error.get('message') or 'no message'}"
        if error.get("hint"):
            line += f"\nWhat to do: {error['hint']}"
    return line


def run(args) -> int:
    from workbench.cli.report_command import find_run
    from workbench.insight import follow
    from workbench.jobs import gpu_queue

    interval = check_interval(args.interval)
    run_dir = find_run(args.source, args.runs_dir)
    print(f"Watching {run_dir.name} ({run_dir}); Ctrl-C stops watching, not the run.", flush=True)
    seen = None
    try:
        for news in follow.follow(run_dir, interval, read_status=gpu_queue.status_with_queue_place):
            seen = news.seen
            if news.state and not follow.is_over(seen.status):  # the last line says how it ended
                print(state_line(seen.status), flush=True)
            for record in news.steps:
                print(step_line(record, seen.status.get("total_steps")), flush=True)
            for alarm in news.alarms:
                print(alarm_line(alarm), flush=True)
    except KeyboardInterrupt:
        status = seen.status if seen is not None else {}
        print(f"\nStopped watching {run_dir.name}; the run goes on ({state_line(status)}).", file=sys.stderr)
        return 130
    status = seen.status if seen is not None else {}
    print(final_line(run_dir.name, status), flush=True)
    return 0 if status.get("state") in GOOD_ENDINGS else 1
