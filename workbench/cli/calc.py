"""`python -m workbench calc`: the GRPO batch calculator on the command line.

    python -m workbench calc --per-device-train-batch-size 1 --num-processes 3 --num-generations 8
    python -m workbench calc --framework open-r1 --gpus 4 --vllm-gpus 1 --per-device-train-batch-size 1
    python -m workbench calc --framework ms-swift --dataset-size 8000 ... --json
    python -m workbench calc --explain "generation_batch_size (4) must be divisible by num_generations (8)."

Exit status: 0 valid plan (or recognised error text), 1 invalid plan or
unrecognised text, 2 bad arguments (one line naming the field).
"""

from __future__ import annotations

import json

from workbench.cli import ArgumentError

# (flag field, default) for every `plan` input; flags are TRL's names with dashes.
PLAN_FLAGS = (
    ("per_device_train_batch_size", 8),
    ("gradient_accumulation_steps", 1),
    ("num_generations", 8),
    ("num_processes", None),  # None: 1, or --gpus minus --vllm-gpus
    ("steps_per_generation", None),
    ("generation_batch_size", None),
    ("num_iterations", 1),
    ("dataset_size", None),
    ("num_train_epochs", 1.0),
    ("max_steps", -1),
    ("max_completion_length", 512),
    ("per_device_eval_batch_size", 8),
    ("num_generations_eval", None),
    ("vllm_gpus", 0),
)
TOP_SUGGESTIONS = 5


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser(
        "calc",
        help="check GRPO batch settings against TRL 1.16's rules and count steps",
        description="Check GRPO batch settings against TRL 1.16's rules (exact error texts), count the steps, "
        "suggest the nearest valid settings, or explain a pasted error message.",
    )
    for name, default in PLAN_FLAGS:
        parser.add_argument(
            "--" + name.replace("_", "-"),
            dest=name,
            default=default,
            metavar="N",
            help=f"TRL's {name} (default {default if default is not None else 'unset'})",
        )
    parser.add_argument("--do-eval", action="store_true", help="evaluation on (checks the eval batch as TRL does)")
    parser.add_argument(
        "--gpus",
        default=None,
        metavar="N",
        help="GPUs in all; with --vllm-gpus K, N-K of them train (Open-R1's server split)",
    )
    parser.add_argument(
        "--framework",
        default="trl",
        choices=("trl", "open-r1", "ms-swift", "all"),
        help="read the inputs as this framework does (default trl)",
    )
    parser.add_argument("--train-data-ratio", default=1.0, metavar="R", help="ms-swift's train_data_ratio (default 1)")
    parser.add_argument("--explain", default=None, metavar="TEXT", help="explain a pasted error message instead")
    parser.add_argument("--json", action="store_true", help="print JSON instead of the readable report")
    parser.set_defaults(run=run)


def _number(field: str, text):
    """A flag's text as int (or float); anything else is passed on for the calculator to reject by name."""
    if text is None or not isinstance(text, str):
        return text
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            continue
    raise ArgumentError(f"--{field.replace('_', '-')}: must be a number, got {text!r}.")


def collect_inputs(args) -> dict:
    """The plan inputs from parsed flags, with --gpus resolved into num_processes."""
    inputs = {name: _number(name, getattr(args, name)) for name, _ in PLAN_FLAGS}
    inputs["do_eval"] = bool(args.do_eval)
    gpus = _number("gpus", args.gpus)
    if gpus is not None:
        if isinstance(gpus, bool) or not isinstance(gpus, int) or gpus < 1:
            raise ArgumentError(f"--gpus: must be a whole number >= 1, got {args.gpus!r}.")
        vllm = inputs["vllm_gpus"]
        if not isinstance(vllm, int) or vllm >= gpus:
            raise ArgumentError(
                f"--vllm-gpus: must be less than --gpus ({gpus}) so at least one GPU trains, got {args.vllm_gpus!r}."
            )
        training = gpus - vllm
        if inputs["num_processes"] is not None and inputs["num_processes"] != training:
            raise ArgumentError(
                f"--num-processes: {inputs['num_processes']} disagrees with --gpus {gpus} minus "
                f"--vllm-gpus {vllm} = {training}; give one or the other."
            )
        inputs["num_processes"] = training
    if inputs["num_processes"] is None:
        inputs["num_processes"] = 1
    return inputs


def _count(number, noun: str) -> str:
    return f"{number:g} {noun}{'' if number == 1 else 's'}"


def format_plan(p, title: str = "TRL 1.16", show_steps: bool = True) -> str:
    """A short readable report of one plan."""
    lines = [f"{title}: {'VALID' if p.valid else 'INVALID'}"]
    lines += [f"  error: {e}" for e in p.errors]
    g = p.inputs["num_generations"]
    if p.valid:
        lines.append(
            f"  generation_batch_size {p.generation_batch_size} = {_count(p.prompts_per_generation, 'prompt')} "
            f"x {g} completions, steps_per_generation {p.steps_per_generation}"
        )
    elif p.generation_batch_size is not None:
        lines.append(
            f"  generation_batch_size {p.generation_batch_size} = {p.generation_batch_size / g:g} groups "
            f"of {g} completions"
        )
    lines.append(
        f"  per optimizer step: {_count(p.completions_per_step, 'completion')} "
        f"({_count(p.prompts_per_step, 'prompt')}), up to {p.max_generated_tokens_per_step:,} completion tokens"
    )
    if p.valid and show_steps:
        per_epoch = "?" if p.steps_per_epoch is None else p.steps_per_epoch
        total = "? (give --dataset-size)" if p.total_steps is None else p.total_steps
        lines.append(f"  steps per epoch {per_epoch}, total steps {total}")
    lines += [f"  warning: {w}" for w in p.warnings]
    lines += [f"  note: {n}" for n in p.notes]
    if p.suggestions:
        lines.append("  fixes (smallest change first):")
        for s in p.suggestions[:TOP_SUGGESTIONS]:
            lines.append(
                f"    - {s.description}  (generation_batch_size {s.plan.generation_batch_size}, "
                f"{_count(s.plan.prompts_per_generation, 'prompt')} per generation)"
            )
    return "\n".join(lines)


def _reading_dict(reading) -> dict:
    """A framework reading as JSON: its plan's fields, with the framework's own verdict and step count."""
    data = reading.plan.to_dict()
    data.update(
        framework=reading.framework,
        title=reading.title,
        message=reading.message,
        total_steps=reading.total_steps,
        steps_formula=reading.steps_formula,
        notes=reading.notes,
        training_processes=reading.training_processes,
        vllm_gpus=reading.vllm_gpus,
    )
    return data


def run_explain(args) -> int:
    from workbench.calc.explain import explain

    result = explain(args.explain)
    if args.json:
        print(json.dumps(result.to_dict(), indent=2))
        return 0 if result.recognised else 1
    if not result.recognised:
        print(result.why)
        return 1
    print(f"Recognised: {result.kind} ({result.source})")
    if result.values:
        print("  values: " + ", ".join(f"{k}={v}" for k, v in result.values.items()))
    print(f"  why: {result.why}")
    if result.note:
        print(f"  note: {result.note}")
    if result.fixes:
        print("  fixes (smallest change first):")
        for fix in result.fixes[:TOP_SUGGESTIONS]:
            print(f"    - {fix.description}")
    return 0


def run(args) -> int:
    from workbench.calc import InputError, plan
    from workbench.calc.frameworks import FRAMEWORKS, compare_frameworks

    if args.explain is not None:
        return run_explain(args)
    try:
        inputs = collect_inputs(args)
        ratio = _number("train_data_ratio", args.train_data_ratio)
        if args.framework == "trl":
            result = plan(**inputs)
            print(json.dumps(result.to_dict(), indent=2) if args.json else format_plan(result))
            return 0 if result.valid else 1
        names = FRAMEWORKS if args.framework == "all" else (args.framework,)
        readings = compare_frameworks(train_data_ratio=ratio, frameworks=names, **inputs)
    except InputError as exc:
        raise ArgumentError(f"--{exc.field.replace('_', '-')}: {exc.rule}") from None
    if args.json:
        data = [_reading_dict(r) for r in readings]
        print(json.dumps(data[0] if len(data) == 1 else {"frameworks": data}, indent=2))
    else:
        blocks = []
        for r in readings:
            text = format_plan(r.plan, r.title, show_steps=False)
            if r.framework == "ms-swift" and not r.valid:
                text = text.replace(f"  error: {r.plan.errors[0]}", f"  error: {r.message}", 1)
            extra = [f"  note: {note}" for note in r.notes]
            if r.valid:
                extra.append(
                    f"  total steps ({r.framework}): {r.total_steps if r.total_steps is not None else '?'}"
                    f"  [{r.steps_formula}]"
                )
            blocks.append("\n".join([text, *extra]))
        print("\n\n".join(blocks))
    return 0 if all(r.valid for r in readings) else 1
