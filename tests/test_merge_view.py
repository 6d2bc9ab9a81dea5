"""The Runs tab's merged-model export, pure: adapter choices, where it may write, its progress as HTML."""

from __future__ import annotations

import pytest

from workbench.modeltools.export_model import ExportError
from workbench.runstore import runfolder
from workbench.spec.config import RunConfig
from workbench.ui import merge_panel, merge_view


@pytest.fixture
def run_dir(tmp_path, make_checkpoint):
    folder = tmp_path / "runs" / "20261123-100000-demo"
    RunConfig(model="tiny").save(folder / runfolder.CONFIG_FILE)
    for step in (0, 5, 10):
        make_checkpoint(folder, step)
    (folder / "checkpoint-0").rename(folder / runfolder.ADAPTER_DIR)  # a checkpoint's files include an adapter's
    return folder


def test_choices_are_the_final_adapter_then_checkpoints_newest_first(run_dir):
    assert merge_panel.adapter_choices(run_dir) == [
        ("final adapter", "final"),
        ("checkpoint-10 (step 10)", "10"),
        ("checkpoint-5 (step 5)", "5"),
    ]
    assert merge_panel.adapter_choices(None) == []


@pytest.mark.parametrize("choice, out", [("final", "merged"), ("10", "merged-checkpoint-10"), (None, "merged")])
def test_the_default_output_lies_in_the_run_folder(run_dir, choice, out):
    assert merge_view.checkpoint_of(choice) == (10 if choice == "10" else None)
    assert merge_view.default_out_text(run_dir, choice) == str(run_dir / out)


def test_the_dashboard_writes_only_inside_the_runs_folder(run_dir):
    runs = run_dir.parent
    assert merge_panel.resolve_out("merged-x", run_dir, runs) == run_dir / "merged-x"
    assert merge_panel.resolve_out(str(runs / "elsewhere"), run_dir, runs) == runs / "elsewhere"
    for text in ("/tmp/model", "../../outside", str(runs)):
        with pytest.raises(
            ExportError,
            match=r"^out: .* is outside the runs folder .*`python -m workbench "
            r"export-model` writes anywhere",
        ):
            merge_panel.resolve_out(text, run_dir, runs)
    with pytest.raises(ExportError, match="^out: no output folder given"):
        merge_panel.resolve_out("  ", run_dir, runs)


def test_progress_shows_the_stage_then_where_and_how_big():
    assert merge_view.progress_html(None) == ""
    running = merge_view.progress_html({"stage": "merging", "done": False}, seconds=4.2)
    assert "step 2 of 3, merging the adapter into the base weights (4 s)" in running and "width: 50%" in running
    done = merge_view.progress_html({"done": True, "out": "/r/<m>", "bytes": 540 * 2**20, "seconds": 9.1})
    assert "Merged model written" in done and "&lt;m&gt;" in done and "<m>" not in done and "540 MB, 9.1 s" in done
    failed = merge_view.progress_html({"done": True, "error": "OSError: <disk> full"})
    assert "wb-merge-note-error" in failed and "&lt;disk&gt;" in failed
