"""User accounts for a dashboard served beyond this machine: names, roles, salted password hashes.

A dashboard starts processes and runs reward code, so serving it on anything
but a loopback address requires sign-in (`app.py` refuses otherwise). The
accounts come from a users file (`--users FILE` or `WORKBENCH_USERS_FILE`) or
from the `WORKBENCH_USERS` environment variable, one account per line:

    NAME ROLE pbkdf2_sha256$ITERATIONS$SALT$HASH

ROLE is `user` or `admin` (`users add NAME --admin`): a user sees and controls
the runs they launched, an admin every run (access/owners.py). SALT and HASH
are base64. Only hashes are stored: `python -m workbench users add NAME` asks
for the password and writes the line; nothing here ever prints or logs a
password. Checking uses `hmac.compare_digest`, so a wrong password takes as
long as a right one.

Pure standard library; no gradio, no torch.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import ipaddress
import os
import re
import secrets
from dataclasses import dataclass
from pathlib import Path

from workbench.errors import WorkbenchError

USERS_FILE_ENV = "WORKBENCH_USERS_FILE"
USERS_ENV = "WORKBENCH_USERS"
ROLES = ("user", "admin")
SCHEME = "pbkdf2_sha256"
# OWASP's 2023 advice for PBKDF2-HMAC-SHA256: deliberately slow, and paid once per sign-in.
ITERATIONS = 600_000
# A name is also a folder name (its uploads on a shared dashboard): never "." or "..".
NAME_PATTERN = re.compile(r"^(?!\.+$)[A-Za-z0-9_.-]{1,64}$")
MIN_PASSWORD_LENGTH = 8


class UsersError(WorkbenchError):
    """A users file or account that cannot be used; the message names the line or field and a fix."""


@dataclass(frozen=True)
class User:
    name: str
    role: str
    password_hash: str

    @property
    def is_admin(self) -> bool:
        return self.role == "admin"


def hash_password(password: str, salt: bytes | None = None, iterations: int = ITERATIONS) -> str:
    """`pbkdf2_sha256$ITERATIONS$SALT$HASH` for `password` (a fresh random salt unless given)."""
    salt = secrets.token_bytes(16) if salt is None else salt
    digest = hashlib.pbkdf2_hmac("sha256", password.encode("utf-8"), salt, iterations)
    return "$".join((SCHEME, str(iterations), base64.b64encode(salt).decode(), base64.b64encode(digest).decode()))


def check_password(password: str, password_hash: str) -> bool:
    """True when `password` matches `password_hash`; False for any malformed hash, never an exception."""
    try:
        scheme, iterations, salt, expected = password_hash.split("$")
        if scheme != SCHEME:
            return False
        digest = hashlib.pbkdf2_hmac("sha256", password.encode("utf-8"), base64.b64decode(salt), int(iterations))
        return hmac.compare_digest(digest, base64.b64decode(expected))
    except (ValueError, TypeError):
        return False


def parse_users(text: str, source: str = "users") -> dict[str, User]:
    """Accounts from users-file text (blank lines and `#` comments skipped); a bad line raises UsersError."""
    users: dict[str, User] = {}
    for number, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        fields = line.split()
        where = f"{source}, line {number}"
        if len(fields) != 3:
            raise UsersError(
                f"{where}: a line is `NAME ROLE HASH` (3 fields), found {len(fields)}; "
                "write it with `python -m workbench users add NAME`"
            )
        name, role, password_hash = fields
        if not NAME_PATTERN.match(name):
            raise UsersError(
                f"{where}: user name {name[:40]!r} may hold only letters, digits, '.', '_', '-' "
                "(1 to 64 characters, not only dots)"
            )
        if role not in ROLES:
            raise UsersError(f"{where}: role {role[:20]!r} is not one of {', '.join(ROLES)}")
        if not password_hash.startswith(SCHEME + "$") or password_hash.count("$") != 3:
            raise UsersError(
                f"{where}: the password must be stored hashed ({SCHEME}$...), never as plain text; "
                "write the line with `python -m workbench users add NAME`"
            )
        if name in users:
            raise UsersError(f"{where}: user {name} is listed twice; keep one line per user")
        users[name] = User(name, role, password_hash)
    return users


def load_users(path: str | os.PathLike | None = None, environ: dict | None = None) -> dict[str, User]:
    """The accounts the app knows: from `path`, else WORKBENCH_USERS_FILE, else WORKBENCH_USERS; {} when none."""
    environ = os.environ if environ is None else environ
    path = path or environ.get(USERS_FILE_ENV)
    if path:
        try:
            text = Path(path).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise UsersError(
                f"users file {path}: cannot be read ({exc.__class__.__name__}); "
                "create it with `python -m workbench users add NAME --file FILE`"
            ) from None
        return parse_users(text, str(path))
    if environ.get(USERS_ENV):
        return parse_users(environ[USERS_ENV].replace(";", "\n"), USERS_ENV)
    return {}


def iterations_of(password_hash: str) -> int:
    """The PBKDF2 rounds a stored hash was made with (0 when it is malformed)."""
    try:
        return int(password_hash.split("$")[1])
    except (IndexError, ValueError):
        return 0


def stand_in_hash(users: dict[str, User]) -> str:
    """A hash no password matches, as costly to check as the dearest account's: what an unknown name is checked against."""
    rounds = max((iterations_of(user.password_hash) for user in users.values()), default=ITERATIONS) or ITERATIONS
    zeros = base64.b64encode(bytes(32)).decode()
    return "$".join((SCHEME, str(rounds), zeros[:24], zeros))


def authenticate(users: dict[str, User], name: str, password: str) -> User | None:
    """The user when `name` and `password` match an account, else None (same work either way)."""
    user = users.get(name)
    # An unknown name costs one check of the same rounds, so the time of an answer does not tell names apart
    # (building a hash for it, as before, cost a second PBKDF2 and so told them apart again).
    matched = check_password(password, user.password_hash if user else stand_in_hash(users))
    return user if user is not None and matched else None


def add_user_line(name: str, password: str, role: str = "user") -> str:
    """The users-file line for a new account; refuses a bad name, role or a short password."""
    if not NAME_PATTERN.match(name):
        raise UsersError(
            f"user name {name[:40]!r}: only letters, digits, '.', '_', '-' (1 to 64 characters, not only dots)"
        )
    if role not in ROLES:
        raise UsersError(f"role {role!r}: use one of {', '.join(ROLES)}")
    if len(password) < MIN_PASSWORD_LENGTH:
        raise UsersError(f"password: at least {MIN_PASSWORD_LENGTH} characters; choose a longer one")
    return f"{name} {role} {hash_password(password)}"


def is_loopback(host: str) -> bool:
    """True for addresses only this machine reaches (127.0.0.0/8, ::1, localhost)."""
    if host.strip().lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def check_serving(host: str, users: dict[str, User]) -> None:
    """Refuse to serve beyond this machine without accounts: anyone who reaches the page could run code."""
    if users or is_loopback(host):
        return
    raise UsersError(
        f"--host {host}: serving beyond this machine requires sign-in, because the dashboard starts processes "
        "and runs reward code with this account's rights. Create an account with "
        "`python -m workbench users add NAME --file users.txt`, then start with "
        f"`python app.py --host {host} --users users.txt` (or set WORKBENCH_USERS_FILE); "
        "or serve on 127.0.0.1 only"
    )
