"""Three ways to the same tokens faster for the sampling copy's decode steps on a CPU: two now run by
`packed_decode`, one measured and not adopted.

    python benchmarks/bench_decode_variants.py

All three keep the tokens a seed draws (each row below checks it), and each starts from the bundled model in
float32 with its linear layers through MKL's packed GEMM (`PackedDecode`), 8 rows of 37 prompt tokens, 32 new
tokens sampled at temperature 0.7 by transformers' `generate`.

1. The decode step written for Llama layers (workbench/trainer/llama_decode.py, `packed_decode`'s default
   for Llama models): q, k and v in one packed GEMM, gate and up in one, the key/value cache grown in place
   instead of concatenated each step, one rotary over the query and key heads, torch's SDPA with the padding
   mask. It prints the median decode step and the 8 x 32 tokens against transformers' forward on the same
   packed weights.
2. torch.multinomial's exponential draws (one per vocabulary entry and row, `aten::exponential_`, a serial
   loop over MT19937 and `log1p`) made from numpy's MT19937 at the generator's position
   (workbench/trainer/exact_draws.py, which `packed_decode` samples with). It prints one token's draws both
   ways and whether every value and the generator's state after them match.
3. The same draws made ahead on a thread of their own while the model runs, in each of OpenMP's wait
   policies (a fresh process each): torch's OpenMP threads spin between parallel regions by default, so the
   second core is seldom free. Not adopted: slower either way.
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

    from workbench.sources.model_files import bundled_model_dir
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
        tokens = model.generate(
            ids,
            attention_mask=mask,
            max_new_tokens=NEW_TOKENS,
            min_new_tokens=NEW_TOKENS,
            do_sample=True,
            temperature=0.7,
            top_k=0,
            top_p=1.0,
            pad_token_id=0,
        )
    return time.perf_counter() - started, tokens


# ---------------------------------------------------------------- 1. a decode step written for Llama layers


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
            forward(
                input_ids=ids[:, -1:],
                attention_mask=mask,
                position_ids=positions,
                past_key_values=cache,
                use_cache=True,
            )
            times.append(time.perf_counter() - started)
    return statistics.median(times) * 1e3


def fused_row(model) -> None:
    """The same packed weights through transformers' forward (PackedDecode) and through llama_decode's step."""
    from transformers import AutoModelForCausalLM

    from workbench.sources.model_files import bundled_model_dir
    from workbench.trainer.llama_decode import FusedLlamaDecode

    sample(model)  # warm-up
    plain = [sample(model) for _ in range(3)]
    written = AutoModelForCausalLM.from_pretrained(bundled_model_dir(), dtype=model.dtype).eval()
    fused = FusedLlamaDecode(written, ROWS)
    if fused.check() is not None:
        raise SystemExit(f"llama_decode's start-up check failed: {fused.check()}")
    sample(written)
    ours = [sample(written) for _ in range(3)]
    same = all(tokens.equal(plain[0][1]) for _, tokens in plain + ours)
    print(
        f"1. decode step: transformers' forward {decode_step_ms(model, model.forward):.1f} ms, written for Llama "
        f"layers {decode_step_ms(written, fused.forward):.1f} ms; {ROWS} x {NEW_TOKENS} tokens "
        f"{min(t for t, _ in plain):.2f} s against {min(t for t, _ in ours):.2f} s; the same tokens: {same}"
    )


# ---------------------------------------------------------------- 2. the draws reproduced bit for bit


def draws_row(vocab: int) -> None:
    import torch

    from workbench.trainer.exact_draws import exponentials

    count = ROWS * vocab
    torch.manual_seed(7)
    expected = torch.empty(count).exponential_()
    after = torch.get_rng_state()
    torch.manual_seed(7)
    reproduced = exponentials(count)
    exact = torch.equal(expected, reproduced) and torch.equal(after, torch.get_rng_state())
    timing = {}
    for name, draw in (
        ("torch", lambda: torch.empty(count).exponential_()),
        ("reproduced", lambda: exponentials(count)),
    ):
        draw()
        started = time.perf_counter()
        for _ in range(20):
            draw()
        timing[name] = (time.perf_counter() - started) / 20 * 1e3
    print(
        f"2. one token's draws ({ROWS} x {vocab}): torch {timing['torch']:.1f} ms, reproduced "
        f"{timing['reproduced']:.1f} ms; every value and the generator's state after them the same: {exact}"
    )


# ---------------------------------------------------------------- 3. drawn ahead, per OpenMP wait policy


def ahead_seconds() -> dict:
    """This process: 8 x 32 tokens with the draws inline, then drawn ahead on a thread (the same tokens)."""
    import torch

    from workbench.trainer.exact_draws import exponentials

    model = load_packed_model()
    sample(model)
    inline = [sample(model) for _ in range(3)]
    multinomial, vocab = torch.multinomial, model.config.vocab_size

    def with_draws_ahead():
        torch.manual_seed(1)
        drawn = queue.Queue(maxsize=2)
        worker = threading.Thread(
            target=lambda: [drawn.put(exponentials(ROWS * vocab).view(ROWS, vocab)) for _ in range(NEW_TOKENS)],
            daemon=True,
        )
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
        done = subprocess.run(
            [sys.executable, __file__, "--ahead-here"], capture_output=True, text=True, env=env, timeout=900
        )
        if done.returncode != 0:
            raise SystemExit(f"the OMP_WAIT_POLICY={policy} process failed:\n{done.stderr[-3000:]}")
        result = json.loads(done.stdout.strip().splitlines()[-1])
        print(
            f"3. OMP_WAIT_POLICY={policy or 'unset (spin, then sleep)'}: {ROWS} x {NEW_TOKENS} tokens with the "
            f"draws inline {result['inline']:.2f} s, drawn ahead on a thread {result['ahead']:.2f} s; "
            f"the same tokens: {result['same']}"
        )


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
