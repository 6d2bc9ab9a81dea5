"""Merged-model export: refusals before any model loads, a real tiny run's checkpoint merged by the export's own
process, and the bundled SmolLM2 merged, whose greedy answers equal base + adapter's."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from workbench import cli
from workbench.modeltools import export_model
from workbench.modeltools.export_model import ExportError
from workbench.runstore import runfolder
from workbench.spec.config import RunConfig

PROMPTS = ["What is the capital of France?", "Name a colour of the sky."]


@pytest.fixture
def make_run(tmp_path, make_checkpoint):
    """`make_run(adapter=True, checkpoints=(10,))`: a run folder (config.json) with an adapter's files and checkpoints."""

    def make(adapter: bool = False, checkpoints=()) -> Path:
        run_dir = tmp_path / "20261123-100000-demo"
        RunConfig(model="tiny").save(run_dir / runfolder.CONFIG_FILE)
        if adapter:  # a checkpoint's files include an adapter's
            make_checkpoint(run_dir, 0).rename(run_dir / runfolder.ADAPTER_DIR)
        for step in checkpoints:
            make_checkpoint(run_dir, step)
        return run_dir

    return make


# ---------------------------------------------------------------- refused before anything loads


def test_a_run_is_found_by_id_or_by_folder(tmp_path, make_run):
    run_dir = make_run(adapter=True)
    assert export_model.run_folder(run_dir.name, tmp_path) == run_dir
    assert export_model.run_folder(str(run_dir)) == run_dir.resolve()


@pytest.mark.parametrize("run", ["no-such-run", "../etc", ""], ids=["unknown", "outside", "blank"])
def test_an_unknown_run_is_refused_listing_runs(tmp_path, make_run, run):
    make_run(adapter=True)
    with pytest.raises(ExportError, match=r"^RUN: .* is neither a run folder nor a run in .*20261123-100000-demo"):
        export_model.run_folder(run, tmp_path)


def test_a_missing_checkpoint_is_refused_listing_those_there_are(make_run):
    run_dir = make_run(checkpoints=(10, 20))
    with pytest.raises(ExportError, match=r"^checkpoint: run .* has no complete checkpoint-15; use one of 10, 20"):
        export_model.adapter_for(run_dir, 15)
    assert export_model.adapter_for(run_dir, 20) == run_dir / "checkpoint-20"


def test_a_run_still_training_offers_its_checkpoints(make_run):
    run_dir = make_run(checkpoints=(10,))
    runfolder.update_status(run_dir, state="training", step=12)
    with pytest.raises(
        ExportError, match=r"no final adapter yet \(it is training, step 12\); pass a checkpoint: one of 10"
    ):
        export_model.adapter_for(run_dir)


def test_a_run_without_an_adapter_yet_is_refused(make_run):
    run_dir = make_run()
    runfolder.update_status(run_dir, state="training", step=3)
    with pytest.raises(
        ExportError,
        match=r"^RUN: run .* has no adapter yet \(it is training, step 3\); wait for its "
        r"first checkpoint \(every 10 steps\)",
    ):
        export_model.adapter_for(run_dir)


def test_an_output_folder_that_holds_files_is_refused(tmp_path):
    (tmp_path / "out").mkdir()
    assert export_model.check_out(tmp_path / "out") == tmp_path / "out"  # empty: fine
    (tmp_path / "out" / "config.json").write_text("{}")
    with pytest.raises(ExportError, match=r"^out: .* already holds files \(config.json\); choose a new folder"):
        export_model.check_out(tmp_path / "out")
    with pytest.raises(ExportError, match=r"^out: .* is a file"):
        export_model.check_out(tmp_path / "out" / "config.json")


def test_cli_refusal_is_one_line_with_exit_2(tmp_path, make_run, capsys):
    run_dir = make_run(adapter=True)
    progress = tmp_path / "progress.jsonl"
    code = cli.main(
        ["export-model", str(run_dir), "--checkpoint", "7", "--out", str(tmp_path / "m"), "--progress", str(progress)]
    )
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1
    assert "checkpoint: run 20261123-100000-demo has no complete checkpoint-7; leave it out" in err
    assert runfolder.read_jsonl(progress) == [{"done": True, "error": err.strip().removeprefix("error: ")}]


def test_the_export_command_is_an_argument_list(tmp_path, make_run):
    run_dir = make_run(adapter=True)
    plan = export_model.plan_export(run_dir.name, None, run_dir / "merged", tmp_path)
    command = export_model.export_command(plan)
    assert command[1:5] == ["-m", "workbench", "export-model", str(run_dir)]
    assert plan.progress_path.parent == run_dir and not str(plan.progress_path).startswith(str(plan.out) + "/")


# ---------------------------------------------------------------- real merges


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory, tiny_trained_run):
    """A real 2-step run of the tiny model (a checkpoint per step and the final adapter, as the Trainer saves
    them), copied: the exports are written into it."""
    run_dir = tmp_path_factory.mktemp("runs") / tiny_trained_run.name
    shutil.copytree(tiny_trained_run, run_dir)
    return run_dir


def load(folder):
    from transformers import AutoModelForCausalLM

    return AutoModelForCausalLM.from_pretrained(folder).eval()


@pytest.mark.slow
def test_a_real_runs_checkpoint_is_merged_by_a_background_export(tiny_run):
    import torch
    from peft import PeftModel
    from transformers import AutoTokenizer

    from workbench.sources.model_files import tiny_model_dir

    plan = export_model.plan_export(tiny_run, 1, export_model.default_out(tiny_run, 1))
    process = export_model.start_export(plan)
    try:
        process.wait(timeout=240)
    finally:
        export_model.cancel_export(process, plan)  # only if it hung: nothing is left running
    progress = export_model.read_export(plan.progress_path, process)
    assert progress["error"] is None, progress["error"]
    assert progress["out"] == str(tiny_run / "merged-checkpoint-1") and progress["bytes"] > 0
    assert [r.get("stage") for r in runfolder.read_jsonl(plan.progress_path)][:3] == list(export_model.STAGES)
    names = {p.name for p in plan.out.iterdir()}
    assert {
        "config.json",
        "model.safetensors",
        "tokenizer.json",
        "tokenizer_config.json",
        export_model.EXPORT_INFO_FILE,
    } <= names
    assert not plan.partial.exists()
    info = json.loads((plan.out / export_model.EXPORT_INFO_FILE).read_text())
    assert info["step"] == 1 and info["adapter"] == str(tiny_run / "checkpoint-1")
    assert AutoTokenizer.from_pretrained(plan.out).chat_template  # the chat template came along

    ids = torch.tensor([[1, 2, 3, 4, 5, 6]])
    with torch.no_grad():
        merged = load(plan.out)(ids).logits
        adapted = PeftModel.from_pretrained(load(tiny_model_dir()), str(tiny_run / "checkpoint-1"))(ids).logits
        final = PeftModel.from_pretrained(load(tiny_model_dir()), str(tiny_run / "adapter"))(ids).logits
    assert torch.allclose(merged, adapted, atol=1e-5)
    assert not torch.allclose(merged, final, atol=1e-5)  # the checkpoint asked for, not the final adapter

    with pytest.raises(ExportError, match="already holds files"):  # a second export never writes over the first
        export_model.plan_export(tiny_run, 1, plan.out)


@pytest.fixture
def one_thread():
    """Generate on one thread: on a CPU shared with other jobs, torch's threads waiting on each other make greedy
    decoding several times slower (see the README's note on OMP_NUM_THREADS)."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.mark.slow
def test_merged_smollm_answers_as_base_plus_adapter(tmp_path, one_thread):
    import torch
    from peft import LoraConfig, get_peft_model
    from safetensors import safe_open
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from workbench.modeltools.sampling import sample_answers
    from workbench.sources.model_files import BUNDLED_MODEL, resolve_model

    run_dir = tmp_path / "20261123-100000-smollm"
    RunConfig(model=BUNDLED_MODEL).save(run_dir / runfolder.CONFIG_FILE)
    base_dir = Path(resolve_model(BUNDLED_MODEL))
    peft_model = get_peft_model(
        AutoModelForCausalLM.from_pretrained(base_dir, dtype=torch.float32),
        LoraConfig(r=8, lora_alpha=16, target_modules="all-linear"),
    )
    generator = torch.Generator().manual_seed(0)
    with torch.no_grad():  # LoRA B starts at zero (no change); small random values change the answers, not the language
        for name, param in peft_model.named_parameters():
            if "lora_B" in name:
                param.copy_(torch.randn(param.shape, generator=generator) * 0.02)
    peft_model.save_pretrained(run_dir / runfolder.ADAPTER_DIR)

    summary = export_model.merge_into(export_model.plan_export(run_dir, None, run_dir / "merged"))
    out = Path(summary["out"])
    print(f"merged SmolLM2 in {summary['seconds']} s: {summary['bytes'] / 2**20:.0f} MB")
    settings = dict(max_new_tokens=16, temperature=0.0)
    merged = [a["answer"] for a in sample_answers(str(out), PROMPTS, **settings)]
    adapted = [a["answer"] for a in sample_answers(BUNDLED_MODEL, PROMPTS, adapter_dir=run_dir / "adapter", **settings)]
    assert merged == adapted and all(merged)

    name = "model.layers.0.self_attn.q_proj.weight"  # the adapter is in the weights: they moved from the base's
    with (
        safe_open(str(out / "model.safetensors"), "pt") as new,
        safe_open(str(base_dir / "model.safetensors"), "pt") as old,
    ):
        assert not torch.equal(new.get_tensor(name), old.get_tensor(name))
        assert not any("lora" in key for key in new.keys())
    tokenizer = AutoTokenizer.from_pretrained(out)
    assert "<|im_start|>" in tokenizer.apply_chat_template([{"role": "user", "content": "Hi"}], tokenize=False)
