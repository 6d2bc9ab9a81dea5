"""A decoder-only model's shape, read from its config.json alone (no weights, no torch): what the memory
estimate counts from, and the linear layers LoRA wraps in it.

Pure standard library (reads JSON): importable without torch.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from workbench.errors import WorkbenchError
from workbench.sources import model_files

# The linear layers of one decoder layer (Llama naming), the ones LoRA may wrap.
LINEAR_NAMES = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")

# config.json keys, with the aliases other architectures use.
_ALIASES = {
    "hidden_size": ("hidden_size", "n_embd", "d_model"),
    "num_hidden_layers": ("num_hidden_layers", "n_layer", "num_layers"),
    "num_attention_heads": ("num_attention_heads", "n_head", "num_heads"),
    "vocab_size": ("vocab_size",),
}


class MemoryInputError(WorkbenchError):
    """An input the estimate cannot use; the message names the field, the rule and a fix."""


@dataclass(frozen=True)
class ModelShape:
    """What the estimate needs to know about a decoder-only transformer."""

    hidden_size: int
    intermediate_size: int
    num_hidden_layers: int
    num_attention_heads: int
    num_key_value_heads: int
    head_dim: int
    vocab_size: int
    tie_word_embeddings: bool = True
    num_parameters: int | None = None  # counted from the shape when not given

    @property
    def kv_size(self) -> int:
        return self.num_key_value_heads * self.head_dim

    @property
    def attention_size(self) -> int:
        return self.num_attention_heads * self.head_dim

    def linear_shapes(self) -> dict[str, tuple[int, int]]:
        """(in, out) features of each linear layer of one decoder layer (Llama naming)."""
        h, a, kv, i = self.hidden_size, self.attention_size, self.kv_size, self.intermediate_size
        return {
            "q_proj": (h, a),
            "k_proj": (h, kv),
            "v_proj": (h, kv),
            "o_proj": (a, h),
            "gate_proj": (h, i),
            "up_proj": (h, i),
            "down_proj": (i, h),
        }

    def parameter_count(self) -> int:
        if self.num_parameters:
            return int(self.num_parameters)
        per_layer = sum(i * o for i, o in self.linear_shapes().values()) + 2 * self.hidden_size
        embeddings = self.vocab_size * self.hidden_size
        head = 0 if self.tie_word_embeddings else embeddings
        return embeddings + self.num_hidden_layers * per_layer + self.hidden_size + head


def _first(config: Mapping, field_name: str, source: str) -> int:
    for key in _ALIASES[field_name]:
        if config.get(key) is not None:
            return int(config[key])
    raise MemoryInputError(
        f"{field_name}: missing from {source}; the estimate needs a decoder-only model config "
        f"with {' or '.join(_ALIASES[field_name])} (a transformers config.json)"
    )


def model_shape(config: Mapping, source: str = "the model config") -> ModelShape:
    """A ModelShape from a transformers config dict (the text config of a multimodal one)."""
    if not isinstance(config, Mapping):
        raise MemoryInputError(
            f"model: expected a config dict, a ModelShape or a model folder, got {type(config).__name__}"
        )
    config = config.get("text_config") or config
    hidden = _first(config, "hidden_size", source)
    heads = _first(config, "num_attention_heads", source)
    shape = ModelShape(
        hidden_size=hidden,
        intermediate_size=int(config.get("intermediate_size") or config.get("n_inner") or 4 * hidden),
        num_hidden_layers=_first(config, "num_hidden_layers", source),
        num_attention_heads=heads,
        num_key_value_heads=int(config.get("num_key_value_heads") or heads),
        head_dim=int(config.get("head_dim") or hidden // heads),
        vocab_size=_first(config, "vocab_size", source),
        tie_word_embeddings=bool(config.get("tie_word_embeddings", True)),
        num_parameters=config.get("num_parameters"),
    )
    return shape


def from_model_dir(path: str | Path) -> ModelShape:
    """The shape of the model in `path`, from its config.json alone (no weights, no torch)."""
    config_path = Path(path) / "config.json"
    try:
        content = model_files.read_model_file(path, "config.json")  # at most the admin's limit, or ModelError
    except model_files.ModelError as exc:
        raise MemoryInputError(str(exc)) from None
    if content is None:
        raise MemoryInputError(f"model: no config.json in {path}; point at a transformers model folder")
    try:
        config = json.loads(content)
    except RecursionError:
        raise MemoryInputError(f"model: {config_path} is nested deeper than JSON is read") from None
    except UnicodeDecodeError:
        raise MemoryInputError(f"model: {config_path} is not UTF-8 text") from None
    except json.JSONDecodeError as exc:
        raise MemoryInputError(f"model: {config_path} is not valid JSON ({exc.msg}, line {exc.lineno})") from None
    return model_shape(config, source=str(config_path))


def as_shape(model: Any) -> ModelShape:
    """A ModelShape from what a caller gives: a ModelShape, a model folder or a config dict."""
    if isinstance(model, ModelShape):
        return model
    if isinstance(model, (str, Path)):
        return from_model_dir(model)
    return model_shape(model)


def lora_target_names(lora_target_modules: Any) -> list[str]:
    """The per-layer linear layers LoRA wraps: "all-linear", a comma list or a list of names."""
    if isinstance(lora_target_modules, str):
        if lora_target_modules.strip() == "all-linear":
            return list(LINEAR_NAMES)
        names = [n.strip() for n in lora_target_modules.split(",") if n.strip()]
    else:
        names = [str(n) for n in lora_target_modules or ()]
    unknown = [n for n in names if n not in LINEAR_NAMES]
    if unknown or not names:
        raise MemoryInputError(
            f'lora_target_modules: {unknown or names!r} not understood; use "all-linear" or '
            f"names from {', '.join(LINEAR_NAMES)}"
        )
    return names


def reward_model_shape(name: str) -> tuple[ModelShape | None, int | None, str]:
    """(shape, bytes per weight, note) of a run's reward model: read from its folder's config.json; a hub id's
    config is not on disk, so it is not counted and the note says so."""
    config_path = Path(name).expanduser() / "config.json"
    try:
        if not config_path.is_file():
            return None, None, f"reward_model {name:.200} is not a local folder: its memory is not counted."
        config = json.loads(config_path.read_text(encoding="utf-8"))
    except (OSError, ValueError):  # a name no file system holds, or a config that is not JSON
        return None, None, f"reward_model {name:.200}: its config.json cannot be read, so its memory is not counted."
    dtype = str(config.get("dtype") or config.get("torch_dtype") or "")
    if not isinstance(config, dict):
        return None, None, f"reward_model {name:.200}: its config.json is not an object, so its memory is not counted."
    return model_shape(config, str(config_path)), {"float32": 4, "bfloat16": 2, "float16": 2}.get(dtype), ""
