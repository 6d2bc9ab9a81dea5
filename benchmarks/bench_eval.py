"""Held-out evaluation's time: answered through the PEFT policy against through merged_generation's copy.

    .venv/bin/python benchmarks/bench_eval.py [--repeats 3]

A run that samples its rounds from a merged copy of the policy (merged_generation, the CPU default) answers
its held-out prompts from that copy too (workbench/trainer/evaluator.py). This loads the demo task as a run
does (bundled model, its LoRA settings, its held-out rows: 16 prompts, greedy, up to 32 tokens), gives the
LoRA update random values so the copy has something to merge, and times one evaluation each way, in turns,
`--repeats` times; it prints the median seconds of each, and whether the answers are the same.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from workbench.spec.config import RunConfig  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    import torch
    from peft import get_peft_model

    from workbench.trainer import training
    from workbench.trainer.answering import end_token_ids
    from workbench.trainer.evaluator import Evaluator, Policy, load_eval_rows
    from workbench.trainer.generation_copy import GenerationCopy

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)
    cfg = RunConfig.for_task("demo", device="cpu").with_absolute_paths()
    model, tokenizer = training.load_model_and_tokenizer(cfg)
    model = get_peft_model(model, training.build_lora_config(cfg))
    torch.manual_seed(0)
    with torch.no_grad():
        for name, weight in model.named_parameters():
            if "lora_B" in name:
                weight.normal_(0, 0.01)
    has_template = tokenizer.chat_template is not None
    rows = load_eval_rows(cfg, training.load_dataset_for(cfg, has_template)["prompt"], has_template)
    copy = GenerationCopy(model, torch.float32)
    ways = {"through the PEFT policy": None, "through merged_generation's copy": copy}
    seconds, answers = {name: [] for name in ways}, {}
    for _ in range(args.repeats):
        for name, generation_copy in ways.items():
            policy = Policy(
                model,
                tokenizer,
                "cpu",
                end_token_ids(model, tokenizer),
                training.build_reward_funcs(cfg),
                generation_copy=generation_copy,
            )
            started = time.perf_counter()
            record = Evaluator(policy, cfg, rows).evaluate(0)
            seconds[name].append(time.perf_counter() - started)
            answers[name] = [p["completion"] for p in record["prompts"]]
    print(
        f"\nheld-out evaluation of the demo ({len(rows)} prompts, greedy, up to {cfg.max_completion_length} tokens, "
        f"{torch.get_num_threads()} threads), median of {args.repeats}:"
    )
    for name in ways:
        print(f"  {name:34s} {statistics.median(seconds[name]):6.2f} s")
    same = answers["through the PEFT policy"] == answers["through merged_generation's copy"]
    print(f"  the same answers: {same}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
