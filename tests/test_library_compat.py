"""The registry of private library ties (workbench/library_compat.py): every tie holds with the installed libraries,
and each kind of change (a signature, an attribute an `__init__` no longer sets or TRL no longer reads, a gone global
or class attribute, a cache layer that no longer reads what is rebound, another generator layout, a name clash with
the workbench's hooks) is reported by the tie's name, on the real objects with the change made; a broken tie a run
needs refuses that run before its model loads, one it can do without and another version are said in status.json."""

from __future__ import annotations

from collections import defaultdict

import pytest
import torch
import transformers.cache_utils
import trl
import trl.trainer.utils
from transformers.cache_utils import DynamicLayer

from workbench import library_compat
from workbench.cli import main
from workbench.runstore import runfolder
from workbench.spec.config import RunConfig
from workbench.trainer import ties_verdict
from workbench.trainer.recorder import StatusWriter
from workbench.trainer.training import check_library_ties


def test_every_tie_holds_with_the_installed_libraries():
    assert library_compat.check() == {}
    verdict = ties_verdict.verdict(RunConfig(generation="vllm-server", num_machines=2), problems={})
    assert verdict.refusal() is None and verdict.refused == ()
    for tie in library_compat.TIES:
        assert (
            tie.why
            and tie.touches
            and tie.sites
            and tie.gone
            and tie.without
            and tie.needed_when in library_compat.NEEDED_WHEN
        ), tie.label
        assert tie.library in library_compat.WRITTEN_FOR and tie.kind in library_compat.CHECKS, tie.label
    assert set(library_compat.WRITTEN_FOR) == {tie.library for tie in library_compat.TIES}
    assert set(library_compat.WRITTEN_FOR) <= set(library_compat.LIBRARIES)
    assert set(library_compat.PRIVATE_NAMES) >= {
        "_generate_single_turn",
        "_generate_and_score_completions",
        "_compute_loss",
        "_get_per_token_logps_and_entropies",
        "_entropy_bonus_enabled",
        "_ChunkedLogProbFunction",
        "_metrics",
        "_logs",
        "_tokenizer",
        "_tokenize_prompts",
        "_last_loaded_step",
        "_save_rng_state",
        "_attn_implementation",
    }


def test_grpo_hooks_forward_each_override_and_nothing_else():
    overrides = {tie.name: tie.hook for tie in library_compat.TIES if tie.kind == "override"}
    assert all(overrides.values())
    defined = {name for name in vars(library_compat.GRPOHooks) if not name.startswith("__")}
    assert defined == set(overrides) | set(overrides.values())


def test_the_ties_command_prints_the_registry_checked(capsys):
    import json

    assert main(["ties"]) == 0
    out = capsys.readouterr().out
    assert all(f"ok     {tie.label} " in out for tie in library_compat.TIES)
    assert f"{len(library_compat.TIES)} ties, 0 broken" in out
    assert main(["ties", "--json"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert [tie["name"] for tie in printed["ties"]] == [tie.name for tie in library_compat.TIES]
    assert all(tie["problem"] is None for tie in printed["ties"])


def test_the_written_for_versions_are_requirements_pins():
    from pathlib import Path

    pins = dict(
        line.strip().split("==")
        for line in (Path(__file__).resolve().parents[1] / "requirements.txt").read_text().splitlines()
        if "==" in line
    )
    assert {library: pins[library] for library in library_compat.WRITTEN_FOR} == library_compat.WRITTEN_FOR


def test_a_changed_signature_is_reported_by_the_ties_name_and_refuses_every_run(monkeypatch):
    def _compute_loss(self, model, inputs, num_items_in_batch):  # a TRL that grew a parameter
        raise AssertionError("never called")

    monkeypatch.setattr(trl.GRPOTrainer, "_compute_loss", _compute_loss)
    problems = library_compat.check()  # (the ties it no longer reads are said too: this one reads nothing)
    assert (
        problems["trl _compute_loss"] == "trl.GRPOTrainer._compute_loss takes (self, model, inputs, "
        "num_items_in_batch), written for (self, model, inputs)"
    )
    refusal = ties_verdict.verdict(RunConfig(), problems).refusal()
    assert "trl _compute_loss" in refusal and "make setup" in refusal and "trl==1.16.0" in refusal


def test_trailing_parameters_with_defaults_are_allowed_only_where_the_override_takes_them(monkeypatch):
    tie = library_compat.BY_LABEL["trl _get_per_token_logps_and_entropies"]
    trls = trl.GRPOTrainer._get_per_token_logps_and_entropies

    def grown(
        self,
        model,
        input_ids,
        attention_mask,
        logits_to_keep,
        batch_size=None,
        compute_entropy=False,
        compute_aux_loss=False,
        pixel_values=None,
        audio_values=None,
    ):  # one more multimodal input: fine
        return trls(self, model, input_ids, attention_mask, logits_to_keep, batch_size, compute_entropy)

    monkeypatch.setattr(trl.GRPOTrainer, "_get_per_token_logps_and_entropies", grown)
    assert library_compat.problem_of(tie) is None

    def reordered(
        self,
        model,
        input_ids,
        attention_mask,
        logits_to_keep,
        compute_entropy=False,
        batch_size=None,
        compute_aux_loss=False,
    ):
        return trls(self, model, input_ids, attention_mask, logits_to_keep, batch_size, compute_entropy)

    monkeypatch.setattr(trl.GRPOTrainer, "_get_per_token_logps_and_entropies", reordered)
    assert library_compat.problem_of(tie).startswith(
        "trl.GRPOTrainer._get_per_token_logps_and_entropies takes (self, model, input_ids, attention_mask, "
        "logits_to_keep, compute_entropy, batch_size, compute_aux_loss), written for (self, model, input_ids, "
        "attention_mask, logits_to_keep, batch_size, compute_entropy, compute_aux_loss, ...)"
    )


def test_a_tie_only_some_runs_need_refuses_those_runs_only(monkeypatch):
    monkeypatch.delattr(trl.GRPOTrainer, "_tokenize_prompts")
    problems = library_compat.check()
    assert problems == {"trl _tokenize_prompts": "trl.GRPOTrainer._tokenize_prompts is gone"}
    assert ties_verdict.verdict(RunConfig(), problems).refusal() is None  # warned: transformers' generation
    assert ties_verdict.verdict(None, problems).refusal() is None  # `workbench ties`: what every run needs
    refused = ties_verdict.verdict(RunConfig(generation="vllm-server"), problems)
    assert refused.refused == ("trl _tokenize_prompts",) and "generation=vllm-server" in refused.refusal()


def test_an_attribute_init_no_longer_sets_or_trl_no_longer_reads_is_reported(monkeypatch):
    init = trl.GRPOTrainer.__init__

    def renamed_init(self, *args, **kwargs):  # an __init__ that sets its metrics under another name
        init(self, *args, **kwargs)
        self.metrics_store = {}

    monkeypatch.setattr(trl.GRPOTrainer, "__init__", renamed_init)
    problems = library_compat.check()
    for name in ("_metrics", "_logs", "_tokenizer", "_last_loaded_step", "_entropy_bonus_enabled"):
        assert problems[f"trl {name}"] == f"trl.GRPOTrainer.__init__ no longer sets {name}"
    monkeypatch.undo()

    def log(self, logs, start_time=None):  # a log() that reads its metrics from elsewhere
        return self.metrics_store

    monkeypatch.setattr(trl.GRPOTrainer, "log", log)
    assert library_compat.check() == {"trl _metrics": "trl.GRPOTrainer.log no longer reads _metrics"}


def test_an_override_trl_no_longer_calls_or_that_no_longer_reads_what_is_swapped_is_reported(monkeypatch):
    def _generate_single_turn(self, prompt_ids, images, multimodal_fields, num_generations, has_tool_images=False):
        return self.model  # samples from the model itself, not model_wrapped

    monkeypatch.setattr(trl.GRPOTrainer, "_generate_single_turn", _generate_single_turn)
    problems = library_compat.check()
    assert problems == {
        "trl _generate_single_turn": "trl.GRPOTrainer._generate_single_turn no longer reads model_wrapped"
    }
    assert ties_verdict.verdict(RunConfig(merged_generation="float32"), problems).refusal() is None  # a fallback
    monkeypatch.undo()
    monkeypatch.setattr(trl.GRPOTrainer, "compute_loss", lambda self, model, inputs, **kwargs: 0.0)
    assert library_compat.check() == {"trl _compute_loss": "trl.GRPOTrainer.compute_loss no longer reads _compute_loss"}


def test_a_workbench_hook_name_trl_takes_for_itself_is_reported(monkeypatch):
    monkeypatch.setattr(trl.GRPOTrainer, "grpo_loss", lambda self: None, raising=False)
    assert library_compat.check() == {
        "trl _compute_loss": "trl.GRPOTrainer has a grpo_loss of its own, the "
        "workbench's name for overriding _compute_loss"
    }


def test_a_gone_global_is_reported_and_left_unswapped(monkeypatch):
    swapped = []
    with library_compat.trl_lm_head_replaced(lambda trls: swapped.append(trls) or "ours"):
        assert trl.trainer.utils._ChunkedLogProbFunction == "ours"
    assert swapped and trl.trainer.utils._ChunkedLogProbFunction is swapped[0]
    monkeypatch.delattr(trl.trainer.utils, "_ChunkedLogProbFunction")
    assert library_compat.check() == {
        "trl _ChunkedLogProbFunction": "trl.trainer.utils._ChunkedLogProbFunction is gone, or has no apply"
    }
    with library_compat.trl_lm_head_replaced(lambda trls: pytest.fail("swapped in a gone global")):
        assert not hasattr(trl.trainer.utils, "_ChunkedLogProbFunction")


def test_a_gone_property_and_a_gone_class_are_reported(monkeypatch):
    from transformers import PretrainedConfig

    monkeypatch.delattr(PretrainedConfig, "_attn_implementation")
    problems = library_compat.check()
    assert problems == {
        "transformers _attn_implementation": "transformers.PretrainedConfig._attn_implementation is gone"
    }
    assert ties_verdict.verdict(RunConfig(), problems).refused == ()  # the Llama decode step's tie: a lever
    monkeypatch.undo()
    monkeypatch.delattr(transformers.cache_utils, "DynamicLayer")
    problem = library_compat.check()["transformers DynamicLayer.keys/.values"]
    assert problem.startswith("transformers.cache_utils.DynamicLayer cannot be imported (AttributeError")


def test_a_cache_layer_that_no_longer_reads_its_rebound_keys_is_reported(monkeypatch):
    layer = DynamicLayer()
    keys = torch.zeros(1, 1, 2, 4)
    layer.update(keys, keys)
    library_compat.rebind_cache_layer(layer, torch.ones(1, 1, 5, 4), torch.ones(1, 1, 5, 4))
    assert layer.get_seq_length() == 5
    monkeypatch.setattr(DynamicLayer, "get_seq_length", lambda self: 2)  # a length kept apart from .keys
    assert library_compat.check() == {
        "transformers DynamicLayer.keys/.values": "transformers.cache_utils.DynamicLayer"
        ".get_seq_length no longer counts the keys rebound to .keys"
    }


def test_another_generator_layout_is_reported(monkeypatch):
    torch.manual_seed(7)
    torch.rand(3)
    expected = torch.rand(700)  # past the end of the 624 words: the generator turns them over
    torch.manual_seed(7)
    torch.rand(3)
    words, position, state = library_compat.cpu_generator_mt19937()
    library_compat.set_cpu_generator_mt19937(state, words, position)
    assert torch.equal(torch.rand(700), expected)  # read and written back: the generator goes on as it would
    monkeypatch.setattr(library_compat, "RNG_STATE_BYTES", 4096)
    assert library_compat.check() == {
        "torch CPUGeneratorImplState": "a CPU generator's state holds 5056 bytes, written for 4096"
    }
    monkeypatch.undo()
    monkeypatch.setattr(library_compat, "RNG_WORDS", 16)
    assert library_compat.check() == {
        "torch CPUGeneratorImplState": "a seeded CPU generator's state no longer "
        "holds its seed and MT19937's words where written for"
    }


def test_the_accessors_leave_out_a_metric_where_trl_keeps_none():
    class Bare:
        pass

    host = Bare()
    library_compat.step_metrics(host, "train")["x"].append(1.0)  # nowhere: no error
    library_compat.start_step_metrics(host)
    library_compat.step_metrics(host, "eval")["x"].append(2.0)
    assert library_compat.step_metrics(host, "eval") == {"x": [2.0]} and isinstance(
        library_compat.step_metrics(host, "train"), defaultdict
    )


def test_another_version_is_said_in_status_json_and_the_log_and_the_run_goes_on(monkeypatch, tmp_path, capsys):
    monkeypatch.setitem(library_compat.WRITTEN_FOR, "trl", "1.15.0")
    status = StatusWriter(tmp_path)
    assert check_library_ties(RunConfig(), status) is False
    record = runfolder.read_status(tmp_path)["library_ties"]
    assert record == {
        "problems": {},
        "refused": [],
        "versions": [f"trl {trl.__version__} is installed; the private ties were written for 1.15.0"],
    }
    out = capsys.readouterr().out
    assert "[workbench] private library ties: trl 1.16.0 is installed" in out and "Every private tie still holds" in out


def test_a_broken_tie_a_run_can_do_without_is_said_and_the_run_goes_on(monkeypatch, tmp_path, capsys):
    monkeypatch.delattr(trl.GRPOTrainer, "_tokenize_prompts")
    status = StatusWriter(tmp_path)
    assert check_library_ties(RunConfig(), status) is False
    assert runfolder.read_status(tmp_path)["library_ties"]["problems"] == {
        "trl _tokenize_prompts": "trl.GRPOTrainer._tokenize_prompts is gone"
    }
    assert "generation=vllm-server cannot render its prompts" in capsys.readouterr().out


@pytest.mark.slow  # starts a run (refused before its model loads) and the CLI
def test_a_run_whose_libraries_broke_a_tie_it_needs_is_refused_before_its_model_loads(monkeypatch, tmp_path, capsys):
    from workbench.trainer.training import run_training

    monkeypatch.setattr(trl.GRPOTrainer, "_generate_and_score_completions", lambda self, inputs, extra: None)
    run_dir = tmp_path / "run"
    assert run_training(RunConfig.for_task("demo", model="tiny", max_steps=1), run_dir) == 1
    status = runfolder.read_status(run_dir)
    assert status["state"] == "failed" and status["error"]["type"] == "LibraryTiesBroken"
    assert (
        "trl _generate_and_score_completions" in status["error"]["message"] and status["error"]["traceback_tail"] == ""
    )
    assert "trl _generate_and_score_completions" in status["library_ties"]["refused"]
    assert status.get("speed_choice") is None  # refused before the speed choice and the model
    assert "Traceback" not in capsys.readouterr().err
    assert main(["ties"]) == 1
    assert "BROKEN trl _generate_and_score_completions" in capsys.readouterr().out
