"""`python -m workbench users`: the accounts that may sign in to a dashboard served beyond this machine.

    python -m workbench users add alice --file users.txt            # asks for the password twice
    python -m workbench users add bob --admin --file users.txt --password-stdin < secret.txt
    python -m workbench users list --file users.txt

Writes only salted PBKDF2 hashes (workbench/access/users.py); the password is
read from the terminal without echo, or from standard input, never from the
command line, where other users of the machine could read it.
"""

from __future__ import annotations

import argparse
import getpass
import os
import sys
import tempfile
from pathlib import Path

from workbench.cli import ArgumentError


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser(
        "users",
        help="add or list the accounts of a shared dashboard",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    actions = parser.add_subparsers(dest="action", metavar="ACTION")
    actions.required = True
    add = actions.add_parser("add", help="add an account (or, with --replace, set a new password)")
    add.add_argument("name")
    add.add_argument("--admin", action="store_true", help="an admin sees and controls every user's runs")
    add.add_argument("--password-stdin", action="store_true", help="read the password from standard input")
    add.add_argument("--replace", action="store_true", help="replace the account if it exists")
    listing = actions.add_parser("list", help="list the accounts (names and roles only)")
    for sub in (add, listing):
        sub.add_argument(
            "--file",
            default=os.environ.get("WORKBENCH_USERS_FILE"),
            help="the users file (default $WORKBENCH_USERS_FILE)",
        )
        sub.set_defaults(run=run)


def _read_password(from_stdin: bool) -> str:
    if from_stdin:
        return sys.stdin.readline().rstrip("\r\n")
    first = getpass.getpass("password: ")
    if getpass.getpass("again: ") != first:
        raise ArgumentError("password: the two entries differ; run the command again")
    return first


def write_private(path: Path, text: str) -> None:
    """Replace `path` with `text`, readable by this account only at every moment (hashes are nobody else's business).

    The text goes to a temporary file made 0600 before a byte is written, then
    takes the file's place in one rename; a users file that was readable by
    others before is not left so.
    """
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as out:
            out.write(text)
        os.replace(temporary, path)
    finally:
        Path(temporary).unlink(missing_ok=True)


def run(args: argparse.Namespace) -> int:
    from workbench.access import users

    if not args.file:
        raise ArgumentError("--file: name the users file (or set WORKBENCH_USERS_FILE)")
    path = Path(args.file)
    try:
        known = users.load_users(path) if path.exists() else {}
        if args.action == "list":
            for user in known.values():
                print(f"{user.name}\t{user.role}")
            return 0
        if args.name in known and not args.replace:
            raise ArgumentError(f"user {args.name} exists in {path}; add --replace to set a new password")
        line = users.add_user_line(args.name, _read_password(args.password_stdin), "admin" if args.admin else "user")
    except users.UsersError as exc:
        raise ArgumentError(str(exc)) from None
    kept = [
        raw
        for raw in (path.read_text(encoding="utf-8").splitlines() if path.exists() else [])
        if raw.split()[:1] != [args.name]
    ]
    write_private(path, "\n".join([*kept, line]) + "\n")
    print(
        f"{'replaced' if args.name in known else 'added'} {args.name} ({'admin' if args.admin else 'user'}) in {path}"
    )
    return 0
