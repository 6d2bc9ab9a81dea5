"""`python -m workbench sample`: answer probe prompts with a model (and a LoRA adapter).

    python -m workbench sample --model tiny --prompts-file probes.json --out answers.jsonl
    python -m workbench sample --model smollm2-135m-instruct --adapter runs/RUN/adapter \\
        --prompts-file probes.json --out answers.jsonl --max-new-tokens 48

Appends one JSON line per answer to --out as it goes and a final `{"done": true}`
(see workbench/modeltools/sampling.py), so a UI can show progress and cancel by killing it.
"""

from __future__ import annotations

import argparse
import sys

from workbench.cli import ArgumentError


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser(
        "sample",
        help="answer probe prompts with a model and optional LoRA adapter",
        description="Answer each prompt of a JSON file, appending one JSON line per answer to --out.",
    )
    parser.add_argument(
        "--model",
        default="smollm2-135m-instruct",
        help="smollm2-135m-instruct (bundled, default), tiny, a model folder or a hub id",
    )
    parser.add_argument("--adapter", default=None, help="a PEFT adapter folder (a run's adapter/ or checkpoint-N/)")
    parser.add_argument(
        "--prompts-file",
        required=True,
        help='JSON list of prompts: text, or chat messages [{"role": "user", "content": ...}]',
    )
    parser.add_argument("--out", required=True, help="JSON-lines file the answers are appended to")
    parser.add_argument("--max-new-tokens", type=int, default=64, help="longest answer in tokens (default 64)")
    parser.add_argument("--temperature", type=float, default=0.0, help="0 = greedy (default); above 0 samples")
    parser.add_argument("--seed", type=int, default=0, help="seed for sampling when temperature > 0")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from workbench.modeltools.sampling import (
        SamplingError,
        check_generation_settings,
        read_prompts_file,
        write_answers,
    )
    from workbench.runstore.runfolder import append_jsonl
    from workbench.sources.model_files import ModelError

    try:
        prompts = read_prompts_file(args.prompts_file)
        check_generation_settings(args.max_new_tokens, args.temperature)
    except SamplingError as exc:
        raise ArgumentError(str(exc)) from None
    try:
        write_answers(
            args.out,
            args.model,
            prompts,
            adapter_dir=args.adapter,
            max_new_tokens=args.max_new_tokens,
            temperature=args.temperature,
            seed=args.seed,
        )
    except (SamplingError, ModelError) as exc:
        # bad model or adapter: the reader of --out sees why, the terminal too
        append_jsonl(args.out, [{"done": True, "error": str(exc)}])
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except Exception as exc:  # a failure inside generation: recorded for the UI, then shown in full
        append_jsonl(args.out, [{"done": True, "error": f"{type(exc).__name__}: {exc}"}])
        raise
    print(f"wrote {len(prompts)} answers to {args.out}", file=sys.stderr)
    return 0
