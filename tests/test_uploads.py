"""Each user's uploads on a shared dashboard (access/uploads.py) and the Setup tab's use of them (uploads_view)."""

from __future__ import annotations

import pytest

from workbench.access import paths, uploads
from workbench.access.owners import Viewer
from workbench.sources import dataset_reading
from workbench.spec.config import RunConfig
from workbench.ui import files_panel, paths_view, uploads_view
from workbench.ui.paths_view import scope_for

REWARD_SOURCE = "import os\n\ndef short(prompts, completions, **kwargs):\n    return [1.0 for _ in completions]\n"


@pytest.fixture
def folder(tmp_path):
    """Bob's uploads folder with a dataset and a reward file, and files outside it."""
    mine = uploads.uploads_dir(tmp_path / "runs", "bob")
    mine.mkdir(parents=True)
    (mine / "prompts.jsonl").write_text('{"prompt": "What is 2 + 2?"}\n')
    (mine / "rewards.py").write_text(REWARD_SOURCE)
    theirs = uploads.uploads_dir(tmp_path / "runs", "alice")
    theirs.mkdir(parents=True)
    (theirs / "secret.jsonl").write_text('{"prompt": "alice only"}\n')
    (tmp_path / "elsewhere.py").write_text(REWARD_SOURCE)
    (mine / "link.py").symlink_to(tmp_path / "elsewhere.py")
    return mine


def test_the_accepted_suffixes_are_what_datasets_io_reads():
    assert uploads.DATASET_SUFFIXES == dataset_reading.SUPPORTED


@pytest.mark.parametrize(
    "name, stored",
    [
        ("prompts.jsonl", "prompts.jsonl"),
        ("My Data (v2).CSV", "My_Data_v2_.csv"),
        ("../../etc/x.py", "x.py"),
        ("C:\\Users\\me\\r.py", "r.py"),
        (".hidden.json", "hidden.json"),
        ("x..py", "x.py"),
        ("名前.parquet", "_.parquet"),
        ("a" * 300 + ".jsonl", "a" * 94 + ".jsonl"),
    ],
    ids=["plain", "spaces-case", "dotdot", "windows", "hidden", "dots-before-suffix", "unicode", "long"],
)
def test_upload_names_are_cleaned(name, stored):
    assert uploads.safe_file_name(name) == stored


@pytest.mark.parametrize("name", ["model.bin", "run.sh", "noext", "", "x.py.exe", "..py", "-.py", "..", None], ids=str)
def test_other_files_are_refused(name):
    with pytest.raises(uploads.UploadError, match=r"^upload: .* is not a dataset or reward file; upload a"):
        uploads.safe_file_name(name)


@pytest.mark.parametrize("user", ["", ".", "..", "a/b", "a\0b", None], ids=repr)
def test_no_user_name_reaches_outside_the_uploads_folder(tmp_path, user):
    with pytest.raises(uploads.UploadError, match="cannot name an uploads folder"):
        uploads.uploads_dir(tmp_path, user)


def test_an_upload_lands_in_the_users_folder_within_the_size_limit(tmp_path, folder, monkeypatch):
    source = tmp_path / "gradio-temp.jsonl"
    source.write_text('{"prompt": "hi"}\n')
    stored = uploads.store_upload(source, "../../prompts two.jsonl", folder)
    assert stored == folder / "prompts_two.jsonl" and stored.read_text() == '{"prompt": "hi"}\n'
    # Replacing a link replaces the link, never the file it points to.
    uploads.store_upload(source, "link.py", folder)
    assert not (folder / "link.py").is_symlink() and (tmp_path / "elsewhere.py").read_text() == REWARD_SOURCE
    assert [p.name for p in uploads.list_uploads(folder)] == [
        "link.py",
        "prompts.jsonl",
        "prompts_two.jsonl",
        "rewards.py",
    ]
    monkeypatch.setattr(uploads, "MAX_UPLOAD_BYTES", 10)
    with pytest.raises(uploads.UploadError, match=r"upload: prompts.jsonl is 0.0 MB, over the 50 MB limit"):
        uploads.store_upload(source, "prompts.jsonl", folder)
    assert not [p for p in folder.iterdir() if p.name.startswith(".upload-")], "no temporary file left behind"


def test_paths_resolve_inside_the_users_folder_only(tmp_path, folder):
    scope = scope_for(folder.parent.parent, Viewer("bob"))
    assert paths_view.confine_path("dataset_path", "prompts.jsonl", scope) == str(folder / "prompts.jsonl")
    assert paths_view.confine_path("reward_file", str(folder / "rewards.py"), scope) == str(folder / "rewards.py")
    assert paths_view.confine_path("dataset_path", "", scope) == ""
    outside = [
        "../alice/secret.jsonl",
        str(folder.parent / "alice" / "secret.jsonl"),
        "/etc/passwd",
        "link.py",
        "missing.jsonl",
        "x\0y",
        "n" * 5000,
        str(tmp_path / "elsewhere.py"),
    ]
    for value in outside:
        with pytest.raises(
            paths.PathError,
            match=r"^dataset_path: .* is not a file or folder in your uploads folder "
            r".*bob, one of your runs; on a shared dashboard .* upload the file",
        ):
            paths_view.confine_path("dataset_path", value, scope)


def test_a_config_keeps_only_files_of_the_users_uploads(folder):
    scope = scope_for(folder.parent.parent, Viewer("bob"))
    cfg = RunConfig(dataset_path="prompts.jsonl", reward_file="rewards.py")
    confined, problems = paths_view.confine_config(cfg, scope)
    assert (confined.dataset_path, confined.reward_file, problems) == (
        str(folder / "prompts.jsonl"),
        str(folder / "rewards.py"),
        [],
    )
    confined, problems = paths_view.confine_config(
        RunConfig(dataset_path="/etc/passwd", reward_file="../alice/x.py"), scope
    )
    assert (confined.dataset_path, confined.reward_file) == ("", ""), "nothing outside is read by later checks"
    assert [p.field for p in problems] == ["dataset_path", "reward_file"]
    assert "is not a file or folder in your uploads folder" in problems[0].rule and "upload the file" in problems[0].fix


def test_the_reward_code_is_shown_as_text_and_never_run(tmp_path, folder):
    scope = scope_for(folder.parent.parent, Viewer("bob"))
    marker = tmp_path / "ran"  # the file makes it when it runs
    (folder / "rewards.py").write_text(REWARD_SOURCE + f"open({str(marker)!r}, 'w').write('ran')\n")
    note, code = files_panel.reward_source_view("rewards.py", scope)
    assert "<code>short</code>" in note and "rights of the account serving" in note
    assert code == (folder / "rewards.py").read_text() and not marker.exists()
    note, code = files_panel.reward_source_view(str(tmp_path / "elsewhere.py"), scope)
    assert code == "" and "is not a file in your uploads folder" in note
    (folder / "markup.py").write_text("def <script>(:\n")
    note, code = files_panel.reward_source_view("markup.py", scope)
    assert code == "" and "syntax error" in note and "<script>" not in note
    assert files_panel.reward_source_view("", scope) == ("", "")
    note, code = files_panel.reward_source_view(str(tmp_path / "elsewhere.py"), None)
    assert "<code>short</code>" in note and code == REWARD_SOURCE, "an open dashboard shows any path typed"


def test_uploaded_files_are_listed_with_refusals_escaped(tmp_path, folder):
    sent = [tmp_path / "a.csv", tmp_path / "<img src=x>.exe"]
    for path in sent:
        path.write_text("prompt\nhi\n")
    stored, refused = files_panel.store_files(
        [str(p) for p in sent] + [str(tmp_path / "gone.py")], folder, upload_folder=str(tmp_path)
    )
    assert stored == [folder / "a.csv"] and len(refused) == 2
    assert uploads_view.newest_of(stored, uploads.DATASET_SUFFIXES) == str(folder / "a.csv")
    assert uploads_view.newest_of(stored, uploads.REWARD_SUFFIXES) is None
    page = files_panel.uploads_html(folder, refused)
    assert "<img" not in page and "&lt;img src=x&gt;" in page and "could not be stored" in page
    assert str(folder / "a.csv") in page
    assert "No uploads yet" in files_panel.uploads_html(tmp_path / "empty")


def test_only_files_in_the_upload_folder_are_stored(tmp_path, folder):
    """What the browser's upload route wrote is stored; another user's file, or a link out of it, never is."""
    sent = tmp_path / "gradio" / "abc123"
    sent.mkdir(parents=True)
    (sent / "mine.jsonl").write_text('{"prompt": "mine"}\n')
    theirs = tmp_path / "runs" / "uploads" / "alice" / "secret.jsonl"
    (sent / "link.jsonl").symlink_to(theirs)
    paths = [
        str(sent / "mine.jsonl"),
        str(theirs),
        str(sent / "link.jsonl"),
        str(sent / ".." / ".." / "elsewhere.py"),
        "relative.py",
        "nul\0.py",
    ]
    stored, refused = files_panel.store_files(paths, folder, upload_folder=str(tmp_path / "gradio"))
    assert stored == [folder / "mine.jsonl"]
    assert refused == [
        f"upload: {name!r} was not uploaded through this page; upload the file with the upload box "
        "under 'Your files' in the Setup tab"
        for name in ["secret.jsonl", "link.jsonl", "elsewhere.py", "relative.py", "nul\0.py"]
    ]
    assert not (folder / "secret.jsonl").exists()


def test_dataset_name_takes_a_hub_id_or_a_file_of_the_users_uploads(folder):
    scope = scope_for(folder.parent.parent, Viewer("bob"))
    assert paths_view.confine_path("dataset_name", "openai/gsm8k", scope) == "openai/gsm8k"
    assert paths_view.confine_path("dataset_name", "prompts.jsonl", scope) == str(folder / "prompts.jsonl")
    confined, problems = paths_view.confine_config(RunConfig(dataset_name="/etc/passwd"), scope)
    assert confined.dataset_name == "" and [p.field for p in problems] == ["dataset_name"]
    assert "(a dataset may also be a hub id)" in problems[0].fix
