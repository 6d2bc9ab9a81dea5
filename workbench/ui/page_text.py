"""Text written into the page's Markdown, shown as it is written.

A task's, reward's or recipe's description, a run id or a filter's error names things such as `<answer>` tags,
`exact_answer` or `a*b`: put into a gr.Markdown as they are, the page takes a tag for markup (and drops what
follows it) and `*...*` for emphasis. `markdown_text` escapes them outside `code` spans (inside backticks
Markdown already shows text as it is). HTML builders use `html.escape`; Gradio's `info=` text escapes itself.
"""

from __future__ import annotations

import re

# HTML's three, then every character Markdown may read as emphasis, a link or an escape
_HTML = {"&": "&amp;", "<": "&lt;", ">": "&gt;"}
_MARKDOWN = re.compile(r"([\\*_\[\]])")


def markdown_text(text: str) -> str:
    """`text` for a Markdown component, shown literally: markup characters escaped outside `code` spans."""
    parts = str(text).split("`")
    tail = ""
    if len(parts) % 2 == 0:  # an odd backtick opens no code span: it and what follows are plain text
        tail = "\\`" + _escape(parts.pop())
    return "`".join(part if index % 2 else _escape(part) for index, part in enumerate(parts)) + tail


def _escape(part: str) -> str:
    return _MARKDOWN.sub(r"\\\1", "".join(_HTML.get(ch, ch) for ch in part))
