"""Per-user runs: the owner rule (access/owners.py) and where the tabs apply it (ui/run_access.py)."""

from __future__ import annotations

import json

import pytest

from workbench.access import owners, users
from workbench.access.owners import NOBODY, OPEN, Viewer
from workbench.insight import follow
from workbench.runstore import runfolder
from workbench.ui import run_access

ALICE, BOB, ADMIN = Viewer("alice"), Viewer("bob"), Viewer("root", admin=True)


@pytest.mark.parametrize(
    "viewer, owner, allowed",
    [
        (OPEN, "alice", True),
        (OPEN, None, True),
        (ALICE, "alice", True),
        (ALICE, "bob", False),
        (ALICE, None, False),
        (ALICE, "", False),
        (ADMIN, "alice", True),
        (ADMIN, None, True),
        (NOBODY, "", False),
        (NOBODY, None, False),
        (NOBODY, "alice", False),
    ],
    ids=[
        "open-owned",
        "open-unowned",
        "own",
        "other",
        "user-unowned",
        "user-empty-owner",
        "admin-other",
        "admin-unowned",
        "nobody-empty",
        "nobody-unowned",
        "nobody-owned",
    ],
)
def test_who_may_see_and_control_a_run(viewer, owner, allowed):
    assert owners.may_see(viewer, owner) is allowed
    assert owners.may_control(viewer, owner) is allowed


def test_viewer_comes_from_the_signed_in_name_and_the_accounts():
    hashed = users.hash_password("password1", iterations=1000)
    known = users.parse_users(f"alice user {hashed}\nroot admin {hashed}\n")
    assert owners.viewer_for("alice", {}) is OPEN, "no accounts: an open dashboard, everyone sees everything"
    assert owners.viewer_for(None, {}) is OPEN
    assert owners.viewer_for("alice", known) == Viewer("alice", admin=False)
    assert owners.viewer_for("root", known) == Viewer("root", admin=True)
    for stranger in (None, "", "mallory", ["alice"]):
        assert owners.viewer_for(stranger, known) is NOBODY


@pytest.fixture
def runs(tmp_path):
    """A runs folder with one run of alice, one of bob, one without an owner, and `alias`, a link to alice's run."""
    root = tmp_path / "runs"
    for run_id, owner in [("20260101-000001-a", "alice"), ("20260101-000002-b", "bob"), ("20260101-000003-x", None)]:
        run_dir = root / run_id
        run_dir.mkdir(parents=True)
        (run_dir / runfolder.CONFIG_FILE).write_text(json.dumps({"model": "tiny", "task": "demo"}))
        runfolder.update_status(run_dir, state="finished", step=1, owner=owner)
    (root / "alias").symlink_to(root / "20260101-000001-a", target_is_directory=True)
    return root


def names(paths):
    return [path.name for path in paths]


def test_each_user_lists_only_their_runs_and_an_admin_all(runs):
    everything = names(runfolder.list_run_dirs(runs))
    assert names(run_access.visible_run_dirs(runs, OPEN)) == everything
    assert names(run_access.visible_run_dirs(runs, ADMIN)) == everything
    assert names(run_access.visible_run_dirs(runs, BOB)) == ["20260101-000002-b"]
    assert "20260101-000001-a" in names(run_access.visible_run_dirs(runs, ALICE))
    assert names(run_access.visible_run_dirs(runs, NOBODY)) == []
    entries = [{"run_id": "a", "owner": "alice"}, {"run_id": "b", "owner": "bob"}, {"run_id": "x"}]
    assert [e["run_id"] for e in run_access.visible_entries(entries, BOB)] == ["b"]
    assert [e["run_id"] for e in run_access.visible_entries(entries, ADMIN)] == ["a", "b", "x"]


def test_a_run_id_from_the_browser_is_checked_against_the_owner(runs):
    assert run_access.run_dir_for(runs, "20260101-000002-b", BOB, control=True) == runs / "20260101-000002-b"
    assert run_access.run_dir_for(runs, "20260101-000001-a", ADMIN, control=True).name == "20260101-000001-a"
    # Another user's run, an unowned run, and no run at all read the same to a signed-in user.
    messages = set()
    for run_id in ("20260101-000001-a", "alias", "20260101-000003-x", "no-such-run"):
        with pytest.raises(run_access.RunAccessError, match=r"^run: .* is not one of your runs; pick") as refused:
            run_access.run_dir_for(runs, run_id, BOB, control=True)
        messages.add(str(refused.value).replace(repr(run_id), "ID"))
    assert len(messages) == 1
    # Ids that are not plain run folder names are refused before any owner is read, for everyone.
    for viewer in (OPEN, ADMIN, BOB):
        for run_id in ("..", "../20260101-000002-b", str(runs / "20260101-000002-b"), "a\0b", None, ["x"]):
            with pytest.raises(runfolder.RunIdError):
                run_access.run_dir_for(runs, run_id, viewer)


def test_the_change_signature_reveals_no_other_users_run(runs):
    def signature(viewer, run_id):
        return follow.change_signature(runs, run_id, run_dirs=run_access.visible_run_dirs(runs, viewer))

    assert signature(BOB, "20260101-000001-a") == signature(BOB, "no-such-run")
    before = signature(BOB, "20260101-000002-b")
    newer = runs / "20260102-000000-a"  # alice starts a run: bob's page must not hear of it
    newer.mkdir()
    (newer / runfolder.CONFIG_FILE).write_text("{}")
    runfolder.update_status(newer, state="starting", owner="alice")
    assert signature(BOB, "20260101-000002-b") == before
    assert signature(ADMIN, "20260101-000002-b") != signature(BOB, "20260101-000002-b"), "an admin's page hears of it"


def test_what_a_queued_run_waits_for_names_only_runs_the_viewer_may_see(runs):
    waits_for = "GPU 0 (run 20260101-000001-a), the CPU (run 20260101-000002-b, queued ahead)"
    hidden = "GPU 0 (another user's run), the CPU (run 20260101-000002-b, queued ahead)"
    assert run_access.hide_other_runs(waits_for, ["20260101-000002-b"]) == hidden
    assert run_access.waits_for_seen_by(BOB, runs, waits_for) == hidden
    assert run_access.waits_for_seen_by(ADMIN, runs, waits_for) == waits_for

    def read_status(run_dir):
        return {"state": "queued", "waits_for": waits_for}

    assert run_access.status_reader(read_status, runs, BOB)(runs / "20260101-000002-b")["waits_for"] == hidden
    assert run_access.status_reader(read_status, runs, OPEN) is read_status
