"""A decode step of the packed float32 sampling copy written for Llama layers, on a CPU (`packed_decode`).

Why: with MKL's packed GEMM (trainer/packed_decode.py) a decode step of the demo's 8 rows spends a large share
of its time outside reading weights: seven GEMM calls, two RMSNorms, a rotary of the query
and the key apart, a `torch.cat` that copies the whole key/value cache, and the Python of four module
layers, per decoder layer. This step does the same arithmetic with fewer, larger operations:
- q, k and v in one packed GEMM, gate and up in one (the copy's q/k/v and gate/up weights become views
  of one matrix each, so refreshing the copy writes straight into it and the packing reads it once);
- the key/value cache grown in place, 64 positions at a time, instead of concatenated every step;
- one rotary over the query and key heads together, each row at the position `generate` gives it;
- the padding mask as the causal mask (one new token sees every cached position) and torch's SDPA called
  directly, without transformers' mask builder and attention wrapper around it.
It is faster than transformers' forward on the same packed weights, drawing the same tokens
(benchmarks/bench_decode_variants.py times both).

Only steps of one new token for the packed row count, without gradients, go this way; anything else
(the prefill, evaluation batches of other sizes) runs the model's own forward. `unsupported(model)` names
what this step does not reproduce (biases, another activation, another attention, scaled rotary
variants with per-layer differences are all Llama's own config fields), and before first use
`FusedLlamaDecode.check()` runs one decode step both ways on random prompts: logits and the cache's new
keys and values must agree to float32 rounding, or the copy keeps `PackedDecode` instead.

Ties to transformers: `LlamaForCausalLM`'s module layout (`model.layers[i].self_attn.{q,k,v,o}_proj`,
`mlp.{gate,up,down}_proj`, the two RMSNorms, `model.norm`, `model.rotary_emb`, `lm_head`), `DynamicCache`'s
`DynamicLayer.keys/values` rebound in place, and the model's `sdpa` attention (what `integrations.sdpa_attention`
calls; the private ties through workbench/library_compat.py's registry);
`generate` reads the forward's signature to decide what it passes, so the replacement keeps `position_ids`
and `logits_to_keep`.
"""

from __future__ import annotations

import copy as copying

import torch

from workbench import library_compat
from workbench.trainer import packed_decode

GROW = 64  # cache positions added at a time


def unsupported(model) -> str | None:
    """Why this decode step does not compute `model`'s, or None when it does."""
    config = model.config
    if config.model_type != "llama":
        return f"written for llama layers, not {config.model_type}"
    if getattr(config, "attention_bias", False) or getattr(config, "mlp_bias", False):
        return "the model's layers have biases"
    if config.hidden_act != "silu":
        return f"the model's activation is {config.hidden_act}, not silu"
    if getattr(config, "pretraining_tp", 1) != 1:
        return "the model splits its linear layers (pretraining_tp)"
    attention = library_compat.attention_implementation(config)
    if attention != "sdpa":
        return f"the model's attention is {attention}, not sdpa"
    weight = model.lm_head.weight
    if weight.dtype != torch.float32 or weight.device.type != "cpu":
        return "a float32 model on a CPU only"
    return None


def _rms_norm(module, x):
    """LlamaRMSNorm in one op: torch's rms_norm computes its operations in its order (float32; the same bits,
    tests/test_llama_decode.py)."""
    return torch.nn.functional.rms_norm(x, module.weight.shape, module.weight, module.variance_epsilon)


def _signed(sin):
    """`sin` with its first half negated: rotate_half(x) * sin = roll(x, half) * _signed(sin), the same bits."""
    half = sin.shape[-1] // 2
    return torch.cat((-sin[..., :half], sin[..., half:]), dim=-1)


def _rotate(x, cos, signed_sin):
    """transformers' rotary embedding of `x` (apply_rotary_pos_emb), in two ops fewer: `signed_sin` is
    `_signed(sin)`, made once a step for every layer."""
    return x * cos + x.roll(signed_sin.shape[-1] // 2, dims=-1) * signed_sin


def _fuse(linears) -> torch.Tensor:
    """One matrix holding the weights of `linears` one after the other; each layer's weight becomes a view
    of its rows, so whatever writes a weight writes the matrix."""
    fused = torch.cat([linear.weight.detach() for linear in linears])
    start = 0
    for linear in linears:
        rows = linear.weight.shape[0]
        linear.weight.data = fused[start : start + rows]
        start += rows
    return fused


def _append(cache_layer, key, value):
    """The cache layer's keys and values with this step's written in place, grown GROW positions at a time;
    the grown storage lives on the cache layer, so it goes when the cache does."""
    length = cache_layer.keys.shape[-2]
    keys, values = getattr(cache_layer, "workbench_grown", (None, None))
    if keys is None or cache_layer.keys.data_ptr() != keys.data_ptr() or keys.shape[2] <= length:
        keys = cache_layer.keys.new_empty(*cache_layer.keys.shape[:2], length + GROW, cache_layer.keys.shape[-1])
        values = torch.empty_like(keys)
        keys[:, :, :length], values[:, :, :length] = cache_layer.keys, cache_layer.values
        cache_layer.workbench_grown = keys, values
    keys[:, :, length], values[:, :, length] = key, value
    library_compat.rebind_cache_layer(cache_layer, keys[:, :, : length + 1], values[:, :, : length + 1])
    return cache_layer.keys, cache_layer.values


class FusedLlamaDecode:
    """The copy's decode steps of `rows` rows through one function of fused packed GEMMs; `invalidate()` (the
    weights changed) packs them again, into the same buffers, at the next step. Same interface as PackedDecode."""

    def __init__(self, model, rows: int):
        from transformers.cache_utils import DynamicLayer

        self.model, self.rows = model, rows
        self.dynamic_layer = DynamicLayer  # the one cache layer type a step grows in place
        self.own_forward = model.forward
        config = model.config
        attention = model.model.layers[0].self_attn
        self.heads, self.kv_heads = config.num_attention_heads, config.num_key_value_heads
        self.head_dim = attention.head_dim
        # per layer: (fused q/k/v, o, fused gate/up, down), each a PackedWeight
        self.layers: list[list[packed_decode.PackedWeight]] = []
        for layer in model.model.layers:
            attention, mlp = layer.self_attn, layer.mlp
            weights = (
                _fuse([attention.q_proj, attention.k_proj, attention.v_proj]),
                attention.o_proj.weight,
                _fuse([mlp.gate_proj, mlp.up_proj]),
                mlp.down_proj.weight,
            )
            self.layers.append(
                [packed_decode.PackedWeight(weight, packed_decode.new_buffer(weight, rows), rows) for weight in weights]
            )
        self.head = packed_decode.PackedWeight(
            model.lm_head.weight, packed_decode.new_buffer(model.lm_head.weight, rows), rows
        )
        self.steps = 0  # decode steps taken this way, for tests and benchmarks
        model.forward = self.forward

    def detach(self) -> None:
        """The model's own forward again (its q/k/v and gate/up weights stay views of the fused matrices)."""
        self.model.forward = self.own_forward

    def invalidate(self, weights=None) -> None:
        """The copy's weights changed: pack the layers again at the next decode step (the LM head too when
        `weights` is None or holds it; the LoRA update leaves it alone)."""
        for entries in self.layers:
            for entry in entries:
                entry.current = False
        if weights is None or any(weight is self.head.weight for weight in weights):
            self.head.current = False

    def _linear(self, x, entry: packed_decode.PackedWeight):
        """x (rows, 1, in) @ weight.T through the packed buffer: MKL's call without packed_linear's reshaping,
        which is most of a small product's Python cost."""
        if not entry.current:
            packed_decode.pack_into(entry.buffer, entry.weight, self.rows)
            entry.current = True
        x = x.contiguous()  # held here: MKL reads it by address
        out = torch.empty(self.rows, 1, entry.weight.shape[0], dtype=torch.float32)
        packed_decode.compute_into(out, x, entry.buffer)
        return out

    # generate reads this signature to decide what to pass: the positions it counts over each row's real
    # tokens, and logits_to_keep, as it does to the model's own forward
    def forward(
        self, input_ids=None, attention_mask=None, position_ids=None, past_key_values=None, logits_to_keep=0, **kwargs
    ):
        others = {key for key in kwargs if key not in ("use_cache", "return_dict")}
        # this step grows a dynamic cache in place and reads a 2-D padding mask: anything else is the model's
        if (
            others
            or input_ids is None
            or input_ids.shape != (self.rows, 1)
            or past_key_values is None
            or torch.is_grad_enabled()
            or kwargs.get("use_cache") is False
            or (attention_mask is not None and attention_mask.dim() != 2)
            or any(type(layer) is not self.dynamic_layer for layer in getattr(past_key_values, "layers", [None]))
            or past_key_values.get_seq_length() == 0
        ):
            return self.own_forward(
                input_ids=input_ids,
                attention_mask=attention_mask,
                position_ids=position_ids,
                past_key_values=past_key_values,
                logits_to_keep=logits_to_keep,
                **kwargs,
            )
        return self._step(input_ids, attention_mask, position_ids, past_key_values)

    def _step(self, input_ids, attention_mask, position_ids, cache):
        import torch.nn.functional as F
        from transformers.modeling_outputs import CausalLMOutputWithPast

        inner, rows = self.model.model, self.rows
        heads, kv_heads, head_dim = self.heads, self.kv_heads, self.head_dim
        hidden = inner.embed_tokens(input_ids)
        positions = (
            torch.full((1, 1), cache.get_seq_length(), dtype=torch.long) if position_ids is None else position_ids
        )
        # one new token sees every cached position: the causal mask is the padding mask alone
        # (transformers' create_causal_mask gives the same, or None without padding)
        mask = None if attention_mask is None else attention_mask.bool()[:, None, None, :]
        # (rows or 1, 1, head_dim): each row's position, broadcast over its query and key heads
        cos, sin = (t.view(-1, 1, head_dim) for t in inner.rotary_emb(hidden, positions))
        sin = _signed(sin)
        for layer, cache_layer, (qkv_w, o_w, gate_up_w, down_w) in zip(inner.layers, cache.layers, self.layers):
            qkv = self._linear(_rms_norm(layer.input_layernorm, hidden), qkv_w).view(
                rows, heads + 2 * kv_heads, head_dim
            )
            qk = _rotate(qkv[:, : heads + kv_heads], cos, sin)
            keys, values = _append(cache_layer, qk[:, heads:], qkv[:, heads + kv_heads :])
            # torch's SDPA called directly, as transformers' sdpa_attention_forward calls it for this shape
            attended = F.scaled_dot_product_attention(
                qk[:, :heads].unsqueeze(2),
                keys,
                values,
                attn_mask=mask,
                scale=layer.self_attn.scaling,
                enable_gqa=heads != kv_heads,
            )
            hidden = hidden + self._linear(attended.reshape(rows, 1, -1), o_w)
            gate, up = self._linear(_rms_norm(layer.post_attention_layernorm, hidden), gate_up_w).split(
                layer.mlp.gate_proj.weight.shape[0], dim=-1
            )
            hidden = hidden + self._linear(layer.mlp.act_fn(gate) * up, down_w)
        self.steps += 1
        logits = self._linear(_rms_norm(inner.norm, hidden), self.head)
        return CausalLMOutputWithPast(logits=logits, past_key_values=cache)

    def check(self) -> str | None:
        """One decode step of random prompts (left-padded rows among them) this way and through the model's own
        forward: None when logits and the cache's new keys and values agree to float32 rounding, else how far
        apart they are."""
        from transformers import DynamicCache

        generator = torch.Generator().manual_seed(0)
        vocab = self.model.config.vocab_size
        ids = torch.randint(0, vocab, (self.rows, 6), generator=generator)
        mask = torch.ones_like(ids)
        mask[: self.rows // 2, :2] = 0
        positions = (mask.cumsum(-1) - 1).clamp(min=0)
        with torch.no_grad():
            cache = DynamicCache(config=self.model.config)
            self.own_forward(
                input_ids=ids[:, :-1],
                attention_mask=mask[:, :-1],
                position_ids=positions[:, :-1],
                past_key_values=cache,
                use_cache=True,
            )
            theirs_cache = copying.deepcopy(cache)
            theirs = self.own_forward(
                input_ids=ids[:, -1:],
                attention_mask=mask,
                position_ids=positions[:, -1:],
                past_key_values=theirs_cache,
                use_cache=True,
            ).logits[:, -1]
            ours = self._step(ids[:, -1:], mask, positions[:, -1:], cache).logits[:, -1]
        self.steps -= 1
        pairs = [(ours, theirs)] + [(mine.keys, their.keys) for mine, their in zip(cache.layers, theirs_cache.layers)]
        pairs += [(mine.values, their.values) for mine, their in zip(cache.layers, theirs_cache.layers)]
        if not all(bool(torch.isfinite(mine).all()) for mine, _ in pairs):
            return "a decode step gave values that are not finite"
        # each difference relative to its tensor's size (at least 1): float32 rounding is about 1e-6 of it
        worst = max(float((mine - their).abs().max()) / max(1.0, float(their.abs().max())) for mine, their in pairs)
        return None if worst < 1e-4 else f"a decode step differed from transformers' by {worst:.1e} of its size"
