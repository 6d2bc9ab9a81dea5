"""TRL 1.16's GRPO batch rules and step count, without TRL.

`build_plan` answers, in microseconds, what `trl.GRPOConfig(...)` would say
(the same error texts in the same order) and how many optimizer steps
`GRPOTrainer.train()` would take; `grid` maps which (batch, G) pairs are
valid. No suggestions here: `workbench.calc.planner.plan` adds them on top.
tests/test_calculator_oracle.py checks these rules against GRPOConfig itself
and tests/test_calculator_steps.py against real GRPOTrainer runs.

Notation in comments: bs = per_device_train_batch_size, GA =
gradient_accumulation_steps, n = num_processes (training world size),
G = num_generations, spg = steps_per_generation, gbs = generation_batch_size,
P = unique prompts per generation round, N = dataset_size.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field

from workbench.errors import WorkbenchError

# Larger values are typing mistakes, not configurations anyone trains with.
MAX_VALUE = 1_000_000

# The inputs of `plan`, with their defaults (TRL's where TRL has one).
PLAN_DEFAULTS = {
    "per_device_train_batch_size": 8,
    "gradient_accumulation_steps": 1,
    "num_generations": 8,
    "num_processes": 1,
    "steps_per_generation": None,
    "generation_batch_size": None,
    "num_iterations": 1,
    "dataset_size": None,
    "num_train_epochs": 1.0,
    "max_steps": -1,
    "max_completion_length": 512,
    "do_eval": False,
    "per_device_eval_batch_size": 8,
    "num_generations_eval": None,
    "vllm_gpus": 0,
}

# The Trainer's own text when an epoch has no batches and max_steps is -1.
NO_LENGTH_ERROR = "args.max_steps must be set to a positive value if dataloader does not have a length, was {max_steps}"


class InputError(WorkbenchError):
    """A value `plan` cannot work with; the message names the field, the rule and a fix."""

    def __init__(self, field_name: str, message: str):
        super().__init__(f"{field_name}: {message}", field=field_name, rule=message)


@dataclass
class Suggestion:
    """A nearby valid configuration: the inputs to change and the plan they give."""

    changes: dict
    description: str
    plan: Plan

    def to_dict(self) -> dict:
        return {"changes": dict(self.changes), "description": self.description, "plan": self.plan.to_dict()}


# (Plan attribute, what it means, how it is counted) for every number of a plan, in reading order:
# the words the Calculator and Setup tabs and the run report show beside each number.
PLAN_NUMBERS = (
    ("generation_batch_size", "completions generated per round", "generation_batch_size"),
    (
        "prompts_per_generation",
        "unique prompts per round (each sampled G times)",
        "generation_batch_size / num_generations",
    ),
    ("steps_per_generation", "optimizer micro-steps fed by one round", "steps_per_generation"),
    (
        "completions_per_step",
        "completions per optimizer step (all processes)",
        "batch x processes x grad. accumulation",
    ),
    ("prompts_per_step", "prompt groups per optimizer step", "completions per step / G"),
    ("steps_per_epoch", "optimizer steps per epoch", "needs dataset_size"),
    ("total_steps", "optimizer steps in the run", "what trainer.state.global_step reaches"),
    ("prompts_dropped_per_epoch", "prompts dropped each epoch", "dataset_size mod prompts per round"),
    (
        "max_generated_tokens_per_step",
        "tokens generated per step at most",
        "completions per step x max_completion_length",
    ),
)


def format_plan_number(value) -> str:
    """A plan number as people read it: thousands separated, fractions to two places, a dash when unknown."""
    if value is None:
        return "–"
    if isinstance(value, float):
        return f"{value:,.2f}".rstrip("0").rstrip(".")
    return f"{value:,}"


@dataclass
class Plan:
    """What TRL would make of one set of inputs."""

    inputs: dict
    valid: bool
    errors: list[str]
    warnings: list[str]  # what may go wrong with a valid plan (prompts it never trains on, no step at all)
    generation_batch_size: int | None
    steps_per_generation: int | None
    prompts_per_generation: int | None  # P: unique prompts per generation round
    completions_per_step: int  # completions one optimizer step trains on, all processes
    prompts_per_step: float  # completions_per_step / G (fractional when a step splits a group)
    steps_per_epoch: int | None  # optimizer steps per epoch; None without dataset_size
    total_steps: int | None  # Trainer's global_step at the end; None when it cannot be known
    prompts_dropped_per_epoch: int | None  # the sampler drops N % P prompts each epoch
    max_generated_tokens_per_step: int  # completions_per_step x max_completion_length
    suggestions: list[Suggestion] = field(default_factory=list)
    # information about a valid plan, nothing wrong with it (epochs max_steps gives, prompts left to the next epoch)
    notes: list[str] = field(default_factory=list)

    def numbers(self) -> list[tuple[str, str, str]]:
        """(what it means, how it is counted, the number as text) for each of PLAN_NUMBERS, in reading order."""
        return [(meaning, how, format_plan_number(getattr(self, attr))) for attr, meaning, how in PLAN_NUMBERS]

    def to_dict(self) -> dict:
        data = {k: v for k, v in asdict(self).items() if k != "suggestions"}
        data["inputs"] = dict(self.inputs)
        data["suggestions"] = [s.to_dict() for s in self.suggestions]
        return data


# ---------------------------------------------------------------- input checks


def _whole(field_name: str, value, minimum: int, allow_none: bool = False, hint: str = "") -> int | None:
    """Return `value` as an int, or raise InputError naming the field, the rule and a fix."""
    if value is None:
        if allow_none:
            return None
        raise InputError(field_name, f"is missing; give a whole number >= {minimum}{hint}.")
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InputError(field_name, f"must be a whole number >= {minimum}, got {value!r}{hint}.")
    if isinstance(value, float):
        if not math.isfinite(value):
            raise InputError(field_name, f"must be a whole number >= {minimum}, got {value!r}{hint}.")
        if not value.is_integer():
            raise InputError(
                field_name, f"must be a whole number, got {value!r}; use {math.floor(value)} or {math.ceil(value)}."
            )
        value = int(value)
    if value < minimum:
        raise InputError(field_name, f"must be >= {minimum}, got {value}{hint}.")
    if value > MAX_VALUE:
        raise InputError(field_name, f"must be <= {MAX_VALUE:,}, got {value:,}; that looks like a typing mistake.")
    return value


def normalise_inputs(**inputs) -> dict:
    """Check and normalise `plan`'s inputs (defaults filled in); raise InputError on bad input."""
    unknown = sorted(set(inputs) - set(PLAN_DEFAULTS))
    if unknown:
        raise InputError(unknown[0], f"is not a calculator input; valid inputs are {', '.join(PLAN_DEFAULTS)}.")
    values = {**PLAN_DEFAULTS, **inputs}
    out = {}
    for name in (
        "per_device_train_batch_size",
        "gradient_accumulation_steps",
        "num_processes",
        "num_iterations",
        "max_completion_length",
        "per_device_eval_batch_size",
    ):
        out[name] = _whole(name, values[name], 1)
    out["num_generations"] = _whole("num_generations", values["num_generations"], 1, hint=" (GRPO needs at least 2)")
    for name in ("steps_per_generation", "generation_batch_size", "num_generations_eval", "dataset_size"):
        out[name] = _whole(name, values[name], 1, allow_none=True, hint=" or leave it unset")
    out["vllm_gpus"] = _whole("vllm_gpus", values["vllm_gpus"], 0)

    max_steps = values["max_steps"]
    if max_steps is None:
        max_steps = -1
    if isinstance(max_steps, float) and max_steps.is_integer():
        max_steps = int(max_steps)
    if isinstance(max_steps, bool) or not isinstance(max_steps, int) or (max_steps < 1 and max_steps != -1):
        raise InputError("max_steps", f"must be -1 (train by epochs) or a whole number >= 1, got {max_steps!r}.")
    if max_steps > MAX_VALUE:
        raise InputError("max_steps", f"must be <= {MAX_VALUE:,}, got {max_steps:,}; that looks like a typing mistake.")
    out["max_steps"] = max_steps

    epochs = values["num_train_epochs"]
    if isinstance(epochs, bool) or not isinstance(epochs, (int, float)) or not math.isfinite(epochs) or epochs <= 0:
        raise InputError("num_train_epochs", f"must be a number > 0 (fractions allowed), got {epochs!r}; try 1.")
    if epochs > MAX_VALUE:
        raise InputError(
            "num_train_epochs", f"must be <= {MAX_VALUE:,}, got {epochs}; that looks like a typing mistake."
        )
    out["num_train_epochs"] = float(epochs)

    do_eval = values["do_eval"]
    if not isinstance(do_eval, bool):
        raise InputError("do_eval", f"must be true or false, got {do_eval!r}.")
    out["do_eval"] = do_eval
    return {name: out[name] for name in PLAN_DEFAULTS}


# ---------------------------------------------------------------- TRL's rules


def divisors(number: int, limit: int = 10**9) -> list[int] | None:
    """Sorted divisors of `number`; None when it is above `limit` (too slow to list per keystroke)."""
    if number > limit:
        return None
    small, large = [], []
    for d in range(1, math.isqrt(number) + 1):
        if number % d == 0:
            small.append(d)
            if d != number // d:
                large.append(number // d)
    return small + large[::-1]


def trl_errors(v: dict) -> tuple[list[str], int | None, int | None]:
    """GRPOConfig.__post_init__'s batch checks on normalised inputs `v`, in TRL's order.

    Returns (errors, gbs, spg). TRL raises only the first error; the later ones
    are what the user meets next after fixing it. gbs/spg are None when TRL
    cannot derive them.
    """
    bs, n, G = v["per_device_train_batch_size"], v["num_processes"], v["num_generations"]
    spg, gbs = v["steps_per_generation"], v["generation_batch_size"]
    errors = []
    if gbs is None and spg is None:
        spg = v["gradient_accumulation_steps"]
        gbs = bs * n * spg
    elif gbs is not None and spg is None:
        if gbs % (bs * n) != 0:
            errors.append(f"generation_batch_size ({gbs}) must be divisible by the global batch size ({bs * n}).")
        else:
            spg = gbs // (bs * n)
    elif gbs is None and spg is not None:
        gbs = bs * n * spg
    else:
        errors.append("'generation_batch_size' and 'steps_per_generation' can not be both configured at the same time")

    if v["do_eval"]:
        g_eval = v["num_generations_eval"] or G
        if (v["per_device_eval_batch_size"] * n) % g_eval != 0:
            errors.append(
                f"The global eval batch size ({v['per_device_eval_batch_size']} * {n}) must be "
                f"divisible by the number of generations used for evaluation ({g_eval})."
            )
    if gbs % G != 0:
        errors.append(f"generation_batch_size ({gbs}) must be divisible by num_generations ({G}).")
    if G < 2:
        errors.append(
            "GRPO requires at least 2 generations per prompt to calculate the advantages. You provided "
            f"{G}, which is less than the minimum required."
        )
    if errors and errors[0].startswith("'generation_batch_size' and"):
        spg = None
    return errors, gbs, spg


# ---------------------------------------------------------------- steps


def count_steps(v: dict, gbs: int, spg: int) -> dict:
    """Optimizer steps as RepeatSampler + Trainer count them (trl-grpo.md §2)."""
    G, GA, N = v["num_generations"], v["gradient_accumulation_steps"], v["dataset_size"]
    P = gbs // G
    out = {"prompts_per_generation": P, "steps_per_epoch": None, "total_steps": None, "prompts_dropped_per_epoch": None}
    if N is not None:
        # The sampler drops the incomplete tail chunk; each chunk feeds num_iterations * spg micro-batches.
        micro_steps = (N // P) * v["num_iterations"] * spg
        out["steps_per_epoch"] = max(1, math.ceil(micro_steps / GA))
        out["prompts_dropped_per_epoch"] = N % P
        if micro_steps == 0:
            # An empty dataloader: the Trainer trains 0 steps with max_steps > 0, raises with -1.
            out["steps_per_epoch"] = 0
            out["total_steps"] = 0 if v["max_steps"] > 0 else None
            return out
        if v["max_steps"] <= 0:
            out["total_steps"] = math.ceil(v["num_train_epochs"] * out["steps_per_epoch"])
    if v["max_steps"] > 0:
        out["total_steps"] = v["max_steps"]
    return out


def collect_warnings(v: dict, gbs: int, spg: int, steps: dict) -> list[str]:
    """Plain-words warnings about a valid configuration: what may go wrong (`collect_notes` has the rest)."""
    N, P = v["dataset_size"], steps["prompts_per_generation"]
    if N is None or N >= P:
        return []
    if v["max_steps"] > 0:
        tail = f"with max_steps={v['max_steps']} TRL silently trains 0 steps"
    else:
        tail = "the Trainer stops with: " + NO_LENGTH_ERROR.format(max_steps=v["max_steps"])
    return [
        f"The dataset has {N} prompt{'' if N == 1 else 's'} but one generation round needs {P} unique prompts "
        f"(generation_batch_size {gbs} / num_generations {v['num_generations']}); the sampler drops "
        f"the incomplete chunk, so an epoch has no batches and {tail}. Use more prompts or a smaller "
        f"generation batch."
    ]


def collect_notes(v: dict, gbs: int, spg: int, steps: dict) -> list[str]:
    """Plain-words information about a valid configuration: how TRL will treat it, nothing wrong with it."""
    notes = []
    N, P = v["dataset_size"], steps["prompts_per_generation"]
    if N is not None and N >= P and steps["prompts_dropped_per_epoch"]:
        notes.append(
            f"{steps['prompts_dropped_per_epoch']} of {N} prompts are dropped each epoch: the sampler cuts the "
            f"shuffled dataset into chunks of {P} prompts and drops the incomplete last one "
            f"(a different random set each epoch)."
        )
    if v["num_iterations"] > 1:
        notes.append(
            f"num_iterations={v['num_iterations']}: each generation round is trained on {v['num_iterations']} times, "
            f"so the policy ratio moves away from 1 and epsilon clipping takes effect; generation cost per step "
            f"drops by the same factor."
        )
    if v["max_steps"] > 0 and steps["steps_per_epoch"]:
        per_epoch = steps["steps_per_epoch"]
        if v["max_steps"] < per_epoch:
            notes.append(
                f"max_steps={v['max_steps']} covers {v['max_steps'] / per_epoch:.0%} of one epoch "
                f"({per_epoch} steps); num_train_epochs is ignored."
            )
        elif v["max_steps"] > per_epoch:
            notes.append(
                f"max_steps={v['max_steps']} runs {v['max_steps'] / per_epoch:.1f} epochs of {per_epoch} steps; "
                f"num_train_epochs is ignored."
            )
    if spg > 1:
        notes.append(
            f"steps_per_generation={spg}: each generation round of {gbs} completions is shuffled and split into "
            f"{spg} micro-batches, so a micro-batch mixes completions of different groups (advantages are still "
            f"computed over whole groups first)."
        )
    return notes


# ---------------------------------------------------------------- plan


def build_plan(v: dict) -> Plan:
    """A Plan for normalised inputs, without suggestions."""
    errors, gbs, spg = trl_errors(v)
    bs, n, GA, G = (
        v["per_device_train_batch_size"],
        v["num_processes"],
        v["gradient_accumulation_steps"],
        v["num_generations"],
    )
    completions_per_step = bs * n * GA
    plan_ = Plan(
        inputs=dict(v),
        valid=not errors,
        errors=errors,
        warnings=[],
        generation_batch_size=gbs,
        steps_per_generation=spg,
        prompts_per_generation=None,
        completions_per_step=completions_per_step,
        prompts_per_step=completions_per_step / G,
        steps_per_epoch=None,
        total_steps=None,
        prompts_dropped_per_epoch=None,
        max_generated_tokens_per_step=completions_per_step * v["max_completion_length"],
    )
    if errors:
        return plan_
    steps = count_steps(v, gbs, spg)
    for key, value in steps.items():
        setattr(plan_, key, value)
    plan_.warnings = collect_warnings(v, gbs, spg, steps)
    plan_.notes = collect_notes(v, gbs, spg, steps)
    return plan_


def grid(
    num_processes=1,
    gradient_accumulation_steps=1,
    steps_per_generation=None,
    generation_batch_size=None,
    do_eval=False,
    per_device_eval_batch_size=8,
    num_generations_eval=None,
    per_device_train_batch_sizes=range(1, 17),
    num_generations_values=range(2, 17),
) -> dict:
    """Validity of every (per_device_train_batch_size, num_generations) pair, for a heatmap.

    Returns {"per_device_train_batch_size": [...], "num_generations": [...],
    "valid": rows indexed [num_generations][batch], "errors": the first TRL error or ""}.
    """
    base = normalise_inputs(
        num_processes=num_processes,
        gradient_accumulation_steps=gradient_accumulation_steps,
        steps_per_generation=steps_per_generation,
        generation_batch_size=generation_batch_size,
        do_eval=do_eval,
        per_device_eval_batch_size=per_device_eval_batch_size,
        num_generations_eval=num_generations_eval,
    )
    batches = [_whole("per_device_train_batch_size", b, 1) for b in per_device_train_batch_sizes]
    gens = [_whole("num_generations", g, 1) for g in num_generations_values]
    valid_rows, error_rows = [], []
    for g in gens:
        valid_row, error_row = [], []
        for b in batches:
            errors = trl_errors({**base, "per_device_train_batch_size": b, "num_generations": g})[0]
            valid_row.append(not errors)
            error_row.append(errors[0] if errors else "")
        valid_rows.append(valid_row)
        error_rows.append(error_row)
    return {"per_device_train_batch_size": batches, "num_generations": gens, "valid": valid_rows, "errors": error_rows}
