"""`python -m workbench export-model RUN [--checkpoint N|best|final] --out DIR`: the run's adapter merged into its base model.

    python -m workbench export-model 20261122-031502-demo --out merged-demo
    python -m workbench export-model runs/20261122-031502-demo --checkpoint 10 --out merged-step10

Without --checkpoint it merges the checkpoint with the best held-out accuracy when the run evaluated
(eval_strategy=steps; workbench/insight/eval_results.py `best_checkpoint_of`), else the final adapter.

DIR becomes a standard transformers folder (model.safetensors, config,
tokenizer with its chat template) that `AutoModelForCausalLM.from_pretrained`
and vLLM load (workbench/modeltools/export_model.py). Bad input (a run that does not
exist, a missing checkpoint, a run without an adapter yet, a DIR that already
holds files) exits 2 with one line naming the field, the rule and a fix.
"""

from __future__ import annotations

import sys

from workbench.cli import ArgumentError
from workbench.cli.report_command import add_run_arguments


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser(
        "export-model", help="merge a run's LoRA adapter into its base model (a folder transformers and vLLM load)"
    )
    add_run_arguments(parser)
    parser.add_argument(
        "--checkpoint",
        default=None,
        metavar="N|best|final",
        help="merge checkpoint-N, the best evaluated checkpoint (best) or the final adapter (final); "
        "default: best when the run evaluated held-out prompts, else final",
    )
    parser.add_argument("--out", required=True, metavar="DIR", help="the folder to write (new, or empty)")
    parser.add_argument(
        "--progress",
        default=None,
        metavar="FILE",
        help="append each stage and the outcome to this JSON-lines file (the dashboard reads it)",
    )
    parser.add_argument(
        "--within",
        default=None,
        metavar="DIR",
        help="a folder above DIR: no folder below it on the way to DIR is followed if it is a link (the dashboard "
        "gives the run's folder); default: the nearest folder above DIR that exists",
    )
    parser.set_defaults(run=run)


def run(args) -> int:
    from workbench.modeltools import export_model
    from workbench.runstore import runfolder

    try:
        step, why = chosen_checkpoint(args.checkpoint, export_model.run_folder(args.source, args.runs_dir))
        plan = export_model.plan_export(args.source, step, args.out, args.runs_dir, within=args.within)
    except export_model.ExportError as exc:
        if args.progress:
            runfolder.append_jsonl(args.progress, [{"done": True, "error": str(exc)}])
        raise ArgumentError(str(exc)) from None
    source = (f"checkpoint-{plan.step}" if plan.step is not None else "the final adapter") + why
    print(f"Merging {source} of {plan.run_dir.name} into {plan.model} ...", file=sys.stderr, flush=True)
    summary = export_model.write_export(plan, args.progress)
    print(
        f"Merged model in {summary['out']} ({summary['bytes'] / 2**20:,.0f} MB, {summary['seconds']} s); "
        f"load it with AutoModelForCausalLM.from_pretrained({summary['out']!r}), or serve it with "
        f"`python -m vllm.entrypoints.openai.api_server --model {summary['out']}`"
    )
    return 0


def chosen_checkpoint(value: str | None, run_dir) -> tuple[int | None, str]:
    """(the checkpoint step to merge, None for the final adapter; why, said after its name) from --checkpoint."""
    from workbench.insight import eval_results

    value = (value or "").strip()
    if value.isdecimal():
        return int(value), ""
    if value not in ("", "best", "final"):
        raise ArgumentError(f"--checkpoint: {value[:80]!r} is not a step, best or final; give e.g. 10, best or final")
    best = eval_results.best_checkpoint_of(run_dir) if value != "final" else None
    if best is not None:
        accuracy = best.get("accuracy")
        return best["step"], " (the best held-out accuracy" + ("" if accuracy is None else f", {accuracy:.0%}") + ")"
    if value == "best":
        raise ArgumentError(
            f"--checkpoint: best, but run {run_dir.name} has no evaluated checkpoint (a run with "
            "eval_strategy=steps records one); give a step or final"
        )
    return None, ""
