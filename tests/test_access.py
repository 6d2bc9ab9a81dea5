"""Sign-in for a shared dashboard: hashed accounts, the users command, and app.py refusing to serve openly."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from workbench.access import users
from workbench.cli import main as cli_main

FAST = 1000  # PBKDF2 iterations for tests that only need a valid hash


def test_a_password_checks_against_its_hash_and_nothing_else():
    stored = users.hash_password("correct horse", iterations=FAST)
    assert stored.startswith("pbkdf2_sha256$1000$") and "correct horse" not in stored
    assert users.check_password("correct horse", stored)
    assert not users.check_password("correct horsE", stored)
    assert users.hash_password("correct horse", iterations=FAST) != stored, "a fresh salt every time"
    for broken in ("", "plain", "pbkdf2_sha256$x$y$z", "md5$1$AA==$AA==", "pbkdf2_sha256$10$!!$!!"):
        assert users.check_password("correct horse", broken) is False


def test_users_file_lines_are_read_and_bad_ones_named():
    line = f"alice admin {users.hash_password('s3cret-pass', iterations=FAST)}"
    known = users.parse_users(f"# accounts\n\n{line}\nbob user {users.hash_password('x' * 8, iterations=FAST)}\n")
    assert set(known) == {"alice", "bob"} and known["alice"].is_admin and not known["bob"].is_admin
    assert users.authenticate(known, "alice", "s3cret-pass") == known["alice"]
    assert users.authenticate(known, "alice", "wrong") is None
    assert users.authenticate(known, "mallory", "s3cret-pass") is None
    for text, words in [
        ("alice admin hunter2", "never as plain text"),
        ("alice boss pbkdf2_sha256$1$a$b", "role"),
        ("al/ce user pbkdf2_sha256$1$a$b", "user name"),
        (".. user pbkdf2_sha256$1$a$b", "not only dots"),
        ("alice user", "3 fields"),
        (f"{line}\n{line}", "listed twice"),
    ]:
        with pytest.raises(users.UsersError, match=words) as caught:
            users.parse_users(text, "users.txt")
        assert "users.txt, line" in str(caught.value)


def test_accounts_come_from_the_file_then_the_environment(tmp_path):
    hashed = users.hash_password("password1", iterations=FAST)
    path = tmp_path / "users.txt"
    path.write_text(f"carol user {hashed}\n")
    assert set(users.load_users(path, environ={})) == {"carol"}
    assert set(users.load_users(None, environ={users.USERS_FILE_ENV: str(path)})) == {"carol"}
    assert set(users.load_users(None, environ={users.USERS_ENV: f"dan user {hashed};erin admin {hashed}"})) == {
        "dan",
        "erin",
    }
    assert users.load_users(None, environ={}) == {}
    with pytest.raises(users.UsersError, match="cannot be read"):
        users.load_users(tmp_path / "missing.txt", environ={})


@pytest.mark.parametrize(
    "host, loopback",
    [
        ("127.0.0.1", True),
        ("127.0.1.5", True),
        ("localhost", True),
        ("::1", True),
        ("0.0.0.0", False),
        ("192.168.1.20", False),
        ("::", False),
        ("example.org", False),
    ],
)
def test_only_loopback_may_serve_without_accounts(host, loopback):
    assert users.is_loopback(host) is loopback
    if loopback:
        users.check_serving(host, {})
    else:
        with pytest.raises(users.UsersError, match="requires sign-in.*users add NAME"):
            users.check_serving(host, {})
    users.check_serving(host, {"a": users.User("a", "user", "pbkdf2_sha256$1$a$b")})


def test_users_command_writes_hashes_only(tmp_path, monkeypatch, capsys):
    path = tmp_path / "users.txt"
    monkeypatch.setattr("sys.stdin", __import__("io").StringIO("a-long-password\n"))
    assert cli_main(["users", "add", "alice", "--admin", "--file", str(path), "--password-stdin"]) == 0
    text = path.read_text()
    assert "a-long-password" not in text and text.startswith("alice admin pbkdf2_sha256$")
    assert users.authenticate(users.load_users(path), "alice", "a-long-password") is not None
    assert oct(path.stat().st_mode & 0o777) == "0o600"

    monkeypatch.setattr("sys.stdin", __import__("io").StringIO("another-password\n"))
    assert cli_main(["users", "add", "alice", "--file", str(path), "--password-stdin"]) == 2
    assert "add --replace" in capsys.readouterr().err
    monkeypatch.setattr("sys.stdin", __import__("io").StringIO("short\n"))
    assert cli_main(["users", "add", "bob", "--file", str(path), "--password-stdin"]) == 2
    assert "at least 8 characters" in capsys.readouterr().err
    monkeypatch.setattr("sys.stdin", __import__("io").StringIO("a-long-password\n"))
    assert cli_main(["users", "add", "..", "--file", str(path), "--password-stdin"]) == 2
    assert "not only dots" in capsys.readouterr().err, "a name is also its uploads folder's name"

    assert cli_main(["users", "list", "--file", str(path)]) == 0
    assert capsys.readouterr().out == "alice\tadmin\n"


# Runs `users add` with a hook that, at every audited call of the process (opens, renames, chmods, ...),
# notes the mode of each file in the users file's folder that holds text: what another account could read.
WATCHED_USERS_ADD = """
import os, runpy, sys
folder, seen, busy = sys.argv[1], set(), []
def watch(event, args):
    if busy:
        return
    busy.append(1)
    try:
        for entry in os.scandir(folder):
            if entry.is_file() and entry.stat().st_size:
                seen.add((entry.name, oct(entry.stat().st_mode & 0o777)))
    finally:
        busy.pop()
os.umask(0o022)
sys.addaudithook(watch)
sys.argv = ["workbench", *sys.argv[2:]]
try:
    runpy.run_module("workbench", run_name="__main__")
finally:
    print(sorted(seen))
"""


@pytest.mark.slow  # three `workbench users add` processes, each hashing a password
def test_the_users_file_is_never_readable_by_others_not_even_while_written(tmp_path):
    folder = tmp_path / "accounts"
    folder.mkdir()
    path = folder / "users.txt"

    def add(name: str, *extra: str) -> set:
        result = subprocess.run(
            [
                sys.executable,
                "-c",
                WATCHED_USERS_ADD,
                str(folder),
                "users",
                "add",
                name,
                "--file",
                str(path),
                "--password-stdin",
                *extra,
            ],
            input="a-long-password\n",
            capture_output=True,
            text=True,
            timeout=60,
            cwd=Path(__file__).resolve().parents[1],
        )
        assert result.returncode == 0, result.stderr
        return {mode for _, mode in eval(result.stdout.splitlines()[-1])}

    assert add("alice") == {"0o600"}
    path.chmod(0o644)  # made readable by hand: the next change makes it private again
    assert add("bob") >= {"0o600"} and oct(path.stat().st_mode & 0o777) == "0o600"
    assert add("bob", "--replace") == {"0o600"}
    assert [line.split()[0] for line in path.read_text().splitlines()] == ["alice", "bob"]
    assert [p.name for p in folder.iterdir()] == ["users.txt"], "no temporary file left behind"


def test_app_refuses_an_open_address_without_accounts(tmp_path):
    result = subprocess.run(
        [sys.executable, "app.py", "--host", "0.0.0.0", "--port", "1", "--runs-dir", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=Path(__file__).resolve().parents[1],
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": "."},
    )
    assert result.returncode != 0
    assert "--host 0.0.0.0: serving beyond this machine requires sign-in" in result.stderr
    assert "Traceback" not in result.stderr
