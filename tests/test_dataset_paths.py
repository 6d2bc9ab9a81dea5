"""A dataset named on a shared dashboard is read with every file it names under the path rule (issue 42, item 5).

The path rule (access/paths.py) decides the path typed; a dataset folder in a
user's own uploads or run may still name files elsewhere: its README's
`data_files` (`../carol/secret.jsonl`, an absolute path, a glob through a
linked folder), its `data_dir`, a data file that is a link, save_to_disk's
state.json. Each is refused, naming dataset_name, the rule and a fix, through
the app's own handlers as a signed-in user calls them (the Setup tab's data
preview, its live plan, the Train tab's launch), and the secret's rows never
come back; an honest hub-layout folder still previews.
"""

from __future__ import annotations

import json
import os

import gradio as gr
import pytest
from helpers import app_handler, setup_form_values, write_hub_dataset

from workbench.access import paths, users
from workbench.access.owners import Viewer
from workbench.sources import dataset_files, hub_datasets
from workbench.ui import paths_view
from workbench.ui.app import build_app
from workbench.ui.train_view import RunWatch

SECRET = "CAROL-SECRET-ROW"
USERS_LINE = "alice user pbkdf2_sha256$1$salt$HASH-OF-ALICE"


def readme(data_files: str, extra: str = "") -> str:
    """A README.md whose one config's train split reads `data_files`."""
    return (
        f"---\nconfigs:\n- config_name: default\n{extra}  data_files:\n  - split: train\n    path: {data_files}\n"
        "---\n# a dataset\n"
    )


@pytest.fixture(scope="module")
def places(tmp_path_factory):
    """A runs folder with carol's secret upload, a users file outside it, bob's uploads and a shared app."""
    root = tmp_path_factory.mktemp("dataset-paths")
    runs = root / "runs"
    carol = runs / "uploads" / "carol"
    carol.mkdir(parents=True)
    (carol / "secret.jsonl").write_text(json.dumps({"prompt": SECRET}) + "\n")
    (root / "server").mkdir()
    (root / "server" / "users.jsonl").write_text(json.dumps({"prompt": USERS_LINE}) + "\n")
    bob = runs / "uploads" / "bob"
    bob.mkdir(parents=True)
    accounts = {name: users.User(name, "user", "") for name in ("bob", "carol")}
    app = build_app(runs, users=accounts)
    return {
        "runs": runs,
        "root": root,
        "bob": bob,
        "secret": carol / "secret.jsonl",
        "users": root / "server" / "users.jsonl",
        "app": app,
    }


def hostile(places, name: str, data_files: str, extra: str = "", files: dict | None = None):
    """A hub-layout folder in bob's uploads whose README reads `data_files` (and holds `files`)."""
    folder = places["bob"] / name
    folder.mkdir()
    (folder / "README.md").write_text(readme(data_files, extra))
    for file_name, content in (files or {}).items():
        (folder / file_name).write_text(content)
    return folder


def preview(places, folder) -> str:
    """The Setup tab's data preview of `folder` as bob sees it (the page's HTML)."""
    handler = app_handler(places["app"], "setup_tab", "live_preview")
    return handler(gr.Request(username="bob"), *setup_form_values(dataset_name=str(folder), task="demo"))[0]


def assert_refused(places, folder, *, leads: str) -> None:
    html = preview(places, folder)
    assert SECRET not in html and "HASH-OF-ALICE" not in html, "a row from outside reached the page"
    assert "dataset_name" in html and "reads a file outside your uploads folder" in html and leads in html, html
    assert "keep a dataset&#x27;s files in its own folder" in html or "keep a dataset's files" in html, html
    scope = paths_view.scope_for(places["runs"], Viewer("bob"))
    with pytest.raises(paths.PathError, match=r"^dataset_name: .* reads a file outside .*; keep a dataset's files"):
        paths_view.confine_path("dataset_name", str(folder), scope)


def test_readme_data_files_climbing_into_another_users_uploads_are_refused(places):
    folder = hostile(places, "climb", "../../carol/secret.jsonl")
    assert_refused(places, folder, leads="carol/secret.jsonl")


def test_readme_data_files_with_an_absolute_path_are_refused(places):
    folder = hostile(places, "absolute", str(places["users"]))
    assert_refused(places, folder, leads="users.jsonl")


def test_a_data_file_that_links_outside_is_refused(places):
    folder = hostile(places, "linked", "train.jsonl")
    (folder / "train.jsonl").symlink_to(places["secret"])
    assert_refused(places, folder, leads="train.jsonl")
    bare = places["bob"] / "bare"  # no README: datasets finds the linked file by its name
    bare.mkdir()
    (bare / "train.jsonl").symlink_to(places["users"])
    assert_refused(places, bare, leads="train.jsonl")


def test_a_data_dir_or_a_glob_through_a_linked_folder_is_refused(places):
    hostile(places, "data-dir", '"*.jsonl"', extra="  data_dir: ../../carol\n")
    assert_refused(places, places["bob"] / "data-dir", leads="data_dir")
    other = places["bob"] / "other"  # an allowed folder outside the dataset, itself holding links out
    other.mkdir()
    (other / "rows.jsonl").symlink_to(places["secret"])
    (other / "carol").symlink_to(places["secret"].parent)
    hostile(places, "glob", '"../other/*.jsonl"')  # the glob's fixed part is allowed; what it finds is not
    assert_refused(places, places["bob"] / "glob", leads="secret.jsonl")
    hostile(places, "through", "../other/carol/secret.jsonl")
    assert_refused(places, places["bob"] / "through", leads="secret.jsonl")


def test_a_url_and_a_fifo_are_refused_without_reading(places):
    hostile(places, "url", "https://example.invalid/rows.jsonl")
    assert_refused(places, places["bob"] / "url", leads="is a URL")
    fifo = hostile(places, "fifo", "train.jsonl")
    os.mkfifo(fifo / "train.jsonl")  # opening it would block the server's thread forever
    assert_refused(places, fifo, leads="not a regular file")


def test_a_save_to_disk_folder_whose_state_names_an_outside_file_is_refused(places):
    from datasets import Dataset

    saved = places["bob"] / "saved"
    Dataset.from_list([{"prompt": "mine"}]).save_to_disk(str(saved))
    state = json.loads((saved / "state.json").read_text())
    state["_data_files"] = [{"filename": "../../carol/secret.arrow"}]
    (saved / "state.json").write_text(json.dumps(state))
    assert_refused(places, saved, leads="secret.arrow")


def test_an_honest_hub_layout_folder_and_save_to_disk_folder_still_preview(places):
    honest = write_hub_dataset(
        places["bob"] / "honest", {"main": {"train": [{"prompt": "What is 2 + 3?"}]}}, fmt="jsonl"
    )
    html = preview(places, honest)
    assert "What is 2 + 3?" in html and "reads a file outside" not in html, html
    scope = paths_view.scope_for(places["runs"], Viewer("bob"))
    assert paths_view.confine_path("dataset_name", str(honest), scope) == str(honest.resolve())
    from datasets import Dataset

    Dataset.from_list([{"prompt": "What is 4 + 4?"}]).save_to_disk(str(places["bob"] / "saved-honest"))
    assert "What is 4 + 4?" in preview(places, places["bob"] / "saved-honest")


def test_a_readme_whose_yaml_is_broken_says_so_without_a_traceback(places):
    folder = hostile(places, "broken", "*.jsonl")  # an unquoted glob: YAML reads `*` as an alias
    (folder / "train.jsonl").write_text(json.dumps({"prompt": "mine"}) + "\n")
    html = preview(places, folder)
    assert "README.md&#x27;s YAML front matter cannot be read" in html or "front matter cannot be read" in html, html


def test_the_live_plan_and_the_launch_refuse_it_before_reading_a_row(places):
    folder = places["bob"] / "climb-launch"
    folder.mkdir()
    (folder / "README.md").write_text(readme("../../carol/secret.jsonl"))
    bob = gr.Request(username="bob")
    *_, problems, _memory, ready = app_handler(places["app"], "setup_tab", "live_plan")(
        bob, *setup_form_values(dataset_name=str(folder), task="demo")
    )
    assert ready is False and "<b>dataset_name</b>" in problems and "reads a file outside" in problems, problems
    assert SECRET not in problems
    out = app_handler(places["app"], "train_tab", "on_launch")(
        bob, RunWatch(), 0.5, *setup_form_values(dataset_name=str(folder), task="demo")
    )
    notice = next(v.value for v in out.values() if isinstance(v, gr.HTML) and "wb-notice" in v.value)
    assert "Not launched" in notice and "reads a file outside" in notice and SECRET not in notice, notice


def test_a_cached_hub_dataset_reads_only_its_own_download(tmp_path, places):
    """The hub's README decides a hub id's files: they stay in its repository's folder in the hub cache."""
    repo = tmp_path / "datasets--someone--rows"
    snapshot = repo / "snapshots" / "abc"
    (repo / "blobs").mkdir(parents=True)
    snapshot.mkdir(parents=True)
    (repo / "blobs" / "1").write_text(json.dumps({"prompt": "hub row"}) + "\n")
    (snapshot / "train.jsonl").symlink_to(repo / "blobs" / "1")
    (snapshot / "README.md").write_text(readme("train.jsonl"))
    source = hub_datasets.Source(hub_datasets.HUB, str(snapshot), "someone/rows")
    anything = lambda path: True  # noqa: E731 - even a rule that allows everything does not widen a hub id
    assert dataset_files.outside(source, anything) is None
    (snapshot / "README.md").write_text(readme(str(places["users"])))
    assert "users.jsonl" in dataset_files.outside(source, anything)
