"""`python -m workbench ...` and the `workbench` command (pyproject.toml's script, which calls `main`): the
command-line entry point."""

import sys

from workbench import startup

startup.pause_collection()  # resumed once the command's libraries are in (workbench/startup.py)

from workbench.cli import main  # noqa: E402  (after the pause: the dispatcher's imports are start-up too)

if __name__ == "__main__":
    sys.exit(main())
