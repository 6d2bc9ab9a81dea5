"""Sign-in in a real Chromium: with accounts configured, the dashboard and its routes open only after sign-in."""

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
