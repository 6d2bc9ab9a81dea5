"""HTML of the token view: a completion's tokens coloured by a channel, and a step's token summary.

`token_view_html(record, scale)` renders one tokens.jsonl record (workbench/spec/token_records.py) as a
block that opens inside its group card: five channels (log-probability, KL, entropy, advantage × ratio,
clipped), and a sixth for a run that generates with vLLM (the engine's log-probability against the trainer's,
with TRL's importance-sampling weight in the block's title), picked with radio buttons that need no script and no
server (each token carries one colour class per channel; the checked button's CSS shows its channel and its
legend), every value on hover, masked tokens struck through. On-policy, the clipped channel says why nothing is
clipped instead of showing an empty channel. `summary_html(summary)` renders `insight.tokens.step_summary`: the
step's largest-KL and highest-entropy tokens, the share clipped and, with vLLM, the engine's mismatch and weights.
`Scale.of(records)` fixes the colour ranges for one step, so cards of a step compare.

All model text is HTML-escaped. Pure: strings in, a string out (the dashboard, the report, the notebooks).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from html import escape

from workbench.insight.tokens import ON_POLICY_NOTE, engine_text

BUCKETS = 6  # colour steps per channel (and per sign for advantage × ratio)
# channel id -> (label, legend text); the legend's {max} is the step's largest value of the channel
CHANNELS = {
    "logprob": ("log-probability", "pale: likely under the policy · dark: unlikely (p = e^logprob)"),
    "kl": ("KL", "the per-token KL term to the reference, 0 (pale) to {max} (dark)"),
    "entropy": ("entropy", "how unsure the policy was, 0 (pale) to {max} nats (dark)"),
    "push": ("advantage × ratio", "green: made likelier · red: made less likely; up to ±{max}"),
    "clipped": ("clipped", "blue: ratio clipped low (advantage < 0) · orange: clipped high (advantage > 0)"),
    "engine": ("engine vs trainer", "|trainer − engine log-probability|, 0 (pale) to {max} nats (dark)"),
}
OPTIONAL = {"kl": "kl", "engine": "engine_logprob"}  # channels shown only when the record has this field
# the first letter of a token's colour class per channel ("e" is entropy's, so the engine's is "g")
PREFIX = {"logprob": "l", "kl": "k", "entropy": "e", "push": "p", "clipped": "c", "engine": "g"}

STYLE = (
    """
<style>
.wb-tokview { border-top: 1px dashed #e5e7eb; padding-top: 4px; font-size: 12px; }
.wb-tokview > summary { cursor: pointer; color: #2563eb; }
.wb-tokview input { position: absolute; opacity: 0; pointer-events: none; }
.wb-tokview label { display: inline-block; margin: 3px 4px 0 0; padding: 0 6px; border: 1px solid #d1d5db;
  border-radius: 999px; cursor: pointer; color: #374151; }
.wb-legend span, .wb-clipnote { display: none; color: #4b5563; }
.wb-toks { white-space: pre-wrap; overflow-wrap: anywhere; font-family: ui-monospace, SFMono-Regular, Menlo, monospace;
  font-size: 12px; line-height: 1.7; max-height: 240px; overflow-y: auto; margin-top: 4px; }
.wb-tok { border-radius: 3px; outline: 1px solid #f3f4f6; }
.wb-tok.wb-masked { text-decoration: line-through; color: #9ca3af; }
"""
    + "".join(
        f".wb-tokview input.wb-ch-{c}:checked + label {{ background: #1f2937; color: #fff; }}\n"
        f".wb-tokview input.wb-ch-{c}:checked ~ .wb-legend .wb-leg-{c} {{ display: inline; }}\n"
        for c in CHANNELS
    )
    + "".join(
        f".wb-tokview input.wb-ch-{c}:checked ~ .wb-toks .{PREFIX[c]}{b} {{ background: {colour}; }}\n"
        for c, b, colour in [
            *[
                (c, b, f"rgba(220, 38, 38, {b / BUCKETS * 0.75:.2f})")
                for c in ("logprob", "kl", "entropy", "engine")
                for b in range(1, BUCKETS + 1)
            ],
            *[("push", b, f"rgba(22, 163, 74, {b / BUCKETS * 0.7:.2f})") for b in range(1, BUCKETS + 1)],
            *[("push", f"n{b}", f"rgba(220, 38, 38, {b / BUCKETS * 0.7:.2f})") for b in range(1, BUCKETS + 1)],
            ("clipped", "lo", "#93c5fd"),
            ("clipped", "hi", "#fdba74"),
        ]
    )
    + """
.wb-tokview input.wb-ch-clipped:checked ~ .wb-clipnote { display: block; }
.wb-tok-summary { border: 1px solid #e5e7eb; border-radius: 8px; padding: 6px 10px; margin: 0 0 10px; background: #fff; }
.wb-tok-summary code { background: #f3f4f6; border-radius: 3px; padding: 0 3px; }
</style>
"""
)


@dataclass(frozen=True)
class Scale:
    """The largest value of each channel over a step's records: the dark end of its colours."""

    kl: float = 0.0
    entropy: float = 0.0
    push: float = 0.0
    engine: float = 0.0

    @classmethod
    def of(cls, records: list[Mapping]) -> Scale:
        def largest(values) -> float:
            return max((abs(v) for v in values if v is not None), default=0.0)

        return cls(
            kl=largest(v for r in records for v in (r.get("kl") or [])),
            entropy=largest(v for r in records for v in r["entropy"]),
            push=largest(v for r in records for v in _push(r)),
            engine=largest(v for r in records for v in (r.get("engine_diff") or [])),
        )


def _push(record: Mapping) -> list[float | None]:
    ratios = record.get("ratio") or [1.0] * len(record["ids"])
    return [None if ratio is None else record["advantage"] * ratio for ratio in ratios]


def _bucket(value: float | None, top: float) -> int:
    if value is None or top <= 0:
        return 0
    return min(BUCKETS, max(0, math.ceil(BUCKETS * abs(value) / top)))


def _classes(record: Mapping, position: int, scale: Scale, push: float | None) -> str:
    logprob = record["logprob"][position]
    surprise = None if logprob is None else 1 - math.exp(logprob)  # 0 for a sure token, 1 for an impossible one
    names = [f"l{_bucket(surprise, 1.0)}", f"e{_bucket(record['entropy'][position], scale.entropy)}"]
    if record.get("kl"):
        names.append(f"k{_bucket(record['kl'][position], scale.kl)}")
    if record.get("engine_diff"):
        names.append(f"g{_bucket(record['engine_diff'][position], scale.engine)}")
    size = _bucket(push, scale.push)
    names.append(f"p{'n' if push is not None and push < 0 else ''}{size}")
    names.append({-1: "clo", 1: "chi"}.get(record["clipped"][position], ""))
    if record["masked"][position]:
        names.append("wb-masked")
    return " ".join(name for name in names if name)


def _number(value: float | None) -> str:
    return "—" if value is None else f"{value:.4g}"


def _hover(record: Mapping, position: int, push: float | None, before: tuple | None = None) -> str:
    ref = "reference" if record["ref"] == "reference" else "old policy"
    kl = record.get("kl")
    ratio = record.get("ratio")
    parts = [
        repr(record["tokens"][position]),
        f"logprob {_number(record['logprob'][position])}",
        f"{ref} {_number(record['ref_logprob'][position])}",
        f"KL {_number(kl[position]) if kl else '— (beta 0)'}",
        f"entropy {_number(record['entropy'][position])}",
        f"ratio {_number(ratio[position]) if ratio else '1 (on-policy)'}",
        f"advantage × ratio {_number(push)}",
        f"clipped {({-1: 'low', 1: 'high'}).get(record['clipped'][position], 'no')}",
    ]
    if record.get("engine_logprob"):
        parts.append(
            f"engine logprob {_number(record['engine_logprob'][position])} · trainer − engine "
            f"{_number(record['engine_diff'][position])}"
        )
        weight = record.get("is_weight")
        if isinstance(weight, list):
            parts.append(f"IS weight {_number(weight[position])}")
    if record["masked"][position]:
        parts.append("masked: outside the loss")
    if before is not None:
        parts.append(f"at step {before[0]}, same prompt and tokens before: logprob {_number(before[1])}")
    return " · ".join(parts)


def token_view_html(
    record: Mapping,
    scale: Scale,
    channel: str = "logprob",
    page: str = "wb",
    opened: bool = False,
    earlier: list | None = None,
) -> str:
    """One completion's tokens as a block to open (`opened`: open already): channel buttons, legend, tokens
    coloured, values on hover. `page` names the view where it is shown (its buttons' ids must be unique on a
    page showing two views). `earlier`: per token, (step, logprob) of the same token after the same tokens
    when the prompt was sampled at an earlier step (`insight.tokens.prefix_matches`), shown on hover."""
    before = earlier or [None] * len(record["tokens"])
    if channel not in CHANNELS or (channel in OPTIONAL and not record.get(OPTIONAL[channel])):
        channel = "logprob"
    name = f"{page}-tv{record['step']}-{record['round']}-{record['index']}"
    pushes = _push(record)
    buttons = []
    for key, (label, _) in CHANNELS.items():
        if key in OPTIONAL and not record.get(OPTIONAL[key]):
            continue  # beta = 0: TRL computes no KL term; no vLLM: no engine log-probabilities
        checked = " checked" if key == channel else ""
        buttons.append(
            f'<input type="radio" name="{name}" id="{name}-{key}" class="wb-ch-{key}"{checked}>'
            f'<label for="{name}-{key}">{escape(label)}</label>'
        )
    tops = {"kl": scale.kl, "entropy": scale.entropy, "push": scale.push, "engine": scale.engine}
    legend = "".join(
        f'<span class="wb-leg-{key}">{escape(text.format(max=_number(tops.get(key))))}</span>'
        for key, (_, text) in CHANNELS.items()
        if key not in OPTIONAL or record.get(OPTIONAL[key])
    )
    note = ""
    if record.get("ratio") is None:
        note = f'<div class="wb-clipnote">Nothing is clipped here. {escape(ON_POLICY_NOTE)}</div>'
    elif not any(record["clipped"]):
        note = '<div class="wb-clipnote">No token of this completion was clipped.</div>'
    spans = "".join(
        f'<span class="wb-tok {_classes(record, i, scale, pushes[i])}" '
        f'title="{escape(_hover(record, i, pushes[i], before[i]))}">'
        f"{escape(token)}</span>"
        for i, token in enumerate(record["tokens"])
    )
    kind = "reference" if record["ref"] == "reference" else "old policy (beta 0)"
    return (
        f'<details class="wb-tokview"{" open" if opened else ""}><summary>tokens ({len(record["tokens"])}; step {record["step"]}, '
        f"against the {kind}{escape(_weight_note(record))})</summary>"
        f'{"".join(buttons)}<div class="wb-legend">{legend}</div>{note}'
        f'<div class="wb-toks">{spans}</div></details>'
    )


def _weight_note(record: Mapping) -> str:
    """The importance-sampling weight TRL applied to the completion, for the block's title ('' without vLLM)."""
    if not record.get("engine_logprob"):
        return ""
    weight = record.get("is_weight")
    if weight is None:
        return "; engine log-probabilities, no IS correction"
    if isinstance(weight, list):
        return f"; IS weight per token ({record['is_mode']})"
    return f"; IS weight {_number(weight)} ({record['is_mode']}{', masked' if weight == 0 else ''})"


def _tokens_line(items: list[Mapping]) -> str:
    return (
        ", ".join(
            f"<code>{escape(repr(item['token']))}</code> {_number(item['value'])} "
            f"(group {item['group']} #{item.get('place', item['index'])}, token {item['position'] + 1})"
            for item in items
        )
        or "—"
    )


def summary_html(summary: Mapping, step: int) -> str:
    """The step's token summary: largest KL, highest entropy, share clipped (or why nothing can be)."""
    if not summary["tokens"]:
        return ""
    clipped = (
        escape(summary["note"])
        if summary["on_policy"]
        else f"clipped low {summary['clipped_low']:.1%} · high {summary['clipped_high']:.1%} of "
        f"{summary['tokens']} tokens in the loss"
    )
    kl = _tokens_line(summary["top_kl"]) if summary["top_kl"] else "— (beta 0: no KL term)"
    engine = engine_text(summary.get("engine") or {})
    return (
        f'<div class="wb-tok-summary"><b>Tokens of step {step}</b> (open a card\'s tokens to colour them)<br>'
        f"largest KL: {kl}<br>highest entropy: {_tokens_line(summary['top_entropy'])}<br>{clipped}"
        f"{'<br>' + escape(engine) if engine else ''}</div>"
    )


# A step's token views are all in its page: past this many tokens the rest of the cards go without one.
MAX_TOKENS_SHOWN = 20_000


def step_token_views(
    records: Mapping[int, Mapping],
    group_size: int,
    step: int,
    page: str = "wb",
    channel: str = "logprob",
    earlier: Mapping[int, list] | None = None,
) -> tuple[dict[tuple[int, int], str], str]:
    """For the cards of the round recorded at `step`: (group, position) -> its token view, and the HTML to
    show above the groups (style and the step's summary); `records` from `insight.tokens.tokens_of_round`,
    `earlier` (index -> values at an earlier step) from `insight.tokens.earlier_of_round`."""
    earlier = earlier or {}
    from workbench.insight.tokens import card_position, step_summary

    if not records:
        return {}, ""
    chosen = [records[index] for index in sorted(records)]
    scale = Scale.of(chosen)
    views, shown = {}, 0
    for record in chosen:
        shown += len(record["ids"])
        views[card_position(record, group_size)] = (
            token_view_html(record, scale, channel, page, earlier=earlier.get(record["index"]))
            if shown <= MAX_TOKENS_SHOWN
            else f'<div class="wb-tokview">tokens: <code>python -m workbench tokens RUN --step {record["step"]}</code> '
            f"(too many on this page to show them all)</div>"
        )
    return views, STYLE + summary_html(step_summary(chosen), chosen[-1]["step"])
