"""packed_decode: the merged float32 copy's decode steps through MKL's packed GEMM.

A decode step (one new token per row) must give the plain model's logits to float32 rounding and draw the
same tokens; only decode steps pack (a prefill, a product with gradients run the plain weight); the packed
weights follow the row count and are made again after the weights change.
"""

from __future__ import annotations

import pytest

from workbench.trainer import packed_decode
from workbench.trainer.packed_decode import PackedDecode

# every test loads the tiny model's weights; MKL's packed GEMM is what torch's x86 wheels link in
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        packed_decode.available() is not None, reason=f"no MKL packed GEMM: {packed_decode.available()}"
    ),
]


@pytest.fixture
def model(tiny_model):
    import torch
    from transformers import AutoModelForCausalLM

    torch.manual_seed(0)
    return AutoModelForCausalLM.from_pretrained(tiny_model, dtype=torch.float32).eval()


def prompt_and_cache(model, rows: int = 4):
    """A prefilled cache of `rows` random 6-token prompts and one next token per row."""
    import torch

    tokens = torch.randint(0, 200, (rows, 6), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        out = model(tokens, use_cache=True)
    return out.past_key_values, out.logits[:, -1:].argmax(-1)


def test_a_decode_step_packs_every_linear_layer_and_gives_the_plain_logits(model):
    import copy

    import torch

    cache, token = prompt_and_cache(model)
    with torch.no_grad():
        plain = model(token, past_key_values=copy.deepcopy(cache)).logits
        packing = PackedDecode(model)
        assert packing.packed == {}
        packed = model(token, past_key_values=cache).logits
    linear_layers = [m for m in model.modules() if isinstance(m, torch.nn.Linear)]
    assert len(packing.layers) == len(linear_layers) and len(packing.packed) == len(linear_layers)
    assert {entry.rows for entry in packing.packed.values()} == {4}
    # MKL's packed kernel sums in another order than the plain sgemm: float32 rounding, not other numbers
    assert torch.allclose(packed, plain, rtol=0, atol=1e-5 * plain.abs().max().item())


def test_a_prefill_and_a_product_with_gradients_run_the_plain_weights(model):
    import torch

    packing = PackedDecode(model)
    prompt_and_cache(model)
    assert packing.packed == {}
    layer = packing.layers[0]
    x = torch.randn(4, 1, layer.in_features, requires_grad=True)
    layer(x).sum().backward()
    assert packing.packed == {} and x.grad is not None


def test_new_weights_are_packed_again_into_the_same_buffer_and_a_new_row_count_gets_its_own(model, monkeypatch):
    import torch

    packing = PackedDecode(model)
    layer = packing.layers[0]
    packs = []
    monkeypatch.setattr(packed_decode, "pack_into", lambda *args: packs.append(args) or real_pack(*args))
    with torch.no_grad():
        layer(torch.randn(4, 1, layer.in_features))
        buffer = packing.packed[id(layer)].buffer
        layer(torch.randn(4, 1, layer.in_features))
        assert len(packs) == 1  # packed once for 4 rows
        layer.weight.add_(1.0)
        packing.invalidate()
        x = torch.randn(4, 1, layer.in_features)
        assert torch.allclose(layer(x), torch.nn.functional.linear(x, layer.weight, layer.bias), atol=1e-4)
        # the new weights, written where the old ones were: no new memory each step
        assert len(packs) == 2 and packing.packed[id(layer)].buffer is buffer
        layer(torch.randn(3, 1, layer.in_features))
        assert packing.packed[id(layer)].rows == 3 and len(packs) == 3


real_pack = packed_decode.pack_into


def test_the_product_is_torch_s_own_packed_mkl_product_to_the_bit():
    """torch's wrappers of the same MKL calls (what inductor uses when it freezes a CPU model) agree exactly."""
    import torch

    weight, x = torch.randn(96, 64), torch.randn(8, 1, 64)
    buffer = packed_decode.new_buffer(weight, 8)
    packed_decode.pack_into(buffer, weight, 8)
    theirs = torch.ops.mkl._mkl_linear(
        x.view(8, 64), torch.ops.mkl._mkl_reorder_linear_weight(weight, 8), weight, None, 8
    )
    assert torch.equal(packed_decode.packed_linear(x, buffer, 96).view(8, 96), theirs)


def test_sampling_draws_the_same_tokens_packed_or_not(model):
    import torch

    prompts = torch.randint(0, 200, (4, 6), generator=torch.Generator().manual_seed(2))
    settings = dict(
        attention_mask=torch.ones_like(prompts),
        max_new_tokens=12,
        min_new_tokens=12,
        do_sample=True,
        temperature=1.0,
        top_k=0,
        top_p=1.0,
        pad_token_id=0,
    )
    drawn = []
    for packing in (False, True):
        if packing:
            PackedDecode(model)
        torch.manual_seed(3)
        with torch.no_grad():
            drawn.append(model.generate(prompts, **settings))
    assert torch.equal(drawn[0], drawn[1])


def test_a_layer_with_a_bias_adds_it():
    """Qwen2's attention projections carry biases."""
    import torch

    layer = torch.nn.Linear(64, 96, bias=True)
    packing = PackedDecode(torch.nn.Sequential(layer))
    x = torch.randn(5, 1, 64)
    with torch.no_grad():
        assert torch.allclose(layer(x), torch.nn.functional.linear(x, layer.weight, layer.bias), atol=1e-5)
    assert packing.packed[id(layer)].rows == 5


def test_packing_for_one_row_count_leaves_other_counts_on_the_plain_weight(model):
    """A run packs for its rounds' rows; held-out evaluation's batches of another size run the plain weight."""
    import torch

    packing = PackedDecode(model, rows=4)
    layer = packing.layers[0]
    with torch.no_grad():
        layer(torch.randn(3, 1, layer.in_features))
        assert packing.packed == {}
        layer(torch.randn(4, 1, layer.in_features))
        assert packing.packed[id(layer)].rows == 4


def test_a_linear_subclass_with_a_forward_of_its_own_keeps_it():
    """transformers' MoE routers subclass nn.Linear and return a tuple: only plain Linear layers are packed."""
    import torch

    class Router(torch.nn.Linear):
        def forward(self, x):
            return super().forward(x), "routed"

    router, plain = Router(16, 4), torch.nn.Linear(16, 4)
    packing = PackedDecode(torch.nn.Sequential(router, plain))
    assert packing.layers == [plain]
    with torch.no_grad():
        assert router(torch.randn(2, 1, 16))[1] == "routed"
