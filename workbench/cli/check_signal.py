"""`python -m workbench check-signal`: before launch, will this run learn?

    python -m workbench check-signal --task arithmetic --groups 8
    python -m workbench check-signal --task gsm8k --set dataset_name=workbench/spec/data/gsm8k_sample --set dataset_config=main --json
    python -m workbench check-signal --config my.json --groups 4 --out signal.json   # the Setup tab's way

Samples `--groups` prompts x num_generations completions from the base model with the run's settings,
scores them with the run's rewards and prints the reward spread, the share of groups with zero spread,
the correctness rate, the truncation rate and a verdict (spec/signal_check.py). Exit 0 with a report
(whatever it says), 2 for a bad config or model, with the field's message.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from workbench.cli import ArgumentError
from workbench.errors import WorkbenchError


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser(
        "check-signal",
        help="sample a few groups from the base model: will the run learn?",
        description="Sample groups from the base model with the run's settings, score "
        "them with its rewards and say whether it has a learning signal.",
    )
    parser.add_argument("--config", help="a config.json (RunConfig fields); other options change it")
    parser.add_argument("--model", help="smollm2-135m-instruct (default), tiny, a model folder or a hub id")
    parser.add_argument(
        "--task", help="a built-in task: demo (default), arithmetic, keywords, gsm8k, reward_hacking (a lesson)"
    )
    parser.add_argument("--recipe", help="a published GRPO variant, as for train")
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="FIELD=VALUE",
        help="any RunConfig field, e.g. --set temperature=0.7 (repeatable)",
    )
    parser.add_argument(
        "--groups", type=int, default=8, help="prompts to sample, each num_generations times (default 8)"
    )
    parser.add_argument("--json", action="store_true", help="print the report as one JSON object")
    parser.add_argument("--out", help="also write the report as JSON to this file (replaced when done)")
    parser.set_defaults(run=run, max_steps=None)


def run(args) -> int:
    from workbench.cli.train import _checked, config_from_args
    from workbench.spec.signal_check import report_lines

    try:
        if args.groups < 1:
            raise ArgumentError(f"--groups: must be a whole number >= 1, got {args.groups}; use e.g. 8")
        config = config_from_args(args)
        _checked(config)
        from workbench.trainer.signal_probe import probe_signal

        try:
            report = probe_signal(config, args.groups)
        except WorkbenchError as exc:  # a model it cannot load, data it cannot read, a reward that refuses
            raise ArgumentError(str(exc).replace("\n", "; ")) from None
    except ArgumentError as exc:  # the reader of --out (the Setup tab) shows the same message
        _write_out(args.out, {"error": str(exc)})
        raise
    data = report.to_dict()
    _write_out(args.out, data)
    print(json.dumps(data) if args.json else "\n".join(report_lines(report)))
    return 0


def _write_out(out: str | None, data: dict) -> None:
    """The report for a reader polling the file: written whole, then renamed into place."""
    if not out:
        return
    path = Path(out)
    path.parent.mkdir(parents=True, exist_ok=True)
    temp = path.with_suffix(path.suffix + ".tmp")
    temp.write_text(json.dumps(data), encoding="utf-8")
    temp.replace(path)
    print(f"report written to {path}", file=sys.stderr)
