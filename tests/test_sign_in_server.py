"""Sign-in on the served dashboard, over plain HTTP(S) as a browser or a script would send it.

One real app server with accounts whose passwords are hashed as `users add`
hashes them (PBKDF2, 600,000 rounds), and a second one over HTTPS with
sessions of a few seconds. What they must hold:

- checking passwords leaves the server answering other pages;
- a name with five wrong passwords waits, right password or not, and is told how long;
- an unknown name takes as long to refuse as a known one;
- sign-out is a POST from the dashboard's own page, and ends the session on the server;
- no other site gets a CORS answer; FastAPI's /docs and /openapi.json are off;
- HTTPS serves the app with a Secure cookie, and an expired session is refused by every route.
"""

from __future__ import annotations

import contextlib
import shutil
import statistics
import threading
import time

import httpx
import pytest
from helpers import make_certificate

from workbench.access import users

pytestmark = pytest.mark.slow

PASSWORD = "a-long-password"
# Each test signs in with its own names, so one test's failures never make another's name wait.
NAMES = ["alice", "bob", "carol", "dave", "erin", "frank", "grace", "heidi"]
WAIT_S = 3  # the wait after too many wrong passwords, short for the test (5 minutes by default)
SIGN_IN_WAIT_ENV = "WORKBENCH_SIGN_IN_WAIT_S"
SESSION_HOURS = 0.002  # 7.2 s


@pytest.fixture(scope="module")
def users_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("accounts") / "users.txt"
    path.write_text("".join(users.add_user_line(name, PASSWORD) + "\n" for name in NAMES))
    return path


@pytest.fixture(scope="module")
def server(users_file):
    from browser_fixtures import start_app

    app = start_app(
        users_file.parent / "runs", extra_env={users.USERS_FILE_ENV: str(users_file), SIGN_IN_WAIT_ENV: str(WAIT_S)}
    )
    yield app
    app.stop()


@contextlib.contextmanager
def signed_in(url: str, name: str):
    """An HTTP client signed in as `name`, closed afterwards (an open keep-alive holds the server's shutdown)."""
    with httpx.Client(base_url=url, timeout=30) as client:
        answer = client.post("login", data={"username": name, "password": PASSWORD})
        assert answer.status_code == 200, answer.text
        yield client


def sign_in_seconds(url: str, name: str, password: str) -> float:
    start = time.perf_counter()
    httpx.post(url + "login", data={"username": name, "password": password}, timeout=30)
    return time.perf_counter() - start


@pytest.mark.serial  # the page's answers are timed against six sign-ins
def test_checking_passwords_leaves_the_pages_answering(server):
    with signed_in(server.url, "alice") as page:
        logins, waits, logins_s = sign_in_while_asking(server.url, page)
    assert len(logins) == 6 and min(logins) > 0.05, "600,000 rounds of PBKDF2 take time"
    slowest = max(waits)
    assert len(waits) >= 3 and slowest < 0.5 and slowest < logins_s / 2, (
        f"the page waited up to {slowest:.3f} s while six sign-ins took {logins_s:.3f} s ({len(waits)} asks)"
    )


def sign_in_while_asking(url: str, page: httpx.Client) -> tuple[list[float], list[float], float]:
    """Six sign-ins at once while `page` asks the change route every 20 ms: (each sign-in's seconds,
    each answer's seconds, seconds from the first sign-in sent to the last answered)."""
    logins = []

    def log_in(name):
        logins.append(sign_in_seconds(url, name, PASSWORD))

    # Six at once (two per name, under each name's limit of attempts under way): on the event loop they
    # would hold every page for six checks in a row.
    threads = [threading.Thread(target=log_in, args=(name,)) for name in ["bob", "carol", "dave"] * 2]
    waits = []
    start = time.perf_counter()
    for thread in threads:
        thread.start()
    while any(thread.is_alive() for thread in threads):
        asked = time.perf_counter()
        assert page.get("workbench/changes", params={"run": "x"}).status_code == 200
        waits.append(time.perf_counter() - asked)
        time.sleep(0.02)
    return logins, waits, time.perf_counter() - start


def test_five_wrong_passwords_make_a_name_wait_and_say_how_long(server):
    for _ in range(5):
        answer = httpx.post(server.url + "login", data={"username": "erin", "password": "wrong-password"})
        assert answer.status_code == 400 and answer.json()["detail"] == "Incorrect credentials."
    for password in ("wrong-password", PASSWORD):  # the 6th, and then the right one: both wait
        answer = httpx.post(server.url + "login", data={"username": "erin", "password": password})
        assert answer.status_code == 429
        assert "Too many wrong passwords" in answer.json()["detail"] and f"wait {WAIT_S} s" in answer.json()["detail"]
        assert int(answer.headers["retry-after"]) <= WAIT_S
        assert "set-cookie" not in answer.headers
    time.sleep(WAIT_S + 0.2)
    assert httpx.post(server.url + "login", data={"username": "erin", "password": PASSWORD}).status_code == 200


@pytest.mark.serial  # two timings compared: another test's load would fall on one side
def test_an_unknown_name_takes_as_long_as_a_known_one(server):
    known, unknown = [], []
    for i in range(5):  # interleaved, so a busy moment of the machine falls on both
        known.append(sign_in_seconds(server.url, "frank", PASSWORD))
        unknown.append(sign_in_seconds(server.url, f"nobody{i}", PASSWORD))
    ratio = statistics.median(unknown) / statistics.median(known)
    assert 0.6 < ratio < 1.6, f"known {statistics.median(known):.3f} s, unknown {statistics.median(unknown):.3f} s"


def test_sign_out_is_a_post_from_the_page_itself(server):
    with signed_in(server.url, "grace") as client:
        check_sign_out(server.url, client)


def check_sign_out(url: str, client: httpx.Client) -> None:
    cookies = dict(client.cookies)
    own_page = url.rstrip("/")
    # Another site can make a signed-in browser GET /logout (a link, an image) or POST to it: neither signs out.
    assert client.get("logout", headers={"Referer": "https://evil.example/"}).status_code == 405
    assert client.post("logout", headers={"Origin": "https://evil.example"}).status_code == 403
    assert client.post("logout").status_code == 403, "a POST that names no page is not the page's"
    assert client.get("config").status_code == 200, "still signed in"
    assert client.post("logout", headers={"Origin": own_page}).status_code == 200
    # The old cookie, kept by whoever copied it, no longer opens anything.
    for path in ("config", "workbench/changes?run=x", "gradio_api/info"):
        assert httpx.get(url + path, cookies=cookies).status_code == 401, path
    answer = httpx.post(url + "gradio_api/queue/join", cookies=cookies, json={"data": [], "fn_index": 0})
    assert answer.status_code == 401


def test_no_other_site_gets_a_cors_answer(server):
    with signed_in(server.url, "heidi") as client:
        check_no_cors_answer(client)


def check_no_cors_answer(client: httpx.Client) -> None:
    # Served on a network name (not loopback), Gradio echoed any Origin with credentials allowed.
    foreign = {"Origin": "https://evil.example", "Host": "class.example:7860"}
    answer = client.get("config", headers=foreign)
    assert "access-control-allow-origin" not in answer.headers
    assert "access-control-allow-credentials" not in answer.headers
    preflight = client.options("gradio_api/queue/join", headers={**foreign, "Access-Control-Request-Method": "POST"})
    assert "access-control-allow-origin" not in preflight.headers
    own = client.get("config", headers={"Origin": "http://class.example:7860", "Host": "class.example:7860"})
    assert own.status_code == 200, "the page itself is same-origin and needs no CORS answer"


def test_fastapi_docs_and_schema_are_off(server):
    for path in ("docs", "redoc", "openapi.json", "docs/oauth2-redirect"):
        answer = httpx.get(server.url + path)
        assert answer.status_code in (401, 404), f"/{path} answered {answer.status_code}"
        assert "openapi" not in answer.text.lower()


@pytest.fixture(scope="module")
def https_server(users_file, tmp_path_factory):
    if not shutil.which("openssl"):
        pytest.skip("openssl is needed to make a test certificate")
    from browser_fixtures import start_app

    folder = tmp_path_factory.mktemp("https")
    cert, key = make_certificate(folder)
    app = start_app(
        folder / "runs",
        extra_env={users.USERS_FILE_ENV: str(users_file)},
        scheme="https",
        extra_args=["--ssl-certfile", str(cert), "--ssl-keyfile", str(key), "--session-hours", str(SESSION_HOURS)],
    )
    app.certificate = cert
    yield app
    app.stop()


def test_https_serves_the_app_with_a_secure_cookie(https_server):
    with httpx.Client(base_url=https_server.url, timeout=30, verify=str(https_server.certificate)) as client:
        answer = client.post("login", data={"username": "alice", "password": PASSWORD})
        assert answer.status_code == 200
        cookie = answer.headers["set-cookie"].lower()
        assert "secure" in cookie and "httponly" in cookie and "samesite=lax" in cookie
        page = client.get("")
        assert page.status_code == 200 and "<html" in page.text.lower()
        assert "GRPO Workbench" in client.get("config").text
    with pytest.raises(httpx.HTTPError):
        httpx.get(https_server.url.replace("https:", "http:"), timeout=10)


def test_an_expired_session_is_refused_by_every_route(https_server):
    with httpx.Client(base_url=https_server.url, timeout=30, verify=str(https_server.certificate)) as client:
        check_session_expires(client)


def check_session_expires(client: httpx.Client) -> None:
    start = time.monotonic()
    assert client.post("login", data={"username": "bob", "password": PASSWORD}).status_code == 200
    for path in ("config", "workbench/changes?run=x"):
        assert client.get(path).status_code == 200
    time.sleep(max(0.0, SESSION_HOURS * 3600 + 0.5 - (time.monotonic() - start)))
    for path in ("config", "workbench/changes?run=x", "gradio_api/info"):
        assert client.get(path).status_code == 401, path
    assert client.post("gradio_api/queue/join", json={"data": [], "fn_index": 0}).status_code == 401
    assert client.post("login", data={"username": "bob", "password": PASSWORD}).status_code == 200
    assert client.get("config").status_code == 200, "signing in again starts a new session"
