"""`python -m workbench ties`: the registry of private library ties (workbench/library_compat.py), checked now.

    python -m workbench ties           # each tie, whether it holds with the installed libraries, and why it exists
    python -m workbench ties -v        # and what it touches, where, how to tell it is gone, what happens without it
    python -m workbench ties --json

Exit 1 when a tie every run needs is broken (a run that needs another broken tie is refused when it starts).
"""

from __future__ import annotations

import json


def add_parser(subparsers) -> None:
    ties = subparsers.add_parser(
        "ties",
        help="check the workbench's ties to private parts of TRL, transformers, "
        "PEFT, accelerate and torch against the installed versions",
    )
    ties.add_argument("-v", "--verbose", action="store_true", help="print every field of each tie")
    ties.add_argument("--json", action="store_true", help="print the ties and their problems as JSON")
    ties.set_defaults(run=run_ties)


def run_ties(args) -> int:
    from dataclasses import asdict

    from workbench import library_compat
    from workbench.trainer import ties_verdict

    verdict = ties_verdict.verdict()
    if args.json:
        print(
            json.dumps(
                {
                    "written_for": library_compat.WRITTEN_FOR,
                    "versions": verdict.versions,
                    "ties": [
                        {**asdict(tie), "problem": verdict.problems.get(tie.label)} for tie in library_compat.TIES
                    ],
                },
                indent=2,
            )
        )
        return 1 if verdict.refused else 0
    for note in verdict.versions:
        print(f"note: {note}")
    for tie in library_compat.TIES:
        problem = verdict.problems.get(tie.label)
        print(f"{'BROKEN' if problem else 'ok    '} {tie.label} ({tie.kind} of {tie.holder}): {tie.why}")
        if problem:
            print(f"       {problem}; needed by {tie.needed_when}; without it: {tie.without}")
        if args.verbose:
            for name in ("touches", "sites", "gone", "without", "needed_when"):
                value = getattr(tie, name)
                print(f"       {name}: {', '.join(value) if isinstance(value, tuple) else value}")
    print(
        f"{len(library_compat.TIES)} ties, {len(verdict.problems)} broken; written for "
        + ", ".join(f"{library} {version}" for library, version in library_compat.WRITTEN_FOR.items())
    )
    return 1 if verdict.refused else 0
