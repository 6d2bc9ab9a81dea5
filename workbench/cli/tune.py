"""`python -m workbench tune`: measure which speed levers are fastest for a run on this machine, and keep the choice.

    python -m workbench tune                          # the demo on the bundled model
    python -m workbench tune --config my.json         # a run's model and shape
    python -m workbench tune --model tiny --set per_device_train_batch_size=4 --json
    python -m workbench tune --again                  # measure afresh, replacing the kept choice

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
    tune.set_defaults(run=run_tune, recipe=None, max_steps=None)


def run_tune(args) -> int:
    from workbench.cli.train import _checked, config_from_args
    from workbench.trainer import speed_probe, training
    from workbench.tuning import cache
    from workbench.tuning.for_config import key_for, needs_no_choice

    config = config_from_args(args)
    _checked(config)
    skip = needs_no_choice(config.with_changes(merged_generation="auto"))
    if skip:
        print(f"nothing to measure: {skip}", file=sys.stderr)
        return 0
    choice = None if args.again else cache.lookup(key_for(config))
    if choice is None:
        choice = speed_probe.measure(config, lambda line: print(line, file=sys.stderr, flush=True),
                                     training.probe_trainer)
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
