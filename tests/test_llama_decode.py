"""llama_decode: the packed copy's decode step written for Llama layers must compute transformers' own.

The oracle is the model's own forward: a decode step's logits and cache, and the tokens `generate` samples
with a seed (left-padded prompts, several temperatures and top-k / top-p settings), must be the same; a
refresh of the copy's weights must reach the fused matrices and be packed again; models it was not written
for are refused with the reason.
"""

from __future__ import annotations

import pytest

from workbench.trainer import packed_decode

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        packed_decode.available() is not None, reason=f"no MKL packed GEMM: {packed_decode.available()}"
    ),
]
ROWS = 4


@pytest.fixture
def model(tiny_model):
    import torch
    from transformers import AutoModelForCausalLM

    return AutoModelForCausalLM.from_pretrained(tiny_model, dtype=torch.float32).eval()


def prompts():
    import torch

    ids = torch.randint(3, 200, (ROWS, 7), generator=torch.Generator().manual_seed(2))
    mask = torch.ones_like(ids)
    mask[:2, :3] = 0  # left padding, as a round of prompts of different lengths has
    return ids, mask


def sampled(model, seed: int, **settings):
    import torch

    ids, mask = prompts()
    torch.manual_seed(seed)
    with torch.no_grad():
        return model.generate(ids, attention_mask=mask, max_new_tokens=12, do_sample=True, pad_token_id=0, **settings)


def test_the_start_up_check_passes_on_a_llama_model(model):
    from workbench.trainer.llama_decode import FusedLlamaDecode, unsupported

    assert unsupported(model) is None
    fused = FusedLlamaDecode(model, ROWS)
    assert fused.check() is None and fused.steps == 0


@pytest.mark.parametrize(
    "settings",
    [dict(temperature=1.0, top_k=0), dict(temperature=0.7, top_k=0), dict(temperature=0.9, top_k=20, top_p=0.9)],
)
def test_generate_samples_the_tokens_of_the_models_own_forward(model, settings, monkeypatch):
    from workbench.trainer import llama_decode
    from workbench.trainer.llama_decode import FusedLlamaDecode

    monkeypatch.setattr(llama_decode, "GROW", 2)  # the cache regrows every other step
    theirs = [sampled(model, seed, **settings) for seed in (1, 2)]
    fused = FusedLlamaDecode(model, ROWS)
    ours = [sampled(model, seed, **settings) for seed in (1, 2)]
    assert fused.steps == 2 * 11  # every step after the prefill went this way
    assert all(a.equal(b) for a, b in zip(ours, theirs))
    fused.detach()
    assert sampled(model, 1, **settings).equal(theirs[0]) and fused.steps == 22


def first_scores(model):
    """The logits of the first sampled step after the prefill (a decode step), greedy."""
    import torch

    ids, mask = prompts()
    with torch.no_grad():
        out = model.generate(
            ids,
            attention_mask=mask,
            max_new_tokens=2,
            do_sample=False,
            pad_token_id=0,
            output_scores=True,
            return_dict_in_generate=True,
        )
    return out.scores[1]


def test_a_refresh_writes_the_fused_matrices_and_they_are_packed_again(model, monkeypatch):
    import torch

    from workbench.trainer.llama_decode import FusedLlamaDecode

    fused = FusedLlamaDecode(model, ROWS)
    assert fused.check() is None
    before = first_scores(model)
    attention = model.model.layers[0].self_attn
    packs = []
    real_pack = packed_decode.pack_into
    monkeypatch.setattr(
        packed_decode,
        "pack_into",
        lambda buffer, weight, rows: packs.append(weight.shape) or real_pack(buffer, weight, rows),
    )
    with torch.no_grad():  # as GenerationCopy.sync writes a weight: in place
        attention.v_proj.weight.mul_(-3.0)
        model.model.layers[-1].mlp.down_proj.weight.mul_(5.0)
    qkv = fused.layers[0][0].weight
    assert qkv[-attention.v_proj.weight.shape[0] :].data_ptr() == attention.v_proj.weight.data_ptr()
    fused.invalidate([attention.v_proj.weight])
    after = first_scores(model)
    assert len(packs) == 4 * len(model.model.layers)  # every decoder layer's four matrices; not the LM head
    fused.detach()
    own = first_scores(model)
    assert (after - before).abs().max() > 1e-3  # the new weights made a difference...
    assert torch.allclose(after, own, rtol=0, atol=1e-5 * own.abs().max().item())  # ...the model's own


def test_other_rows_a_prefill_and_gradients_run_the_models_own_forward(model):
    import torch

    from workbench.trainer.llama_decode import FusedLlamaDecode

    fused = FusedLlamaDecode(model, ROWS + 1)
    sampled(model, 1)  # 4 rows: not the packed row count
    ids, mask = prompts()
    out = model(ids, attention_mask=mask, use_cache=True)  # with gradients
    model(ids[:, -1:], attention_mask=torch.cat([mask, mask[:, :1]], 1), past_key_values=out.past_key_values)
    assert fused.steps == 0


def test_models_it_was_not_written_for_are_named_with_the_reason(model):
    import torch
    from transformers import AutoModelForCausalLM, Qwen2Config

    from workbench.trainer.llama_decode import unsupported

    qwen = AutoModelForCausalLM.from_config(
        Qwen2Config(
            vocab_size=64,
            hidden_size=16,
            intermediate_size=32,
            num_hidden_layers=1,
            num_attention_heads=2,
            num_key_value_heads=1,
        )
    )
    assert unsupported(qwen) == "written for llama layers, not qwen2"
    model.config.hidden_act = "gelu"
    assert unsupported(model) == "the model's activation is gelu, not silu"
    model.config.hidden_act = "silu"
    model.config._attn_implementation = "eager"
    assert unsupported(model) == "the model's attention is eager, not sdpa"
    model.config._attn_implementation = "sdpa"
    assert unsupported(model.to(torch.bfloat16)) == "a float32 model on a CPU only"


def test_the_one_op_rms_norm_and_rotary_give_transformers_bits(model):
    import torch
    from transformers.models.llama.modeling_llama import apply_rotary_pos_emb

    from workbench.trainer.llama_decode import _rms_norm, _rotate, _signed

    norm = model.model.layers[0].input_layernorm
    x = torch.randn(ROWS, 1, model.config.hidden_size, generator=torch.Generator().manual_seed(3)) * 4
    assert torch.equal(_rms_norm(norm, x), norm(x))
    heads, head_dim = 3, model.model.layers[0].self_attn.head_dim
    q = torch.randn(ROWS, heads, 1, head_dim)
    positions = torch.tensor([[5], [6], [2], [9]])
    cos, sin = model.model.rotary_emb(x, positions)
    theirs, _ = apply_rotary_pos_emb(q, q, cos, sin)
    cos, sin = (t.view(-1, 1, head_dim) for t in (cos, sin))
    ours = _rotate(q.squeeze(2), cos, _signed(sin))
    assert torch.equal(ours, theirs.squeeze(2))


def test_rows_without_padding_decode_the_same_way(model):
    import torch

    from workbench.trainer.llama_decode import FusedLlamaDecode

    ids = torch.randint(3, 200, (ROWS, 5), generator=torch.Generator().manual_seed(4))

    def generate():
        torch.manual_seed(6)
        with torch.no_grad():
            return model.generate(ids, max_new_tokens=6, do_sample=True, pad_token_id=0)

    theirs = generate()
    fused = FusedLlamaDecode(model, ROWS)
    assert generate().equal(theirs) and fused.steps == 5


def test_a_start_up_check_that_fails_leaves_the_copy_on_its_own_layers(model, monkeypatch):
    from workbench.trainer import llama_decode
    from workbench.trainer.generation_copy import GenerationCopy
    from workbench.trainer.packed_decode import PackedDecode

    def broken(self):
        raise RuntimeError("shapes do not fit")

    monkeypatch.setattr(llama_decode.FusedLlamaDecode, "check", broken)
    copy = GenerationCopy.__new__(GenerationCopy)  # only its model and packing are used here
    copy.model = model
    own = model.forward
    assert copy.pack_decode(ROWS) == (
        "the model's own layers (its start-up check failed: RuntimeError: shapes do not fit)"
    )
    assert isinstance(copy.packed, PackedDecode) and model.forward == own
