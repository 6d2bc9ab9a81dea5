"""`python -m workbench eval RUN [--json] [--per-prompt] [--checkpoint latest|N|base]`: a run's held-out evaluation.

    python -m workbench eval 20261122-031502-arithmetic
    python -m workbench eval runs/20261122-031502-arithmetic --json --per-prompt
    python -m workbench eval 20261122-031502-arithmetic --checkpoint 20 --json

Reads the run folder's eval.jsonl (written when the run trained with eval_strategy=steps; see
workbench/spec/heldout.py): one point per evaluation, the base model's before any update at step 0.
Without --json it prints a line per point (step, accuracy, pass@k, each reward's mean, n; with
eval_pass_k >= 2 mean@k, maj@k and best@k with their bootstrap spreads; per data source with
eval_group_column) and the answers that changed since step 0; with --json a JSON list of
`{"step", "accuracy", "pass_at_k", "k", "mean_at_k", "mean_at_k_std", "maj_at_k", "maj_at_k_std", "best_at_k",
"best_at_k_std", "rewards", "n"}` (the @k figures null without k >= 2 samples; `maj_at_k_note` says why maj@k
is unavailable when it is; `groups` holds the figures per data source), and with --per-prompt each point also holds
`prompts`: `[{"prompt", "completion", "rewards"}]`. A run that never evaluated exits 1 saying how to turn
evaluation on. `--checkpoint` evaluates now, in this process, on the same held-out prompts: the base model
(`base`), a checkpoint (its step) or the newest adapter (`latest`); it prints that one point (nothing is
written) and works for a run that trained without evaluation too (workbench/trainer/saved_eval.py).
A run the launcher started in a sandbox is evaluated in that sandbox (its reward code runs nowhere else),
with the policy and config the launcher recorded; the record comes back as data.
Bad input exits 2 with one line naming the argument, the rule and a fix.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

from workbench.cli import ArgumentError
from workbench.cli.report_command import add_run_arguments, find_run


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser(
        "eval",
        help="print a run's held-out accuracy curve (eval.jsonl), as lines or as JSON",
        description="Print a run's held-out evaluations: accuracy (greedy answers with full marks from the "
        "correctness reward), pass@k, each reward's mean and n, from step 0 (before any update) on.",
    )
    add_run_arguments(parser)
    parser.add_argument(
        "--json",
        action="store_true",
        help='print a JSON list of {"step", "accuracy", "pass_at_k", "k", "mean_at_k", "mean_at_k_std", "maj_at_k", '
        '"maj_at_k_std", "best_at_k", "best_at_k_std", "rewards", "n"}',
    )
    parser.add_argument(
        "--per-prompt",
        dest="per_prompt",
        action="store_true",
        help="with each point, every held-out prompt with its greedy completion and rewards",
    )
    parser.add_argument(
        "--checkpoint",
        metavar="WHICH",
        help="evaluate now, in this process: latest (the final adapter, else the newest checkpoint), "
        "a checkpoint's step, or base (the model without an adapter)",
    )
    # inside a run's sandbox: write the one record here instead of printing (evaluate_in_sandbox reads it)
    parser.add_argument("--write-record", dest="write_record", help=argparse.SUPPRESS)
    parser.set_defaults(run=run)


def _share(value) -> str:
    return "-" if value is None else f"{value:.3f}"


def print_lines(points: list[dict], changed: list[dict]) -> None:
    from workbench.insight.eval_results import at_k_text, group_texts

    for point in points:
        rewards = ", ".join(f"{name} {_share(mean)}" for name, mean in (point["rewards"] or {}).items())
        pass_k = f"  pass@{point['k']} {_share(point['pass_at_k'])}" if point.get("k") else ""
        print(f"step {point['step']:>5}  accuracy {_share(point['accuracy'])}{pass_k}  n {point['n']}  ({rewards})")
        if at_k_text(point):
            print(f"             {at_k_text(point)}  (± a bootstrap std over sample subsets)")
        for line in group_texts(point):
            print(f"             {line}")
    if points and points[-1].get("maj_at_k_note"):
        print(points[-1]["maj_at_k_note"])
    for item in changed:
        print(
            f"\n{item['change']} (step {item['first_step']} -> {item['last_step']}): {item['prompt']}\n"
            f"  before: {item['before']!r}\n  after:  {item['after']!r}"
        )


def evaluate_now(run_dir, which: str) -> list[dict]:
    """The run's policy `which` evaluated now: one record, or ArgumentError naming what is wrong."""
    from workbench.errors import WorkbenchError
    from workbench.runstore import launch_records, runfolder
    from workbench.trainer.saved_eval import evaluate_saved

    record = launch_records.read_record(run_dir)
    if record is not None and record.sandboxed and not runfolder.inside_sandbox():
        return evaluate_in_sandbox(Path(run_dir), which, record)
    try:
        return [evaluate_saved(run_dir, which)]
    except WorkbenchError as exc:
        raise ArgumentError(str(exc)) from None


RECORD_FILE = ".eval-now.json"  # in the run folder: the one place its sandbox can write


def evaluate_in_sandbox(run_dir: Path, which: str, record) -> list[dict]:
    """The evaluation of a sandboxed run, run in its sandbox (the launcher's recorded policy and config), its
    one record read back as data and checked like any eval.jsonl record."""
    from workbench.errors import WorkbenchError
    from workbench.jobs import processes, sandbox, sandbox_policy
    from workbench.runstore import runfolder, safe_files
    from workbench.spec.heldout import eval_problem

    out = run_dir / RECORD_FILE
    safe_files.unlink(out)
    command = [
        sys.executable,
        "-m",
        "workbench",
        "eval",
        str(run_dir),
        "--checkpoint",
        str(which),
        "--write-record",
        str(out),
    ]
    config = dict(record.config or {})
    try:
        sandbox.prepare(config)
        confine = sandbox.confinement(
            run_dir, run_dir.parent, config, sandbox_policy.Policy.from_status(record.policy) or sandbox_policy.Policy()
        )
        argv, env = confine(command, processes.job_env())
    except WorkbenchError as exc:
        raise ArgumentError(str(exc)) from None
    done = subprocess.run(argv, env=env)
    found = runfolder.read_json(out)
    safe_files.unlink(out)
    if done.returncode != 0 or not isinstance(found, dict) or eval_problem(found):
        raise ArgumentError(
            f"--checkpoint: the evaluation in the run's sandbox did not give a record (exit "
            f"{done.returncode}); read its message above, or evaluate from the dashboard"
        )
    return [found]


def run(args) -> int:
    from workbench.insight import eval_results

    run_dir = find_run(args.source, args.runs_dir)
    records = evaluate_now(run_dir, args.checkpoint) if args.checkpoint else eval_results.read_evals(run_dir)
    if args.write_record:  # inside the run's sandbox, for evaluate_in_sandbox
        Path(args.write_record).write_text(json.dumps(records[0]), encoding="utf-8")
        return 0
    points = eval_results.curve_points(records, per_prompt=args.per_prompt)
    if args.json:
        print(json.dumps(points, indent=1))
    elif points:
        print_lines(points, eval_results.changed_answers(records))
    if not records:
        print(
            f"Run {run_dir.name} has no held-out evaluation (no eval.jsonl): train with --set eval_strategy=steps "
            f"(and eval_steps, eval_size) to record one.",
            file=sys.stderr,
        )
        return 1
    return 0
