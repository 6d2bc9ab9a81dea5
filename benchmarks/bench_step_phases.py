"""Where a GRPO step's time goes on this machine: the trainer's phases, timed inside one training process.

    python benchmarks/bench_step_phases.py                 # the demo's defaults, packed_decode=no, shared_prompt_pass=no
    python benchmarks/bench_step_phases.py --steps 6 --decode
    python benchmarks/bench_step_phases.py --compile-only  # torch.compile of a decode step, three ways
    python benchmarks/bench_step_phases.py --matmul-only   # the decode step's matmuls and draws, other ways
    python benchmarks/bench_step_phases.py --head-only     # the scoring passes' LM head: TRL's against cpu_head
    python benchmarks/bench_step_phases.py --autocast      # the demo's levers here, with and without bf16 autocast

It builds the workbench's trainer for the demo task (bundled model, held-out evaluation off) as
`python -m workbench train` does, wraps its phases with timers and trains `--steps` steps, once with the
CPU defaults, once with `packed_decode=no` and once with `shared_prompt_pass=no` (and the three columns below). For each it prints the
median over the steps (the first left out) of: sampling the round (`_generate_single_turn`), the reference pass (the log-probability
pass without gradients), the policy's forward (with gradients), the backward and optimizer step (the step
less the rest) and the whole step.

Three more columns run the defaults with one lever that `packed_decode` or `shared_prompt_pass` carries
turned off inside this process: the decode step written for Llama layers (trainer/llama_decode.py), the
faster exact draws (trainer/exact_draws.py) and the CPU LM head of the scoring passes (trainer/cpu_head.py).

`--decode` also profiles sampling itself on the plain model (8 rows x 32 new tokens, float32 and
bfloat16): total time, the matmuls' share (`aten::mm`), the sampler's (`aten::exponential_`, what
`torch.multinomial` draws with), one layer's matmul with int8 weights against float32, and the memory
bandwidth a plain sum over the same bytes reaches.

`--compile` (or `--compile-only`, without the phases) times one decode step of the plain float32 model
(8 rows, a static cache) eager and under `torch.compile` three ways, each in a fresh process: inductor's
defaults; `max_autotune` with its C++ GEMM template; and that with `freezing`, which folds the weights
into the compiled code as constants - fastest, but a merged sampling copy is refreshed every step, so
frozen weights would be stale. It prints each one's compile time and median decode step.

`--matmul-only` tries the decode step's two largest costs other ways: the 8-row matmuls over every linear
weight of the model (as the model calls them, through MKL's packed GEMM as `packed_decode` runs them, with
the weights stored transposed, with the weights as the tall side, and with oneDNN allowed to compute float32
matmuls in bfloat16; the LM head plain and packed) against the bandwidth a plain
sum reaches, and `torch.multinomial`'s exponential draws (one and two threads; drawn inline against drawn
ahead on a thread of their own while 32 decode steps run, in the same generator order, so the same tokens).

`--autocast` times two columns only: the levers `auto` takes for the demo on a CPU that multiplies bfloat16 natively
(a merged bfloat16 copy samples, the shared prompt pass scores), and the same with the scoring passes (the reference
pass, the policy's forward and so its backward) under bfloat16 autocast over the float32 weights, which is what
TRL's own `bf16=True` does to every pass. It times the step, not what the rounding does to the learning.

`--head-only` times the LM head of the scoring passes at the demo's size (264 positions: 8 rows of the last
prompt token and 32 completion tokens, the bundled model's 49,152 x 576 head, temperature 0.7): TRL's
`ChunkedLogProbFunction` against `cpu_head`'s, forward without gradients (the reference pass), and forward
and backward of a loss over the log-probabilities (the policy's), with the largest difference between them.
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from workbench.spec.config import RunConfig  # noqa: E402
from workbench.trainer import levers, training  # noqa: E402

PHASES = ("sampling", "reference pass", "policy forward", "backward + optimizer", "whole step")


def timed_trainer_class(times: dict, autocast: bool = False):
    """The workbench's trainer class with each phase's wall time appended to `times[phase]`; `autocast`: its scoring
    passes (the reference pass, the policy's forward, whose backward follows the casts it recorded) run under
    bfloat16 autocast over the float32 weights."""
    import torch

    base = training.make_trainer_class()

    def timer(name, method):
        def run(self, *args, **kwargs):
            started = time.perf_counter()
            cast = torch.autocast("cpu", dtype=torch.bfloat16) if autocast and name == "logps" else None
            try:
                with cast or contextlib.nullcontext():
                    return method(self, *args, **kwargs)
            finally:
                grad = torch.is_grad_enabled() if name == "logps" else None
                key = {True: "policy forward", False: "reference pass"}.get(grad, name)
                times[key].append(time.perf_counter() - started)

        return run

    return type(
        "TimedTrainer",
        (base,),
        {
            "_generate_single_turn": timer("sampling", base._generate_single_turn),
            "_get_per_token_logps_and_entropies": timer("logps", base._get_per_token_logps_and_entropies),
            "_generate_and_score_completions": timer("round", base._generate_and_score_completions),
            "training_step": timer("whole step", base.training_step),
        },
    )


def _off(module_name: str, attribute: str, replacement):
    """A context in which one lever of the defaults is off: `module.attribute` replaced for its duration."""

    def context():
        import importlib
        from unittest import mock

        return mock.patch.object(importlib.import_module(module_name), attribute, replacement)

    return context


# The defaults with one lever inside `packed_decode` or `shared_prompt_pass` off, each alone (no setting
# turns these off one by one: they compute what they replace, so the settings name the larger choice)
LEVERS_OFF = {
    "no llama decode step": _off("workbench.trainer.llama_decode", "unsupported", lambda model: "off here"),
    "no faster draws": _off("workbench.trainer.exact_draws", "verified", lambda: False),
    "TRL's LM head": _off("workbench.trainer.cpu_head", "applies", lambda *args: False),
}


def phase_medians(cfg: RunConfig, steps: int, autocast: bool = False) -> dict[str, float]:
    cfg = cfg.with_absolute_paths()
    model, tokenizer = training.load_model_and_tokenizer(cfg)
    times: dict[str, list[float]] = defaultdict(list)
    trainer = timed_trainer_class(times, autocast)(
        model=model,
        reward_funcs=training.build_reward_funcs(cfg),
        args=training.build_grpo_config(cfg, Path(tempfile.mkdtemp(prefix="bench-phases-"))),
        train_dataset=training.load_dataset_for(cfg, tokenizer.chat_template is not None),
        processing_class=tokenizer,
        peft_config=training.build_lora_config(cfg),
    )
    levers.attach(trainer, cfg, model.config.model_type)
    trainer.train()
    times["backward + optimizer"] = [
        step - round_ - forward
        for step, round_, forward in zip(times["whole step"], times["round"], times["policy forward"])
    ]
    return {phase: statistics.median(times[phase][1:] or times[phase]) for phase in PHASES}


def decode_prompts():
    """The prompts both decode probes start from: 8 rows of 37 random tokens (the demo's round and prompt length)."""
    import torch

    return torch.randint(100, 40000, (8, 37), generator=torch.Generator().manual_seed(0))


def decode_profile() -> None:
    import torch
    from torch.profiler import profile
    from transformers import AutoModelForCausalLM

    from workbench.sources.model_files import bundled_model_dir

    prompts = decode_prompts()
    settings = dict(
        attention_mask=torch.ones_like(prompts),
        max_new_tokens=32,
        min_new_tokens=32,
        do_sample=True,
        temperature=0.7,
        top_k=0,
        top_p=1.0,
        pad_token_id=0,
    )
    for dtype in (torch.float32, torch.bfloat16):
        model = AutoModelForCausalLM.from_pretrained(bundled_model_dir(), dtype=dtype).eval()
        with torch.no_grad():
            model.generate(prompts, **settings)  # warm up
            started = time.perf_counter()
            with profile() as prof:
                model.generate(prompts, **settings)
            total = time.perf_counter() - started
        ops = {event.key: event.self_cpu_time_total / 1e6 for event in prof.key_averages()}
        print(
            f"{str(dtype):15s} 8 x 32 tokens {total:.2f} s (profiled); aten::mm {ops.get('aten::mm', 0):.2f} s, "
            f"aten::exponential_ {ops.get('aten::exponential_', 0):.2f} s"
        )
    # int8 weights would read a quarter of the bytes: torch's weight-only int8 matmul against float32, one MLP layer
    x, w = torch.randn(8, 576), torch.randn(1536, 576)
    scales = w.abs().amax(dim=1) / 127
    w8 = (w / scales[:, None]).round().to(torch.int8)
    for name, matmul in (
        ("float32 x @ W.T", lambda: x @ w.T),
        ("int8 _weight_int8pack_mm", lambda: torch._weight_int8pack_mm(x, w8, scales)),
    ):
        print(f"{name:26s} (8x576 by 576x1536): {per_call_ms(matmul, 100) * 1e3:.0f} us")
    weights = torch.randn(135_000_000)  # the 135M model's weights in float32: 540 MB
    ms = per_call_ms(weights.sum, 5)
    print(f"a plain sum over 540 MB: {ms:.1f} ms, {0.54 / ms * 1e3:.1f} GB/s ({torch.get_num_threads()} threads)")


def per_call_ms(work, reps: int = 20) -> float:
    """Milliseconds one call of `work` takes, after three warm-up calls."""
    for _ in range(3):
        work()
    started = time.perf_counter()
    for _ in range(reps):
        work()
    return (time.perf_counter() - started) / reps * 1e3


def sampled_packed_and_plain(model) -> None:
    """8 x 32 tokens sampled by `generate` with plain matmuls, then with packed_decode (the packing of every
    layer included, as after each refresh of the copy): the best of three each, and whether the tokens match."""
    import torch

    from workbench.trainer.packed_decode import PackedDecode

    prompts = decode_prompts()
    settings = dict(
        attention_mask=torch.ones_like(prompts),
        max_new_tokens=32,
        min_new_tokens=32,
        do_sample=True,
        temperature=0.7,
        top_k=0,
        top_p=1.0,
        pad_token_id=0,
    )

    def sample(packing=None):
        torch.manual_seed(1)
        started = time.perf_counter()
        if packing is not None:
            packing.invalidate()
        with torch.no_grad():
            tokens = model.generate(prompts, **settings)
        return time.perf_counter() - started, tokens

    plain = [sample() for _ in range(3)]
    packing = PackedDecode(model)
    packed = [sample(packing) for _ in range(3)]
    for layer in packing.layers:  # the plain model again, for what follows
        del layer.forward
    same = all(torch.equal(tokens, plain[0][1]) for _, tokens in plain + packed)
    print(
        f"  8 x 32 tokens sampled: plain {min(t for t, _ in plain):.2f} s, packed_decode "
        f"{min(t for t, _ in packed):.2f} s (packing included); the same tokens: {same}"
    )


def matmul_probe() -> None:
    """The decode step's two largest costs, each tried another way: the 8-row matmuls over every linear
    weight of the model, and the sampler's exponential draws over the vocabulary."""
    import queue
    import threading

    import torch
    from transformers import AutoModelForCausalLM

    from workbench.sources.model_files import bundled_model_dir
    from workbench.trainer import packed_decode

    model = AutoModelForCausalLM.from_pretrained(bundled_model_dir()).eval()
    weights = [
        m.weight.detach() for name, m in model.named_modules() if isinstance(m, torch.nn.Linear) and name != "lm_head"
    ]
    rows = {k: torch.randn(8, k) for k in {w.shape[1] for w in weights}}
    gigabytes = sum(w.numel() for w in weights) * 4 / 1e9
    transposed = [w.t().contiguous() for w in weights]
    columns = {k: x.t().contiguous() for k, x in rows.items()}
    packed = [(packed_decode.new_buffer(w, 8), w) for w in weights]
    for buffer, w in packed:  # the first packing also faults the buffers' pages in
        packed_decode.pack_into(buffer, w, 8)
    started = time.perf_counter()
    for buffer, w in packed:  # what each step's refresh costs
        packed_decode.pack_into(buffer, w, 8)
    pack_seconds = time.perf_counter() - started
    ways = {
        "F.linear(x, W), as the model does": lambda: [torch.nn.functional.linear(rows[w.shape[1]], w) for w in weights],
        "MKL's packed GEMM (packed_decode)": lambda: [
            packed_decode.packed_linear(rows[w.shape[1]], p, w.shape[0]) for p, w in packed
        ],
        "x @ W.T stored transposed": lambda: [rows[w.shape[0]] @ w for w in transposed],
        "W @ x.T (W as the tall side)": lambda: [torch.mm(w, columns[w.shape[1]]) for w in weights],
    }
    print(f"8-row matmuls over the {len(weights)} linear weights ({gigabytes * 1e3:.0f} MB, float32):")
    for name, work in ways.items():
        ms = per_call_ms(work)
        print(f"  {name:36s} {ms:6.1f} ms  {gigabytes / ms * 1e3:5.1f} GB/s")
    print(f"  packing them again in place (each step's refresh) took {pack_seconds:.3f} s")
    head = model.lm_head.weight.detach()
    head_packed = packed_decode.new_buffer(head, 8)
    packed_decode.pack_into(head_packed, head, 8)
    x = rows[head.shape[1]]
    print(
        f"  the LM head ({head.numel() * 4 / 1e6:.0f} MB): F.linear "
        f"{per_call_ms(lambda: torch.nn.functional.linear(x, head)):.1f} ms, packed "
        f"{per_call_ms(lambda: packed_decode.packed_linear(x, head_packed, head.shape[0])):.1f} ms"
    )
    sampled_packed_and_plain(model)
    matmul_backend = getattr(getattr(torch.backends, "mkldnn", None), "matmul", None)
    if matmul_backend is not None and hasattr(matmul_backend, "fp32_precision"):
        matmul_backend.fp32_precision = "bf16"  # oneDNN may compute float32 matmuls in bfloat16
        ms = per_call_ms(ways["F.linear(x, W), as the model does"])
        matmul_backend.fp32_precision = "ieee"
        print(f"  {'F.linear, fp32_precision=bf16':36s} {ms:6.1f} ms  {gigabytes / ms * 1e3:5.1f} GB/s")
    flat = torch.randn(135_000_000)
    print(f"  a plain sum over 540 MB reaches {0.54 / per_call_ms(flat.sum, 5) * 1e3:.1f} GB/s")
    vocab = model.config.vocab_size
    noise = torch.empty(8, vocab)
    for threads in (1, 2):
        torch.set_num_threads(threads)
        print(
            f"torch.multinomial's exponential draws for one token (8 x {vocab}), {threads} thread(s): "
            f"{per_call_ms(noise.exponential_, 50):.1f} ms"
        )

    def decode(draw) -> float:
        """Seconds for 32 tokens of 8 rows, sampled as torch.multinomial does (argmax of p / exponential)."""
        started = time.perf_counter()
        with torch.no_grad():
            out = model(decode_prompts(), use_cache=True)
            for step in range(32):
                token = (torch.softmax(out.logits[:, -1], -1) / draw(step)).argmax(-1, keepdim=True)
                out = model(token, past_key_values=out.past_key_values, use_cache=True)
        return time.perf_counter() - started

    def ahead():
        """The same draws made on a thread of their own while the model runs (the generator's order kept)."""
        drawn = queue.Queue()
        threading.Thread(
            target=lambda: [drawn.put(torch.empty(8, vocab).exponential_()) for _ in range(32)], daemon=True
        ).start()
        return lambda step: drawn.get()

    inline = [decode(lambda step: torch.empty(8, vocab).exponential_()) for _ in range(2)]
    overlapped = [decode(ahead()) for _ in range(2)]
    print(
        f"32 decode steps of 8 rows: draws inline {min(inline):.2f} s, drawn ahead on a thread {min(overlapped):.2f} s"
    )


COMPILE_MODES = ("eager", "default", "max-autotune", "max-autotune + freezing")


def compiled_decode_step(mode: str) -> dict[str, float]:
    """Seconds to compile and the median of 19 decode steps for one `mode` of COMPILE_MODES, in this process."""
    import torch
    import torch._inductor.config as inductor
    from transformers import AutoModelForCausalLM, StaticCache

    from workbench.sources.model_files import bundled_model_dir

    if mode.startswith("max-autotune"):
        inductor.max_autotune = True
        inductor.max_autotune_gemm_backends = "CPP,ATEN"
    inductor.freezing = mode.endswith("freezing")
    model = AutoModelForCausalLM.from_pretrained(bundled_model_dir(), dtype=torch.float32).eval()
    ids = decode_prompts()
    prompt = ids.size(1)
    cache = StaticCache(config=model.config, max_cache_len=80)
    with torch.no_grad():
        model(ids, past_key_values=cache, cache_position=torch.arange(prompt), use_cache=True)

        def step(token, position):
            return model(token, past_key_values=cache, cache_position=position, use_cache=True).logits

        if mode != "eager":
            step = torch.compile(step, dynamic=False)
        token = ids[:, -1:]
        started = time.perf_counter()
        step(token, torch.tensor([prompt]))
        compile_s = time.perf_counter() - started
        times = []
        for i in range(1, 20):
            started = time.perf_counter()
            step(token, torch.tensor([prompt + i]))
            times.append(time.perf_counter() - started)
    return {"compile_s": compile_s, "step_s": statistics.median(times)}


def compile_probe() -> None:
    """Print each of COMPILE_MODES' compile time and median decode step, each timed in a fresh process."""
    import json
    import subprocess

    print(f"\n{'decode step of 8 rows':<28}{'compile':>10}{'median step':>14}")
    for mode in COMPILE_MODES:  # each in a process of its own: inductor's settings and caches stay apart
        out = subprocess.run(
            [sys.executable, __file__, "--compile-mode", mode], capture_output=True, text=True, check=True
        ).stdout
        result = json.loads(out.strip().splitlines()[-1])
        print(f"{mode:<28}{result['compile_s']:>8.1f} s{result['step_s'] * 1e3:>11.1f} ms", flush=True)


def head_probe() -> None:
    """The scoring passes' LM head at the demo's size: TRL's fused function against cpu_head's."""
    import torch
    from transformers import AutoModelForCausalLM
    from trl.kernels.chunked_logprob import ChunkedLogProbFunction

    from workbench.sources.model_files import bundled_model_dir
    from workbench.trainer.cpu_head import CpuLogProbFunction

    weight = AutoModelForCausalLM.from_pretrained(bundled_model_dir()).lm_head.weight.detach()
    generator = torch.Generator().manual_seed(0)
    hidden = torch.randn(264, weight.shape[1], generator=generator)
    targets = torch.randint(0, weight.shape[0], (264,), generator=generator)
    outputs = ("log_probs", "entropy")
    results = {}
    # TRL's head computes entropies in the reference pass too; cpu_head leaves them out there
    for name, function, reference_outputs in (
        ("TRL's ChunkedLogProbFunction", ChunkedLogProbFunction, outputs),
        ("cpu_head.CpuLogProbFunction", CpuLogProbFunction, ("log_probs",)),
    ):

        def reference(function=function, reference_outputs=reference_outputs):
            with torch.no_grad():
                return function.apply(hidden, weight, None, targets, 0.7, 32768, None, 1.0, reference_outputs)[0]

        def policy(function=function, outputs=outputs):
            leaf = hidden.clone().requires_grad_()
            log_probs = function.apply(leaf, weight, None, targets, 0.7, 32768, None, 1.0, outputs)[0]
            log_probs.sum().backward()
            return leaf.grad

        results[name] = (reference(), policy())
        print(
            f"{name:30s} forward without gradients {per_call_ms(reference, 5):6.1f} ms; "
            f"forward and backward {per_call_ms(policy, 5):6.1f} ms"
        )
    (trl_logps, trl_grad), (our_logps, our_grad) = results.values()
    print(
        f"largest difference: log-probabilities {(trl_logps - our_logps).abs().max():.1e}, "
        f"hidden gradient {(trl_grad - our_grad).abs().max():.1e}"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=6)
    parser.add_argument("--decode", action="store_true", help="also profile sampling on the plain model")
    parser.add_argument("--compile", action="store_true", help="also time a compiled decode step")
    parser.add_argument("--compile-only", action="store_true", help="only time a compiled decode step")
    parser.add_argument("--compile-mode", choices=COMPILE_MODES, help=argparse.SUPPRESS)
    parser.add_argument(
        "--matmul-only", action="store_true", help="only try the decode step's matmuls and sampler draws other ways"
    )
    parser.add_argument(
        "--head-only", action="store_true", help="only time the scoring passes' LM head, TRL's against cpu_head's"
    )
    parser.add_argument(
        "--autocast",
        action="store_true",
        help="only the demo's levers on a bfloat16 CPU, with and without bf16 autocast of the scoring passes",
    )
    args = parser.parse_args(argv)
    if args.head_only:
        head_probe()
        return 0
    if args.matmul_only:
        matmul_probe()
        return 0
    if args.compile_mode:
        import json

        print(json.dumps(compiled_decode_step(args.compile_mode)))
        return 0
    if args.compile_only:
        compile_probe()
        return 0
    base = RunConfig.for_task("demo", device="cpu", max_steps=args.steps, save_steps=10_000, eval_strategy="no")
    columns = {
        "defaults": (base, None),
        "packed_decode=no": (base.with_changes(packed_decode="no"), None),
        "shared_prompt_pass=no": (base.with_changes(shared_prompt_pass="no"), None),
    }
    columns.update({name: (base, lever) for name, lever in LEVERS_OFF.items()})
    casts = dict.fromkeys(columns, False)
    if args.autocast:
        levers_here = base.with_changes(merged_generation="bfloat16", shared_prompt_pass="yes", packed_decode="no")
        columns = {"bf16 copy + shared": (levers_here, None), "the same + autocast": (levers_here, None)}
        casts = {"bf16 copy + shared": False, "the same + autocast": True}
    results = {}
    for name, (cfg, lever_off) in columns.items():
        with lever_off() if lever_off else contextlib.nullcontext():
            results[name] = phase_medians(cfg, args.steps, casts[name])
    print(f"\n{'phase':<24}" + "".join(f"{name:>24}" for name in results))
    for phase in PHASES:
        print(f"{phase:<24}" + "".join(f"{results[name][phase]:>22.2f} s" for name in results))
    if args.decode:
        decode_profile()
    if args.compile:
        compile_probe()
    return 0


if __name__ == "__main__":
    sys.exit(main())
