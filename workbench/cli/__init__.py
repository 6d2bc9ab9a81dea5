"""Command-line dispatcher: `python -m workbench <command> ...`.

Each command lives in its own module exposing `add_parser(subparsers)` and
`run(args) -> int`. Modules import heavy libraries inside `run`, never at the
top, so `python -m workbench calc` answers in a fraction of a second.

Exit status: 0 success (or a valid plan), 1 a result that is a "no" (an
invalid plan, an unrecognised error text, a failed run), 2 bad arguments.
"""

from __future__ import annotations

import argparse
import importlib
import sys

from workbench import startup
from workbench.cli import outside_venv

# Commands that resume garbage collection themselves once their libraries and model are loaded
# (workbench/startup.py); every other command has it resumed before it runs.
RESUME_THEMSELVES = ("train", "sample", "check-signal")
# Command modules, in the order `--help` lists them.
COMMAND_MODULES = (
    "workbench.cli.calc",
    "workbench.cli.train",
    "workbench.cli.tune",
    "workbench.cli.ties",
    "workbench.cli.sample",
    "workbench.cli.check_signal",
    "workbench.cli.export",
    "workbench.cli.export_script",
    "workbench.cli.report_command",
    "workbench.cli.watch",
    "workbench.cli.eval",
    "workbench.cli.tokens_command",
    "workbench.cli.completions_command",
    "workbench.cli.export_model_command",
    "workbench.cli.users_command",
)


class ArgumentError(Exception):
    """Bad command-line input; the message names the field, the rule and a fix."""


class _Parser(argparse.ArgumentParser):
    """An ArgumentParser that reports bad input in one line, exit status 2."""

    def error(self, message: str):  # noqa: D401 - argparse's hook
        self.exit(2, f"error: {message} (see `{self.prog} --help`)\n")


def build_parser(parser_class: type[argparse.ArgumentParser] = _Parser) -> argparse.ArgumentParser:
    """Every command's parser under one; `parser_class` (a subclass of _Parser) is what the documentation's CLI
    reference reads them with (cli/docs_pages.py)."""
    parser = parser_class(prog="python -m workbench", description="GRPO Workbench command line")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=parser_class)
    subparsers.required = True
    for module_name in COMMAND_MODULES:
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            if exc.name != module_name:
                raise
            continue  # a command not built yet is simply not offered
        module.add_parser(subparsers)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run one command; a Python outside the venv that lacks a dependency gets one line and status 2."""
    try:
        return _run_command(argv)
    except ModuleNotFoundError as exc:
        line = outside_venv.message(exc, sys.executable, sys.prefix, sys.argv[1:] if argv is None else argv)
        if line is None:
            raise
        print(line, file=sys.stderr)
        return 2


def _run_command(argv: list[str] | None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    # Only a real command line may be re-executed (the foreground train does, to set its allocator).
    args.from_command_line = argv is None
    if args.command not in RESUME_THEMSELVES:
        startup.resume_collection()
    try:
        return int(args.run(args) or 0)
    except ArgumentError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
