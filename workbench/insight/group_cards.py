"""HTML of completion groups: each prompt's G completions as cards.

`render_groups_html(groups)` takes the `GroupView`s of `workbench.insight.groups` and
returns one self-contained HTML fragment (its own `<style>`, every class
prefixed `wb-`), ready for a `gr.HTML` component, a notebook's
`IPython.display.HTML` or the run report. Each prompt is a section; its completions sit side by
side in a wrapping CSS grid, each card showing the text, every reward
function's score, the total, the advantage (green above zero, red below) and
the line of arithmetic that produced it, with badges for truncated and
zero-advantage completions.

All model text is HTML-escaped: a completion is data, never markup.
Plain strings in, a string out: no gradio, no torch.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from html import escape

from workbench.insight.groups import GroupView, format_number, format_signed

# Cards are at least this wide, so a 1280 px page shows about five per row and
# a narrow column still shows one whole card.
CARD_MIN_WIDTH_PX = 210
# Long completions scroll inside their card instead of stretching the row.
CARD_TEXT_MAX_HEIGHT_PX = 220

STYLE = f"""
<style>
.wb-groups {{ font-family: Inter, system-ui, -apple-system, 'Segoe UI', sans-serif; color: #1f2937;
  font-size: 13px; line-height: 1.4; max-width: 100%; box-sizing: border-box; }}
.wb-groups *, .wb-groups *::before, .wb-groups *::after {{ box-sizing: border-box; }}
.wb-step-title {{ font-size: 14px; font-weight: 600; margin: 0 0 8px; }}
.wb-group {{ border: 1px solid #e5e7eb; border-radius: 8px; padding: 10px 12px; margin: 0 0 12px;
  background: #fafafa; }}
.wb-group-head {{ display: flex; flex-wrap: wrap; gap: 4px 16px; align-items: baseline; margin-bottom: 6px; }}
.wb-group-label {{ font-weight: 600; }}
.wb-group-stats {{ color: #4b5563; font-variant-numeric: tabular-nums; }}
.wb-prompt {{ white-space: pre-wrap; overflow-wrap: anywhere; background: #fff; border-left: 3px solid #93c5fd;
  padding: 4px 8px; margin: 0 0 8px; max-height: 120px; overflow-y: auto; }}
.wb-note {{ color: #92400e; background: #fffbeb; border: 1px solid #fde68a; border-radius: 6px;
  padding: 3px 8px; margin: 0 0 8px; }}
.wb-cards {{ display: grid; grid-template-columns: repeat(auto-fill, minmax(min({CARD_MIN_WIDTH_PX}px, 100%), 1fr));
  gap: 8px; }}
.wb-card {{ background: #fff; border: 1px solid #e5e7eb; border-radius: 8px; padding: 8px; min-width: 0;
  display: flex; flex-direction: column; gap: 6px; }}
.wb-card.wb-positive {{ border-top: 3px solid #16a34a; }}
.wb-card.wb-negative {{ border-top: 3px solid #dc2626; }}
.wb-card.wb-zero {{ border-top: 3px solid #9ca3af; }}
.wb-card-head {{ display: flex; flex-wrap: wrap; gap: 4px; align-items: center; color: #6b7280; font-size: 12px; }}
.wb-text {{ white-space: pre-wrap; overflow-wrap: anywhere; word-break: break-word; margin: 0;
  max-height: {CARD_TEXT_MAX_HEIGHT_PX}px; overflow-y: auto;
  font-family: inherit; font-size: 13px; }}
.wb-empty-text {{ color: #9ca3af; font-style: italic; }}
.wb-scores {{ width: 100%; margin-top: auto; border-collapse: collapse; font-size: 12px; font-variant-numeric: tabular-nums; }}
.wb-scores td {{ padding: 1px 0; border-top: 1px solid #f3f4f6; }}
.wb-scores td:first-child {{ overflow-wrap: anywhere; color: #4b5563; }}
.wb-scores td:last-child {{ text-align: right; padding-left: 8px; white-space: nowrap; }}
.wb-scores tr.wb-total td {{ font-weight: 600; color: #1f2937; }}
.wb-weight {{ color: #6b7280; font-size: 11px; }}
.wb-advantage {{ font-weight: 700; font-variant-numeric: tabular-nums; }}
.wb-advantage.wb-positive {{ color: #15803d; }}
.wb-advantage.wb-negative {{ color: #b91c1c; }}
.wb-advantage.wb-zero {{ color: #6b7280; }}
.wb-math {{ font-family: ui-monospace, SFMono-Regular, Menlo, monospace; font-size: 11.5px; color: #374151;
  background: #f3f4f6; border-radius: 4px; padding: 2px 6px; overflow-wrap: anywhere; }}
.wb-badge {{ display: inline-block; border-radius: 999px; padding: 0 7px; font-size: 11px; font-weight: 600; }}
.wb-badge-truncated {{ background: #fef3c7; color: #92400e; }}
.wb-badge-zero {{ background: #e5e7eb; color: #374151; }}
.wb-badge-unscored {{ background: #fee2e2; color: #991b1b; }}
.wb-empty {{ color: #6b7280; padding: 12px; border: 1px dashed #d1d5db; border-radius: 8px; }}
</style>
"""


def _sign_class(value: float, is_zero: bool) -> str:
    if is_zero:
        return "wb-zero"
    return "wb-positive" if value > 0 else "wb-negative"


# One numbering of a group's completions everywhere (cards, the token summary, Explore, its CSV, the command
# line): counted from 0, as the run folder's own `group` and `index` fields are, so a number read on the page is
# the one a notebook or pandas finds in the files.
PLACE_TITLE = "place in the group, counted from 0 as the Explore table, its CSV and the command line count"


def render_card(item, group_size: int, tokens_html: str = "", weights: Mapping | None = None) -> str:
    """One completion: text, scores (each with its weight in the total, when `weights` has it), total,
    advantage, arithmetic, badges (and its token view, when recorded)."""
    weights = weights or {}
    sign = _sign_class(item.advantage, item.zero_advantage)
    badges = []
    if item.truncated:
        badges.append('<span class="wb-badge wb-badge-truncated" title="hit max_completion_length">truncated</span>')
    if item.zero_advantage:
        badges.append(
            '<span class="wb-badge wb-badge-zero" title="equal to the group mean: '
            'no push either way">zero advantage</span>'
        )
    length = f" · {item.length} tokens" if item.length is not None else ""
    text = (
        f'<pre class="wb-text">{escape(item.completion)}</pre>'
        if item.completion.strip()
        else '<div class="wb-text wb-empty-text">(empty completion)</div>'
    )
    for name, error in item.reward_errors.items():
        badges.append(
            f'<span class="wb-badge wb-badge-unscored" title="{escape(name)}: {escape(error)}">'
            f"{escape(name)} could not score</span>"
        )
    rows = "".join(
        f"<tr><td>{escape(name)}{' (failed)' if name in item.reward_errors else ''}"
        + (
            f' <span class="wb-weight" title="its weight in the total">x{weights[name]:g}</span>'
            if name in weights
            else ""
        )
        + f"</td><td>{format_number(score)}</td></tr>"
        for name, score in item.rewards.items()
    )
    rows += f'<tr class="wb-total"><td>total</td><td>{format_number(item.reward)}</td></tr>'
    return (
        f'<div class="wb-card {sign}">'
        f'<div class="wb-card-head"><span title="{PLACE_TITLE}">#{item.index} of {group_size}{length}</span>'
        f"{''.join(badges)}</div>"
        f"{text}"
        f'<table class="wb-scores">{rows}</table>'
        f'<div>advantage <span class="wb-advantage {sign}">{format_signed(item.advantage)}</span></div>'
        f'<div class="wb-math">{escape(item.arithmetic)}</div>'
        f"{tokens_html}</div>"
    )


def render_group(
    group: GroupView, position: int, count: int, token_views: Mapping | None = None, weights: Mapping | None = None
) -> str:
    """One prompt: its header with the group's statistics, notes, then the cards.

    `token_views`: (group, position in the group) -> the HTML of that completion's token view."""
    size = max(group.expected_size, len(group.completions))
    std = format_number(group.std) if group.std is not None else "—"
    stats = f"group mean {format_number(group.mean)} · std {std} · {len(group.completions)} of {size} completions"
    unscored = [
        f"{name} could not score {count} of {len(group.completions)} completions"
        for name, count in group.unscored.items()
    ]
    if unscored:  # reward_errors=record: those completions got reward_failure_score, their errors are on the cards
        unscored[-1] += " (they got reward_failure_score; hover a red badge for the error)"
    notes = "".join(f'<div class="wb-note">{escape(note)}</div>' for note in [*group.notes, *unscored])
    views = token_views or {}
    cards = "".join(
        render_card(item, size, views.get((group.group, item.index), ""), weights) for item in group.completions
    )
    return (
        f'<section class="wb-group">'
        f'<div class="wb-group-head"><span class="wb-group-label">Prompt {position} of {count}</span>'
        f'<span class="wb-group-stats">{stats}</span></div>'
        f'<div class="wb-prompt">{escape(group.prompt)}</div>'
        f"{notes}"
        f'<div class="wb-cards">{cards}</div>'
        f"</section>"
    )


def render_empty_html(message: str = "No completions yet: the first group appears after the first step.") -> str:
    """The view's placeholder, in the same style as the cards."""
    return f'{STYLE}<div class="wb-groups"><div class="wb-empty">{escape(message)}</div></div>'


def render_groups_html(
    groups: Iterable[GroupView],
    title: str | None = None,
    token_views: Mapping | None = None,
    header: str = "",
    weights: Mapping | None = None,
) -> str:
    """All groups of a step as one HTML fragment (style included); `token_views` as for `render_group`, `header`
    HTML shown above the groups (the step's token summary), `weights` each reward's weight in the total."""
    groups = list(groups)
    if not groups:
        return render_empty_html()
    heading = title if title is not None else f"Step {groups[0].step}"
    body = "".join(render_group(group, i, len(groups), token_views, weights) for i, group in enumerate(groups, start=1))
    return f'{STYLE}<div class="wb-groups"><div class="wb-step-title">{escape(heading)}</div>{header}{body}</div>'
