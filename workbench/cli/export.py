"""`python -m workbench export CONFIG_OR_RUN --out DIR`: a cluster bundle that runs a config on other machines.

    python -m workbench export my.json --out bundle --set num_machines=2 --set num_processes=8
    python -m workbench export 20261122-031502-demo --out bundle   # a run's config, as a new run

The bundle (workbench/jobs/bundle.py) holds config.json, accelerate's config,
a launch script per machine role, a Slurm script and a README; this prints
the commands that start it. Bad input exits 2 with a one-line message.
"""

from __future__ import annotations

from pathlib import Path

from workbench.cli import ArgumentError


def add_parser(subparsers) -> None:
    export = subparsers.add_parser(
        "export", help="write a cluster bundle (accelerate configs, launch and Slurm scripts)"
    )
    export.add_argument("source", metavar="CONFIG_OR_RUN", help="a config.json, or a run (its id or folder)")
    export.add_argument("--out", required=True, help="folder to write the bundle into")
    export.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="FIELD=VALUE",
        help="change a RunConfig field, e.g. --set num_machines=2 (repeatable)",
    )
    export.add_argument("--run-id", dest="run_id", help="the run folder's name (default: a new timestamped id)")
    export.add_argument(
        "--runs-dir", dest="runs_dir", help="where to look up a run id (default $WORKBENCH_RUNS_DIR or ./runs)"
    )
    export.set_defaults(run=run)


def load_source(source: str, runs_dir: str | None = None):
    """The RunConfig of a config.json file, or of a run given by id or folder."""
    from workbench.jobs import launcher, run_state
    from workbench.runstore import runfolder
    from workbench.spec.config import RunConfig

    path = Path(source)
    if path.is_file():
        return RunConfig.load(path)
    try:
        return RunConfig.load(run_state.run_dir_of(source, runs_dir) / runfolder.CONFIG_FILE)
    except launcher.LauncherError as exc:
        raise ArgumentError(f"CONFIG_OR_RUN: {source!r} is neither a config file nor a run ({exc})") from None


def run(args) -> int:
    from workbench.jobs import bundle
    from workbench.spec.config import ConfigError, parse_assignment

    try:
        config = load_source(args.source, args.runs_dir)
        changes = dict(parse_assignment(text) for text in args.set)
        written = bundle.write_bundle(config.with_changes(**changes) if changes else config, args.out, args.run_id)
    except ConfigError as exc:
        raise ArgumentError(str(exc).replace("\n", "; ")) from None
    print(f"Bundle for run {written.run_id} in {written.folder}: {', '.join(written.files)}")
    print("Start it:\n" + "\n".join(written.commands))
    return 0
