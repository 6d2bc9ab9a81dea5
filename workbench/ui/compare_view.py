"""The Compare tab's pure parts: a probe job's progress line and its side-by-side answers table.

No gradio and no file read here: workbench.ui.compare_tab reads each side's
answers file, lays the tab out and wires its events.
"""

from __future__ import annotations

import html
import re

from workbench.modeltools.probes import ProbeJob

CHECKPOINT_LABEL = re.compile(r"step (\d+) \(checkpoint-\1\)")


def gone_rule(label, run_id: str, save_total_limit) -> str:
    """Why a checkpoint picked is not one of the run's: save_total_limit removed it (a label the list offered
    once), or it never was one."""
    if isinstance(label, str) and CHECKPOINT_LABEL.fullmatch(label):
        n = save_total_limit
        keeps = f"save_total_limit={n} keeps the newest {n} and removed it" if n else "it was removed"
        return f"{label.split(' (')[1][:-1]} is no longer in run {run_id}'s folder ({keeps})"
    if isinstance(label, str) and label.startswith(("adapter", "final adapter")):
        return f"run {run_id}'s adapter is no longer {label[:80]!r}: the run went on and saved it again"
    return f"{repr(label)[:80]} is not a checkpoint of run {run_id}"


def progress_text(job: ProbeJob | None, read: list[dict]) -> str:
    """One line: which side is answering and how far it got, or how the job ended.

    `read`: each side's sampling progress (`sampling.read_sampling` of its answers file), in `job.sides` order.
    """
    if job is None:
        return ""
    parts = []
    for index, (side, progress) in enumerate(zip(job.sides, read)):
        count = len(progress["answers"])
        total = progress["total"] or len(job.prompts)
        if progress["done"] and not progress["error"]:
            parts.append(f"{side.title}: done")
        elif index == job.running:
            what = "loading the model" if progress["total"] is None else f"{count} / {total} answered"
            parts.append(f"{side.title}: {what}")
        else:
            parts.append(f"{side.title}: {'cancelled' if job.cancelled else 'waiting'}")
    line = " · ".join(parts)
    error = job.error
    if error:
        return f"Sampling failed. {error}"
    if job.cancelled:
        return f"Cancelled. {line}"
    return line


COMPARE_CSS = """
table.wb-compare { width: 100%; border-collapse: collapse; table-layout: fixed; font-size: 0.9rem; }
table.wb-compare th { text-align: left; padding: 6px 8px; background: #eef2ff; color: #312e81; border-bottom: 1px solid #c7d2fe; }
table.wb-compare td { padding: 8px; border-bottom: 1px solid #e2e8f0; vertical-align: top; white-space: pre-wrap;
  overflow-wrap: anywhere; }
table.wb-compare td.wb-compare-prompt { color: #334155; font-weight: 600; }
table.wb-compare td .wb-pending { color: #94a3b8; font-style: italic; }
table.wb-compare td .wb-seconds { display: block; color: #94a3b8; font-size: 0.75rem; margin-top: 4px; }
"""


def compare_html(job: ProbeJob | None, read: list[dict] | None = None) -> str:
    """A table: one row per prompt, one column per side, answers filled in as they come (`read` as in
    `progress_text`)."""
    if job is None:
        return (
            '<p class="wb-empty">Pick a run and a checkpoint, check the probe prompts, and press '
            "<b>Answer side by side</b>.</p>"
        )
    answers = [{a["index"]: a for a in progress["answers"]} for progress in read]
    prompt_width = "28%" if len(job.sides) > 1 else "40%"
    head = "".join(f"<th>{html.escape(side.title)}</th>" for side in job.sides)
    rows = []
    for index, prompt in enumerate(job.prompts):
        cells = [f'<td class="wb-compare-prompt">{html.escape(prompt)}</td>']
        for by_index in answers:
            answer = by_index.get(index)
            if answer is None:
                cells.append('<td><span class="wb-pending">…</span></td>')
            else:
                text = html.escape(answer["answer"]) or '<span class="wb-pending">(no visible text)</span>'
                cells.append(f'<td>{text}<span class="wb-seconds">{answer["seconds"]:.1f} s</span></td>')
        rows.append(f"<tr>{''.join(cells)}</tr>")
    return (
        f'<table class="wb-compare"><colgroup><col style="width:{prompt_width}"></colgroup>'
        f"<thead><tr><th>prompt</th>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table>"
    )


NOTE_CSS = """
.wb-probe-progress { font-size: 0.9rem; color: #334155; padding: 4px 2px; }
.wb-probe-progress.wb-probe-error { color: #7f1d1d; background: #fef2f2; border: 1px solid #fca5a5; border-radius: 8px;
  padding: 8px 12px; white-space: pre-wrap; overflow-wrap: anywhere; }
"""


def progress_html(text: str) -> str:
    if not text:
        return ""
    failed = text.startswith(("Sampling failed", "Probe prompts", "Run:", "Not started"))
    kind = " wb-probe-error" if failed else ""
    return f'<div class="wb-probe-progress{kind}">{html.escape(text)}</div>'
