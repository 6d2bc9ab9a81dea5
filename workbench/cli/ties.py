"""`python -m workbench ties`: the registry of private library ties (workbench/library_compat.py), checked now.

    python -m workbench ties           # each tie, whether it holds with the installed libraries, and why it exists
    python -m workbench ties --json

Exit 1 when a tie every run needs is broken.
"""

from __future__ import annotations

import json


def add_parser(subparsers) -> None:
    ties = subparsers.add_parser("ties", help="check the workbench's ties to private parts of TRL, transformers, torch")
    ties.add_argument("--json", action="store_true", help="print the ties and their problems as JSON")
    ties.set_defaults(run=run_ties)


def run_ties(args) -> int:
    from dataclasses import asdict

    from workbench import library_compat

    problems = library_compat.check()
    if args.json:
        print(json.dumps({"ties": [{**asdict(t), "problem": problems.get(f"{t.library} {t.name}")}
                                   for t in library_compat.TIES],
                          "versions": library_compat.version_notes()}, indent=2))
    else:
        for note in library_compat.version_notes():
            print(f"note: {note}")
        for tie in library_compat.TIES:
            problem = problems.get(f"{tie.library} {tie.name}")
            print(f"{'BROKEN' if problem else 'ok    '} {tie.library} {tie.where}.{tie.name}: {tie.why}"
                  + (f"\n       {problem}; without it: {tie.without}" if problem else ""))
    return 1 if library_compat.refusal(problems) else 0
