"""`python -m workbench tokens RUN [--step N] [--json]`: a run's recorded completions, token by token.

    python -m workbench tokens runs/20261122-031502-demo --step 2 --json

Reads the run folder's tokens.jsonl (recorded at logging steps unless the run set record_tokens=false; see
workbench/spec/token_records.py). With --json it prints a JSON list with one object per recorded completion:
`step`, `prompt`, `completion`, `advantage` (a number), and `tokens`, `logprob`, `ref_logprob`, `entropy`,
`kl`, `clipped` (lists of equal length; `kl` null when beta = 0; `clipped` 0, -1 on the low side, 1 on the
high side), with `round`, `index`, `group` (where the completion lies in completions.jsonl), `ref`
(`reference`, or `old policy` when beta = 0), `ratio` (null on-policy: exactly 1) and `masked`; a run that
generates with vLLM adds `engine_logprob`, `engine_diff` (trainer's minus engine's, per token), `is_weight` and
`is_mode` (TRL's importance-sampling weight and its mode: workbench/spec/engine_records.py). Without --json, per
step its summary (largest KL, highest entropy, share clipped; with vLLM the engine's mismatch and weights) and each
completion's tokens (with vLLM, `token:trainer/engine` log-probabilities and the completion's weight).
Without --step, every recorded step. Bad input exits 2 with one line naming the argument, the rule and a fix.
"""

from __future__ import annotations

import json
import sys

from workbench.cli import ArgumentError
from workbench.cli.report_command import add_run_arguments, find_run


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser(
        "tokens",
        help="print a run's recorded completions token by token (logprob, reference, KL, entropy, clipped)",
        description="Print a run's recorded completions token by token, from tokens.jsonl: each token's "
        "log-probability, the reference's, the KL term, the entropy and whether it was clipped; for a run that "
        "generates with vLLM also the engine's log-probability, the difference and TRL's importance-sampling weight.",
    )
    add_run_arguments(parser)
    parser.add_argument("--step", type=int, help="only this optimizer step (default: every recorded step)")
    parser.add_argument("--json", action="store_true", help="print a JSON list, one object per recorded completion")
    parser.set_defaults(run=run)


def _token_text(row: dict, position: int) -> str:
    def number(value):
        return "—" if value is None else f"{value:.2f}"

    text = f"{row['tokens'][position]!r}:{number(row['logprob'][position])}"
    if "engine_logprob" in row:
        text += f"/{number(row['engine_logprob'][position])}"
    return text


def _weight_text(row: dict) -> str:
    weight = row.get("is_weight")
    if "engine_logprob" not in row or weight is None or isinstance(weight, list):
        return ""
    return f" IS weight {weight:.4g}"


def print_lines(rows: list[dict], summaries: dict[int, dict]) -> None:
    from workbench.insight.tokens import engine_text

    for step, summary in summaries.items():
        top = ", ".join(f"{item['token']!r} {item['value']:.3g}" for item in summary["top_kl"]) or "none (beta 0)"
        print(
            f"step {step}: largest KL {top}; clipped low {summary['clipped_low']:.1%} high "
            f"{summary['clipped_high']:.1%}{' (' + summary['note'] + ')' if summary['note'] else ''}"
        )
        if summary.get("engine"):
            print(f"  {engine_text(summary['engine'])} (tokens: 'token':trainer/engine)")
        for row in (r for r in rows if r["step"] == step):
            tokens = " ".join(_token_text(row, i) for i in range(len(row["tokens"])))
            print(f"  #{row['index']} advantage {row['advantage']:+.3f}{_weight_text(row)}  {tokens}")


def run(args) -> int:
    from workbench.insight import tokens

    run_dir = find_run(args.source, args.runs_dir)
    steps = tokens.token_steps(run_dir)
    if args.step is not None and steps and args.step not in steps:
        raise ArgumentError(
            f"--step: step {args.step} has no token records; use one of {', '.join(map(str, steps[:20]))}"
        )
    rows = tokens.cli_rows(run_dir, args.step)
    if args.json:
        print(json.dumps(rows))
    else:
        print_lines(
            rows,
            {
                step: tokens.step_summary(tokens.tokens_of_step(run_dir, step))
                for step in ([args.step] if args.step is not None else steps)
            },
        )
    if not steps:
        print(
            f"Run {run_dir.name} has no token records (no tokens.jsonl): it ran with record_tokens=false or "
            f"before its first logging step; train with --set record_tokens=true.",
            file=sys.stderr,
        )
        return 1
    return 0
