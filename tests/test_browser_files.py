"""Files named by the browser: only what was uploaded through the page is ever read.

A Gradio event's input may carry a `FileData` whose `path` the server then
reads (copies into its cache, hands to the handler). A crafted client can put
any server path there: another user's upload, `app.py`, the users file. The
app is served with accounts as a class would share it, with Gradio's cache in
a folder of its own, and driven as a crafted client drives it: plain HTTP to
`/gradio_api/queue/join` with a forged `FileData`, the answer read from the
queue's event stream. Every upload event the served `/config` lists, then
every event of the app, must refuse such a file with a message and copy
nothing (not into the user's uploads, not into Gradio's cache); a file sent
through Gradio's own upload route still lands in the user's uploads.
"""

from __future__ import annotations

import json
import secrets
import uuid
from pathlib import Path

import httpx
import pytest
from browser_fixtures import REPO
from helpers import PASSWORD

from workbench.access import users
from workbench.ui import browser_files

SECRET = f"bob's secret {secrets.token_hex(8)}"
# Component types whose value is one or more files the browser uploads.
FILE_TYPES = {
    "file",
    "uploadbutton",
    "image",
    "audio",
    "video",
    "gallery",
    "model3d",
    "multimodaltextbox",
    "imageeditor",
    "simpleimage",
}
REFUSAL = "was not uploaded through this page"


@pytest.fixture(scope="module")
def server(tmp_path_factory, accounts):
    from browser_fixtures import start_app

    base = tmp_path_factory.mktemp("browser-files")
    runs_dir = base / "runs"
    bob_folder = runs_dir / "uploads" / "bob"
    bob_folder.mkdir(parents=True)
    (bob_folder / "bob_reward.py").write_text(f"# {SECRET}\ndef short(completions, **kwargs):\n    return [1.0]\n")
    users_file = base / "users.txt"
    users_file.write_text(accounts)
    app = start_app(
        runs_dir,
        log_dir=base,
        extra_env={users.USERS_FILE_ENV: str(users_file), "GRADIO_TEMP_DIR": str(base / "gradio-cache")},
    )
    app.cache = base / "gradio-cache"
    yield app
    app.process.kill()
    app.process.wait(timeout=10)


@pytest.fixture(scope="module")
def alice(server):
    """Alice's session cookies and the served config, as her browser gets them after signing in."""
    with httpx.Client(base_url=server.url, timeout=60) as client:
        answer = client.post("login", data={"username": "alice", "password": PASSWORD})
        assert answer.status_code in (200, 302, 303), answer.text
        config = client.get("config")
        config.raise_for_status()
        yield client, config.json()


def send_event(client: httpx.Client, dependency: dict, data: list) -> dict:
    """Join the queue with `data` as `dependency`'s inputs; Gradio's last message about it (process_completed)."""
    session = uuid.uuid4().hex
    trigger = dependency["targets"][0][0] if dependency["targets"] else None
    joined = client.post(
        "gradio_api/queue/join",
        json={
            "data": data,
            "fn_index": dependency["id"],
            "trigger_id": trigger,
            "session_hash": session,
            "event_data": None,
        },
    )
    joined.raise_for_status()
    with client.stream("GET", "gradio_api/queue/data", params={"session_hash": session}) as stream:
        for line in stream.iter_lines():
            if line.startswith("data:"):
                message = json.loads(line[5:])
                if message.get("msg") == "process_completed":
                    return message
    raise AssertionError(f"the queue's stream ended without an answer for event {dependency['id']}")


def forged(path: Path) -> dict:
    """A FileData as Gradio's page sends one, naming a server file it never uploaded."""
    return {
        "path": str(path),
        "orig_name": path.name,
        "size": path.stat().st_size,
        "mime_type": None,
        "is_stream": False,
        "meta": {"_type": "gradio.FileData"},
    }


def upload_events(config: dict) -> list[dict]:
    """The dependencies that run on a file component's upload, from the served config."""
    file_ids = {c["id"] for c in config["components"] if c["type"] in FILE_TYPES}
    return [
        d
        for d in config["dependencies"]
        if d.get("backend_fn") and any(target in file_ids and event == "upload" for target, event in d["targets"])
    ]


def copies_of_secrets(*folders: Path) -> list[Path]:
    """Files under `folders` holding bob's secret or app.py's text."""
    app_text = (REPO / "app.py").read_bytes()
    found = []
    for folder in folders:
        for path in folder.rglob("*") if folder.is_dir() else []:
            if path.is_file() and (SECRET.encode() in path.read_bytes() or path.read_bytes() == app_text):
                found.append(path)
    return found


def assert_refused(answer: dict) -> None:
    assert answer["success"] is False, answer
    message = answer["output"].get("error") or ""
    assert REFUSAL in message and "upload" in message and "Traceback" not in message, answer


@pytest.mark.slow
def test_a_forged_file_in_an_upload_event_is_refused_and_a_real_upload_still_lands(server, alice):
    client, config = alice
    events = upload_events(config)
    assert events, "the Setup tab's upload event is in the served config"
    alice_folder = server.runs_dir / "uploads" / "alice"
    stolen = [server.runs_dir / "uploads" / "bob" / "bob_reward.py", REPO / "app.py"]
    for dependency in events:
        for target in stolen:
            # every file input gets the forged file (a list where the input takes several)
            data = [
                [forged(target)] if component_takes_list(config, i) else forged(target) for i in dependency["inputs"]
            ]
            assert_refused(send_event(client, dependency, data))
        assert copies_of_secrets(alice_folder, server.cache) == []

    # Gradio's own upload route, then the same event with the path it answered: stored in alice's uploads.
    uploaded = client.post("gradio_api/upload", files=[("files", ("mine.jsonl", b'{"prompt": "2 + 2?"}\n'))])
    uploaded.raise_for_status()
    path = Path(uploaded.json()[0])
    for dependency in events:
        data = [[forged(path)] if component_takes_list(config, i) else forged(path) for i in dependency["inputs"]]
        answer = send_event(client, dependency, data)
        assert answer["success"] is True, answer
    assert (alice_folder / "mine.jsonl").read_text() == '{"prompt": "2 + 2?"}\n'


def component_takes_list(config: dict, component_id: int) -> bool:
    component = next(c for c in config["components"] if c["id"] == component_id)
    return component["props"].get("file_count") in ("multiple", "directory")


@pytest.mark.slow
def test_no_event_reads_a_file_the_browser_did_not_upload(server, alice):
    """A forged file in every input of every event: refused before any handler runs, nothing copied."""
    client, config = alice
    states = {c["id"] for c in config["components"] if c["type"] == "state"}
    secret = server.runs_dir / "uploads" / "bob" / "bob_reward.py"
    sent = 0
    for dependency in config["dependencies"]:
        if not dependency.get("backend_fn") or not set(dependency["inputs"]) - states:
            continue
        data = [None if i in states else forged(secret) for i in dependency["inputs"]]
        assert_refused(send_event(client, dependency, data))
        sent += 1
    assert sent > 30
    assert copies_of_secrets(server.runs_dir / "uploads" / "alice", server.cache) == []


def test_every_file_named_in_an_event_is_found_however_deep():
    deep: list = [{"path": "/etc/passwd"}]
    for _ in range(5000):  # deeper than Python's recursion limit
        deep = [deep]
    inputs = [
        None,
        "text",
        3,
        {"value": [{"path": "/tmp/gradio/x/a.py", "meta": {"_type": "gradio.FileData"}}]},
        {"path": 7},
        deep,
    ]
    assert sorted(browser_files.named_paths(inputs)) == ["/etc/passwd", "/tmp/gradio/x/a.py"]
    assert browser_files.foreign_paths(inputs, ["/tmp/gradio"]) == ["/etc/passwd"]
