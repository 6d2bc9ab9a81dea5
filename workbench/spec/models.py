"""The model names a run may give, as the description of a run sees them: the bundled SmolLM2, the tiny test
model, a local folder or a hub id.

What a name leads to on this machine (the one-time GGUF conversion, the tiny model's build, a folder's checks,
the cache) is read in `workbench/sources/model_files.py`; its names are re-exported here so that
`from workbench.spec.models import resolve_model` (notebooks, outside scripts) keeps working.
"""

from __future__ import annotations

from workbench.sources.model_files import (
    BUNDLED_MODEL,
    MODEL_CHOICES,
    TINY_CONFIG,
    TINY_MODEL,
    ModelError,
    bundled_model_dir,
    cache_dir,
    check_model,
    check_reward_model,
    hub_unreachable_message,
    looks_like_path,
    model_location,
    resolve_model,
    tiny_model_dir,
)

__all__ = [
    "BUNDLED_MODEL",
    "MODEL_CHOICES",
    "TINY_CONFIG",
    "TINY_MODEL",
    "ModelError",
    "bundled_model_dir",
    "cache_dir",
    "check_model",
    "check_reward_model",
    "hub_unreachable_message",
    "looks_like_path",
    "model_location",
    "resolve_model",
    "tiny_model_dir",
]
