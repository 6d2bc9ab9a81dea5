"""A note above the Train tab's bar about a run in flight ("Resuming ... from its last checkpoint") is cleared
once the run reaches a final state, instead of staying after the run finished."""

from __future__ import annotations

from workbench.ui.train_tab import notice_outlived


def test_the_resume_note_goes_when_the_run_finishes():
    assert notice_outlived({"state": "running", "step": 3}, {"state": "finished", "step": 10})
    assert notice_outlived({"state": "stopped"}, {"state": "finished"})  # resumed and done between two looks
    assert notice_outlived({"state": "finished"}, {"state": "finished"}) is False
    assert notice_outlived({"state": "queued"}, {"state": "running"}) is False
    assert notice_outlived({}, {"state": "finished"})  # a resume seen first as finished (a short run)
