"""Reading a run's tokens.jsonl: each recorded completion token by token, and a step's summary.

- `token_steps(run_dir)`, `tokens_of_step(run_dir, step)`: the steps with token records and one step's
  records, read through the process's cache (`jsonl_cache`: a step's lines are found by its index and only
  they are parsed; what was appended since the last read is all that is read again).
- `tokens_of_round(run_dir, round_step, passes)`: for the cards of the completions recorded at
  `round_step`, the newest token record of each (a round trained on `passes` times has one per pass).
- `cli_rows(run_dir, step)`: what `python -m workbench tokens RUN --json` prints, each token record joined
  with its completions.jsonl record (prompt and completion text).
- `step_summary(records)`: the tokens with the largest KL and the highest entropy of a step, the share of
  clipped tokens and why there are none on-policy, and with vLLM the engine's mismatch and weights
  (`spec.engine_records.step_metrics`). Pure, like `card_position` and `round_passes`.

The record is described in workbench/spec/token_records.py.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path

from workbench.runstore import jsonl_cache, runfolder
from workbench.spec import engine_records
from workbench.spec.chat import transcript_text
from workbench.spec.run_records import well_formed
from workbench.spec.token_records import CLIP_HIGH, CLIP_LOW, token_problem

CLI_KEYS = ("step", "prompt", "completion", "advantage", "tokens", "logprob", "ref_logprob", "entropy", "kl", "clipped")
TOP_TOKENS = 5
ON_POLICY_NOTE = (
    "On-policy: each round is trained on once (num_iterations 1, steps_per_generation = "
    "gradient_accumulation_steps), so the old policy is the policy itself, the ratio is exactly 1 "
    "and no token can be clipped. num_iterations 2 or more lets the ratio move."
)


def token_steps(run_dir: str | Path) -> list[int]:
    """The steps with token records, ascending ([] when the run recorded none)."""
    return [int(step) for step in jsonl_cache.step_index(Path(run_dir) / runfolder.TOKENS_FILE).steps]


def tokens_of_step(run_dir: str | Path, step: int) -> list[dict]:
    """The well-formed token records of `step` (its newest round when a resume wrote it twice)."""
    records = jsonl_cache.records_of_step(Path(run_dir) / runfolder.TOKENS_FILE, step)
    return newest_pass(well_formed(records, token_problem))


def newest_pass(records: list[dict]) -> list[dict]:
    """One record per (round, index) of a step, the last written."""
    kept = {(r["round"], r["index"]): r for r in records}
    return sorted(kept.values(), key=lambda r: (r["round"], r["index"]))


def round_passes(config: Mapping) -> int:
    """How many optimizer steps train on one generation round: TRL generates every
    steps_per_generation × num_iterations micro-steps, gradient_accumulation_steps to an optimizer step."""
    accumulation = int(config.get("gradient_accumulation_steps") or 1)
    per_generation = int(config.get("steps_per_generation") or accumulation)
    return max(1, math.ceil(per_generation * int(config.get("num_iterations") or 1) / accumulation))


def tokens_of_round(run_dir: str | Path, round_step: int, passes: int = 1) -> dict[int, dict]:
    """Index among the round's completions -> the newest token record of it, from steps round_step onwards."""
    found: dict[int, dict] = {}
    for step in range(int(round_step), int(round_step) + max(1, passes)):
        for record in tokens_of_step(run_dir, step):
            if record["round"] == round_step:
                found[int(record["index"])] = record
    return found


def card_position(record: Mapping, group_size: int) -> tuple[int, int]:
    """(group, position in the group) of a token record: the round lays groups out one after the other."""
    return int(record["group"]), int(record["index"]) - int(record["group"]) * group_size


def cli_rows(run_dir: str | Path, step: int | None = None) -> list[dict]:
    """One object per token record of `step` (every step when None), with its prompt and completion text."""
    run_dir = Path(run_dir)
    rows = []
    for at in [step] if step is not None else token_steps(run_dir):
        records = tokens_of_step(run_dir, at)
        completions: dict[int, list[dict]] = {}
        for record in records:
            if record["round"] not in completions:
                completions[record["round"]] = jsonl_cache.records_of_step(
                    run_dir / runfolder.COMPLETIONS_FILE, record["round"]
                )
            rows.append(cli_row(record, completions[record["round"]]))
    return rows


def cli_row(record: Mapping, round_records: list[dict]) -> dict:
    """A token record with its completion's prompt and text (None where the completion was not recorded)."""
    index = int(record["index"])
    completion = round_records[index] if index < len(round_records) else {}
    row = {key: record.get(key) for key in CLI_KEYS}
    row.update(
        prompt=transcript_text(completion.get("prompt")) if completion else None,
        completion=transcript_text(completion.get("completion")) if completion else None,
        round=record["round"],
        index=index,
        group=record["group"],
        ref=record["ref"],
        ratio=record.get("ratio"),
        masked=record["masked"],
    )
    if engine_records.has_engine(record):  # a run that generates with vLLM; others' rows have no engine keys
        row.update({name: record.get(name) for name in engine_records.ENGINE_FIELDS})
    return row


def _places(records: list[Mapping]) -> dict[tuple[int, int], int]:
    """(round, index in the round) -> the completion's place in its group, counted from 0 as its card counts it: a
    round lays its groups out one after the other, each as large as its largest group's records."""
    sizes: dict[tuple[int, int], int] = {}
    for record in records:
        key = (record["round"], record["group"])
        sizes[key] = sizes.get(key, 0) + 1
    size_of_round: dict[int, int] = {}
    for (round_step, _), size in sizes.items():
        size_of_round[round_step] = max(size, size_of_round.get(round_step, 0))
    return {(r["round"], r["index"]): card_position(r, size_of_round[r["round"]])[1] for r in records}


def _top(records: list[Mapping], channel: str, count: int) -> list[dict]:
    places = _places(records)
    found = []
    for record in records:
        values = record.get(channel) or []
        for position, (value, masked) in enumerate(zip(values, record["masked"])):
            if value is not None and not masked:
                found.append(
                    {
                        "token": record["tokens"][position],
                        "value": value,
                        "index": record["index"],
                        "group": record["group"],
                        "place": places.get((record["round"], record["index"])),
                        "position": position,
                        "round": record["round"],
                    }
                )
    return sorted(found, key=lambda item: -item["value"])[:count]


def step_summary(records: list[Mapping], count: int = TOP_TOKENS) -> dict:
    """`top_kl`, `top_entropy` (each token with its value, completion index and position), `clipped_low` and
    `clipped_high` (shares of the tokens in the loss), `tokens`, `on_policy`, `note` (why nothing can clip) and `engine` (a vLLM run's
    mismatch and weights, `spec.engine_records.step_metrics`; empty for other runs)."""
    kept = [flag for r in records for flag, masked in zip(r["clipped"], r["masked"]) if not masked]
    on_policy = bool(records) and all(r.get("ratio") is None for r in records)
    return {
        "top_kl": _top(records, "kl", count),
        "top_entropy": _top(records, "entropy", count),
        "tokens": len(kept),
        "clipped_low": sum(flag == CLIP_LOW for flag in kept) / len(kept) if kept else 0.0,
        "clipped_high": sum(flag == CLIP_HIGH for flag in kept) / len(kept) if kept else 0.0,
        "on_policy": on_policy,
        "note": ON_POLICY_NOTE if on_policy else "",
        "engine": engine_records.step_metrics(records),
    }


def engine_text(engine: Mapping) -> str:
    """A step's engine summary (`step_summary(...)["engine"]`) in one line; '' for a run without vLLM."""
    if not engine:
        return ""
    m = engine_records
    text = (
        f"engine vs trainer: mean |difference| {engine[m.MISMATCH_MEAN]:.3g}, largest {engine[m.MISMATCH_MAX]:.3g} nats"
    )
    if m.WEIGHT_MEAN not in engine:
        return text + "; no importance-sampling correction"
    return (
        f"{text}; IS weight min {engine[m.WEIGHT_MIN]:.3g} mean {engine[m.WEIGHT_MEAN]:.3g} max "
        f"{engine[m.WEIGHT_MAX]:.3g}, {engine[m.MASKED_COMPLETIONS]} completion(s) masked"
    )


def last_step_tokens(run_dir: str | Path) -> list[dict]:
    """The token records of the run's last recorded step ([] when it recorded none), for its report."""
    steps = token_steps(run_dir)
    return tokens_of_step(run_dir, steps[-1]) if steps else []


def tokens_read(run_dir: str | Path) -> int:
    """How far the process's index of the run's tokens.jsonl reaches (a drawing made before it grew is stale)."""
    return jsonl_cache.step_index(Path(run_dir) / runfolder.TOKENS_FILE).offset


# ---------------------------------------------------------------- the same tokens at an earlier step

# Recorded steps searched for the same prompt sampled again: each is parsed whole to find it, so few (a
# round trained on several times, a small dataset); a prompt seen again an epoch later is not looked for.
LOOK_BACK_STEPS = 4


def prefix_matches(ids: list[int], earlier: list[Mapping]) -> list[tuple[int, float | None] | None]:
    """Per position of `ids`: (step, logprob) of the same token after the same tokens before it, in the newest
    of the `earlier` records (of the same prompt) that shares that prefix; None where none does.

    The earlier records go into a tree of their tokens (one branch per prefix), so each lookup follows `ids`
    down it: linear in the tokens, however long the completions."""
    root: dict = {}
    for record in sorted(earlier, key=lambda r: r["step"]):  # newest last: it overwrites the older values
        node = root
        for token, logprob in zip(record["ids"], record["logprob"]):
            value, children = node.get(token, (None, {}))
            node[token] = ((record["step"], logprob), children)
            node = children
    found: list = []
    node = root
    for token in ids:
        if node is None or token not in node:
            node = None
            found.append(None)
            continue
        value, node = node[token]
        found.append(value)
    return found


def earlier_of_round(
    run_dir: str | Path, records: Mapping[int, Mapping], prompts: Mapping[int, str], look_back: int = LOOK_BACK_STEPS
) -> dict[int, list]:
    """For the token records of a round (index -> record) and their prompts (index -> text): index ->
    `prefix_matches` against the same prompt's completions at the `look_back` recorded steps before the
    record's (a round trained on twice: its first pass too)."""
    run_dir = Path(run_dir)
    wanted = set(prompts.values())
    newest = max((record["step"] for record in records.values()), default=0)
    by_prompt: dict[str, list[dict]] = {}
    for at in [s for s in token_steps(run_dir) if s < newest][-look_back:]:
        earlier = tokens_of_step(run_dir, at)
        rounds: dict[int, list[dict]] = {}
        for record in earlier:
            completions = rounds.setdefault(
                record["round"], jsonl_cache.records_of_step(run_dir / runfolder.COMPLETIONS_FILE, record["round"])
            )
            if record["index"] < len(completions):
                prompt = transcript_text(completions[record["index"]].get("prompt"))
                if prompt in wanted:
                    by_prompt.setdefault(prompt, []).append(record)
    found = {}
    for index, record in records.items():
        before = [r for r in by_prompt.get(prompts.get(index), []) if r["step"] < record["step"]]
        if before:
            found[index] = prefix_matches(record["ids"], before)
    return found
