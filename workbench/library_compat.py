"""Every tie of the workbench to a private part of TRL, transformers or torch, in one registry checked at start-up.

A private name (`GRPOTrainer._compute_loss`, `trainer._metrics`, `config._attn_implementation`, the byte layout of
torch's generator state) is not part of a library's promise: an upgrade may rename, reshape or drop it without a
word. Each tie below says why the workbench needs it, which of its modules touch it (`sites`: the architecture test
keeps the name out of every other module), how to tell it is gone, and what happens without it. `check()` inspects the
installed libraries (an overridden method's parameters, an attribute an `__init__` sets, a class or a layout) and
returns one problem per tie that no longer holds; a training process runs it before its model loads
(workbench/trainer/training.py): a broken tie the run needs refuses the run, naming it, and a library version other
than the one written for is said once in the log and status.json. `python -m workbench ties` prints the registry.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass, field
from importlib import metadata

# the versions these ties were written and checked against
WRITTEN_FOR = {"trl": "1.16.0", "transformers": "5.23.0", "torch": "2.13.0"}


@dataclass(frozen=True)
class Tie:
    """One private name the workbench relies on."""

    library: str
    name: str  # the private name as the code spells it
    where: str  # the object that holds it, importable: "trl.GRPOTrainer"
    kind: str  # "method" (parameters), "attribute" (set in `where`'s __init__), "class", "layout"
    why: str
    sites: tuple[str, ...]  # the workbench modules that touch it (paths under workbench/)
    gone: str  # how to tell it is gone
    without: str  # what happens without it
    parameters: tuple[str, ...] = ()  # for a method: the parameter names it was written for (self first)
    required: bool = True  # False: only an optional lever or lesson needs it, a run can go on without
    check_source: str = field(default="", compare=False)  # for an attribute: the text its __init__ must hold


TIES = (
    Tie("trl", "_generate_and_score_completions", "trl.GRPOTrainer", "method",
        "each generation round's completions, rewards and advantages are recorded right after TRL made them",
        ("trainer/training.py",),
        "its parameters change, or the round's dict loses completion_ids/completion_mask",
        "no completions.jsonl: the group cards, the token view and the reports have nothing to show",
        parameters=("self", "inputs")),
    Tie("trl", "_generate_single_turn", "trl.GRPOTrainer", "method",
        "the merged copy (merged_generation) is put where TRL unwraps the model for one call",
        ("trainer/training.py",), "its parameters change",
        "rounds cannot be sampled from the merged copy: merged_generation must be no",
        parameters=("self", "prompt_ids", "images", "multimodal_fields", "num_generations", "has_tool_images"),
        required=False),
    Tie("trl", "_compute_loss", "trl.GRPOTrainer", "method",
        "the token view records the loss's own per-token tensors at logging steps; the lessons recompute TRL's loss",
        ("trainer/training.py", "teach/loss_probe.py", "teach/trl_loss.py"),
        "its parameters change", "no tokens.jsonl and no loss lesson; training itself is TRL's",
        parameters=("self", "model", "inputs")),
    Tie("trl", "_get_per_token_logps_and_entropies", "trl.GRPOTrainer", "method",
        "the shared prompt pass computes TRL's values with each prompt run once per group; the token view's tensors",
        ("trainer/training.py", "teach/trl_loss.py"),
        "its parameters change", "shared_prompt_pass must be no, and the token view is empty",
        parameters=("self", "model", "input_ids", "attention_mask", "logits_to_keep", "batch_size", "compute_entropy",
                    "compute_aux_loss", "pixel_values", "image_grid_thw", "num_images", "pixel_attention_mask",
                    "spatial_shapes", "num_tiles", "image_sizes", "token_type_ids", "mm_token_type_ids",
                    "image_position_ids")),
    Tie("trl", "_save_rng_state", "trl.GRPOTrainer", "method",
        "processes on machines other than machine 0 save no random state into a folder that machine may not share",
        ("trainer/training.py",), "its parameters change", "a multi-machine run's checkpoints may fail to save",
        parameters=("self", "output_dir"), required=False),
    Tie("trl", "_entropy_bonus_enabled", "trl.GRPOTrainer", "attribute",
        "the loss lesson turns TRL's entropy bonus off on the stand-in trainer it computes the loss with",
        ("teach/trl_loss.py",), "GRPOTrainer.__init__ no longer sets self._entropy_bonus_enabled",
        "the loss lesson's loss may carry an entropy term", required=False, check_source="self._entropy_bonus_enabled"),
    Tie("trl", "_metrics", "trl.GRPOTrainer", "attribute",
        "the workbench adds its own metrics (GPU memory, the copy's sync, vLLM timings) to the step TRL logs",
        ("trainer/training.py", "trainer/gpu_metrics.py", "trainer/vllm_rollout.py", "teach/trl_loss.py"),
        "GRPOTrainer.__init__ no longer sets self._metrics", "those metrics are missing from metrics.jsonl",
        check_source="self._metrics"),
    Tie("trl", "_logs", "trl.GRPOTrainer", "attribute",
        "a round's prompts, completions and rewards, gathered from every process in group order",
        ("trainer/training.py",), "GRPOTrainer.__init__ no longer sets self._logs",
        "no completions.jsonl", check_source="self._logs"),
    Tie("trl", "_tokenizer", "trl.GRPOTrainer", "attribute",
        "the pad token that ends a completion, and the token view's token texts",
        ("trainer/training.py", "trainer/token_capture.py"), "GRPOTrainer.__init__ no longer sets self._tokenizer",
        "truncation and the token view's texts cannot be read", check_source="self._tokenizer"),
    Tie("trl", "_tokenize_prompts", "trl.GRPOTrainer", "method",
        "the workbench's own vLLM rollout tokenizes prompts as TRL does", ("trainer/vllm_rollout.py",),
        "the method is gone", "generation=vllm-server cannot run", required=False),
    Tie("trl", "_last_loaded_step", "trl.GRPOTrainer", "attribute",
        "the workbench's vLLM rollout syncs the weights once a step, as TRL's own does", ("trainer/vllm_rollout.py",),
        "GRPOTrainer.__init__ no longer sets self._last_loaded_step",
        "generation=vllm-server syncs weights every round", required=False, check_source="self._last_loaded_step"),
    Tie("trl", "_ChunkedLogProbFunction", "trl.trainer.utils", "class",
        "on a CPU the LM head's log-probabilities run through the workbench's equivalent with TRL's interface",
        ("trainer/cpu_head.py",), "the class is gone, or loses apply", "the shared prompt pass scores through TRL's head",
        required=False),
    Tie("transformers", "_attn_implementation", "transformers.PretrainedConfig", "attribute",
        "the decode step written for Llama layers runs only for the attention it was checked against",
        ("trainer/llama_decode.py",), "PretrainedConfig no longer sets self._attn_implementation",
        "packed_decode decodes in the model's own layers", required=False, check_source="_attn_implementation"),
    Tie("transformers", "_tied_weights_keys", "transformers.LlamaForCausalLM", "class",
        "the merged copy leaves tied weights (the LM head) to weight tying when it loads the policy's state",
        ("trainer/generation_copy.py",), "LlamaForCausalLM has no _tied_weights_keys",
        "building the merged copy reports the LM head missing: merged_generation must be no", required=False),
    Tie("transformers", "DynamicLayer.keys/.values", "transformers.cache_utils.DynamicLayer", "attribute",
        "the decode step written for Llama layers grows each cache layer's keys and values in place",
        ("trainer/llama_decode.py",), "DynamicLayer no longer keeps self.keys and self.values",
        "packed_decode decodes in the model's own layers", required=False, check_source="self.keys"),
    Tie("torch", "the CPU generator's state layout", "torch.get_rng_state", "layout",
        "the faster exact draws continue torch's MT19937 where it stopped (trainer/exact_draws.py verifies every "
        "value once a process)", ("trainer/exact_draws.py",), "torch.get_rng_state() is not 5056 bytes",
        "the sampler's draws are torch.multinomial's own (slower, the same tokens)", required=False),
)
# private names a tie names, as the architecture test looks for them in the source
PRIVATE_NAMES = tuple(tie.name for tie in TIES if tie.name.startswith("_"))
RNG_STATE_BYTES = 5056


def _resolve(where: str):
    import importlib

    module, _, attribute = where.rpartition(".")
    try:
        return getattr(importlib.import_module(module), attribute)
    except (ImportError, AttributeError):
        return importlib.import_module(where)


def problem_of(tie: Tie) -> str | None:
    """Why `tie` no longer holds with the installed libraries, or None."""
    try:
        holder = _resolve(tie.where)
    except Exception as exc:
        return f"{tie.where} cannot be imported ({type(exc).__name__})"
    if tie.kind == "method":
        method = getattr(holder, tie.name, None)
        if method is None:
            return f"{tie.where}.{tie.name} is gone"
        found = tuple(inspect.signature(method).parameters)
        if tie.parameters and found != tie.parameters:
            return f"{tie.where}.{tie.name} takes ({', '.join(found)}), written for ({', '.join(tie.parameters)})"
    elif tie.kind == "attribute":
        source = inspect.getsource(holder)
        if tie.check_source not in source:
            return f"{tie.where} no longer mentions {tie.check_source}"
    elif tie.kind == "class":
        if getattr(holder, tie.name, None) is None:
            return f"{tie.where}.{tie.name} is gone"
    elif tie.kind == "layout":
        import torch

        size = torch.get_rng_state().numel()
        if size != RNG_STATE_BYTES:
            return f"torch.get_rng_state() holds {size} bytes, written for {RNG_STATE_BYTES}"
    return None


def check() -> dict[str, str]:
    """Every tie that no longer holds: its label -> the problem."""
    problems = {}
    for tie in TIES:
        problem = problem_of(tie)
        if problem:
            problems[f"{tie.library} {tie.name}"] = problem
    return problems


def version_notes() -> list[str]:
    """One line per library installed at another version than the ties were written for."""
    notes = []
    for name, wanted in WRITTEN_FOR.items():
        try:
            found = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
        if found.split("+")[0] != wanted:
            notes.append(f"{name} {found} is installed; the private ties were written for {wanted}")
    return notes


def refusal(problems: dict[str, str]) -> str | None:
    """The message refusing a run when a tie every run needs is broken, or None."""
    broken = [tie for tie in TIES if tie.required and f"{tie.library} {tie.name}" in problems]
    if not broken:
        return None
    return ("the installed libraries break what every run relies on: "
            + "; ".join(f"{tie.library} {tie.name}: {problems[f'{tie.library} {tie.name}']} ({tie.without})"
                        for tie in broken)
            + f". Install the pinned versions (make setup: {', '.join(f'{k}=={v}' for k, v in WRITTEN_FOR.items())})")
