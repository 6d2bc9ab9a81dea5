"""Three more ways to the same tokens faster, for the sampling copy's decode steps on a CPU: measured, not adopted.

    python benchmarks/bench_decode_variants.py

All three keep the tokens a seed draws (each row below checks it), and each starts from what the demo's
defaults run: the bundled model in float32 with `packed_decode` (MKL's packed GEMM), 8 rows of 37 prompt
tokens, 32 new tokens sampled at temperature 0.7 by transformers' `generate`.

1. A decode step written for Llama layers: q, k and v in one packed GEMM, gate and up in one, the key/value
   cache grown in place instead of concatenated each step, one rotary over the query and key heads
   together, the mask and attention through transformers' own functions. It prints the median decode step
   and the 8 x 32 tokens against transformers' forward on the same packed weights.
2. torch.multinomial's exponential draws (one per vocabulary entry and row, `aten::exponential_`, a serial
   loop over MT19937 and `log1p`) reproduced bit for bit: the generator's MT19937 state read from
   `torch.get_rng_state()`, its 32-bit words drawn by numpy's MT19937, the doubles and `log1p` done in torch
   on both cores, the state written back. It prints one token's draws both ways and whether every value and
   the generator's state after them match.
3. The same draws made ahead on a thread of their own while the model runs, in each of OpenMP's wait
   policies (a fresh process each): torch's OpenMP threads spin between parallel regions by default, so the
   second core is seldom free.
"""

from __future__ import annotations

import json
import os
import queue
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

ROWS, NEW_TOKENS = 8, 32


def load_packed_model():
    import torch
    from transformers import AutoModelForCausalLM

    from workbench.spec.models import bundled_model_dir
    from workbench.trainer.packed_decode import PackedDecode

    model = AutoModelForCausalLM.from_pretrained(bundled_model_dir(), dtype=torch.float32).eval()
    PackedDecode(model, ROWS)
    return model


def prompts():
    import torch

    ids = torch.randint(100, 40000, (ROWS, 37), generator=torch.Generator().manual_seed(0))
    mask = torch.ones_like(ids)
    mask[: ROWS // 2, :5] = 0  # left padding, as a round of prompts of different lengths has
    return ids, mask


def sample(model, seed: int | None = 1):
    """(seconds, tokens) of one `generate` of the demo's round (`seed` None: the generator as it is)."""
    import torch

    ids, mask = prompts()
    if seed is not None:
        torch.manual_seed(seed)
    started = time.perf_counter()
    with torch.no_grad():
        tokens = model.generate(ids, attention_mask=mask, max_new_tokens=NEW_TOKENS, min_new_tokens=NEW_TOKENS,
                                do_sample=True, temperature=0.7, top_k=0, top_p=1.0, pad_token_id=0)
    return time.perf_counter() - started, tokens


# ---------------------------------------------------------------- 1. a decode step written for Llama layers


def fused_decode_forward(model):
    """A forward for (rows, 1) decode steps of a float32 Llama model; anything else goes to the model's own."""
    import torch
    from transformers.integrations.sdpa_attention import sdpa_attention_forward
    from transformers.masking_utils import create_causal_mask
    from transformers.modeling_outputs import CausalLMOutputWithPast

    from workbench.trainer.packed_decode import new_buffer, pack_into, packed_linear

    own, inner, config = model.forward, model.model, model.config
    heads, kv_heads = config.num_attention_heads, config.num_key_value_heads
    head_dim, half = config.hidden_size // heads, config.hidden_size // heads // 2

    def packed(weight):
        buffer = new_buffer(weight, ROWS)
        pack_into(buffer, weight, ROWS)
        return buffer, weight.shape[0]

    layers = [(packed(torch.cat([layer.self_attn.q_proj.weight, layer.self_attn.k_proj.weight,
                                 layer.self_attn.v_proj.weight])),
               packed(layer.self_attn.o_proj.weight),
               packed(torch.cat([layer.mlp.gate_proj.weight, layer.mlp.up_proj.weight])),
               packed(layer.mlp.down_proj.weight)) for layer in inner.layers]
    head = packed(model.lm_head.weight)
    grown: dict[int, tuple] = {}

    def linear(x, weight):
        return packed_linear(x, *weight)

    def append(cache_layer, key, value):
        """The cache's keys and values with this step's written in place (grown 64 positions at a time)."""
        length = cache_layer.keys.shape[-2]
        keys, values = grown.get(id(cache_layer), (None, None))
        if keys is None or cache_layer.keys.data_ptr() != keys.data_ptr() or keys.shape[2] <= length:
            keys = cache_layer.keys.new_empty(*cache_layer.keys.shape[:2], length + 64, head_dim)
            values = torch.empty_like(keys)
            keys[:, :, :length], values[:, :, :length] = cache_layer.keys, cache_layer.values
            grown[id(cache_layer)] = keys, values
        keys[:, :, length], values[:, :, length] = key, value
        cache_layer.keys, cache_layer.values = keys[:, :, :length + 1], values[:, :, :length + 1]
        return cache_layer.keys, cache_layer.values

    def norm(module, x):  # LlamaRMSNorm's own operations, in its order
        return module.weight * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + module.variance_epsilon))

    # generate reads this signature to decide what to pass: the positions it counts over each row's real
    # tokens, and logits_to_keep, as it does to the model's own forward
    def forward(input_ids=None, attention_mask=None, position_ids=None, past_key_values=None, logits_to_keep=0,
                **kwargs):
        extra = {k: v for k, v in kwargs.items() if k not in ("use_cache", "return_dict")}
        if extra or input_ids is None or input_ids.shape != (ROWS, 1) or past_key_values is None:
            return own(input_ids=input_ids, attention_mask=attention_mask, position_ids=position_ids,
                       past_key_values=past_key_values, logits_to_keep=logits_to_keep, **kwargs)
        hidden = inner.embed_tokens(input_ids)
        positions = torch.tensor([[past_key_values.get_seq_length()]]) if position_ids is None else position_ids
        mask = create_causal_mask(config=config, inputs_embeds=hidden, attention_mask=attention_mask,
                                  past_key_values=past_key_values, position_ids=positions)
        # (rows or 1, 1, head_dim): each row's position, broadcast over its query and key heads
        cos, sin = (t.view(-1, 1, head_dim) for t in inner.rotary_emb(hidden, positions))
        for layer, cache_layer, (qkv_w, o_w, gate_up_w, down_w) in zip(inner.layers, past_key_values.layers,
                                                                       layers):
            qkv = linear(norm(layer.input_layernorm, hidden), qkv_w).view(ROWS, heads + 2 * kv_heads, head_dim)
            qk = qkv[:, :heads + kv_heads]
            qk = qk * cos + torch.cat((-qk[..., half:], qk[..., :half]), dim=-1) * sin
            keys, values = append(cache_layer, qk[:, heads:], qkv[:, heads + kv_heads:])
            attended, _ = sdpa_attention_forward(layer.self_attn, qk[:, :heads].unsqueeze(2), keys, values, mask,
                                                 dropout=0.0, scaling=layer.self_attn.scaling)
            hidden = hidden + linear(attended.reshape(ROWS, 1, -1), o_w)
            gate_up = linear(norm(layer.post_attention_layernorm, hidden), gate_up_w)
            gate, up = gate_up.split(config.intermediate_size, dim=-1)
            hidden = hidden + linear(layer.mlp.act_fn(gate) * up, down_w)
        return CausalLMOutputWithPast(logits=linear(norm(inner.norm, hidden), head), past_key_values=past_key_values)

    return forward


def decode_step_ms(model, forward) -> float:
    """Median milliseconds of 20 decode steps through `forward`, after a prefill of the demo's prompts, with the
    positions generate passes (counted over each row's real tokens)."""
    import torch
    from transformers import DynamicCache

    ids, mask = prompts()
    cache = DynamicCache(config=model.config)
    times = []
    with torch.no_grad():
        model(input_ids=ids, attention_mask=mask, past_key_values=cache, use_cache=True)
        for _ in range(20):
            mask = torch.cat([mask, torch.ones(ROWS, 1, dtype=mask.dtype)], dim=1)
            positions = mask.long().cumsum(-1)[:, -1:] - 1
            started = time.perf_counter()
            forward(input_ids=ids[:, -1:], attention_mask=mask, position_ids=positions, past_key_values=cache,
                    use_cache=True)
            times.append(time.perf_counter() - started)
    return statistics.median(times) * 1e3


def fused_row(model) -> None:
    own = model.forward
    sample(model)  # warm-up
    plain = [sample(model) for _ in range(3)]
    fused = fused_decode_forward(model)
    model.forward = fused
    try:
        written = [sample(model) for _ in range(3)]
    finally:
        model.forward = own
    same = all(tokens.equal(plain[0][1]) for _, tokens in plain + written)
    print(f"1. decode step: transformers' forward {decode_step_ms(model, own):.1f} ms, written for Llama layers "
          f"{decode_step_ms(model, fused):.1f} ms; {ROWS} x {NEW_TOKENS} tokens {min(t for t, _ in plain):.2f} s "
          f"against {min(t for t, _ in written):.2f} s; the same tokens: {same}")


# ---------------------------------------------------------------- 2. the draws reproduced bit for bit


def generator_words():
    """(numpy MT19937 at the default CPU generator's position, its state bytes) - CPUGeneratorImplState's layout:
    seed (u64), left (i32), seeded (i32), next (u64), 624 words stored as u64, ..."""
    import numpy as np
    import torch

    state = torch.get_rng_state().numpy()
    left = int(np.frombuffer(state[8:12].tobytes(), np.int32)[0])
    words = np.frombuffer(state[24:24 + 624 * 8].tobytes(), np.uint64).astype(np.uint32)
    twister = np.random.MT19937()
    twister.state = {"bit_generator": "MT19937", "state": {"key": words, "pos": 625 - left}}
    return twister, state


def write_generator(twister, state) -> None:
    """Put the MT19937 position back into the default CPU generator."""
    import numpy as np
    import torch

    position, words = twister.state["state"]["pos"], twister.state["state"]["key"]
    state = state.copy()
    state[8:12] = np.frombuffer(np.int32(625 - position).tobytes(), np.uint8)
    state[16:24] = np.frombuffer(np.uint64(position).tobytes(), np.uint8)
    state[24:24 + 624 * 8] = np.frombuffer(words.astype(np.uint64).tobytes(), np.uint8)
    torch.set_rng_state(torch.from_numpy(state))


def exponentials(count: int):
    """`torch.empty(count).exponential_()`'s values, drawn from numpy's MT19937 and finished in torch."""
    import numpy as np
    import torch

    twister, state = generator_words()
    words = torch.from_numpy(twister.random_raw(2 * count).view(np.int64)).view(-1, 2)
    # random64() = first word << 32 | second; a uniform double from its low 53 bits; -log1p(-u)
    uniform = ((words[:, 0] << 32) | words[:, 1]).bitwise_and_((1 << 53) - 1).to(torch.float64).mul_(2.0 ** -53)
    write_generator(twister, state)
    return uniform.neg_().log1p_().neg_().to(torch.float32)


def draws_row(vocab: int) -> None:
    import torch

    count = ROWS * vocab
    torch.manual_seed(7)
    expected = torch.empty(count).exponential_()
    after = torch.get_rng_state()
    torch.manual_seed(7)
    reproduced = exponentials(count)
    exact = torch.equal(expected, reproduced) and torch.equal(after, torch.get_rng_state())
    timing = {}
    for name, draw in (("torch", lambda: torch.empty(count).exponential_()), ("reproduced", lambda: exponentials(count))):
        draw()
        started = time.perf_counter()
        for _ in range(20):
            draw()
        timing[name] = (time.perf_counter() - started) / 20 * 1e3
    print(f"2. one token's draws ({ROWS} x {vocab}): torch {timing['torch']:.1f} ms, reproduced "
          f"{timing['reproduced']:.1f} ms; every value and the generator's state after them the same: {exact}")


# ---------------------------------------------------------------- 3. drawn ahead, per OpenMP wait policy


def ahead_seconds() -> dict:
    """This process: 8 x 32 tokens with the draws inline, then drawn ahead on a thread (the same tokens)."""
    import torch

    model = load_packed_model()
    sample(model)
    inline = [sample(model) for _ in range(3)]
    multinomial, vocab = torch.multinomial, model.config.vocab_size

    def with_draws_ahead():
        torch.manual_seed(1)
        drawn = queue.Queue(maxsize=2)
        worker = threading.Thread(target=lambda: [drawn.put(exponentials(ROWS * vocab).view(ROWS, vocab))
                                                  for _ in range(NEW_TOKENS)], daemon=True)
        worker.start()
        torch.multinomial = lambda probs, num_samples, **_: (probs / drawn.get()).argmax(-1, keepdim=True)
        try:
            return sample(model, seed=None)
        finally:
            torch.multinomial = multinomial
            worker.join(timeout=60)  # it has drawn its 32 by now, unless sampling failed (daemon: not waited for)

    ahead = [with_draws_ahead() for _ in range(3)]
    same = all(tokens.equal(inline[0][1]) for _, tokens in inline + ahead)
    return {"inline": min(t for t, _ in inline), "ahead": min(t for t, _ in ahead), "same": same}


def ahead_rows() -> None:
    for policy in (None, "PASSIVE"):
        env = {key: value for key, value in os.environ.items() if key != "OMP_WAIT_POLICY"}
        if policy:
            env["OMP_WAIT_POLICY"] = policy
        done = subprocess.run([sys.executable, __file__, "--ahead-here"], capture_output=True, text=True, env=env,
                              timeout=900)
        if done.returncode != 0:
            raise SystemExit(f"the OMP_WAIT_POLICY={policy} process failed:\n{done.stderr[-3000:]}")
        result = json.loads(done.stdout.strip().splitlines()[-1])
        print(f"3. OMP_WAIT_POLICY={policy or 'unset (spin, then sleep)'}: {ROWS} x {NEW_TOKENS} tokens with the "
              f"draws inline {result['inline']:.2f} s, drawn ahead on a thread {result['ahead']:.2f} s; "
              f"the same tokens: {result['same']}")


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv == ["--ahead-here"]:
        print(json.dumps(ahead_seconds()))
        return 0
    model = load_packed_model()
    fused_row(model)
    draws_row(model.config.vocab_size)
    del model
    ahead_rows()
    return 0


if __name__ == "__main__":
    sys.exit(main())
