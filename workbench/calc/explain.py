"""Explain a pasted GRPO batch error: the numbers in it, why it happened, and fixes as plans.

Recognises TRL 1.16's batch errors (GRPOConfig.__post_init__), the older
TRL text the seed articles quote ("The global train batch size (3 x 1) must be
evenly divisible by the number of generations per prompt (8)"), ms-swift's
form (with "Valid values: [...]") and the Trainer's empty-dataloader error.
Each recognised message is rebuilt as a calculator plan that reproduces it, so
its suggestions are the fixes. Anything else gets a "not recognised" answer,
never an exception.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from workbench.calc.planner import plan
from workbench.calc.rules import InputError, Plan

# A paste is read up to this many characters at its start and as many at its end (where a
# traceback's error line is): a multi-megabyte log must not hold the server for its length.
READ_CHARS = 32 * 1024


@dataclass
class Explanation:
    """What `explain` read from a message and what to do about it."""

    recognised: bool
    kind: str  # which rule the message comes from ("" when not recognised)
    source: str  # which framework prints it
    values: dict  # the numbers read, under TRL's names
    why: str
    plan: Plan | None = None  # a plan that reproduces the message (None when the text lacks the numbers)
    fixes: list = field(default_factory=list)  # Suggestions, smallest change first
    note: str = ""  # how much of a long paste was read

    def to_dict(self) -> dict:
        return {
            "recognised": self.recognised,
            "kind": self.kind,
            "source": self.source,
            "values": dict(self.values),
            "why": self.why,
            "plan": self.plan.to_dict() if self.plan else None,
            "fixes": [fix.to_dict() for fix in self.fixes],
            "note": self.note,
        }


def readable_part(text: str, limit: int = READ_CHARS) -> tuple[str, str]:
    """(the part of a paste `explain` reads, a note saying so when it is not all of it)."""
    if len(text) <= 2 * limit:
        return text, ""
    note = f"The paste is {len(text):,} characters long; only its first and last {limit // 1024} KB were read."
    return f"{text[:limit]}\n{text[-limit:]}", note


def _ints(match: re.Match) -> list[int]:
    return [int(group) for group in match.groups() if group is not None and group.isdigit()]


def _explain_old_trl(m: re.Match) -> tuple[str, str, dict, str, dict]:
    n, bs, g = _ints(m)[:3]
    values = {"num_processes": n, "per_device_train_batch_size": bs, "num_generations": g}
    why = (
        f"Older TRL required the completions of one step, num_processes x per_device_train_batch_size = "
        f"{n} x {bs} = {n * bs}, to hold whole groups of num_generations = {g} completions, and {n * bs} is "
        f"not a multiple of {g}. TRL 1.16 checks the same idea on generation_batch_size = "
        f"per_device_train_batch_size x num_processes x steps_per_generation, so gradient accumulation now "
        f"counts too."
    )
    inputs = {**values, "gradient_accumulation_steps": 1}
    return "global_train_batch_not_divisible", "older TRL", values, why, inputs


def _explain_old_trl_eval(m: re.Match):
    n, ebs, g = _ints(m)[:3]
    values = {"num_processes": n, "per_device_eval_batch_size": ebs, "num_generations": g}
    why = (
        f"Older TRL required the eval batch, {n} x {ebs} = {n * ebs} completions, to hold whole groups of "
        f"{g}; it does not."
    )
    inputs = {
        "num_processes": n,
        "per_device_train_batch_size": g,
        "num_generations": g,
        "do_eval": True,
        "per_device_eval_batch_size": ebs,
    }
    return "global_eval_batch_not_divisible", "older TRL", values, why, inputs


def _explain_generation_groups(m: re.Match, source: str):
    gbs, g = _ints(m)[:2]
    values = {"generation_batch_size": gbs, "num_generations": g}
    why = (
        f"One generation round makes generation_batch_size = {gbs} completions (per_device_train_batch_size x "
        f"num_processes x steps_per_generation, steps_per_generation defaulting to gradient_accumulation_steps), "
        f"and it must hold whole groups of num_generations = {g} completions per prompt; {gbs} is not a "
        f"multiple of {g}. Change num_generations to a divisor of {gbs}, or make the generation batch a "
        f"multiple of {g}."
    )
    if source == "ms-swift":
        listed = re.search(r"Valid values:?\s*\[([\d,\s]*)\]", m.string)
        if listed:
            values["valid_values"] = [int(x) for x in re.findall(r"\d{1,30}", listed.group(1))]
    # The message does not say how gbs splits into batch x processes x steps; one process, batch 1.
    inputs = {"generation_batch_size": gbs, "per_device_train_batch_size": 1, "num_processes": 1, "num_generations": g}
    return "generation_batch_not_divisible", source, values, why, inputs


def _explain_global_batch(m: re.Match):
    gbs, global_bs = _ints(m)[:2]
    values = {"generation_batch_size": gbs, "global_batch_size": global_bs}
    why = (
        f"generation_batch_size = {gbs} was set by hand and must be a whole number of steps of the global "
        f"batch, per_device_train_batch_size x num_processes = {global_bs}. Pick a multiple of {global_bs}, or "
        f"leave generation_batch_size unset and use steps_per_generation."
    )
    inputs = {
        "generation_batch_size": gbs,
        "per_device_train_batch_size": global_bs,
        "num_processes": 1,
        "num_generations": 2,
    }
    return "generation_batch_vs_global_batch", "TRL 1.16", values, why, inputs


def _explain_both_set(m: re.Match):
    why = (
        "generation_batch_size and steps_per_generation say the same thing two ways (generation_batch_size = "
        "per_device_train_batch_size x num_processes x steps_per_generation); TRL refuses both. Keep one."
    )
    inputs = {
        "generation_batch_size": 16,
        "steps_per_generation": 2,
        "per_device_train_batch_size": 8,
        "num_generations": 8,
    }
    return "both_generation_settings", "TRL 1.16", {}, why, inputs


def _explain_eval(m: re.Match):
    ebs, n, g = _ints(m)[:3]
    values = {"per_device_eval_batch_size": ebs, "num_processes": n, "num_generations_eval": g}
    why = (
        f"Evaluation generates per_device_eval_batch_size x num_processes = {ebs} x {n} = {ebs * n} completions "
        f"at a time, and they must hold whole groups of {g} (num_generations_eval, or num_generations when it "
        f"is unset). Raise per_device_eval_batch_size to a multiple, or lower num_generations_eval."
    )
    inputs = {
        "per_device_eval_batch_size": ebs,
        "num_processes": n,
        "num_generations_eval": g,
        "num_generations": g,
        "per_device_train_batch_size": g,
        "do_eval": True,
    }
    return "eval_batch_not_divisible", "TRL 1.16", values, why, inputs


def _explain_too_few(m: re.Match):
    g = _ints(m)[0]
    values = {"num_generations": g}
    why = (
        f"GRPO's advantage is a completion's reward minus its group's mean (divided by the group's std); with "
        f"num_generations = {g} a group has no spread to compare against. Use at least 2 (4 to 16 is usual)."
    )
    inputs = {"num_generations": g, "per_device_train_batch_size": 8}
    return "too_few_generations", "TRL 1.16", values, why, inputs


def _explain_empty_dataloader(m: re.Match):
    values = {"max_steps": int(m.group(1))}
    why = (
        "The dataloader has no batches: the dataset holds fewer prompts than one generation round needs "
        "(generation_batch_size / num_generations unique prompts), and the sampler drops the incomplete "
        "chunk. Use more prompts, or a smaller per_device_train_batch_size x num_processes x "
        "steps_per_generation. (With max_steps > 0 the Trainer would instead train 0 steps silently.)"
    )
    return "empty_dataloader", "transformers Trainer", values, why, None


# A number in parentheses, at most 30 digits: a paste with a run of thousands of digits can
# neither be converted (int() refuses over 4300) nor make a pattern backtrack over it.
_N = r"\s*\(\s*(\d{1,30})\s*\)"
_GBS = r"generation_batch_size" + _N + r"\s*must be divisible by "

# Most specific first: ms-swift's text contains TRL 1.16's. Every pattern is anchored on literal
# words and bounded, so a search costs time in proportion to the (bounded) text.
PATTERNS = [
    (
        re.compile(_GBS + r"num_generations" + _N + r"\.?\s*Valid values", re.I),
        lambda m: _explain_generation_groups(m, "ms-swift"),
    ),
    (re.compile(_GBS + r"num_generations" + _N, re.I), lambda m: _explain_generation_groups(m, "TRL 1.16")),
    (re.compile(_GBS + r"the global batch size" + _N, re.I), _explain_global_batch),
    (
        re.compile(
            r"'?generation_batch_size'?\s+and\s+'?steps_per_generation'?\s+can\s*not\s+be\s+both\s+configured", re.I
        ),
        _explain_both_set,
    ),
    (
        re.compile(
            r"global eval batch size\s*\(\s*(\d{1,30})\s*\*\s*(\d{1,30})\s*\)\s*must be divisible by the number of "
            r"generations used for evaluation" + _N,
            re.I,
        ),
        _explain_eval,
    ),
    (
        re.compile(
            r"global train batch size\s*\(\s*(\d{1,30})\s*x\s*(\d{1,30})\s*\)\s*must be evenly divisible by the "
            r"number of generations per prompt" + _N,
            re.I,
        ),
        _explain_old_trl,
    ),
    (
        re.compile(
            r"global eval batch size\s*\(\s*(\d{1,30})\s*x\s*(\d{1,30})\s*\)\s*must be evenly divisible by the "
            r"number of generations per prompt" + _N,
            re.I,
        ),
        _explain_old_trl_eval,
    ),
    # at most 300 characters between the two phrases: an unbounded .*? rescans the rest of the
    # text from every occurrence of the first phrase (quadratic on a long paste)
    (re.compile(r"at least 2 generations per prompt.{0,300}?You provided\s*(\d{1,30})", re.I | re.S), _explain_too_few),
    (
        re.compile(
            r"args\.max_steps must be set to a positive value if dataloader does not have a length, "
            r"was\s*(-?\d{1,30})",
            re.I,
        ),
        _explain_empty_dataloader,
    ),
]

NOT_RECOGNISED = (
    "Not recognised: this text does not contain a GRPO batch error the workbench knows "
    "(TRL's generation_batch_size / num_generations / eval batch / fewer-than-2 messages, the older "
    "'global train batch size (n x b)' form, or ms-swift's). Paste the line that starts with "
    "ValueError, or enter the values in the calculator."
)


def explain(text) -> Explanation:
    """Explain a pasted error message; never raises."""
    if not isinstance(text, str) or not text.strip():
        return Explanation(False, "", "", {}, NOT_RECOGNISED)
    text, note = readable_part(text)
    # Tracebacks wrap long lines; read the message as one line.
    flat = re.sub(r"\s+", " ", text)
    for pattern, reader in PATTERNS:
        match = pattern.search(flat)
        if not match:
            continue
        kind, source, values, why, inputs = reader(match)
        if inputs is None:
            return Explanation(True, kind, source, values, why, note=note)
        try:
            reproduced = plan(**inputs)
        except InputError as exc:
            return Explanation(
                True, kind, source, values, f"{why} (The numbers cannot be checked further: {exc})", note=note
            )
        return Explanation(
            True, kind, source, values, why, plan=reproduced, fixes=list(reproduced.suggestions), note=note
        )
    why = (
        f"{NOT_RECOGNISED} {note} If the error is in the middle, paste the lines around it." if note else NOT_RECOGNISED
    )
    return Explanation(False, "", "", {}, why, note=note)
