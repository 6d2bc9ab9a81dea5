"""A helper job's clock: every job a student starts besides training runs under a wall-time limit per kind.

    python -m workbench.jobs.job_clock --kind signal-check --limit SECONDS -- COMMAND...

A signal check, the Compare tab's sampling (a probe of a checkpoint) and a merged-model export each start
through this process (`clocked`): the server's own, outside any sandbox. It starts COMMAND in its own
process group, waits at most SECONDS, and past that ends COMMAND's whole tree (a sandbox's init among it, so
the kernel ends every process left in the sandbox, double-forked ones included) and exits TIMED_OUT. A reader
tells the user from that exit code alone (`ended_message`), never from a file the job wrote, and the message
names the limit and the admin's setting that raises it (`KINDS`).
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
from dataclasses import dataclass

TIMED_OUT = 124  # the clock's exit code when the limit bit (a command's own 124 is passed on as 1)


@dataclass(frozen=True)
class Kind:
    """One kind of helper job: what the user calls it, its default limit, and the admin's setting."""

    title: str
    default_s: float
    setting: str
    hint: str  # what the user can change


# Defaults: far above what each takes on the tiny or bundled model on a CPU, so only a hung or hostile job meets
# them; an admin with bigger models raises them.
KINDS = {
    "signal-check": Kind(
        "the signal check",
        900.0,
        "WORKBENCH_SIGNAL_CHECK_TIME_LIMIT_S",
        "make the reward file quicker (its import and each call) or check fewer groups",
    ),
    "sampling": Kind("the sampling", 900.0, "WORKBENCH_SAMPLING_TIME_LIMIT_S", "ask fewer prompts or fewer tokens"),
    "export": Kind("the export", 3600.0, "WORKBENCH_EXPORT_TIME_LIMIT_S", "export on a machine of your own"),
}


def time_limit(kind: str, env: dict | None = None) -> float:
    """The wall-time limit of a `kind` job in seconds: the admin's setting, else the default (a value that is not
    a positive number is taken as the default: a helper job never runs without a clock)."""
    spec = KINDS[kind]
    raw = (os.environ if env is None else env).get(spec.setting, "")
    try:
        value = float(raw)
    except ValueError:
        return spec.default_s
    return value if value > 0 and value == value and value != float("inf") else spec.default_s


def clocked(command: list[str], kind: str, env: dict | None = None) -> list[str]:
    """`command` started through the clock, under `kind`'s limit."""
    limit = time_limit(kind, env)
    return [sys.executable, "-m", "workbench.jobs.job_clock", "--kind", kind, "--limit", f"{limit:g}", "--", *command]


def limit_text(kind: str, limit: float) -> str:
    spec = KINDS[kind]
    return (
        f"{spec.title} ran past its time limit of {limit:g} s and was ended with every process "
        f"it started; {spec.hint}, or ask the admin to raise {spec.setting}"
    )


def ended_message(kind: str, returncode: int | None, env: dict | None = None) -> str | None:
    """The one line the user sees when the clock ended a `kind` job (exit code TIMED_OUT), else None."""
    return limit_text(kind, time_limit(kind, env)) if returncode == TIMED_OUT else None


def run(kind: str, limit: float, command: list[str]) -> int:
    """Run `command` for at most `limit` seconds; its exit code, or TIMED_OUT once its tree was ended."""
    from workbench.jobs import processes

    # a group of its own, which ending it signals: what it leaves behind outside a sandbox (an orphan of a shell)
    # is still in it; inside one, the sandbox's PID namespace ends everything with its init
    child = subprocess.Popen(command, process_group=0)

    def forward(signum, frame):  # a stop of the clock alone (its pid) reaches the job
        processes.end_tree(child.pid, grace=2.0)
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, forward)
    try:
        code = child.wait(timeout=limit)
    except subprocess.TimeoutExpired:
        print(f"[clock] {limit_text(kind, limit)}", file=sys.stderr, flush=True)
        processes.end_tree(child.pid, grace=2.0)
        child.wait()
        return TIMED_OUT
    code = code if code >= 0 else 128 - code
    return 1 if code == TIMED_OUT else code


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Run a helper job under its wall-time limit.")
    parser.add_argument("--kind", required=True, choices=sorted(KINDS))
    parser.add_argument("--limit", required=True, type=float, help="seconds")
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("no command after --")
    return run(args.kind, args.limit, command)


if __name__ == "__main__":
    sys.exit(main())
