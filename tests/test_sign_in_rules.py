"""The rules behind a shared dashboard's sign-in, without a server: sessions that expire, the wait after
wrong passwords, unknown names costing what known ones do, the HTTPS files and the same-page check.

The served app's routes are tested over HTTP in tests/test_sign_in_server.py.
"""

from __future__ import annotations

import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers import make_certificate
from starlette.requests import Request

from workbench.access import sessions, sign_in_limits, tls, users
from workbench.access.sign_in_limits import FailedSignIns, SignInLimits
from workbench.errors import WorkbenchError
from workbench.ui.sign_in import from_own_page

REPO = Path(__file__).resolve().parents[1]


class Clock:
    """A clock the test moves by hand."""

    def __init__(self):
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_a_session_token_ends_after_its_hours_and_at_sign_out():
    clock = Clock()
    tokens = sessions.SessionTokens(max_age_s=3600, clock=clock)
    alice, bob = tokens.issue("alice"), tokens.issue("bob")
    assert len(alice) >= 40 and alice != bob
    # Gradio's routes read the mapping like a dict: get, [], in, keys.
    assert tokens.get(alice) == "alice" and tokens[bob] == "bob" and alice in tokens and set(tokens) == {alice, bob}
    tokens.end(bob)
    assert tokens.get(bob) is None and bob not in tokens
    clock.now += 3599
    assert tokens.get(alice) == "alice" and tokens.age_s(alice) == 3599
    clock.now += 1
    assert tokens.get(alice) is None and alice not in tokens and list(tokens) == [] and len(tokens) == 0
    with pytest.raises(KeyError):
        tokens[alice]
    tokens.end("never-issued")  # signing out twice, or with a forged cookie, is harmless
    assert tokens.get(None) is None


def test_an_expired_session_is_swept_out_when_another_begins():
    clock = Clock()
    tokens = sessions.SessionTokens(max_age_s=10, clock=clock)
    old = tokens.issue("alice")
    clock.now += 11
    tokens["from-gradio"] = "bob"  # Gradio's own login writes the mapping this way
    assert old not in tokens._users and tokens.get("from-gradio") == "bob"


def test_session_hours_are_read_with_a_clear_refusal():
    assert sessions.session_hours(None) == sessions.session_hours("") == 12.0
    assert sessions.session_hours("0.5") == 0.5
    for bad in ("0", "-3", "nan", "twelve", "1e9"):
        with pytest.raises(WorkbenchError, match=r"--session-hours: hours a sign-in lasts.*e\.g\. --session-hours 12"):
            sessions.session_hours(bad)


def test_five_wrong_passwords_make_a_name_wait_whatever_it_sends_next():
    clock = Clock()
    failures = FailedSignIns(SignInLimits(per_name=5, window_s=300, wait_s=300), clock=clock)
    for _ in range(5):
        assert failures.attempt("alice", "10.0.0.1") == 0
        failures.failed("alice", "10.0.0.1")
        clock.now += 1
    # The 6th is refused before its password is looked at, from any address: right or wrong, it waits.
    assert failures.attempt("alice", "10.0.0.2") == pytest.approx(299)
    assert failures.attempt("bob", "10.0.0.1") == 0, "another name from the same address goes on"
    failures.succeeded("bob", "10.0.0.1")
    clock.now += 298
    assert failures.wait_s("alice", "10.0.0.1") == pytest.approx(1)
    clock.now += 1
    assert failures.attempt("alice", "10.0.0.1") == 0
    failures.succeeded("alice", "10.0.0.1")
    assert failures.wait_s("alice", "10.0.0.1") == 0


def test_after_a_short_wait_one_attempt_then_waiting_again():
    clock = Clock()
    failures = FailedSignIns(SignInLimits(per_name=5, window_s=300, wait_s=3), clock=clock)
    for _ in range(5):
        failures.attempt("carol", "a")
        failures.failed("carol", "a")
    assert failures.attempt("carol", "a") == pytest.approx(3)
    clock.now += 3
    assert failures.attempt("carol", "a") == 0
    failures.failed("carol", "a")  # still five in the window: one more wrong password, another wait
    assert failures.attempt("carol", "a") == pytest.approx(3)


def test_an_address_may_fail_more_often_than_a_name_but_not_forever():
    clock = Clock()
    failures = FailedSignIns(SignInLimits(per_name=5, per_address=20), clock=clock)
    for i in range(20):  # 20 students behind one router, each one typo
        assert failures.attempt(f"student{i}", "school") == 0
        failures.failed(f"student{i}", "school")
    assert failures.attempt("student20", "school") == pytest.approx(300)
    assert failures.attempt("student20", "home") == 0


def test_attempts_sent_at_once_for_one_name_still_meet_the_limit():
    failures = FailedSignIns(SignInLimits(per_name=5), clock=Clock())
    let_through = [failures.attempt("alice", f"10.0.0.{i}") == 0 for i in range(10)]
    assert sum(let_through) == 5, "checks run in threads: the ones under way count"
    # A class signing in at once from one address is not held back by it.
    for i in range(30):
        assert failures.attempt(f"student{i}", "school") == 0


def test_the_wait_is_said_in_minutes_and_seconds():
    assert sign_in_limits.describe_wait(250.2) == "4 min 11 s"
    assert sign_in_limits.describe_wait(300) == "5 min"
    assert sign_in_limits.describe_wait(0.1) == "1 s"
    assert "wait 40 s, then sign in again" in sign_in_limits.wait_message(40)
    assert sign_in_limits.limits_from_env({}).wait_s == 300
    assert sign_in_limits.limits_from_env({sign_in_limits.SIGN_IN_WAIT_ENV: "3"}).wait_s == 3
    with pytest.raises(WorkbenchError, match="WORKBENCH_SIGN_IN_WAIT_S: seconds"):
        sign_in_limits.limits_from_env({sign_in_limits.SIGN_IN_WAIT_ENV: "soon"})


def _median_cpu_seconds(first, second, repeats: int = 7) -> tuple[float, float]:
    """Median CPU seconds of `first()` and of `second()`, taken in turn: the work of hashing, not how long the
    scheduler kept this process waiting (what other processes on the machine would add to one side)."""
    samples: tuple[list, list] = ([], [])
    for _ in range(repeats):
        for fn, kept in zip((first, second), samples):
            start = time.process_time()
            fn()
            kept.append(time.process_time() - start)
    return statistics.median(samples[0]), statistics.median(samples[1])


@pytest.mark.serial  # two timings compared: another test's load would fall on one side
def test_an_unknown_name_costs_what_a_known_one_does():
    rounds = 100_000
    known = {"alice": users.User("alice", "user", users.hash_password("a-long-password", iterations=rounds))}
    assert users.stand_in_hash(known).split("$")[1] == str(rounds), "as dear as the dearest account"
    assert not users.check_password("", users.stand_in_hash(known))
    known_s, unknown_s = _median_cpu_seconds(
        lambda: users.authenticate(known, "alice", "wrong-password"),
        lambda: users.authenticate(known, "mallory", "wrong-password"),
    )
    assert 0.6 < unknown_s / known_s < 1.6, f"known {known_s:.3f} s, unknown {unknown_s:.3f} s"


def test_https_files_are_checked_before_serving(tmp_path):
    assert tls.check_tls(None, None) is False
    with pytest.raises(WorkbenchError, match="--ssl-keyfile: HTTPS needs the certificate and its private key"):
        tls.check_tls(tmp_path / "cert.pem", None)
    with pytest.raises(WorkbenchError, match="--ssl-certfile: .*openssl req -x509"):
        tls.check_tls(None, tmp_path / "key.pem")
    with pytest.raises(WorkbenchError, match="--ssl-certfile: .* is not a file this account can read"):
        tls.check_tls(tmp_path / "missing.pem", tmp_path / "missing-key.pem")
    (tmp_path / "cert.pem").write_text("not a certificate")
    (tmp_path / "key.pem").write_text("not a key")
    with pytest.raises(WorkbenchError, match="are not a PEM certificate and its private key"):
        tls.check_tls(tmp_path / "cert.pem", tmp_path / "key.pem")
    if shutil.which("openssl"):
        cert, key = make_certificate(tmp_path)
        assert tls.check_tls(cert, key) is True


def test_app_refuses_half_an_https_setting_or_bad_hours(tmp_path):
    for args, words in [
        (["--ssl-certfile", str(tmp_path / "cert.pem")], "error: --ssl-keyfile: HTTPS needs"),
        (["--session-hours", "0"], "error: --session-hours: hours a sign-in lasts"),
    ]:
        result = subprocess.run(
            [sys.executable, "app.py", "--port", "1", "--runs-dir", str(tmp_path), *args],
            capture_output=True,
            text=True,
            timeout=60,
            cwd=REPO,
            env={"PATH": "/usr/bin:/bin", "PYTHONPATH": "."},
        )
        assert result.returncode != 0 and words in result.stderr and "Traceback" not in result.stderr


def request_with(headers: dict, scheme: str = "http", host: str = "class.example:7860") -> Request:
    raw = [(b"host", host.encode())] + [(k.lower().encode(), v.encode()) for k, v in headers.items()]
    return Request(
        {
            "type": "http",
            "method": "POST",
            "scheme": scheme,
            "path": "/logout",
            "headers": raw,
            "query_string": b"",
            "server": ("127.0.0.1", 7860),
        }
    )


@pytest.mark.parametrize(
    "headers, scheme, host, own",
    [
        ({"Origin": "http://class.example:7860"}, "http", "class.example:7860", True),
        ({"Referer": "http://class.example:7860/?tab=runs"}, "http", "class.example:7860", True),
        ({"Origin": "https://class.example"}, "https", "class.example:443", True),
        ({"Origin": "https://class.example", "X-Forwarded-Host": "class.example"}, "http", "127.0.0.1:7860", True),
        ({"Origin": "https://evil.example"}, "http", "class.example:7860", False),
        ({"Origin": "http://class.example:7861"}, "http", "class.example:7860", False),
        ({"Origin": "http://class.example.evil.example:7860"}, "http", "class.example:7860", False),
        ({"Origin": "null"}, "http", "class.example:7860", False),
        ({"Referer": "javascript:alert(1)"}, "http", "class.example:7860", False),
        ({}, "http", "class.example:7860", False),
    ],
)
def test_only_the_dashboards_own_page_may_sign_out(headers, scheme, host, own):
    assert from_own_page(request_with(headers, scheme, host)) is own
    if not headers:
        assert from_own_page(request_with(headers, scheme, host), allow_missing=True), (
            "a sign-in from a script (no page at all) is not a cross-site request"
        )
