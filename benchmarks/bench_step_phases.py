"""Where a GRPO step's time goes on this machine: the trainer's phases, timed inside one training process.

    python benchmarks/bench_step_phases.py                 # the demo's defaults, then shared_prompt_pass=no
    python benchmarks/bench_step_phases.py --steps 6 --decode

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


def decode_profile() -> None:
    import torch
    from torch.profiler import profile
    from transformers import AutoModelForCausalLM

    from workbench.spec.models import bundled_model_dir

    prompts = torch.randint(100, 40000, (8, 37), generator=torch.Generator().manual_seed(0))
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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=6)
    parser.add_argument("--decode", action="store_true", help="also profile sampling on the plain model")
    args = parser.parse_args(argv)
    base = RunConfig.for_task("demo", device="cpu", max_steps=args.steps, save_steps=10_000, eval_strategy="no")
    columns = {"defaults": base, "shared_prompt_pass=no": base.with_changes(shared_prompt_pass="no")}
    results = {name: phase_medians(cfg, args.steps) for name, cfg in columns.items()}
    print(f"\n{'phase':<24}" + "".join(f"{name:>24}" for name in results))
    for phase in PHASES:
        print(f"{phase:<24}" + "".join(f"{results[name][phase]:>22.2f} s" for name in results))
    if args.decode:
        decode_profile()
    return 0


if __name__ == "__main__":
    sys.exit(main())
