"""The same batch inputs read as TRL 1.16, Open-R1 and ms-swift.

- TRL 1.16 (exact): `plan` as given; `num_processes` is what GRPOConfig sees.
- Open-R1: TRL's rules, but GPUs serving the vLLM server do not train. Of
  `num_processes + vllm_gpus` GPUs, `vllm_gpus` serve (Open-R1's recipes give
  the server one GPU when none is named and there is more than one GPU), the
  rest train (e.g. 4 GPUs: 1 serves vLLM, 3 train).
- ms-swift: per_device_train_batch_size counts completions, as in TRL; the
  generation batch must hold whole groups; its step count follows its own
  formula: total = N x G / (bs x dp) x train_data_ratio,
  max_steps = total / GA x num_iterations.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field

from workbench.calc.planner import plan
from workbench.calc.rules import InputError, Plan, divisors, normalise_inputs

FRAMEWORKS = ("trl", "open-r1", "ms-swift")
FRAMEWORK_TITLES = {"trl": "TRL 1.16 (exact)", "open-r1": "Open-R1 (TRL + vLLM server)", "ms-swift": "ms-swift"}


@dataclass
class FrameworkReading:
    """One framework's verdict on the inputs."""

    framework: str
    title: str
    valid: bool
    message: str  # the first error in that framework's words, or "valid"
    training_processes: int
    vllm_gpus: int
    generation_batch_size: int | None
    prompts_per_step: float
    total_steps: int | None
    steps_formula: str  # how total_steps was counted, with the numbers
    notes: list[str] = field(default_factory=list)
    plan: Plan | None = None

    def to_dict(self) -> dict:
        data = {k: v for k, v in asdict(self).items() if k != "plan"}
        data["plan"] = self.plan.to_dict() if self.plan else None
        return data


def check_train_data_ratio(value) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not (0 < value <= 1):
        raise InputError(
            "train_data_ratio", f"must be a fraction in (0, 1], got {value!r}; use 1 to train on all rows."
        )
    return float(value)


def _trl_steps_formula(p: Plan) -> str:
    v = p.inputs
    if not p.valid:
        return "not counted: the configuration is invalid"
    if v["max_steps"] > 0:
        return f"max_steps = {v['max_steps']}"
    if v["dataset_size"] is None:
        return "needs dataset_size"
    return (
        f"ceil({v['num_train_epochs']:g} epochs x max(1, ceil(({v['dataset_size']} // {p.prompts_per_generation}) "
        f"x {v['num_iterations']} x {p.steps_per_generation} / {v['gradient_accumulation_steps']})))"
    )


def read_as_trl(inputs: dict, trl_plan: Plan | None = None) -> FrameworkReading:
    p = trl_plan or plan(**inputs)
    v = p.inputs
    return FrameworkReading(
        framework="trl",
        title=FRAMEWORK_TITLES["trl"],
        valid=p.valid,
        message=p.errors[0] if p.errors else "valid",
        training_processes=v["num_processes"],
        vllm_gpus=v["vllm_gpus"],
        generation_batch_size=p.generation_batch_size,
        prompts_per_step=p.prompts_per_step,
        total_steps=p.total_steps,
        steps_formula=_trl_steps_formula(p),
        notes=["num_processes is the world size GRPOConfig sees (training processes only)."],
        plan=p,
    )


def read_as_open_r1(inputs: dict) -> FrameworkReading:
    gpus = inputs["num_processes"] + inputs["vllm_gpus"]
    served = inputs["vllm_gpus"] or (1 if gpus > 1 else 0)
    notes = [f"{gpus} GPU{'s' if gpus > 1 else ''} in all: {served} serve vLLM, {gpus - served} train."]
    if not inputs["vllm_gpus"] and served:
        notes.append("No vLLM GPU was named; Open-R1's recipes give the vLLM server one GPU.")
    if served == 0:
        notes.append("One GPU: vLLM has to run colocated (vllm_mode='colocate') inside the training process.")
    p = plan(**{**inputs, "num_processes": gpus - served, "vllm_gpus": served})
    return FrameworkReading(
        framework="open-r1",
        title=FRAMEWORK_TITLES["open-r1"],
        valid=p.valid,
        message=p.errors[0] if p.errors else "valid",
        training_processes=gpus - served,
        vllm_gpus=served,
        generation_batch_size=p.generation_batch_size,
        prompts_per_step=p.prompts_per_step,
        total_steps=p.total_steps,
        steps_formula=_trl_steps_formula(p),
        notes=notes,
        plan=p,
    )


def ms_swift_max_steps(
    dataset_size: int,
    num_generations: int,
    per_device_train_batch_size: int,
    num_processes: int,
    train_data_ratio: float,
    gradient_accumulation_steps: int,
    num_iterations: int,
) -> int:
    """Seed 004's formula: 8000 x 8 / (8 x 6) x 0.99 = 1320; 1320 / 2 x 2 = 1320."""
    total = dataset_size * num_generations / (per_device_train_batch_size * num_processes) * train_data_ratio
    steps = total / gradient_accumulation_steps * num_iterations
    return math.ceil(round(steps, 6))  # round first: 0.99 is not exact in binary


def read_as_ms_swift(inputs: dict, train_data_ratio: float, trl_plan: Plan | None = None) -> FrameworkReading:
    # ms-swift checks the same generation batch as TRL, so TRL's plan (and its fixes) serve for both.
    p = trl_plan or plan(**inputs)
    v = p.inputs
    bs, dp, G, GA = (
        v["per_device_train_batch_size"],
        v["num_processes"],
        v["num_generations"],
        v["gradient_accumulation_steps"],
    )
    message = "valid"
    gbs = p.generation_batch_size
    if not p.valid:
        if gbs is not None and G and gbs % G:
            listed = divisors(gbs)
            valid_values = "[...]" if listed is None else [d for d in listed if d >= 2]
            message = (
                f"generation_batch_size ({gbs}) must be divisible by num_generations ({G}). "
                f"Valid values: {valid_values}"
            )
        else:
            message = p.errors[0]
    if v["max_steps"] > 0:
        total, formula = v["max_steps"], f"max_steps = {v['max_steps']}"
    elif v["dataset_size"] is None:
        total, formula = None, "needs dataset_size"
    else:
        total = ms_swift_max_steps(v["dataset_size"], G, bs, dp, train_data_ratio, GA, v["num_iterations"])
        formula = (
            f"{v['dataset_size']} x {G} / ({bs} x {dp}) x {train_data_ratio:g} / {GA} x {v['num_iterations']} = {total}"
        )
    notes = ["per_device_train_batch_size counts completions (not prompts); dp = num_processes."]
    if train_data_ratio < 1:
        notes.append(f"train_data_ratio {train_data_ratio:g}: the rest of the rows are held out for evaluation.")
    if p.valid and total is not None and p.total_steps is not None and total != p.total_steps:
        notes.append(
            f"TRL's own count for the same values is {p.total_steps} steps (it drops incomplete chunks "
            f"and trains on every row)."
        )
    return FrameworkReading(
        framework="ms-swift",
        title=FRAMEWORK_TITLES["ms-swift"],
        valid=p.valid,
        message=message,
        training_processes=dp,
        vllm_gpus=v["vllm_gpus"],
        generation_batch_size=gbs,
        prompts_per_step=p.prompts_per_step,
        total_steps=total if p.valid else None,
        steps_formula=formula,
        notes=notes,
        plan=p,
    )


def compare_frameworks(train_data_ratio: float = 1.0, frameworks=FRAMEWORKS, **inputs) -> list[FrameworkReading]:
    """Read `plan`'s inputs (TRL names, plus vllm_gpus) as each framework would."""
    ratio = check_train_data_ratio(train_data_ratio)
    unknown = [name for name in frameworks if name not in FRAMEWORKS]
    if unknown:
        raise InputError("framework", f"unknown framework {unknown[0]!r}; choose from {', '.join(FRAMEWORKS)}.")
    normalised = normalise_inputs(**inputs)
    trl_plan = plan(**normalised) if {"trl", "ms-swift"} & set(frameworks) else None
    readers = {
        "trl": lambda: read_as_trl(normalised, trl_plan),
        "open-r1": lambda: read_as_open_r1(normalised),
        "ms-swift": lambda: read_as_ms_swift(normalised, ratio, trl_plan),
    }
    return [readers[name]() for name in frameworks]
