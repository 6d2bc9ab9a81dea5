"""A randomly initialised model of a published size with the bundled model's tokenizer, for measuring.

    python benchmarks/random_model.py smollm2-1.7b /tmp/smollm2-1.7b-random
    python benchmarks/bench_speed.py --device cuda --model /tmp/smollm2-1.7b-random

Speed and memory depend on a model's shapes, not on what its weights learned, and a machine that reaches
no model hub (the GPU kit's) has only the bundled 135M model. This writes a model folder of the same
architecture at a larger published size (SmolLM2's own configurations), its weights drawn at random
from the config's initialiser, saved in bfloat16. Its completions are noise that runs to the length
limit, so its rewards say nothing; every step still samples, scores and trains the full model.
"""

from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

# SmolLM2's published configurations, on top of the bundled 135M model's config.json
SIZES = {
    "smollm2-360m": dict(
        hidden_size=960, intermediate_size=2560, num_hidden_layers=32, num_attention_heads=15, num_key_value_heads=5
    ),
    "smollm2-1.7b": dict(
        hidden_size=2048,
        intermediate_size=8192,
        num_hidden_layers=24,
        num_attention_heads=32,
        num_key_value_heads=32,
        rope_theta=130000,
    ),
}
TOKENIZER_FILES = (
    "tokenizer.json",
    "tokenizer_config.json",
    "chat_template.jinja",
    "generation_config.json",
    "special_tokens_map.json",
)


def random_config(size: str):
    """The bundled model's transformers config with `size`'s shapes."""
    from transformers import AutoConfig

    from workbench.sources.model_files import bundled_model_dir

    config = AutoConfig.from_pretrained(bundled_model_dir())
    for name, value in SIZES[size].items():
        setattr(config, name, value)
    return config


def write_random_model(size: str, out: Path, seed: int = 0) -> int:
    """Write the model folder; return its parameter count."""
    import torch
    from transformers import AutoModelForCausalLM

    from workbench.sources.model_files import bundled_model_dir

    bundled = bundled_model_dir()
    config = random_config(size)
    torch.manual_seed(seed)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    with torch.device(device):
        model = AutoModelForCausalLM.from_config(config, dtype=torch.bfloat16)
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out)
    for name in TOKENIZER_FILES:
        if (bundled / name).is_file():
            shutil.copy(bundled / name, out / name)
    return sum(p.numel() for p in model.parameters())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("size", choices=list(SIZES))
    parser.add_argument("out", type=Path, help="the model folder to write")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    parameters = write_random_model(args.size, args.out, args.seed)
    print(f"{args.out}: {args.size} shapes, {parameters / 1e9:.2f}B parameters, random bfloat16 weights")
    return 0


if __name__ == "__main__":
    sys.exit(main())
