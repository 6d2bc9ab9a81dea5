"""`python -m workbench tune`: measure which speed levers are fastest for a run on this machine, and keep the choice.

    python -m workbench tune                          # the demo on the bundled model
    python -m workbench tune --config my.json         # a run's model and shape
    python -m workbench tune --model tiny --set per_device_train_batch_size=4 --json
    python -m workbench tune --again                  # measure afresh, replacing the kept choice
    python -m workbench tune --allocators             # which C allocator trains fastest here (a few minutes)

The choice is kept in the server's cache (workbench/tuning/cache.py) under this machine's CPU, cores and library
versions, the model and the run's shape; runs whose levers are `auto` take it, and a run with no choice for its key
measures it itself when it starts (about a minute). Prints the probe's progress, each candidate's round time and
what was chosen; exit 2 for bad input.
"""

from __future__ import annotations

import json
import sys


def add_parser(subparsers) -> None:
    tune = subparsers.add_parser("tune", help="measure the fastest exact speed levers for a run on this machine")
    tune.add_argument("--config", help="a config.json (RunConfig fields); other options change it")
    tune.add_argument("--model", help="smollm2-135m-instruct (default), tiny, a model folder or a hub id")
    tune.add_argument("--task", help="a built-in task (default demo)")
    tune.add_argument("--set", action="append", default=[], metavar="FIELD=VALUE", help="any RunConfig field")
    tune.add_argument("--again", action="store_true", help="measure even when a choice is kept for this key")
    tune.add_argument("--json", action="store_true", help="print the choice as JSON")
    tune.add_argument(
        "--allocators",
        nargs="*",
        metavar="NAME",
        help="instead: time a few demo steps under each installed allocator (or those named) and keep "
        "the fastest for this machine's runs",
    )
    tune.add_argument("--steps", type=int, default=4, help="with --allocators: steps per allocator (default 4)")
    tune.set_defaults(run=run_tune, recipe=None, max_steps=None)


def run_tune(args) -> int:
    from workbench.cli import ArgumentError
    from workbench.cli.train import _checked, config_from_args
    from workbench.spec.config import ConfigError
    from workbench.trainer import speed_probe, speed_wiring
    from workbench.tuning import cache
    from workbench.tuning.for_config import key_for, needs_no_choice

    if args.allocators is not None:
        return run_allocators(args)
    config = config_from_args(args)
    # Only what the probe reads is checked (speed_probe.probe_config: the model, the shape, a built-in task's
    # prompts): never the run's reward file or data. This process runs outside the run's sandbox, as the server
    # (jobs/tune_job.py): checking the whole config imported a student's reward file there, and its top-level code
    # ran as root (tests/test_attack_tune_outside_sandbox.py). The run's own check inside its sandbox checks the rest.
    try:
        probed = speed_probe.probe_config(config)
    except ConfigError as exc:
        raise ArgumentError(str(exc).replace("\n", "; ")) from None
    _checked(probed)
    skip = needs_no_choice(config.with_changes(merged_generation="auto"))
    if skip:
        print(f"nothing to measure: {skip}", file=sys.stderr)
        return 0
    choice = None if args.again else cache.lookup(key_for(config))
    if choice is None:
        choice = speed_probe.measure(
            config, lambda line: print(line, file=sys.stderr, flush=True), speed_wiring.probe_trainer
        )
        kept = cache.store(choice)
        print(f"{'kept in' if kept else 'could not keep it in'} {cache.cache_path()}", file=sys.stderr)
    else:
        print(f"kept from an earlier probe ({cache.cache_path()}); --again measures afresh", file=sys.stderr)
    if args.json:
        print(json.dumps(choice.to_dict(), indent=2))
        return 0
    for label, seconds in sorted(choice.seconds.items(), key=lambda item: item[1]):
        mark = "*" if label == choice.chosen.label() else " "
        why = choice.exact_failures.get(label) or choice.not_taken.get(label) or ""
        print(f"{mark} {seconds:7.2f} s  {label}" + (f"  ({why})" if why else ""))
    print(f"chosen: {choice.summary()}")
    return 0


def run_allocators(args) -> int:
    """`tune --allocators`: one short demo run per allocator; the fastest (glibc's own unless beaten) is kept."""
    from workbench.cli import ArgumentError
    from workbench.jobs import allocator, allocator_probe
    from workbench.tuning import allocator_kept

    names = args.allocators or allocator.available()
    unknown = [name for name in names if name not in allocator.available()]
    if unknown:
        raise ArgumentError(
            f"--allocators: {', '.join(unknown)} not installed or unknown; "
            f"this machine has {', '.join(allocator.available())}"
        )
    if args.steps < 2:
        raise ArgumentError("--steps must be >= 2 (the first step is left out of the timing)")
    seconds = allocator_probe.measure(
        names, args.model or "smollm2-135m-instruct", args.steps, lambda line: print(line, file=sys.stderr, flush=True)
    )
    choice = allocator_kept.measured(seconds)
    kept = allocator_kept.keep(choice)
    print(f"{'kept in' if kept else 'could not keep it in'} {allocator_kept.path_of()}", file=sys.stderr)
    if args.json:
        print(json.dumps({"allocator": choice.allocator, "seconds": choice.seconds, "cpu": choice.cpu}, indent=2))
        return 0
    for name, value in sorted(seconds.items(), key=lambda item: item[1]):
        print(f"{'*' if name == choice.allocator else ' '} {value:7.2f} s a step  {name}")
    print(f"chosen: {choice.allocator} (runs on this machine start with it; WORKBENCH_ALLOCATOR overrides)")
    return 0
