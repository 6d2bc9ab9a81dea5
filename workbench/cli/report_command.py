"""`python -m workbench report RUN [--out FILE]`: a run as one HTML file that opens without a network.

    python -m workbench report 20261122-031502-demo --out report.html
    python -m workbench report runs/20261122-031502-demo      # writes runs/20261122-031502-demo/report.html

RUN is a run folder, or a run id in the runs folder (--runs-dir, else
$WORKBENCH_RUNS_DIR, else ./runs). The file (built by workbench/insight/report.py)
holds the settings and the batch plan in plain words, the reward / KL / loss /
length curves, the health notes, completion groups with their advantages and
the base vs trained answers the Compare tab sampled; plotly.js is inside it.
Bad input exits 2 with one line naming the argument, the rule and a fix.
"""

from __future__ import annotations

from pathlib import Path

from workbench.cli import ArgumentError


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser(
        "report",
        help="write a run's report: one HTML file with its curves and completions, readable offline",
        description="Write a run's report: settings and batch plan in plain words, curves, health notes, "
        "completion groups with their advantages, base vs trained answers. One HTML file with "
        "plotly.js inside: it opens in any browser without a network.",
    )
    add_run_arguments(parser)
    parser.add_argument("--out", metavar="FILE", help="the HTML file to write (default: report.html in the run folder)")
    parser.set_defaults(run=run)


def add_run_arguments(parser) -> None:
    """RUN (a run id or folder) and --runs-dir, as every command that reads one run takes them (see find_run)."""
    parser.add_argument("source", metavar="RUN", help="a run id in the runs folder, or the path of a run folder")
    parser.add_argument(
        "--runs-dir", dest="runs_dir", help="where to look up a run id (default $WORKBENCH_RUNS_DIR or ./runs)"
    )


def find_run(source: str, runs_dir: str | None) -> Path:
    """The run folder RUN names, or ArgumentError saying which runs there are."""
    from workbench.jobs import launcher, run_state

    try:
        return run_state.run_dir_of(source, runs_dir)
    except launcher.LauncherError as exc:
        reason = str(exc).removeprefix("run: ")
        raise ArgumentError(
            f"RUN: {reason}; give a run id or the path of a run folder (one holding config.json)"
        ) from None


def output_path(out: str | None, run_dir: Path) -> Path:
    """Where the report goes: --out, or report.html in the run folder; refused when it cannot be a file."""
    from workbench.runstore.runfolder import REPORT_FILE

    path = Path(out).expanduser() if out else run_dir / REPORT_FILE
    if out:  # a folder the user named may be a link of theirs; the run's own folder is written without following one
        path = path.parent.resolve() / path.name
    if path.is_dir():
        raise ArgumentError(f"--out: '{path}' is a folder; give a file name, e.g. --out {path / REPORT_FILE}")
    if not path.parent.is_dir():
        raise ArgumentError(
            f"--out: the folder '{path.parent}' does not exist; create it first or write the report somewhere else"
        )
    return path


def run(args) -> int:
    from workbench.insight import report, tokens
    from workbench.modeltools import probes
    from workbench.runstore import runfolder

    run_dir = find_run(args.source, args.runs_dir)
    out = output_path(args.out, run_dir)
    contents = report.RunContents(
        name=run_dir.name,
        folder=str(run_dir),
        comparisons=probes.stored_comparisons(run_dir),
        last_tokens=tokens.last_step_tokens(run_dir),
        **runfolder.read_run(run_dir),
    )
    page = report.build_report(contents).encode("utf-8")
    try:
        runfolder.replace_file(out, page)
    except OSError as exc:
        raise ArgumentError(
            f"--out: cannot write '{out}' ({exc.strerror or exc}); choose a file in a folder you can write to"
        ) from None
    print(
        f"Report of run {run_dir.name} written to {out} ({len(page) / 1e6:.1f} MB); it opens in any browser, offline."
    )
    return 0
