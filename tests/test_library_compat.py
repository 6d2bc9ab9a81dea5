"""The registry of private library ties (workbench/library_compat.py): it holds with the installed libraries, a changed
signature, a gone attribute or another generator layout is reported by the tie's name, and a run with a broken tie it
needs is refused before its model loads."""

from __future__ import annotations

import pytest
import trl

from workbench import library_compat
from workbench.cli import main
from workbench.runstore import runfolder
from workbench.spec.config import RunConfig


@pytest.mark.slow  # the first to import TRL in its process
def test_every_tie_holds_with_the_installed_libraries():
    assert library_compat.check() == {}
    assert library_compat.refusal({}) is None
    assert all(tie.sites and tie.why and tie.gone and tie.without for tie in library_compat.TIES)


def test_a_changed_signature_is_reported_by_the_ties_name_and_refuses_runs_that_need_it(monkeypatch):
    def _compute_loss(self, model, inputs, num_items_in_batch):  # a TRL that grew a parameter
        raise AssertionError("never called")

    monkeypatch.setattr(trl.GRPOTrainer, "_compute_loss", _compute_loss)
    problems = library_compat.check()
    assert problems == {"trl _compute_loss": "trl.GRPOTrainer._compute_loss takes (self, model, inputs, "
                                             "num_items_in_batch), written for (self, model, inputs)"}
    assert "trl _compute_loss" in library_compat.refusal(problems) and "make setup" in library_compat.refusal(problems)
    monkeypatch.delattr(trl.GRPOTrainer, "_tokenize_prompts")  # an optional tie: reported, not refused
    problems = library_compat.check()
    assert problems["trl _tokenize_prompts"] == "trl.GRPOTrainer._tokenize_prompts is gone"


def test_a_gone_attribute_a_gone_class_and_another_generator_layout_are_reported(monkeypatch):
    logs = next(tie for tie in library_compat.TIES if tie.name == "_logs")
    assert library_compat.problem_of(logs) is None
    moved = library_compat.Tie(**{**logs.__dict__, "where": "trl.GRPOConfig"})  # a class that never sets it
    assert library_compat.problem_of(moved) == "trl.GRPOConfig no longer mentions self._logs"
    head = next(tie for tie in library_compat.TIES if tie.name == "_ChunkedLogProbFunction")
    monkeypatch.delattr(trl.trainer.utils, "_ChunkedLogProbFunction")
    assert library_compat.problem_of(head) == "trl.trainer.utils._ChunkedLogProbFunction is gone"
    monkeypatch.setattr(library_compat, "RNG_STATE_BYTES", 4096)
    assert "torch.get_rng_state() holds 5056 bytes, written for 4096" in library_compat.check().values()


@pytest.mark.slow
def test_a_run_whose_libraries_broke_a_tie_it_needs_is_refused_before_its_model_loads(monkeypatch, tmp_path, capsys):
    from workbench.trainer.training import run_training

    monkeypatch.setattr(trl.GRPOTrainer, "_generate_and_score_completions", lambda self, inputs, extra: None)
    run_dir = tmp_path / "run"
    assert run_training(RunConfig.for_task("demo", model="tiny", max_steps=1), run_dir) == 1
    status = runfolder.read_status(run_dir)
    assert status["state"] == "failed" and "trl _generate_and_score_completions" in status["error"]["message"]
    assert "trl _generate_and_score_completions" in status["library_ties"]["problems"]
    assert status.get("speed_choice") is None  # refused before the speed choice and the model
    assert main(["ties"]) == 1 and "BROKEN trl trl.GRPOTrainer._generate_and_score_completions" in capsys.readouterr().out
