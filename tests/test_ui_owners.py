"""A dashboard a class shares: each user's runs and uploads, in the app served with accounts.

Alice and bob are users, root is an admin; the runs folder holds a finished
run of each user and one started from the CLI (no owner). The app is driven
the way a crafted client would drive it: Gradio's own client, signed in, and
plain HTTP for the page's JSON route; then each event handler of the built
app is called directly with another user's run id, the gate the browser
cannot skip.
"""

from __future__ import annotations

import html
import json
import re

import pytest
from helpers import PASSWORD

from workbench.access import users
from workbench.runstore import runfolder

pytestmark = pytest.mark.slow

ALICE_RUN, BOB_RUN, CLI_RUN = "20260101-000001-alice", "20260101-000002-bob", "20260101-000003-cli"


@pytest.fixture(scope="module")
def runs_dir(tmp_path_factory):
    root = tmp_path_factory.mktemp("shared") / "runs"
    for run_id, owner in [(ALICE_RUN, "alice"), (BOB_RUN, "bob"), (CLI_RUN, None)]:
        run_dir = root / run_id
        run_dir.mkdir(parents=True)
        (run_dir / runfolder.CONFIG_FILE).write_text(json.dumps({"model": "tiny", "task": "demo"}))
        runfolder.update_status(run_dir, state="finished", step=1, total_steps=1, owner=owner)
    return root


@pytest.fixture(scope="module")
def server(runs_dir, accounts):
    from browser_fixtures import start_app

    users_file = runs_dir.parent / "users.txt"
    users_file.write_text(accounts)
    app = start_app(runs_dir, extra_env={users.USERS_FILE_ENV: str(users_file)})
    yield app
    # Killed, not asked: a closed client's heartbeat stream lingers until the server's next ping, and a
    # graceful shutdown would wait for it; a test server has nothing to save.
    app.process.kill()
    app.process.wait(timeout=10)


@pytest.fixture
def clients(server):
    """`clients[name]`: Gradio's client signed in as `name`, closed when the test ends (an open heartbeat
    stream holds the server's shutdown)."""
    from gradio_client import Client

    class SignedIn(dict):
        def __missing__(self, name):
            self[name] = Client(server.url, auth=(name, PASSWORD), verbose=False)
            return self[name]

    signed_in = SignedIn()
    yield signed_in
    for client in signed_in.values():
        client.close()


def endpoint(client, name: str, elem_id: str) -> str:
    """The API name of the handler `name` (gradio numbers repeats: name_1, ...) whose outputs hold `elem_id`."""
    ids = {c["id"] for c in client.config["components"] if c.get("props", {}).get("elem_id") == elem_id}
    for dependency in client.config["dependencies"]:
        api = dependency.get("api_name") or ""
        if re.fullmatch(rf"{name}(_\d+)?", api) and ids & set(dependency["outputs"]):
            return f"/{api}"
    raise AssertionError(f"no handler {name} with {elem_id} among its outputs")


def runs_listed(client) -> list[str]:
    """The run ids of the Runs tab's table, as its page load fills it for this client's user."""
    outputs = client.predict([], None, "reward", 0.0, api_name=endpoint(client, "on_load", "wb-runs-table"))
    return [row[0] for row in outputs[0]["data"]]


def test_each_user_sees_only_their_runs_and_an_admin_sees_all(server, clients):
    import httpx

    alice, bob, root = clients["alice"], clients["bob"], clients["root"]
    assert runs_listed(bob) == [BOB_RUN]
    assert runs_listed(alice) == [ALICE_RUN]
    assert runs_listed(root) == [CLI_RUN, BOB_RUN, ALICE_RUN]

    # Bob crafts a delete of alice's run: refused, and her run stays.
    with pytest.raises(Exception, match="not in the list of choices|not one of your runs"):
        bob.predict(ALICE_RUN, [], "reward", 0.0, api_name="/delete")
    assert (server.runs_dir / ALICE_RUN / runfolder.CONFIG_FILE).is_file()

    # A Train tab that remembers alice's run (the browser's own storage) shows bob none of it.
    shown = bob.predict(ALICE_RUN, 0.5, api_name=endpoint(bob, "on_load", "wb-train-progress"))
    assert ALICE_RUN not in json.dumps(shown)

    # The page's change route: alice's run reads to bob like no run at all, and her new run moves nothing.
    def signature(client, run):
        answer = httpx.get(f"{server.url}workbench/changes", params={"run": run}, cookies=client.cookies, timeout=30)
        answer.raise_for_status()
        return answer.json()["signature"]

    assert signature(bob, ALICE_RUN) == signature(bob, "no-such-run") != signature(root, ALICE_RUN)
    before = signature(bob, BOB_RUN)
    newer = server.runs_dir / "20260102-000000-alice"
    newer.mkdir()
    (newer / runfolder.CONFIG_FILE).write_text("{}")
    runfolder.update_status(newer, state="finished", owner="alice")
    assert signature(bob, BOB_RUN) == before


def test_uploads_land_in_the_users_folder_and_other_paths_are_refused(server, clients, tmp_path):
    from gradio_client import handle_file

    from workbench.ui import setup_tab

    bob = clients["bob"]
    data = tmp_path / "my prompts.jsonl"
    data.write_text('{"prompt": "What is 2 + 2?"}\n')
    reward = tmp_path / "rewards.py"
    marker = tmp_path / "ran"
    reward.write_text(
        f"open({str(marker)!r}, 'w')\n\ndef short(prompts, completions, **kwargs):\n"
        "    return [1.0 for _ in completions]\n"
    )
    _, listing, dataset_path, reward_file = bob.predict(
        [handle_file(str(data)), handle_file(str(reward))], api_name="/on_upload"
    )
    folder = (server.runs_dir / "uploads" / "bob").resolve()
    assert dataset_path == str(folder / "my_prompts.jsonl") and reward_file == str(folder / "rewards.py")
    assert (folder / "my_prompts.jsonl").read_text() == data.read_text() and "my_prompts.jsonl" in listing

    note, code = bob.predict(reward_file, api_name="/show_reward_code")
    assert "<code>short</code>" in note and code["value"].strip() == reward.read_text().strip()

    form = dict(zip(setup_tab.FORM_KEYS, setup_tab.benchmark_values()))  # the hardware state is the server's
    form.update(dataset_name=dataset_path, reward_file=reward_file)
    command = bob.predict(*[form[key] for key in setup_tab.FORM_KEYS], api_name="/preview")
    assert "workbench train" in command, command
    assert not marker.exists(), "the dashboard never runs the reward file"

    elsewhere = {**form, "dataset_name": "/etc/passwd", "reward_file": str(reward)}
    refused = bob.predict(*[elsewhere[key] for key in setup_tab.FORM_KEYS], api_name="/preview")
    for field in ("dataset_name", "reward_file"):
        assert re.search(
            rf"{field}: .* is not a file.* in your uploads folder .*bob, one of your runs; .*upload", refused
        ), refused


def test_every_event_checks_the_run_against_its_user(runs_dir, accounts):
    """The handlers themselves refuse another user's run id, whatever the page offered."""
    import inspect

    import gradio as gr
    from gradio import utils as gradio_utils

    from workbench.ui.app import build_app
    from workbench.ui.train_view import RunWatch

    app = build_app(runs_dir, users=users.parse_users(accounts))
    # Gradio passes the request only to a parameter whose annotation it can resolve; otherwise the
    # handler would silently get its inputs one place off. Every handler that asks, gets it.
    asking = [f.fn for f in app.fns.values() if f.fn is not None and "request" in inspect.signature(f.fn).parameters]
    assert len(asking) > 20
    assert [fn.__name__ for fn in asking if gradio_utils.get_type_hints(fn).get("request") is not gr.Request] == []

    def handler(module: str, name: str):
        return next(
            f.fn for f in app.fns.values() if f.fn.__module__ == f"workbench.ui.{module}" and f.fn.__name__ == name
        )

    def said(outputs) -> str:
        """The text of a handler's outputs, as the page would show it."""
        values = outputs.values() if isinstance(outputs, dict) else outputs
        return html.unescape(" ".join(str(getattr(value, "value", value)) for value in values))

    bob, root = gr.Request(username="bob"), gr.Request(username="root")
    refusal = rf"run: '{ALICE_RUN}' is not one of your runs"
    assert re.search(refusal, said(handler("runs_tab", "delete")(bob, ALICE_RUN, [], [], "reward", 0.0, {})))
    assert re.search(refusal, said(handler("runs_tab", "ask_to_delete")(bob, ALICE_RUN)))
    assert re.search(refusal, said(handler("train_tab", "on_pick")(bob, ALICE_RUN, RunWatch(), 0.5)))
    watching_alice = RunWatch(run_id=ALICE_RUN)
    assert re.search(refusal, said(next(handler("train_tab", "on_stop")(bob, watching_alice))))
    assert re.search(refusal, said(handler("train_tab", "on_resume")(bob, watching_alice)))
    assert re.search(refusal, said(handler("compare_tab", "on_answer")(bob, ALICE_RUN, None, "hi", 8, None)))
    assert handler("compare_tab", "on_checkpoint_focus")(bob, ALICE_RUN, None).choices == []
    assert not (runs_dir / ALICE_RUN / runfolder.STOP_FILE).exists()
    assert runfolder.read_status(runs_dir / ALICE_RUN)["state"] == "finished"
    assert (runs_dir / ALICE_RUN).is_dir()
    export = handler("merge_panel", "start")
    assert re.search(refusal, said(export(bob, ALICE_RUN, None, "merged", None)))
    outside = said(export(root, ALICE_RUN, None, str(runs_dir / BOB_RUN / "merged"), None))
    assert f"is outside the run folder {runs_dir / ALICE_RUN}" in outside
    assert not (runs_dir / BOB_RUN / "merged").exists()

    # An admin may sample alice's run, but only from one of its own checkpoints (tests/test_runfolder.py: no links out).
    refused = said(handler("compare_tab", "on_answer")(root, ALICE_RUN, "checkpoint-1/../../x", "hi", 8, None))
    assert "checkpoint: 'checkpoint-1/../../x' is not a checkpoint of run" in refused
