"""Sign-in in a real Chromium: with accounts configured, the dashboard and its routes open only after sign-in,
its Sign out button ends the session, and the login page says how long a name must wait after wrong passwords."""

from __future__ import annotations

import urllib.error
import urllib.request

import pytest
from browser_fixtures import FIRST_LOAD_TIMEOUT_MS, UI_TIMEOUT_MS

from workbench.access import users

pytestmark = [pytest.mark.browser, pytest.mark.slow]


def test_sign_in_gates_the_dashboard(app_factory, tmp_path, page):
    users_file = tmp_path / "users.txt"
    users_file.write_text(users.add_user_line("alice", "a-long-password", "admin") + "\n")
    server = app_factory(tmp_path / "runs", extra_env={users.USERS_FILE_ENV: str(users_file)})

    # The page's own JSON route is closed too: no run signatures for strangers.
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(server.url + "workbench/changes?run=x", timeout=30)
    assert refused.value.code in (401, 403)

    page.goto(server.url, timeout=FIRST_LOAD_TIMEOUT_MS)
    page.get_by_label("username").fill("alice")
    page.get_by_label("password").fill("wrong-password")
    page.get_by_role("button", name="Login").click()
    page.get_by_text("Incorrect Credentials").wait_for(timeout=UI_TIMEOUT_MS)
    assert page.get_by_role("tab", name="Calculator").count() == 0

    page.get_by_label("username").fill("alice")  # the refused attempt emptied the form
    page.get_by_label("password").fill("a-long-password")
    page.get_by_role("button", name="Login").click()
    page.get_by_role("tab", name="Calculator").wait_for(timeout=FIRST_LOAD_TIMEOUT_MS)
    answer = page.evaluate("async () => (await fetch('workbench/changes?run=x')).status")
    assert answer == 200, "signed in, the page's script gets its answers"

    # Sign out ends the session on the server: the cookie the browser had opens nothing any more.
    cookie = "; ".join(f"{c['name']}={c['value']}" for c in page.context.cookies())
    page.get_by_role("button", name="Sign out").click()
    page.get_by_label("username").wait_for(timeout=FIRST_LOAD_TIMEOUT_MS)
    assert page.get_by_role("tab", name="Calculator").count() == 0
    request = urllib.request.Request(server.url + "workbench/changes?run=x", headers={"Cookie": cookie})
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(request, timeout=30)
    assert refused.value.code == 401

    # Five wrong passwords for a name, and the login page says how long it must wait.
    for attempt in range(6):
        page.get_by_label("username").fill("bob")
        page.get_by_label("password").fill(f"guess-{attempt}")
        with page.expect_response(lambda response: response.url.endswith("/login")) as answered:
            page.get_by_role("button", name="Login").click()
        assert answered.value.status == (400 if attempt < 5 else 429)
    page.get_by_role("alert").filter(has_text="Too many wrong passwords").wait_for(timeout=UI_TIMEOUT_MS)
    assert "then sign in again" in page.get_by_role("alert").filter(has_text="Too many").inner_text()
