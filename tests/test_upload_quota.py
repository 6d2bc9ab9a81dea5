"""Gradio's own upload route under each user's upload caps, and its cache kept only while pages use it (#42, 7).

A real app server with accounts and small caps (3 files, 2 MB per user),
sent real multipart uploads with httpx as a script would send them: past
either cap an upload is refused with 413 and the rule, its files never
left in Gradio's cache; parallel uploads cannot slip past together; each
user has caps of their own. Then the cache's cleaning: a file no event named
within the hour goes, one an event named stays.
"""

from __future__ import annotations

import os
import re
import time
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest

from workbench.access import cache_quota, uploads, users
from workbench.ui import browser_files, cleanup, gradio_compat

PASSWORD = "a-long-password"
NAMES = ["alice", "bob", "carol", "dave", "erin"]
KB = 1024
MB = 1024 * KB
UPLOAD_PATH = "gradio_api/upload"


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    from browser_fixtures import start_app

    root = tmp_path_factory.mktemp("upload-quota")
    users_file = root / "users.txt"
    users_file.write_text("".join(f"{name} user {users.hash_password(PASSWORD, iterations=1000)}\n" for name in NAMES))
    app = start_app(
        root / "runs",
        extra_env={
            users.USERS_FILE_ENV: str(users_file),
            "GRADIO_TEMP_DIR": str(root / "gradio"),
            uploads.MAX_FILES_ENV: "3",
            uploads.MAX_TOTAL_ENV: "2",
        },
    )
    app.cache = root / "gradio"
    yield app
    app.stop()


def signed_in(url: str, name: str) -> httpx.Client:
    """A client of the server with `name`'s session cookie (close it: an open keep-alive holds the shutdown)."""
    answer = httpx.post(url + "login", data={"username": name, "password": PASSWORD}, timeout=60)
    assert answer.status_code == 200, answer.text
    return httpx.Client(base_url=url, timeout=60, cookies=answer.cookies)


def upload(client: httpx.Client, *sizes: int, tag: str = "") -> httpx.Response:
    """POST files of `sizes` bytes (each of its own content) to Gradio's upload route, as the page does."""
    files = [("files", (f"rows{tag}{i}.jsonl", os.urandom(size), "application/json")) for i, size in enumerate(sizes)]
    return client.post(UPLOAD_PATH, files=files)


def cached_files(cache) -> list:
    return [path for path in cache.rglob("*") if path.is_file()] if cache.is_dir() else []


@pytest.mark.slow  # a real server
def test_past_the_files_cap_an_upload_is_refused_and_its_files_leave_the_cache(server):
    with signed_in(server.url, "bob") as bob:
        kept = [upload(bob, 100 * KB, tag=str(n)) for n in range(3)]
        assert [answer.status_code for answer in kept] == [200, 200, 200], [a.text for a in kept]
        before = set(cached_files(server.cache))
        refused = upload(bob, 10 * KB, tag="x")
        assert refused.status_code == 413, refused.text
        assert refused.text.startswith(
            "upload: that would leave you 4 files in the upload cache, over the 3 each user may hold"
        ), refused.text
        assert "wait for files no page used within the hour" in refused.text
        assert set(cached_files(server.cache)) == before, "the refused upload left a file in the cache"
    with signed_in(server.url, "carol") as carol:  # several files in one request: those past the cap go again
        answer = upload(carol, 10 * KB, 10 * KB, 10 * KB, 10 * KB, tag="many")
        assert answer.status_code == 413 and "4 files in the upload cache, over the 3" in answer.text, answer.text
        names = {path.name for path in cached_files(server.cache)}
        assert sum(name.startswith("rowsmany") for name in names) == 3, names


@pytest.mark.slow  # a real server
def test_past_the_bytes_cap_an_upload_is_refused_before_its_body_is_read(server):
    with signed_in(server.url, "dave") as dave:
        assert upload(dave, 1500 * KB, tag="big").status_code == 200
        before = len(cached_files(server.cache))
        refused = upload(dave, 700 * KB, tag="more")
        assert refused.status_code == 413, refused.text
        assert re.match(
            r"^upload: 0\.7 MB more would take what you uploaded to 2\.1 MB, over the 2 MB each user "
            r"may hold; wait for files",
            refused.text,
        ), refused.text
        assert len(cached_files(server.cache)) == before
        assert upload(dave, 300 * KB, tag="small").status_code == 200, "room left is room to use"


@pytest.mark.slow  # a real server
def test_parallel_uploads_cannot_pass_the_cap_together(server):
    with signed_in(server.url, "erin") as erin:
        with ThreadPoolExecutor(8) as pool:
            answers = list(pool.map(lambda n: upload(erin, 600 * KB, tag=f"p{n}"), range(8)))
    codes = sorted(answer.status_code for answer in answers)
    assert codes.count(200) == 3 and codes.count(413) == 5, [(a.status_code, a.text[:80]) for a in answers]
    names = [path.name for path in cached_files(server.cache) if path.name.startswith("rowsp")]
    assert len(names) == 3, names


@pytest.mark.slow  # a real server
def test_each_user_has_caps_of_their_own_and_nobody_signed_in_uploads_nothing(server):
    with signed_in(server.url, "alice") as alice:
        assert upload(alice, 100 * KB, tag="alice").status_code == 200
    anonymous = httpx.post(server.url + UPLOAD_PATH, files=[("files", ("x.jsonl", b"{}", "application/json"))])
    assert anonymous.status_code == 401


def test_the_route_held_is_the_one_gradio_serves():
    assert gradio_compat.upload_route_problem() is None
    assert gradio_compat.upload_route() == "/" + UPLOAD_PATH


# ---------------------------------------------------------------- the cache's cleaning


def test_the_cache_keeps_what_an_event_named_within_the_hour(tmp_path, monkeypatch):
    cache = tmp_path / "gradio"
    used, unused = cache / "a1" / "used.jsonl", cache / "b2" / "unused.jsonl"
    two_hours_ago = time.time() - 2 * 3600
    for path in (used, unused):
        path.parent.mkdir(parents=True)
        path.write_text("{}\n")
        for aged in (path, path.parent):
            os.utime(aged, (two_hours_ago, two_hours_ago))
    monkeypatch.setattr(browser_files, "upload_folder", lambda: str(cache))
    event = [{"path": str(used), "meta": {"_type": "gradio.FileData"}}, "text"]
    assert browser_files.refusal(event) is None  # an event of an open page names it: it is used now
    assert cleanup.remove_old_files(cache, cleanup.CACHE_MAX_AGE_SECONDS) == 1
    assert used.exists() and not unused.exists() and not unused.parent.exists()


def test_the_ledger_forgets_files_the_cleaning_removed(tmp_path):
    ledger = cache_quota.CacheLedger(caps=lambda: (2, 10 * MB))
    first, second = tmp_path / "1.jsonl", tmp_path / "2.jsonl"
    for path in (first, second):
        path.touch()
        os.truncate(path, 4 * MB)
    ledger.admit("bob", [str(first), str(second)])
    with pytest.raises(uploads.UploadError, match=r"^upload: that would leave you 3 files"):
        ledger.reserve("bob", KB)
    first.unlink()  # the cleaning removed it: its room is free again
    ledger.reserve("bob", 4 * MB)  # in flight: counted until released
    with pytest.raises(uploads.UploadError, match=r"^upload: 4\.0 MB more would take what you uploaded to 12\.0 MB"):
        ledger.reserve("bob", 4 * MB)
    ledger.release("bob", 4 * MB)
    ledger.reserve("bob", 4 * MB)
