"""shared_prompt_pass: each prompt scored once per group must give TRL's own log-probabilities.

The oracle is TRL's `_get_per_token_logps_and_entropies` path itself: the model patched with TRL's
`add_fused_lm_head`, called on the whole rows. Log-probabilities, entropies and the LoRA gradients of a
loss over them must match; a real run with the pass on logs the loss of a run with it off.
"""

from __future__ import annotations

import pytest
from helpers import tiny_config

from workbench.runstore import runfolder
from workbench.spec.speed import unsupported_reason
from workbench.trainer.prompt_sharing import length_buckets, prompt_groups

GROUP, PROMPT, COMPLETION = 4, 9, 6


def test_rows_with_the_same_prompt_share_one_group_and_keep_their_first_row():
    import torch

    ids = torch.tensor([[5, 6], [7, 8], [5, 6], [7, 8], [5, 6]])
    first, inverse = prompt_groups(ids, torch.ones_like(ids))
    assert sorted(first.tolist()) == [0, 1]
    assert [first[i].item() for i in inverse.tolist()] == [0, 1, 0, 1, 0]
    # the same tokens with different padding are different prompts
    mask = torch.tensor([[1, 1], [1, 1], [0, 1], [1, 1], [1, 1]])
    first, inverse = prompt_groups(ids, mask)
    assert len(first) == 3 and inverse[0] == inverse[4] != inverse[2]


def test_completions_of_very_different_lengths_are_scored_in_two_buckets():
    assert length_buckets([32, 3, 30, 4]) == [[1, 3], [2, 0]]  # 76 padded tokens instead of 132
    assert length_buckets([10, 11, 12, 12]) == [[0, 1, 2, 3]]  # a split would save under 20%: one call
    assert length_buckets([7]) == [[0]]


@pytest.mark.parametrize(
    ("model_type", "checkpointing", "processes", "refused"),
    [
        ("llama", False, 1, None),
        ("qwen2", False, 1, None),
        ("llama", True, 1, "gradient_checkpointing"),
        ("llama", False, 2, "2 processes"),
        ("gpt2", False, 1, "not checked"),
    ],
)
def test_it_runs_only_where_it_was_checked(model_type, checkpointing, processes, refused):
    reason = unsupported_reason(model_type, checkpointing, processes)
    assert reason is None if refused is None else refused in reason


def tiny_of_type(model_type: str, tiny_model: str):
    """A tiny randomly initialised model of `model_type`: the suite's tiny Llama, or a Qwen2 / Qwen3 of the
    same size built from its config."""
    import torch
    from transformers import AutoModelForCausalLM, Qwen2Config, Qwen3Config

    if model_type == "llama":
        return AutoModelForCausalLM.from_pretrained(tiny_model)
    config_class = {"qwen2": Qwen2Config, "qwen3": Qwen3Config}[model_type]
    torch.manual_seed(0)
    config = config_class(
        vocab_size=256,
        hidden_size=16,
        intermediate_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=1,
        head_dim=8,
    )
    return AutoModelForCausalLM.from_config(config)


@pytest.fixture(scope="module", params=["llama", "qwen2", "qwen3"])
def policy(request, tiny_model):
    """A tiny model of each checked type with TRL's fused head, under LoRA with a non-zero update."""
    import torch
    from peft import LoraConfig, get_peft_model
    from trl.trainer.utils import add_fused_lm_head

    from workbench.spec.speed import CHECKED_MODEL_TYPES

    assert request.param in CHECKED_MODEL_TYPES
    torch.manual_seed(0)
    model = tiny_of_type(request.param, tiny_model)
    add_fused_lm_head(model, temperature=0.7, outputs=("log_probs", "entropy"))
    model = get_peft_model(model, LoraConfig(r=8, lora_alpha=16, target_modules="all-linear", task_type="CAUSAL_LM"))
    with torch.no_grad():
        for name, weight in model.named_parameters():
            if "lora_B" in name:
                weight.normal_(0, 0.05)
    return model


def batch(padded: bool):
    """Two prompts of `GROUP` completions each (the second left-padded when `padded`), completions of
    different lengths padded on the right, as TRL lays a round out."""
    import torch

    generator = torch.Generator().manual_seed(3)
    prompts = torch.randint(10, 200, (2, PROMPT), generator=generator).repeat_interleave(GROUP, 0)
    prompt_mask = torch.ones_like(prompts)
    if padded:
        prompt_mask[GROUP:, :3] = 0
    completions = torch.randint(10, 200, (2 * GROUP, COMPLETION), generator=generator)
    completion_mask = (torch.arange(COMPLETION) < torch.arange(2 * GROUP)[:, None] % COMPLETION + 1).long()
    return torch.cat([prompts, completions], 1), torch.cat([prompt_mask, completion_mask], 1), completion_mask


def trl_logps(model, ids, mask):
    """TRL's `_get_per_token_logps_and_entropies` on the whole rows (its CPU path)."""
    labels = ids.masked_fill(mask == 0, -100)
    labels[:, :-COMPLETION] = -100
    outputs = model(input_ids=ids, attention_mask=mask, labels=labels, fused_lm_head=True)
    return outputs.log_probs[:, -COMPLETION:], outputs.entropy[:, -COMPLETION:]


def values_and_grads(model, compute, ids, mask, completion_mask):
    """(log-probs, entropies, LoRA gradients of a loss over both) of `compute`."""

    model.zero_grad(set_to_none=True)
    logps, entropies = compute(model, ids, mask)
    ((logps * completion_mask).sum() + (entropies * completion_mask).sum()).backward()
    grads = [p.grad.clone() for p in model.parameters() if p.requires_grad]
    return logps.detach() * completion_mask, entropies.detach() * completion_mask, grads


@pytest.mark.slow
@pytest.mark.parametrize("padded", [False, True])
def test_the_shared_pass_gives_trls_log_probabilities_entropies_and_gradients(policy, padded):
    from workbench.trainer.prompt_sharing import shared_prompt_logps

    ids, mask, completion_mask = batch(padded)
    assert len(length_buckets(completion_mask.sum(1).tolist())) == 2  # the bucketed path is the one checked

    def shared(model, ids, mask):
        return shared_prompt_logps(model, ids, mask, COMPLETION, compute_entropy=True)

    ours = values_and_grads(policy, shared, ids, mask, completion_mask)
    theirs = values_and_grads(policy, trl_logps, ids, mask, completion_mask)
    assert (ours[0] - theirs[0]).abs().max() < 1e-5
    assert (ours[1] - theirs[1]).abs().max() < 1e-5
    assert theirs[0].abs().max() > 1  # real values, not zeros
    for a, b in zip(ours[2], theirs[2]):
        assert (a - b).abs().max() <= 1e-4 * b.abs().max() + 1e-7
    # chunked as TRL chunks its reference pass, the result is the same
    chunked = shared_prompt_logps(policy, ids, mask, COMPLETION, batch_size=3)[0].detach() * completion_mask
    assert (chunked - ours[0]).abs().max() < 1e-5


@pytest.mark.slow
def test_a_run_with_the_shared_pass_logs_the_loss_of_a_run_without(tiny_model, tmp_path):
    """Two real 2-step runs, same seed, the pass on and off: the same completions, loss and KL."""
    from workbench.trainer.training import run_training

    texts, metrics, status = {}, {}, {}
    for mode in ("no", "yes"):
        run_dir = tmp_path / mode
        cfg = tiny_config(
            task="reward_hacking",
            max_steps=2,
            shared_prompt_pass=mode,
            learning_rate=0.05,
            beta=0.1,
            eval_strategy="no",
            save_steps=100,
        )
        assert run_training(cfg, run_dir) == 0
        texts[mode] = [c["completion"] for c in runfolder.read_jsonl(run_dir / runfolder.COMPLETIONS_FILE)]
        metrics[mode] = [m for m in runfolder.read_jsonl(run_dir / runfolder.METRICS_FILE) if "reward" in m]
        status[mode] = runfolder.read_run_status(run_dir).shared_prompt_pass
    assert {mode: decision.value for mode, decision in status.items()} == {"no": "no", "yes": "yes"}
    assert status["no"].why == "set in the config"
    assert texts["yes"] == texts["no"] and len(texts["no"]) == 8
    for ours, theirs in zip(metrics["yes"], metrics["no"]):
        assert ours["loss"] == pytest.approx(theirs["loss"], abs=1e-5)
        assert ours["kl"] == pytest.approx(theirs["kl"], abs=1e-5)
        assert ours["entropy"] == pytest.approx(theirs["entropy"], abs=1e-5)


@pytest.mark.slow
@pytest.mark.parametrize("model_type", ["llama", "qwen2", "qwen3"])
@pytest.mark.parametrize("do_sample", [False, True])
def test_a_shared_prefill_generates_what_generate_alone_does(tiny_model, model_type, do_sample):
    """Sampling from the merged copy prefills each prompt once: the same scores and tokens as generate's own
    prefill of every row, greedy and sampled with the same seed, left-padded prompt included."""
    import torch

    from workbench.trainer.prompt_sharing import generate_with_shared_prefill

    model = tiny_of_type(model_type, tiny_model).eval()
    ids, mask, _ = batch(padded=True)
    prompts, prompt_mask = ids[:, :PROMPT], mask[:, :PROMPT]
    settings = dict(
        max_new_tokens=8,
        do_sample=do_sample,
        temperature=0.7,
        top_k=0,
        output_scores=True,
        return_dict_in_generate=True,
        pad_token_id=0,
    )
    caches = []

    def generate_from(**kwargs):  # records the cache the shared prefill hands generate
        caches.append(kwargs.get("past_key_values"))
        return model.generate(**kwargs)

    outputs = []
    for generate in (model.generate, lambda **kw: generate_with_shared_prefill(model, generate_from, **kw)):
        torch.manual_seed(5)
        outputs.append(generate(input_ids=prompts, attention_mask=prompt_mask, **settings))
    ours, theirs = outputs[1], outputs[0]
    assert caches[0] is not None  # generate continued from the shared prompts' cache
    assert torch.equal(ours.sequences, theirs.sequences)
    assert max((a - b).abs().max().item() for a, b in zip(ours.scores, theirs.scores)) < 1e-4
