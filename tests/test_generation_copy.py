"""merged_generation: rounds sampled from a plain copy of the policy with the LoRA update merged in.

The copy must be the policy: the same logits in float32 (bfloat16 within its rounding), refreshed once
per step and following each update; and a real run that samples from the float32 copy (decoding through
MKL's packed GEMM, packed_decode's default on a CPU) draws exactly the completions a run sampling from the
policy draws, with the same seed.
"""

from __future__ import annotations

import platform

import pytest
from helpers import tiny_config

from workbench.runstore import runfolder

pytestmark = pytest.mark.slow  # every test loads the tiny model's weights


@pytest.fixture(scope="module")
def policy(tiny_model):
    """The tiny model under PEFT LoRA with a non-zero update (B is zero when LoRA starts)."""
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    torch.manual_seed(0)
    model = get_peft_model(
        AutoModelForCausalLM.from_pretrained(tiny_model),
        LoraConfig(r=8, lora_alpha=16, target_modules="all-linear", task_type="CAUSAL_LM"),
    )
    randomise_lora_b(model)
    return model


def randomise_lora_b(model) -> None:
    import torch

    with torch.no_grad():
        for name, weight in model.named_parameters():
            if "lora_B" in name:
                weight.normal_(0, 0.05)


def logits_gap(policy, copy) -> tuple[float, float]:
    """Largest |policy - copy| logit on a random batch, and the largest policy logit."""
    import torch

    tokens = torch.randint(0, 200, (2, 10), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        ours, theirs = policy(tokens).logits, copy.model(tokens).logits.float()
    return (ours - theirs).abs().max().item(), ours.abs().max().item()


def test_the_float32_copy_has_the_policys_logits_and_bfloat16_its_rounding(policy):
    import torch

    from workbench.trainer.generation_copy import GenerationCopy

    exact = GenerationCopy(policy, torch.float32)
    exact.sync(1)
    gap, scale = logits_gap(policy, exact)
    assert gap < 1e-5 * max(1.0, scale)
    assert len(exact.merged) == 7 * policy.config.num_hidden_layers  # q k v o gate up down in every layer
    half = GenerationCopy(policy, torch.bfloat16)
    half.sync(1)
    assert half.dtype == torch.bfloat16
    gap, scale = logits_gap(policy, half)
    assert 0 < gap < 0.05 * max(1.0, scale)


def test_each_layer_s_weight_is_peft_s_merge_whether_written_in_one_pass_or_not(policy, monkeypatch):
    import torch

    from workbench.trainer.generation_copy import GenerationCopy

    fused = GenerationCopy(policy, torch.float32)
    assert all(fused._fusable(module, module.get_base_layer().weight, weight) for weight, module in fused.merged)
    fused.sync(1)
    monkeypatch.setattr(GenerationCopy, "_fusable", lambda *args: False)  # get_delta_weight's way
    unfused = GenerationCopy(policy, torch.float32)
    unfused.sync(1)
    for (ours, module), (theirs, _) in zip(fused.merged, unfused.merged):
        peft_merge = module.get_base_layer().weight + module.get_delta_weight(fused.adapter)
        assert torch.allclose(ours, theirs, rtol=0, atol=1e-6) and torch.allclose(ours, peft_merge, rtol=0, atol=1e-6)
        assert not torch.equal(ours, module.get_base_layer().weight)  # the update is in


def test_the_copy_is_refreshed_once_a_step_and_follows_the_update(policy):
    import torch

    from workbench.trainer.generation_copy import GenerationCopy

    copy = GenerationCopy(policy, torch.float32)
    copy.sync(3)
    randomise_lora_b(policy)  # an optimizer step changed the adapter
    copy.sync(3)  # the same step again: nothing is recomputed
    assert logits_gap(policy, copy)[0] > 1e-3
    copy.sync(4)
    assert logits_gap(policy, copy)[0] < 1e-5 * max(1.0, logits_gap(policy, copy)[1])


def test_swapped_in_puts_the_copy_where_trl_unwraps_and_restores_it(policy):
    import torch

    from workbench.trainer.generation_copy import GenerationCopy

    class Trainer:  # the two attributes GenerationCopy.swapped_in reads and writes
        model_wrapped = policy

        class state:
            global_step = 5

    copy = GenerationCopy(policy, torch.float32)
    with copy.swapped_in(Trainer) as model:
        assert Trainer.model_wrapped is model is copy.model and copy.synced_step == 5
    assert Trainer.model_wrapped is policy


def test_a_run_sampling_from_the_float32_copy_draws_the_policys_completions(tiny_model, tmp_path, monkeypatch):
    """Two real 2-step runs, same seed: sampling from the copy changes nothing but where the tokens come from."""
    from workbench.trainer import packed_decode
    from workbench.trainer.training import run_training

    packed_decode.available()  # its own check packs a small matrix: done before the count below
    packs = []  # (rows) of every weight the runs packed for MKL
    real_pack = packed_decode.pack_into
    monkeypatch.setattr(
        packed_decode, "pack_into", lambda buffer, weight, rows: packs.append(rows) or real_pack(buffer, weight, rows)
    )

    texts, metrics, packed, answers = {}, {}, {}, {}
    for mode in ("no", "float32"):
        run_dir = tmp_path / mode
        # held-out evaluation at steps 0, 1 and 2: with the copy it answers from the copy too
        cfg = tiny_config(
            task="reward_hacking",
            max_steps=2,
            merged_generation=mode,
            packed_decode="yes",
            learning_rate=0.05,
            eval_strategy="steps",
            eval_steps=1,
            eval_size=3,
            save_steps=100,
        )
        assert run_training(cfg, run_dir) == 0
        texts[mode] = [c["completion"] for c in runfolder.read_jsonl(run_dir / runfolder.COMPLETIONS_FILE)]
        packed[mode] = runfolder.read_run_status(run_dir).packed_decode
        answers[mode] = [
            [p["completion"] for p in record["prompts"]]
            for record in runfolder.read_jsonl(run_dir / runfolder.EVAL_FILE)
        ]
        metrics[mode] = [m for m in runfolder.read_jsonl(run_dir / runfolder.METRICS_FILE) if "reward" in m]
    assert len(texts["no"]) == 8 and texts["float32"] == texts["no"]
    assert len(answers["no"]) == 3 and answers["float32"] == answers["no"]  # the same held-out answers
    # the copy decoded through MKL's packed GEMM (packed_decode=yes), and drew the same tokens;
    # torch's x86-64 wheels link MKL in, so here it must be there
    if platform.machine() == "x86_64":
        assert packed_decode.available() is None
    if packed_decode.available() is None:
        assert {mode: (decision.value, decision.why) for mode, decision in packed.items()} == {
            "no": ("no", "merged_generation is no: only a float32 merged copy decodes this way"),
            "float32": ("yes", "the decode step written for llama layers"),
        }
        # packed for a round's 4 sequences, 4 matrices a decoder layer (q/k/v fused, o, gate/up fused, down):
        # every one and the LM head for the start-up check, then before each step's round again only the
        # layers the LoRA update changed (the LM head stays packed)
        from transformers import AutoConfig

        layers = AutoConfig.from_pretrained(tiny_model).num_hidden_layers
        assert packs == [4] * ((4 * layers + 1) + 4 * layers + 4 * layers)
    # the second step sampled after an update (lr 0.05 moves the tiny model), from a copy synced to it
    assert [m.get("merged_generation/sync_seconds") is not None for m in metrics["float32"]] == [True, True]
    assert "merged_generation/sync_seconds" not in metrics["no"][0]
    assert metrics["float32"][1]["loss"] == pytest.approx(metrics["no"][1]["loss"], abs=1e-5)


@pytest.mark.parametrize(("free_gib", "taken"), [(80.0, "bfloat16"), (1e-4, "no")])
def test_on_a_gpu_a_measured_bfloat16_copy_is_taken_only_where_it_fits_in_a_quarter_of_the_free_memory(
    policy, monkeypatch, capsys, free_gib, taken
):
    """attach_generation_copy as a bf16 run on a GPU calls it; torch's CUDA queries answer as one GPU would
    (this machine has none), the copy itself is built where the policy's weights are."""
    import types

    import torch

    from workbench.spec.config import RunConfig
    from workbench.trainer.levers import attach_generation_copy

    asked = []
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda device: asked.append(device) or (int(free_gib * 2**30), 0))
    trainer = types.SimpleNamespace(
        model=policy, accelerator=types.SimpleNamespace(device="cuda:0"), generation_copy=None
    )
    # auto resolved to a bfloat16 copy by this machine's probe (tuned): the GPU's free memory still decides
    config = RunConfig(model="tiny", device="cuda", gpu_ids=[0], bf16=True, merged_generation="bfloat16")
    assert attach_generation_copy(trainer, config, tuned=True).value == taken
    assert asked == ["cuda:0"]
    if taken == "no":
        assert trainer.generation_copy is None
        assert "merged_generation=auto -> no (on a GPU: the copy would take" in capsys.readouterr().out
    else:
        assert trainer.generation_copy.model.dtype == torch.bfloat16
    # set in the config, the copy is taken without asking the GPU
    assert attach_generation_copy(trainer, config).value == "bfloat16"
    assert asked == ["cuda:0"]
