"""The Setup tab's data preview, pure: the chosen data's first rows, which reward reads which column, and the text
the model receives for the first row, as HTML; the dropdown choices the data fills.

It renders a `spec.columns.DataPreview`, which ui/setup_form.py reads from the data the form names. No gradio and
no I/O here: tests/test_setup_view.py checks it directly.
"""

from __future__ import annotations

from html import escape

from workbench.spec.chat import prompt_text, transcript_text
from workbench.spec.columns import DataPreview

CELL_CHARS = 90  # a preview cell longer than this is cut, with "…"
MODEL_TEXT_CHARS = 20_000  # the model's text shown: its start, then how many characters are left out
SOLUTION_CHARS = 2_000
NAME_CHARS = 200  # a column or reward name


def clipped(text: str, limit: int) -> str:
    """`text` escaped, or its first `limit` characters and "... N more characters" (a 40 MiB prompt stays small)."""
    if len(text) <= limit:
        return escape(text)
    return escape(text[:limit]) + f"<span class='wb-note'> ... {len(text) - limit:,} more characters</span>"


def _cell(value) -> str:
    if isinstance(value, list) and all(isinstance(v, (str, int, float)) for v in value):
        text = ", ".join(map(str, value))  # e.g. keywords
    else:  # a chat prompt of one message reads as its text; longer ones as `role: content` lines
        text = prompt_text(value) if isinstance(value, list) and len(value) == 1 else transcript_text(value)
    text = " ".join(text[: CELL_CHARS * 4].split())  # cut before splitting: a cell may hold megabytes
    return escape(text if len(text) <= CELL_CHARS else text[: CELL_CHARS - 1] + "…")


def data_preview_html(data: DataPreview) -> str:
    """A small table of the first rows (text escaped and cut), which reward reads which column, and a warning
    for each column a chosen reward needs that the data lacks."""
    lines = []
    for need in data.rewards:
        if not need.needs and not need.optional:
            lines.append(f"<li><code>{escape(need.reward)}</code> reads no column (only the completion)</li>")
            continue
        parts = [
            f"needs <code>{escape(c)}</code> "
            + (
                "<span class='wb-ok'>✓</span>"
                if c in data.columns or data.error
                else "<span class='wb-bad'>missing</span>"
            )
            for c in need.needs
        ]
        parts += [
            f"reads <code>{escape(c)}</code> when present"
            + ("" if c in data.columns or data.error else " (absent here: it uses its default)")
            for c in need.optional
        ]
        lines.append(f"<li><code>{escape(need.reward)}</code> {'; '.join(parts)}</li>")
    needs = f"<ul class='wb-reward-columns'>{''.join(lines)}</ul>" if lines else ""
    if data.error:
        error = data.error if len(data.error) <= 600 else data.error[:599] + "…"
        return f'<div class="wb-data-preview"><p class="wb-warn-line">{escape(error)}</p>{needs}</div>'
    warnings = "".join(
        f'<p class="wb-warn-line"><b>{escape(reward)}</b> needs the column <code>{escape(column)}</code> and '
        f"{escape(data.source)} has none: add it (one value per prompt), or untick {escape(reward)}.</p>"
        for reward, column in data.missing
    )
    read = {c for need in data.rewards for c in need.needs + need.optional}
    head = "".join(
        f"<th>{clipped(c, NAME_CHARS)}"
        + (" <span class='wb-ok'>(read by a reward)</span>" if c in read else "")
        + "</th>"
        for c in data.columns
    )
    body = "".join(
        "<tr>" + "".join(f"<td>{_cell(row.get(c))}</td>" for c in data.columns) + "</tr>" for row in data.rows
    )
    intro = (
        f"<p class='wb-note'>First {len(data.rows)} rows of {escape(data.source)}. Every column reaches the "
        "reward functions, one value per completion; the prompt column as TRL's <code>prompt</code>, the "
        "solution column also as <code>solution</code>.</p>"
    )
    return (
        f'<div class="wb-data-preview">{intro}{warnings}<table class="wb-table"><tr>{head}</tr>{body}</table>'
        f"{needs}{model_text_html(data)}</div>"
    )


def model_text_html(data: DataPreview) -> str:
    """The first row as the model receives it (the exact text after the chat template) and its `solution`."""
    solution = ""
    if data.mapped is not None and "solution" in data.mapped:
        solution = (
            f"<p class='wb-note'>Its <code>solution</code>, as rewards get it: "
            f"<code id='wb-first-solution'>{clipped(str(data.mapped['solution']), SOLUTION_CHARS)}</code></p>"
        )
    text = (
        f"<pre class='wb-model-text' id='wb-model-text'>{clipped(data.model_text, MODEL_TEXT_CHARS)}</pre>"
        if data.model_text
        else ""
    )
    return (
        f"<div class='wb-model-input'><p><b>The exact text the model receives for the first row</b></p>"
        f"{text}<p class='wb-note'>{clipped(data.model_note, SOLUTION_CHARS)}</p>{solution}</div>"
    )


def data_choices(data: DataPreview) -> tuple[list[str], list[str], list[tuple[str, str]]]:
    """The dropdowns the data fills: its configs, the columns for the prompt, and for the solution (or none)."""
    return list(data.configs), list(data.columns), [("(none)", ""), *((c, c) for c in data.columns)]
