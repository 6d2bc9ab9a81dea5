"""Which speed levers a run takes on this machine, as data: the candidates a probe times, the key its result is kept
under, the rule that picks a winner from the probe's timings, and what `auto` becomes once a choice is known.

Pure functions over what the probe measured (workbench/trainer/speed_probe.py) and the machine's fingerprint
(workbench/tuning/machine.py); nothing here reads a clock, a file or a figure measured anywhere else.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field

# the levers `auto` decides, as RunConfig names them
LEVER_FIELDS = ("merged_generation", "shared_prompt_pass", "packed_decode")
# a lever is taken only when its rounds were at least this much faster than without it: a probe's one or two
# rounds per candidate are noisy, and the simpler path wins a tie
MIN_GAIN = 0.03
# the bfloat16 copy samples off-policy by rounding: `auto` takes it only on a CPU that multiplies bfloat16 in
# hardware and only while benchmarks/bench_precision_learning.py's recorded results show no loss in learning
# (benchmarks/results/bench_precision_learning.jsonl: the demo, 50 steps, seeds 1-3 each, verdict "no loss")
BF16_COPY_LEARNS_AS_WELL = True


@dataclass(frozen=True)
class Candidate:
    """One combination of the levers: how rounds are sampled, whether prompts are scored once per group, whether the
    float32 copy decodes through MKL's packed GEMM."""

    merged_generation: str = "no"  # "no", "float32" or "bfloat16"
    shared_prompt_pass: bool = False
    packed_decode: bool = False

    @property
    def exact(self) -> bool:
        """Whether it must give the same tokens and log-probabilities as TRL's own path (a bfloat16 copy need not)."""
        return self.merged_generation != "bfloat16"

    def label(self) -> str:
        parts = [
            {"no": "TRL's sampling", "float32": "float32 copy", "bfloat16": "bfloat16 copy"}[self.merged_generation]
        ]
        if self.packed_decode:
            parts.append("packed decode")
        if self.shared_prompt_pass:
            parts.append("shared prompt pass")
        return " + ".join(parts)

    def settings(self) -> dict[str, str]:
        """The candidate as RunConfig values."""
        return {
            "merged_generation": self.merged_generation,
            "shared_prompt_pass": "yes" if self.shared_prompt_pass else "no",
            "packed_decode": "yes" if self.packed_decode else "no",
        }


@dataclass(frozen=True)
class Possible:
    """What this run and machine allow, before anything is timed."""

    copy: bool = True  # generation=transformers with DDP: a merged copy can sample
    shared: bool = True  # spec/speed.unsupported_reason found nothing against the shared prompt pass
    packed: bool = True  # on a CPU, with a torch that has MKL
    bf16_copy: bool = False  # the bfloat16 copy is timed (a CPU with native bfloat16, or a GPU with bf16 weights)


def first_round(possible: Possible) -> list[Candidate]:
    """The candidates timed first: TRL's path, then each sampling path with the shared prompt pass where it runs."""
    shared = possible.shared
    candidates = [Candidate()]
    if shared:
        candidates.append(Candidate(shared_prompt_pass=True))
    if possible.copy:
        candidates.append(Candidate("float32", shared))
        if possible.packed:
            candidates.append(Candidate("float32", shared, packed_decode=True))
        if possible.bf16_copy:
            candidates.append(Candidate("bfloat16", shared))
    return candidates


def allowed(candidate: Candidate, exact_failures: dict[str, str], bf16_native: bool) -> bool:
    """Whether `auto` may take `candidate`: an exact one that gave the same tokens and log-probabilities as TRL's
    path, or the bfloat16 copy where the CPU has native bfloat16 and the learning benchmark showed no loss."""
    if candidate.label() in exact_failures:
        return False
    return candidate.exact or (bf16_native and BF16_COPY_LEARNS_AS_WELL)


def pick(
    seconds: dict[str, float], candidates: list[Candidate], exact_failures: dict[str, str], bf16_native: bool
) -> Candidate:
    """The candidate `auto` takes: the fastest allowed one, unless a candidate with fewer levers is within MIN_GAIN of
    it (the simpler path wins a tie). `seconds` maps each timed candidate's label to its round's seconds."""
    timed = [c for c in candidates if c.label() in seconds and allowed(c, exact_failures, bf16_native)]
    if not timed:
        return Candidate()
    best = min(timed, key=lambda c: seconds[c.label()])
    for simpler in sorted(timed, key=_lever_count):
        if _lever_count(simpler) < _lever_count(best) and seconds[simpler.label()] <= seconds[best.label()] * (
            1 + MIN_GAIN
        ):
            return simpler
    return best


def _lever_count(candidate: Candidate) -> int:
    return (candidate.merged_generation != "no") + candidate.shared_prompt_pass + candidate.packed_decode


# ---------------------------------------------------------------- the key a choice is kept under

# the RunConfig fields that change which levers win (the shape of a round and of its scoring)
SHAPE_FIELDS = (
    "per_device_train_batch_size",
    "num_generations",
    "max_completion_length",
    "gradient_accumulation_steps",
    "steps_per_generation",
    "num_iterations",
    "beta",
    "bf16",
    "lora_r",
    "lora_target_modules",
    "gradient_checkpointing",
    "generation",
    "distributed_backend",
    "num_processes",
    "device",
)


def key_of(machine: dict, model: str, config: dict) -> str:
    """The cache key of a speed choice: this machine's fingerprint, the model, the run's shape and the rules that pick
    (a choice kept under other rules, e.g. before the bfloat16 copy was allowed, is measured again)."""
    data = {
        "machine": machine,
        "model": model,
        **{name: config.get(name) for name in SHAPE_FIELDS},
        "rules": {"bf16_copy_learns_as_well": BF16_COPY_LEARNS_AS_WELL, "min_gain": MIN_GAIN},
    }
    return hashlib.sha256(json.dumps(data, sort_keys=True, default=str).encode()).hexdigest()[:24]


# ---------------------------------------------------------------- a probe's result


@dataclass(frozen=True)
class SpeedChoice:
    """What a probe chose and what it measured: the lever values, where and when, and every candidate's seconds."""

    key: str
    chosen: Candidate
    cpu: str
    measured_at: float  # seconds since the epoch
    seconds: dict[str, float] = field(default_factory=dict)  # candidate label -> seconds of one round
    exact_failures: dict[str, str] = field(default_factory=dict)  # label -> how it differed from TRL's path
    not_taken: dict[str, str] = field(default_factory=dict)  # label -> why auto did not take it (bf16 copy)
    model: str = ""

    def to_dict(self) -> dict:
        return {**asdict(self), "chosen": asdict(self.chosen)}

    @classmethod
    def from_dict(cls, data: dict) -> SpeedChoice:
        """A choice read back from the cache or the launcher (ValueError/TypeError/KeyError when malformed)."""
        chosen = Candidate(
            **{k: data["chosen"][k] for k in ("merged_generation", "shared_prompt_pass", "packed_decode")}
        )
        if chosen.merged_generation not in ("no", "float32", "bfloat16"):
            raise ValueError(f"merged_generation {chosen.merged_generation!r}")
        return cls(
            key=str(data["key"]),
            chosen=chosen,
            cpu=str(data["cpu"]),
            measured_at=float(data["measured_at"]),
            seconds={str(k): float(v) for k, v in dict(data.get("seconds") or {}).items()},
            exact_failures={str(k): str(v) for k, v in dict(data.get("exact_failures") or {}).items()},
            not_taken={str(k): str(v) for k, v in dict(data.get("not_taken") or {}).items()},
            model=str(data.get("model", "")),
        )

    def baseline_seconds(self) -> float | None:
        return self.seconds.get(Candidate().label())

    def summary(self) -> str:
        """One line: what was chosen, its round against TRL's path, measured where and when."""
        import time

        chosen, base = self.seconds.get(self.chosen.label()), self.baseline_seconds()
        figures = (
            f": a round in {chosen:.2f} s against {base:.2f} s"
            if chosen and base and self.chosen != Candidate()
            else ""
        )
        when = time.strftime("%Y-%m-%d %H:%M", time.localtime(self.measured_at))
        return f"{self.chosen.label()}{figures} (measured on this machine's {self.cpu}, {when})"


def resolved_settings(config: dict, choice: SpeedChoice | None) -> dict[str, str]:
    """The lever fields with each `auto` replaced by the choice's value (TRL's path when there is no choice)."""
    chosen = (choice.chosen if choice else Candidate()).settings()
    return {name: chosen[name] if config.get(name, "auto") == "auto" else str(config[name]) for name in LEVER_FIELDS}
