"""Where a GRPO step's time goes on this machine: the trainer's phases, timed inside one training process.

    python benchmarks/bench_step_phases.py                 # the demo's defaults, then shared_prompt_pass=no
    python benchmarks/bench_step_phases.py --steps 6 --decode
    python benchmarks/bench_step_phases.py --compile-only  # torch.compile of a decode step, three ways

It builds the workbench's trainer for the demo task (bundled model, held-out evaluation off) as
`python -m workbench train` does, wraps its phases with timers and trains `--steps` steps, once with the
CPU defaults and once with `shared_prompt_pass=no`. For each it prints the median over the steps (the
first left out) of: sampling the round (`_generate_single_turn`), the reference pass (the log-probability
pass without gradients), the policy's forward (with gradients), the backward and optimizer step (the step
less the rest) and the whole step.

`--decode` also profiles sampling itself on the plain model (8 rows x 32 new tokens, float32 and
bfloat16): total time, the matmuls' share (`aten::mm`), the sampler's (`aten::exponential_`, what
`torch.multinomial` draws with), one layer's matmul with int8 weights against float32, and the memory
bandwidth a plain sum over the same bytes reaches.

`--compile` (or `--compile-only`, without the phases) times one decode step of the plain float32 model
(8 rows, a static cache) eager and under `torch.compile` three ways, each in a fresh process: inductor's
defaults; `max_autotune` with its C++ GEMM template; and that with `freezing`, which folds the weights
into the compiled code as constants - fastest, but a merged sampling copy is refreshed every step, so
frozen weights would be stale. It prints each one's compile time and median decode step.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from workbench.spec.config import RunConfig  # noqa: E402
from workbench.trainer import training  # noqa: E402

PHASES = ("sampling", "reference pass", "policy forward", "backward + optimizer", "whole step")


def timed_trainer_class(times: dict):
    """The workbench's trainer class with each phase's wall time appended to `times[phase]`."""
    import torch

    base = training.make_trainer_class()

    def timer(name, method):
        def run(self, *args, **kwargs):
            started = time.perf_counter()
            try:
                return method(self, *args, **kwargs)
            finally:
                grad = torch.is_grad_enabled() if name == "logps" else None
                key = {True: "policy forward", False: "reference pass"}.get(grad, name)
                times[key].append(time.perf_counter() - started)
        return run

    return type("TimedTrainer", (base,), {
        "_generate_single_turn": timer("sampling", base._generate_single_turn),
        "_get_per_token_logps_and_entropies": timer("logps", base._get_per_token_logps_and_entropies),
        "_generate_and_score_completions": timer("round", base._generate_and_score_completions),
        "training_step": timer("whole step", base.training_step),
    })


def phase_medians(cfg: RunConfig, steps: int) -> dict[str, float]:
    cfg = cfg.with_absolute_paths()
    model, tokenizer = training.load_model_and_tokenizer(cfg)
    times: dict[str, list[float]] = defaultdict(list)
    trainer = timed_trainer_class(times)(
        model=model, reward_funcs=training.build_reward_funcs(cfg),
        args=training.build_grpo_config(cfg, Path(tempfile.mkdtemp(prefix="bench-phases-"))),
        train_dataset=training.load_dataset_for(cfg, tokenizer.chat_template is not None),
        processing_class=tokenizer, peft_config=training.build_lora_config(cfg))
    training.attach_generation_copy(trainer, cfg)
    training.attach_shared_prompt_pass(trainer, cfg, model.config.model_type)
    trainer.train()
    times["backward + optimizer"] = [step - round_ - forward for step, round_, forward
                                     in zip(times["whole step"], times["round"], times["policy forward"])]
    return {phase: statistics.median(times[phase][1:] or times[phase]) for phase in PHASES}


def decode_prompts():
    """The prompts both decode probes start from: 8 rows of 37 random tokens (the demo's round and prompt length)."""
    import torch

    return torch.randint(100, 40000, (8, 37), generator=torch.Generator().manual_seed(0))


def decode_profile() -> None:
    import torch
    from torch.profiler import profile
    from transformers import AutoModelForCausalLM

    from workbench.spec.models import bundled_model_dir

    prompts = decode_prompts()
    settings = dict(attention_mask=torch.ones_like(prompts), max_new_tokens=32, min_new_tokens=32, do_sample=True,
                    temperature=0.7, top_k=0, top_p=1.0, pad_token_id=0)
    for dtype in (torch.float32, torch.bfloat16):
        model = AutoModelForCausalLM.from_pretrained(bundled_model_dir(), dtype=dtype).eval()
        with torch.no_grad():
            model.generate(prompts, **settings)  # warm up
            started = time.perf_counter()
            with profile() as prof:
                model.generate(prompts, **settings)
            total = time.perf_counter() - started
        ops = {event.key: event.self_cpu_time_total / 1e6 for event in prof.key_averages()}
        print(f"{str(dtype):15s} 8 x 32 tokens {total:.2f} s (profiled); aten::mm {ops.get('aten::mm', 0):.2f} s, "
              f"aten::exponential_ {ops.get('aten::exponential_', 0):.2f} s")
    # int8 weights would read a quarter of the bytes: torch's weight-only int8 matmul against float32, one MLP layer
    x, w = torch.randn(8, 576), torch.randn(1536, 576)
    scales = w.abs().amax(dim=1) / 127
    w8 = (w / scales[:, None]).round().to(torch.int8)
    for name, matmul in (("float32 x @ W.T", lambda: x @ w.T),
                         ("int8 _weight_int8pack_mm", lambda: torch._weight_int8pack_mm(x, w8, scales))):
        matmul()
        started = time.perf_counter()
        for _ in range(100):
            matmul()
        print(f"{name:26s} (8x576 by 576x1536): {(time.perf_counter() - started) * 1e4:.0f} us")
    weights = torch.randn(135_000_000)  # the 135M model's weights in float32: 540 MB
    weights.sum()
    started = time.perf_counter()
    for _ in range(5):
        weights.sum()
    seconds = (time.perf_counter() - started) / 5
    print(f"a plain sum over 540 MB: {seconds * 1e3:.1f} ms, {0.54 / seconds:.1f} GB/s "
          f"({torch.get_num_threads()} threads)")


COMPILE_MODES = ("eager", "default", "max-autotune", "max-autotune + freezing")


def compiled_decode_step(mode: str) -> dict[str, float]:
    """Seconds to compile and the median of 19 decode steps for one `mode` of COMPILE_MODES, in this process."""
    import torch
    import torch._inductor.config as inductor
    from transformers import AutoModelForCausalLM, StaticCache

    from workbench.spec.models import bundled_model_dir

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
        out = subprocess.run([sys.executable, __file__, "--compile-mode", mode], capture_output=True, text=True,
                             check=True).stdout
        result = json.loads(out.strip().splitlines()[-1])
        print(f"{mode:<28}{result['compile_s']:>8.1f} s{result['step_s'] * 1e3:>11.1f} ms", flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=6)
    parser.add_argument("--decode", action="store_true", help="also profile sampling on the plain model")
    parser.add_argument("--compile", action="store_true", help="also time a compiled decode step")
    parser.add_argument("--compile-only", action="store_true", help="only time a compiled decode step")
    parser.add_argument("--compile-mode", choices=COMPILE_MODES, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.compile_mode:
        import json

        print(json.dumps(compiled_decode_step(args.compile_mode)))
        return 0
    if args.compile_only:
        compile_probe()
        return 0
    base = RunConfig.for_task("demo", device="cpu", max_steps=args.steps, save_steps=10_000, eval_strategy="no")
    columns = {"defaults": base, "shared_prompt_pass=no": base.with_changes(shared_prompt_pass="no")}
    results = {name: phase_medians(cfg, args.steps) for name, cfg in columns.items()}
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
