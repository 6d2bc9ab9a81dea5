"""Every tie of the workbench to a private part of TRL, transformers, PEFT, accelerate or torch, in one registry,
checked against the installed libraries when a run starts; the only module that spells those private names.

A private name (`GRPOTrainer._compute_loss`, `trainer._metrics`, `config._attn_implementation`, the byte layout of
torch's generator state) is not part of a library's promise: an upgrade may rename, reshape or drop it without a
word. `TIES` lists each one the workbench relies on, in the manner of ui/gradio_compat/: why it is needed, what of
the library it touches, the workbench modules that rely on it (`sites`), how to tell it is gone, what happens without
it, and which runs cannot go on without it (`needed_when`). Every other module reaches these names only through this
one: `GRPOHooks` gives TRL's private hooks of GRPOTrainer workbench names that a trainer class overrides, and the
accessors below (`step_metrics`, `round_logs`, `trl_tokenizer`, ...) read and write the private attributes.

`check()` inspects the installed libraries, not their version numbers: an overridden method's parameters, that TRL
still calls it and it still reads what the workbench puts in place, that an `__init__` still sets an attribute and
TRL still reads it, a cache layer's behaviour when its tensors are rebound, the generator state's bytes. It returns one
problem per tie that no longer holds, by the tie's name. A training process runs it before its model loads
(`trainer/ties_verdict.verdict`, from workbench/trainer/grpo_subclass.py): a broken tie the run needs refuses the run, naming it; another
version than the one written for, or a broken tie the run can do without, is said once in its log and status.json
(`library_ties`). `python -m workbench ties` prints the registry, checked now.

tests/test_library_compat.py runs every check against the installed libraries and breaks each kind on real objects;
tests/test_architecture.py keeps these names (and any other private name of the five libraries) out of every other
module of the package.
"""

from __future__ import annotations

import contextlib
import importlib
import inspect
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass

# The libraries whose private parts only this module may reach (tests/test_architecture.py keeps them out of the rest).
LIBRARIES = ("trl", "transformers", "peft", "accelerate", "torch")
# The versions the ties below were written for and checked against: requirements.txt's pins of the libraries they
# tie to (PEFT and accelerate have none: the workbench uses only their public API).
WRITTEN_FOR = {"trl": "1.16.0", "transformers": "5.23.0", "torch": "2.13.0"}

# Which runs cannot go on without a tie, by a RunConfig's fields: a broken tie a run needs refuses that run. Without
# a tie that no run needs, a run loses a lever or a lesson (TRL's own path runs instead): it is said, not refused.
NEEDED_WHEN: dict[str, Callable] = {
    "every run": lambda cfg: True,
    "generation=vllm-server": lambda cfg: cfg.generation == "vllm-server",
    "num_machines > 1": lambda cfg: (cfg.num_machines or 1) > 1,
    "no run (warned only)": lambda cfg: False,
}


@dataclass(frozen=True)
class Tie:
    """One private part of a library the workbench relies on."""

    library: str
    name: str  # the private name as the library spells it
    kind: str  # override, method, attribute, global, property, rebinding, layout (a key of CHECKS)
    holder: str  # where it lives, importable: "trl.GRPOTrainer"
    why: str
    touches: str  # what of the library it touches
    sites: tuple[str, ...]  # the workbench modules that rely on it (paths under workbench/), through this module
    gone: str  # how to tell it is gone
    without: str  # what happens without it
    needed_when: str = "every run"  # a key of NEEDED_WHEN
    hook: str = ""  # an override: GRPOHooks' workbench name for it
    parameters: tuple[str, ...] = ()  # a method: the parameter names written for (self first)
    more_parameters: bool = False  # True: parameters with defaults may follow `parameters`
    called_by: tuple[str, ...] = ()  # functions that must still call or read it ("trl.GRPOTrainer._prepare_inputs")
    reads: tuple[str, ...] = ()  # names the method must still read ("model_wrapped")
    set_in: str = ""  # an attribute: the function that sets it

    @property
    def label(self) -> str:
        return f"{self.library} {self.name}"

    def needed_by(self, cfg) -> bool:
        """Whether the run of `cfg` (a RunConfig; None: any run) cannot go on without this tie."""
        return self.needed_when == "every run" if cfg is None else NEEDED_WHEN[self.needed_when](cfg)


TRAINER = "trl.GRPOTrainer"
LOSS_LESSONS = ("teach/loss_probe.py", "teach/trl_loss.py")

TIES = (
    Tie(
        "trl",
        "_generate_and_score_completions",
        "override",
        TRAINER,
        why="each generation round's completions, rewards and advantages are recorded right after TRL made them, "
        "before it shuffles and splits the batch",
        touches="GRPOTrainer._generate_and_score_completions(inputs), called by _prepare_inputs once a round; its "
        "output's completion_ids and completion_mask",
        sites=("trainer/grpo_subclass.py", "trainer/token_capture.py"),
        gone="its parameters change, or _prepare_inputs no longer calls it",
        without="no completions.jsonl or tokens.jsonl: the group cards, the token view and the reports have nothing",
        hook="generate_and_score_round",
        parameters=("self", "inputs"),
        called_by=("trl.GRPOTrainer._prepare_inputs",),
    ),
    Tie(
        "trl",
        "_generate_single_turn",
        "override",
        TRAINER,
        why="merged_generation's plain copy is put where TRL unwraps the model (model_wrapped) for one sampling call",
        touches="GRPOTrainer._generate_single_turn(prompt_ids, images, multimodal_fields, num_generations, "
        "has_tool_images), called by _generate; it reads self.model_wrapped",
        sites=("trainer/grpo_subclass.py", "trainer/generation_copy.py"),
        gone="_generate no longer calls it, or it no longer reads model_wrapped",
        without="rounds are sampled from the policy itself, TRL's way (the copy's speed is lost; the run's status "
        "says the copy sampled no round)",
        needed_when="no run (warned only)",
        hook="generate_turn",
        parameters=("self", "prompt_ids", "images", "multimodal_fields", "num_generations", "has_tool_images"),
        called_by=("trl.GRPOTrainer._generate",),
        reads=("model_wrapped",),
    ),
    Tie(
        "trl",
        "_compute_loss",
        "override",
        TRAINER,
        why="the token view records the loss's own per-token tensors at logging steps; the loss lessons compute "
        "TRL's loss on a stand-in trainer and under every loss type",
        touches="GRPOTrainer._compute_loss(model, inputs), called by compute_loss; it calls "
        "_get_per_token_logps_and_entropies once for the policy",
        sites=("trainer/grpo_subclass.py", *LOSS_LESSONS),
        gone="its parameters change, compute_loss no longer calls it, or it no longer calls "
        "_get_per_token_logps_and_entropies",
        without="every run's trainer overrides it: a run would fail at its first step; the lessons have no TRL figure",
        hook="grpo_loss",
        parameters=("self", "model", "inputs"),
        called_by=("trl.GRPOTrainer.compute_loss",),
        reads=("_get_per_token_logps_and_entropies",),
    ),
    Tie(
        "trl",
        "_get_per_token_logps_and_entropies",
        "override",
        TRAINER,
        why="the shared prompt pass computes TRL's values with each prompt run once per group; the token view takes "
        "the policy's per-token values from its one call inside the loss",
        touches="GRPOTrainer._get_per_token_logps_and_entropies(model, input_ids, attention_mask, logits_to_keep, "
        "batch_size, compute_entropy, compute_aux_loss, **multimodal inputs) -> (logps, entropies, aux loss), "
        "called by _compute_loss and _generate_and_score_completions",
        sites=("trainer/grpo_subclass.py", "trainer/prompt_sharing.py", "teach/trl_loss.py"),
        gone="its leading parameters change, a parameter without a default is added, or TRL no longer calls it",
        without="every run's trainer overrides it: a run would fail at its first round",
        hook="token_logps_and_entropies",
        parameters=(
            "self",
            "model",
            "input_ids",
            "attention_mask",
            "logits_to_keep",
            "batch_size",
            "compute_entropy",
            "compute_aux_loss",
        ),
        more_parameters=True,
        called_by=("trl.GRPOTrainer._compute_loss", "trl.GRPOTrainer._generate_and_score_completions"),
    ),
    Tie(
        "transformers",
        "_save_rng_state",
        "override",
        "transformers.Trainer",
        why="processes on machines other than machine 0 save no random state into a checkpoint folder that machine "
        "may not share",
        touches="Trainer._save_rng_state(output_dir), called by _save_checkpoint",
        sites=("trainer/grpo_subclass.py",),
        gone="its parameters change, or _save_checkpoint no longer calls it",
        without="on a run over several machines the others write into a folder machine 0 may not share: a save "
        "may fail",
        needed_when="num_machines > 1",
        hook="save_rng_state",
        parameters=("self", "output_dir"),
        called_by=("transformers.Trainer._save_checkpoint",),
    ),
    Tie(
        "trl",
        "_entropy_bonus_enabled",
        "attribute",
        TRAINER,
        why="the loss lesson turns TRL's entropy bonus off on the stand-in trainer it computes the loss with",
        touches="self._entropy_bonus_enabled, set by GRPOTrainer.__init__, read by _compute_loss",
        sites=("teach/trl_loss.py",),
        gone="__init__ no longer sets it, or _compute_loss no longer reads it",
        without="the loss lesson's stand-in fails, or its loss carries an entropy term",
        needed_when="no run (warned only)",
        set_in="trl.GRPOTrainer.__init__",
        called_by=("trl.GRPOTrainer._compute_loss",),
    ),
    Tie(
        "trl",
        "_metrics",
        "attribute",
        TRAINER,
        why="the workbench adds its own metrics (GPU memory, the copy's sync seconds, vLLM timings) to the step "
        "TRL logs",
        touches='self._metrics["train" | "eval"][name]: lists TRL\'s log() averages into the step it logs, then clears',
        sites=("trainer/grpo_subclass.py", "trainer/gpu_metrics.py", "trainer/vllm_rollout.py", "teach/trl_loss.py"),
        gone="__init__ no longer sets it, or log() no longer reads it",
        without="those metrics are left out of metrics.jsonl (step_metrics hands a list nobody reads)",
        needed_when="no run (warned only)",
        set_in="trl.GRPOTrainer.__init__",
        called_by=("trl.GRPOTrainer.log",),
    ),
    Tie(
        "trl",
        "_logs",
        "attribute",
        TRAINER,
        why="a round's prompts, completions, rewards and advantages, gathered from every process in group order",
        touches='self._logs["prompt" | "completion" | "rewards" | "advantages"], deques of one generation '
        "batch, filled by _generate_and_score_completions",
        sites=("trainer/grpo_subclass.py", "trainer/recorder.py"),
        gone="__init__ no longer sets it, or _generate_and_score_completions no longer fills it",
        without="no completions.jsonl",
        set_in="trl.GRPOTrainer.__init__",
        called_by=("trl.GRPOTrainer._generate_and_score_completions",),
    ),
    Tie(
        "trl",
        "_tokenizer",
        "attribute",
        TRAINER,
        why="the pad token that ends a completion (truncation), and the token view's token texts",
        touches="self._tokenizer, the processing class's tokenizer, set by GRPOTrainer.__init__",
        sites=("trainer/grpo_subclass.py", "trainer/token_capture.py"),
        gone="__init__ no longer sets it, or TRL's generation no longer reads it",
        without="truncation cannot be told and the token view has no token texts",
        set_in="trl.GRPOTrainer.__init__",
        called_by=("trl.GRPOTrainer._generate_and_score_completions",),
    ),
    Tie(
        "trl",
        "_tokenize_prompts",
        "method",
        TRAINER,
        why="the workbench's vLLM rollout renders and tokenizes prompts exactly as TRL's own generation does",
        touches="GRPOTrainer._tokenize_prompts(prompts) -> (prompt_ids, ...), called by _generate",
        sites=("trainer/vllm_rollout.py",),
        gone="its parameters change, or _generate no longer calls it",
        without="generation=vllm-server cannot render its prompts",
        needed_when="generation=vllm-server",
        parameters=("self", "prompts"),
        called_by=("trl.GRPOTrainer._generate",),
    ),
    Tie(
        "trl",
        "_last_loaded_step",
        "attribute",
        TRAINER,
        why="the workbench's vLLM rollout turns TRL's vLLM mode on after __init__; TRL syncs the weights (here the "
        "adapter) when the step differs from this one",
        touches="self._last_loaded_step, set by __init__ in vLLM modes, read and written by _generate",
        sites=("trainer/vllm_rollout.py",),
        gone="_generate no longer reads it",
        without="generation=vllm-server fails at its first round, or syncs the adapter every round",
        needed_when="generation=vllm-server",
        set_in="trl.GRPOTrainer.__init__",
        called_by=("trl.GRPOTrainer._generate",),
    ),
    Tie(
        "trl",
        "_ChunkedLogProbFunction",
        "global",
        "trl.trainer.utils",
        why="on a CPU the fused LM head's log-probabilities run through the workbench's equivalent (cpu_head), put "
        "in the module global TRL's fused forward looks up at call time",
        touches="trl.trainer.utils._ChunkedLogProbFunction.apply(hidden, weight, bias, targets, temperature, "
        "chunk_size, final_logit_softcapping, logit_scale, outputs), read by add_fused_lm_head's forward",
        sites=("trainer/cpu_head.py",),
        gone="the global is gone or has no apply, or the fused forward no longer reads it",
        without="the shared prompt pass scores through TRL's own head (slower on a CPU, the same values)",
        needed_when="no run (warned only)",
        called_by=("trl.trainer.utils.add_fused_lm_head",),
    ),
    Tie(
        "transformers",
        "_attn_implementation",
        "property",
        "transformers.PretrainedConfig",
        why="the decode step written for Llama layers runs only for the attention it was checked against (sdpa)",
        touches="config._attn_implementation, read by LlamaAttention.forward to pick the attention function",
        sites=("trainer/llama_decode.py",),
        gone="PretrainedConfig no longer has it, or Llama's attention no longer reads it",
        without="packed_decode decodes in the model's own layers (PackedDecode)",
        needed_when="no run (warned only)",
        called_by=("transformers.models.llama.modeling_llama.LlamaAttention.forward",),
    ),
    Tie(
        "transformers",
        "DynamicLayer.keys/.values",
        "rebinding",
        "transformers.cache_utils.DynamicLayer",
        why="the decode step written for Llama layers grows each cache layer's keys and values in place and rebinds "
        "the layer's tensors to views of them",
        touches="DynamicLayer.keys and .values, set by update() (a concatenation) and read by get_seq_length",
        sites=("trainer/llama_decode.py",),
        gone="a layer whose keys and values were rebound no longer reports and grows those tensors",
        without="the Llama decode step fails its start-up comparison: packed_decode decodes in the model's own layers",
        needed_when="no run (warned only)",
    ),
    Tie(
        "torch",
        "CPUGeneratorImplState",
        "layout",
        "torch.Generator.get_state",
        why="the faster exact draws continue torch's MT19937 from its words and position (trainer/exact_draws.py "
        "verifies every value once a process)",
        touches="the bytes of torch.get_rng_state(): seed u64, left i32, seeded i32, next u64, 624 words as u64, "
        "the normal-sample caches (aten/src/ATen/CPUGeneratorImpl.cpp)",
        sites=("trainer/exact_draws.py",),
        gone="a seeded generator's state is not 5056 bytes holding the seed and MT19937's seeded words there",
        without="the sampler's draws are torch.multinomial's own (slower, the same tokens)",
        needed_when="no run (warned only)",
    ),
)
BY_LABEL = {tie.label: tie for tie in TIES}
# The private names a tie names: no other module of the package spells them (tests/test_architecture.py).
PRIVATE_NAMES = tuple(tie.name for tie in TIES if tie.name.startswith("_"))


# ---- the checks --------------------------------------------------------------------------------------------------


def _resolve(path: str):
    """The object an importable dotted path names: "trl.GRPOTrainer._prepare_inputs"."""
    parts = path.split(".")
    for split in range(len(parts), 0, -1):
        try:
            found = importlib.import_module(".".join(parts[:split]))
        except ImportError:
            continue
        for attribute in parts[split:]:
            found = getattr(found, attribute)
        return found
    raise ImportError(path)


def code_names(function) -> set[str]:
    """Every global and attribute name `function`'s code reads or writes, its nested functions' included."""
    code = getattr(inspect.unwrap(function), "__code__", None)
    names, stack = set(), [code] if code is not None else []
    while stack:
        code = stack.pop()
        names.update(code.co_names)
        stack += [const for const in code.co_consts if inspect.iscode(const)]
    return names


def _signature_problem(tie: Tie, method) -> str | None:
    params = list(inspect.signature(method).parameters.values())
    names = tuple(p.name for p in params)
    extra = params[len(tie.parameters) :]
    optional = all(p.default is not p.empty or p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD) for p in extra)
    if names[: len(tie.parameters)] == tie.parameters and (not extra or (tie.more_parameters and optional)):
        return None
    return (
        f"{tie.holder}.{tie.name} takes ({', '.join(names)}), written for "
        f"({', '.join(tie.parameters)}{', ...' if tie.more_parameters else ''})"
    )


def _uses_problem(tie: Tie, function=None) -> str | None:
    """What of `called_by` (and `reads`, in `function`) no longer holds."""
    for name in tie.reads:
        if name not in code_names(function):
            return f"{tie.holder}.{tie.name} no longer reads {name}"
    for caller in tie.called_by:
        try:
            found = _resolve(caller)
        except (ImportError, AttributeError):
            return f"{caller} is gone"
        if tie.name not in code_names(found):
            return f"{caller} no longer reads {tie.name}"
    return None


def _method_problem(tie: Tie, holder) -> str | None:
    method = inspect.getattr_static(holder, tie.name, None)
    if method is None:
        return f"{tie.holder}.{tie.name} is gone"
    if tie.hook and inspect.getattr_static(holder, tie.hook, None) is not None:
        return f"{tie.holder} has a {tie.hook} of its own, the workbench's name for overriding {tie.name}"
    return _signature_problem(tie, method) or _uses_problem(tie, method)


def _attribute_problem(tie: Tie, holder) -> str | None:
    if tie.set_in and tie.name not in code_names(_resolve(tie.set_in)):
        return f"{tie.set_in} no longer sets {tie.name}"
    if tie.kind == "property" and inspect.getattr_static(holder, tie.name, None) is None:
        return f"{tie.holder}.{tie.name} is gone"
    if tie.kind == "global" and not hasattr(getattr(holder, tie.name, None), "apply"):
        return f"{tie.holder}.{tie.name} is gone, or has no apply"
    return _uses_problem(tie)


def _rebinding_problem(tie: Tie, holder) -> str | None:
    import torch

    layer = holder()
    start, rebound = torch.zeros(1, 1, 2, 4), torch.ones(1, 1, 3, 4)
    layer.update(start, start)
    rebind_cache_layer(layer, rebound, rebound.clone())
    if layer.get_seq_length() != 3:
        return f"{tie.holder}.get_seq_length no longer counts the keys rebound to .keys"
    keys, _ = layer.update(start[:, :, :1], start[:, :, :1])
    if keys.shape[-2] != 4 or not torch.equal(keys[:, :, :3], rebound):
        return f"{tie.holder}.update no longer grows the keys rebound to .keys"
    return None


def _layout_problem(tie: Tie, holder) -> str | None:
    import numpy as np
    import torch

    seed = 20_251_128
    generator = torch.Generator()
    generator.manual_seed(seed)
    state = generator.get_state().numpy()
    if state.size != RNG_STATE_BYTES:
        return f"a CPU generator's state holds {state.size} bytes, written for {RNG_STATE_BYTES}"
    words = np.frombuffer(state[RNG_WORDS : RNG_WORDS + RNG_WORD_COUNT * 8].tobytes(), np.uint64)
    if int(np.frombuffer(state[:8].tobytes(), np.uint64)[0]) != seed or not np.array_equal(
        words, np.random.RandomState(seed).get_state()[1]
    ):
        return "a seeded CPU generator's state no longer holds its seed and MT19937's words where written for"
    return None


CHECKS = {
    "override": _method_problem,
    "method": _method_problem,
    "attribute": _attribute_problem,
    "property": _attribute_problem,
    "global": _attribute_problem,
    "rebinding": _rebinding_problem,
    "layout": _layout_problem,
}


def problem_of(tie: Tie) -> str | None:
    """Why `tie` no longer holds with the installed libraries, or None."""
    try:
        holder = _resolve(tie.holder)
    except (ImportError, AttributeError) as exc:
        return f"{tie.holder} cannot be imported ({type(exc).__name__}: {exc})"
    try:
        return CHECKS[tie.kind](tie, holder)
    except Exception as exc:  # a check that cannot run on this library: the tie does not hold as written
        return f"its check failed: {type(exc).__name__}: {exc}"


def check() -> dict[str, str]:
    """Every tie that no longer holds: its label ("trl _compute_loss") -> the problem."""
    return {tie.label: problem for tie in TIES if (problem := problem_of(tie))}


# ---- accessors: the only way the rest of the workbench reaches these names ---------------------------------------


def step_metrics(trainer, mode: str = "train") -> dict[str, list]:
    """TRL's lists of metrics for the step it logs next (`_metrics[mode]`, mode "train" or "eval"), looked up at
    each call since log() replaces them; a list nobody reads where the tie is broken (check() says so)."""
    metrics = getattr(trainer, "_metrics", None)
    return metrics[mode] if isinstance(metrics, dict) and mode in metrics else defaultdict(list)


def start_step_metrics(host) -> None:
    """Empty metric lists on a stand-in trainer built without GRPOTrainer.__init__ (the loss lesson)."""
    host._metrics = {"train": defaultdict(list), "eval": defaultdict(list)}


def entropy_bonus_off(host) -> None:
    """No entropy term in the loss of a stand-in trainer built without GRPOTrainer.__init__ (the loss lesson)."""
    host._entropy_bonus_enabled = False


def round_logs(trainer) -> dict:
    """The last generation round's prompts, completions, rewards and advantages (TRL's `_logs`)."""
    return trainer._logs


def trl_tokenizer(trainer):
    """The tokenizer of the trainer's processing class (TRL's `_tokenizer`)."""
    return trainer._tokenizer


def prompt_ids(trainer, prompts: list) -> list[list[int]]:
    """The prompts' token ids, rendered and tokenized as TRL's own generation does (`_tokenize_prompts`)."""
    return trainer._tokenize_prompts(prompts)[0]


def sync_weights_next_round(trainer) -> None:
    """TRL's vLLM path syncs the weights before the next round (`_last_loaded_step` reset)."""
    trainer._last_loaded_step = -1


@contextlib.contextmanager
def trl_lm_head_replaced(make: Callable):
    """TRL's fused LM head function is `make(TRL's own)` for the block (the module global its fused forward looks up
    at call time); TRL's own where the tie is broken."""
    from trl.trainer import utils

    trls = getattr(utils, "_ChunkedLogProbFunction", None)
    if trls is None:
        yield
        return
    utils._ChunkedLogProbFunction = make(trls)
    try:
        yield
    finally:
        utils._ChunkedLogProbFunction = trls


def attention_implementation(config) -> str | None:
    """The attention a model's layers call ("sdpa", "eager", ...): transformers' `_attn_implementation`."""
    return getattr(config, "_attn_implementation", None)


def rebind_cache_layer(layer, keys, values) -> None:
    """A DynamicLayer of transformers' cache holds `keys` and `values` from now on (its length is theirs)."""
    layer.keys, layer.values = keys, values


# torch's CPU generator state, CPUGeneratorImplState (aten/src/ATen/CPUGeneratorImpl.cpp): byte offsets
RNG_STATE_BYTES = 5056
RNG_LEFT, RNG_NEXT, RNG_WORDS, RNG_WORD_COUNT = slice(8, 12), slice(16, 24), 24, 624


def cpu_generator_mt19937():
    """(the default CPU generator's 624 MT19937 words as uint32, its position as numpy's MT19937 counts it, the
    generator's state bytes)."""
    import numpy as np
    import torch

    state = torch.get_rng_state().numpy()
    left = int(np.frombuffer(state[RNG_LEFT].tobytes(), np.int32)[0])
    words = np.frombuffer(state[RNG_WORDS : RNG_WORDS + RNG_WORD_COUNT * 8].tobytes(), np.uint64).astype(np.uint32)
    return words, RNG_WORD_COUNT + 1 - left, state


def set_cpu_generator_mt19937(state, words, position: int) -> None:
    """The default CPU generator continues at `position` of `words` (as cpu_generator_mt19937 gives them), its other
    bytes those of `state`."""
    import numpy as np
    import torch

    state = state.copy()
    state[RNG_LEFT] = np.frombuffer(np.int32(RNG_WORD_COUNT + 1 - position).tobytes(), np.uint8)
    state[RNG_NEXT] = np.frombuffer(np.uint64(position).tobytes(), np.uint8)
    state[RNG_WORDS : RNG_WORDS + RNG_WORD_COUNT * 8] = np.frombuffer(words.astype(np.uint64).tobytes(), np.uint8)
    torch.set_rng_state(torch.from_numpy(state))


class GRPOHooks:
    """TRL's private hooks of GRPOTrainer under the workbench's names (each an `override` tie above, its `hook`).

    A trainer class `(GRPOHooks, GRPOTrainer)` overrides the workbench's name and calls `super().<that name>(...)`
    for TRL's own; TRL keeps calling its private name, which lands in the override. A class that overrides none is
    GRPOTrainer exactly.
    """

    def _generate_and_score_completions(self, *args, **kwargs):
        return self.generate_and_score_round(*args, **kwargs)

    def generate_and_score_round(self, *args, **kwargs):
        """One generation round: completions, rewards, advantages (GRPOTrainer._generate_and_score_completions)."""
        return super()._generate_and_score_completions(*args, **kwargs)

    def _generate_single_turn(self, *args, **kwargs):
        return self.generate_turn(*args, **kwargs)

    def generate_turn(self, *args, **kwargs):
        """One sampling call over the model TRL unwraps (GRPOTrainer._generate_single_turn)."""
        return super()._generate_single_turn(*args, **kwargs)

    def _compute_loss(self, *args, **kwargs):
        return self.grpo_loss(*args, **kwargs)

    def grpo_loss(self, *args, **kwargs):
        """The GRPO loss of one micro-batch (GRPOTrainer._compute_loss(model, inputs))."""
        return super()._compute_loss(*args, **kwargs)

    def _get_per_token_logps_and_entropies(self, *args, **kwargs):
        return self.token_logps_and_entropies(*args, **kwargs)

    def token_logps_and_entropies(self, *args, **kwargs):
        """(per-token log-probabilities, entropies or None, aux loss or None): GRPOTrainer's
        _get_per_token_logps_and_entropies."""
        return super()._get_per_token_logps_and_entropies(*args, **kwargs)

    def _save_rng_state(self, *args, **kwargs):
        return self.save_rng_state(*args, **kwargs)

    def save_rng_state(self, *args, **kwargs):
        """Save this process's random states into a checkpoint folder (transformers' Trainer._save_rng_state)."""
        return super()._save_rng_state(*args, **kwargs)
