"""The Explore tab's pure pieces: the filter widgets turned into the engine's query, a page of rows as a table,
one group with its answers above and below the group mean apart, and one prompt's history across steps.

The rows come from `insight.completion_search` (dicts in its FIELDS), the groups from `insight.groups`, and each
answer is drawn by `insight.group_cards.render_card`, so a card reads the same here as in the Train tab. No gradio,
no I/O: strings and lists in, strings and lists out. All model text is HTML-escaped.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from html import escape

from workbench.errors import WorkbenchError
from workbench.insight.completion_where import parse_steps as parse_steps  # the step box reads as the CLI's --steps
from workbench.insight.group_cards import STYLE as CARD_STYLE
from workbench.insight.group_cards import render_card
from workbench.insight.groups import CompletionView, GroupView, format_number, format_signed

PAGE_ROWS = 25
# The table cuts long text: the whole text is one click away, in the group card.
CELL_CHARS = 120
COLUMNS = ("step", "group", "#", "prompt", "completion", "reward", "advantage", "length", "flags")
# Yes/no filters: the widget's choice -> the where clause it adds ("any": none).
FLAG_CHOICES = ("any", "yes", "no")
FLAG_FIELDS = {"truncated": "Truncated", "correct": "Correct", "reward_error": "Reward error"}
SORT_LABELS = {
    "step": "step",
    "reward": "reward",
    "advantage": "advantage",
    "length": "length",
    "group": "group",
    "index": "place in group",
    "truncated": "truncated",
    "reward_error": "reward error",
    "correct": "correct",
}

STYLE = (
    CARD_STYLE
    + """
<style>
.wb-explore-part { margin: 10px 0 4px; font-weight: 600; color: #334155; }
.wb-explore-part small { font-weight: 400; color: #64748b; }
.wb-history-step { border-top: 1px solid #e2e8f0; padding: 8px 0; }
.wb-history-head { display: flex; gap: 12px; align-items: baseline; margin-bottom: 6px; }
.wb-history-head b { font-size: 14px; }
.wb-history-row { display: grid; grid-auto-flow: column; grid-auto-columns: minmax(210px, 1fr);
  gap: 8px; overflow-x: auto; }
.wb-history-summary { color: #475569; font-size: 13px; }
</style>
"""
)


# ---------------------------------------------------------------- the query


def steps_text(first: int | None, last: int | None) -> str:
    """The step box's text for a range (the inverse of `parse_steps`)."""
    if first is not None and first == last:
        return str(first)
    return "" if first is None and last is None else f"{'' if first is None else first}:{'' if last is None else last}"


def combined_where(where: str | None, flags: Mapping[str, str]) -> str:
    """The typed filter and-ed with the yes/no widgets' clauses (`flags`: field -> "any", "yes" or "no")."""
    clauses = [f"({where.strip()})"] if where and where.strip() else []
    for name, choice in flags.items():
        if name not in FLAG_FIELDS:
            raise WorkbenchError(field="filter", rule=f"{name!r} is not a yes/no field", fix="reload the page")
        if choice not in FLAG_CHOICES:
            raise WorkbenchError(field=FLAG_FIELDS[name], rule=f"{choice!r} is not a choice", fix="pick any, yes or no")
        if choice != "any":
            clauses.append(f"{name}=={'true' if choice == 'yes' else 'false'}")
    return " and ".join(clauses)


def sort_choices(reward_names: Iterable[str]) -> list[tuple[str, str]]:
    """(label, field) for the sort picker: the fixed fields, then each reward function's score."""
    return [(label, name) for name, label in SORT_LABELS.items()] + [
        (f"score of {name}", f"rewards.{name}") for name in reward_names
    ]


def where_help(reward_names: Iterable[str]) -> str:
    """The filter box's hint, naming this run's reward functions."""
    names = list(reward_names)
    scores = f" Scores: {', '.join(f'rewards.{n}' for n in names)}." if names else ""
    return (
        "Comparisons on step, group, index, reward, advantage, length, truncated, reward_error, correct, prompt, "
        "completion, joined by and/or/not, e.g. reward<0.2 and length>40." + scores
    )


# ---------------------------------------------------------------- the table


def _cut(text: str) -> str:
    flat = " ".join(str(text or "").split())
    return flat if len(flat) <= CELL_CHARS else flat[: CELL_CHARS - 1] + "…"


def _flags(row: Mapping) -> str:
    words = [word for word, on in (("truncated", row.get("truncated")), ("error", row.get("reward_error"))) if on]
    if row.get("correct") is not None:
        words.append("correct" if row["correct"] else "wrong")
    return ", ".join(words)


def table_rows(rows: Iterable[Mapping]) -> list[list]:
    """One page of the engine's rows as the table's cells, in COLUMNS (the place in the group counted from 0, as the
    cards, the CSV and the command line count it: insight/group_cards.PLACE_TITLE)."""
    cells = []
    for row in rows:
        index = row.get("index")
        cells.append(
            [
                row.get("step"),
                row.get("group"),
                index,
                _cut(row.get("prompt", "")),
                _cut(row.get("completion", "")),
                format_number(row.get("reward")),
                "" if row.get("advantage") is None else format_signed(row["advantage"]),
                row.get("length"),
                _flags(row),
            ]
        )
    return cells


def page_note(total: int, offset: int, shown: int, filtered: bool = True) -> str:
    """Which rows the page shows of how many match (`filtered`: the query narrows the run's rows)."""
    if not total:
        return "No completion matches." if filtered else "This run has no completions yet."
    return f"Rows {offset + 1}–{offset + shown} of {total:,} that match. Click a row to open its group."


def page_offset(offset: int, total: int, move: int, rows: int | None = None) -> int:
    """The first row of the page `move` pages away (-1 back, +1 on, 0 the same), kept inside the results."""
    rows = rows or PAGE_ROWS
    last = max(0, (max(total, 1) - 1) // rows * rows)
    return min(max(0, offset + move * rows), last)


# ---------------------------------------------------------------- one group


def split_by_mean(group: GroupView) -> tuple[list[CompletionView], list[CompletionView]]:
    """(the answers above the group mean, best first; those at or below it, or unscored, best first)."""
    ranked = sorted(group.completions, key=lambda item: (item.reward is None, -(item.reward or 0.0), item.index))
    if group.mean is None:
        return [], ranked
    above = [item for item in ranked if item.reward is not None and item.reward > group.mean]
    return above, [item for item in ranked if item not in above]


def _part(title: str, note: str, items: list[CompletionView], size: int, views: Mapping, group: int, weights) -> str:
    cards = "".join(render_card(item, size, views.get((group, item.index), ""), weights) for item in items)
    body = f'<div class="wb-cards">{cards}</div>' if items else '<div class="wb-note">none</div>'
    return f'<div class="wb-explore-part">{escape(title)} <small>{escape(note)}</small></div>{body}'


def group_html(
    group: GroupView | None,
    opened: int | None = None,
    token_views: Mapping | None = None,
    header: str = "",
    weights: Mapping | None = None,
) -> str:
    """One group: its prompt and statistics, then the answers above the group mean and those at or below it
    (`opened`: the place of the row that opened it, named in the title); token views as `render_group` takes them."""
    if group is None:
        return empty_html("Click a row of the table to open its group here.")
    size = max(group.expected_size, len(group.completions))
    above, below = split_by_mean(group)
    mean = format_number(group.mean)
    std = format_number(group.std) if group.std is not None else "—"
    title = f"Step {group.step} · group {group.group}" + (f" · row #{opened + 1}" if opened is not None else "")
    notes = "".join(f'<div class="wb-note">{escape(note)}</div>' for note in group.notes)
    views = token_views or {}
    return (
        f'{STYLE}<div class="wb-groups"><div class="wb-step-title">{escape(title)}</div>{header}'
        f'<section class="wb-group"><div class="wb-group-head"><span class="wb-group-label">Prompt</span>'
        f'<span class="wb-group-stats">group mean {mean} · std {std} · {len(group.completions)} of {size}'
        f" completions</span></div>"
        f'<div class="wb-prompt">{escape(group.prompt)}</div>{notes}'
        + _part("Above the group mean", "pushed up (positive advantage)", above, size, views, group.group, weights)
        + _part("At or below the mean", "pushed down or left alone", below, size, views, group.group, weights)
        + "</section></div>"
    )


# ---------------------------------------------------------------- one prompt's history


def history_html(groups: list[GroupView], prompt: str, weights: Mapping | None = None, cut: bool = False) -> str:
    """Every group of one prompt, step by step: the answers side by side, best first, with their rewards and
    advantages, and each step's mean, so a reader sees how training changed them (`cut`: more steps than shown)."""
    if not groups:
        return empty_html("Click a row, then “Prompt history”, to follow its prompt across the run's steps.")
    means = [group.mean for group in groups if group.mean is not None]
    trend = f"group mean {format_number(means[0])} → {format_number(means[-1])}" if len(means) > 1 else ""
    steps = []
    for group in groups:
        size = max(group.expected_size, len(group.completions))
        ranked = sorted(group.completions, key=lambda item: (item.reward is None, -(item.reward or 0.0)))
        cards = "".join(render_card(item, size, "", weights) for item in ranked)
        best = max((item.reward for item in group.completions if item.reward is not None), default=None)
        steps.append(
            f'<div class="wb-history-step"><div class="wb-history-head"><b>Step {group.step}</b>'
            f'<span class="wb-history-summary">group {group.group} · mean {format_number(group.mean)} · '
            f"best {format_number(best)} · {len(group.completions)} answers</span></div>"
            f'<div class="wb-history-row">{cards}</div></div>'
        )
    shown = f"{len(groups)} step{'s' if len(groups) != 1 else ''}" + (
        " (the newest shown; narrow the steps for earlier ones)" if cut else ""
    )
    return (
        f'{STYLE}<div class="wb-groups"><div class="wb-step-title">Prompt history · {escape(shown)}'
        f"{' · ' + escape(trend) if trend else ''}</div>"
        f'<div class="wb-prompt">{escape(prompt)}</div>{"".join(steps)}</div>'
    )


def history_places(rows: Iterable[Mapping], prompt: str) -> list[tuple[int, int]]:
    """The (step, group) of every row whose prompt is exactly `prompt`, by step (a search also finds the text
    inside other prompts and completions)."""
    return sorted({(row["step"], row["group"]) for row in rows if row.get("prompt") == prompt})


def empty_html(message: str) -> str:
    return f'{STYLE}<div class="wb-groups"><div class="wb-empty">{escape(message)}</div></div>'


# ---------------------------------------------------------------- the curves' click bridge

POINT_BOX_ID = "wb-train-point"
POINT_BUTTON_ID = "wb-train-point-go"
# Gradio's Plot has no click event: this page script hooks Plotly's own `plotly_click` on each of the Train tab's
# figures the first time the pointer comes over it (a figure drawn anew is hooked anew), puts the clicked step in
# a hidden box and clicks a hidden button, whose event opens the Explore tab at that step. Nothing runs until a
# pointer moves over a figure: no timer, no work for a page that only watches.
POINT_CLICK_JS = f"""
() => {{
  const send = (step) => {{
    const box = document.querySelector("#{POINT_BOX_ID} textarea, #{POINT_BOX_ID} input");
    const holder = document.getElementById("{POINT_BUTTON_ID}");
    const button = holder && (holder.tagName === "BUTTON" ? holder : holder.querySelector("button"));
    if (!box || !button) return;
    box.value = String(step);
    box.dispatchEvent(new Event("input", {{ bubbles: true }}));
    setTimeout(() => button.click(), 50);
  }};
  const hook = (plot) => {{
    if (plot.wbPointHooked || typeof plot.on !== "function") return;
    plot.wbPointHooked = true;
    plot.on("plotly_click", (data) => {{
      const point = data && data.points && data.points[0];
      if (point && typeof point.x === "number" && isFinite(point.x)) send(Math.round(point.x));
    }});
  }};
  document.addEventListener("pointerover", (event) => {{
    const plot = event.target && event.target.closest && event.target.closest("#wb-tab-train .js-plotly-plot");
    if (plot) hook(plot);
  }}, true);
}}
"""


def clicked_step(text: str | None) -> int | None:
    """The step the click bridge sent (a whole number), or None for anything else."""
    value = str(text or "").strip()
    # ASCII digits, a step's worth: `isdigit` alone says yes to `²` and to 5,000 nines, which `int` refuses
    return int(value) if value.isascii() and value.isdigit() and len(value) <= 12 else None
