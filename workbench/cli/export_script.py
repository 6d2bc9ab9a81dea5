"""`python -m workbench export-script RUN_OR_CONFIG --out FILE`: a run's setup as one plain TRL script.

    python -m workbench export-script 20261122-031502-demo --out train_demo.py
    python -m workbench export-script my.json --out train.py --set max_steps=100
    python train_demo.py --max_steps 1      # trains with TRL, PEFT and datasets alone

The script (workbench/insight/script_export.py) holds the model, the data, the
reward functions' source and GRPOConfig with every setting of the run. Bad
input exits 2 with a one-line message.
"""

from __future__ import annotations

from pathlib import Path

from workbench.cli import ArgumentError


def add_parser(subparsers) -> None:
    export = subparsers.add_parser(
        "export-script", help="write a run's setup as one Python script (TRL, PEFT, datasets only)"
    )
    export.add_argument("source", metavar="RUN_OR_CONFIG", help="a run (its id or folder), or a config.json")
    export.add_argument("--out", required=True, help="the .py file to write")
    export.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="FIELD=VALUE",
        help="change a RunConfig field first, e.g. --set max_steps=100 (repeatable)",
    )
    export.add_argument(
        "--runs-dir", dest="runs_dir", help="where to look up a run id (default $WORKBENCH_RUNS_DIR or ./runs)"
    )
    export.set_defaults(run=run)


def run(args) -> int:
    from workbench.cli.export import load_source
    from workbench.errors import WorkbenchError
    from workbench.insight import script_export
    from workbench.spec.config import parse_assignment

    try:
        config = load_source(args.source, args.runs_dir)
        changes = dict(parse_assignment(text) for text in args.set)
        config = config.with_changes(**changes) if changes else config
        inputs = script_export.script_inputs(config, title=args.source, reward_source=_run_reward_copy(args, config))
        text = script_export.build_script(inputs)
    except WorkbenchError as exc:
        raise ArgumentError(str(exc).replace("\n", "; ")) from None
    out = Path(args.out)
    if out.suffix != ".py":
        raise ArgumentError(f"--out: {out} is not a .py file; name the script e.g. train.py")
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(text, encoding="utf-8")
    except OSError as exc:
        raise ArgumentError(f"--out: cannot write {out} ({exc.strerror}); choose a writable folder") from None
    print(f"Wrote {out} ({len(text.splitlines())} lines). Run it: python {out}")
    return 0


def _run_reward_copy(args, config) -> str | None:
    """A run's own copy of its reward file (kept in the run folder), when the original has gone."""
    from workbench.jobs import launcher, run_state
    from workbench.runstore import runfolder, safe_files

    if not config.reward_file or Path(config.reward_file).is_file() or Path(args.source).is_file():
        return None
    try:
        copy = run_state.run_dir_of(args.source, args.runs_dir) / runfolder.REWARD_SOURCE_FILE
        return safe_files.read_bytes(copy).decode("utf-8")  # the run wrote it: a link there reads as missing
    except (launcher.LauncherError, FileNotFoundError):
        return None
