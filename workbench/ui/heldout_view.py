"""The Train tab's held-out panel: one line on the latest evaluation against step 0's, and the held-out prompts whose
answer changed verdict, both answers side by side. Pure: the tab reads the run's eval.jsonl and passes its records."""

from __future__ import annotations

import html

from workbench.insight.eval_results import at_k_text, group_texts

CHANGED_CSS = """
.wb-changed { font-size: 0.88rem; }
.wb-changed table { width: 100%; border-collapse: collapse; table-layout: fixed; }
.wb-changed th, .wb-changed td { text-align: left; vertical-align: top; padding: 6px 8px; border-bottom: 1px solid #e5e7eb; }
.wb-changed td pre { white-space: pre-wrap; word-break: break-word; margin: 0; font-size: 0.82rem; }
.wb-changed .wb-right { color: #047857; font-weight: 600; }
.wb-changed .wb-wrong { color: #b91c1c; font-weight: 600; }
.wb-changed .wb-changed-note { color: #64748b; }
"""


def held_out_summary(evals: list[dict]) -> str:
    """One line on the latest evaluation against step 0's: accuracy, pass@k, n, what it cost, and with k >= 2
    samples mean@k, maj@k and best@k with their spreads."""
    if not evals:
        return ""
    first, last = evals[0], evals[-1]

    def share(value) -> str:
        return "-" if value is None else f"{value:.0%}"

    moved = f"{share(first.get('accuracy'))} at step {first['step']} → " if len(evals) > 1 else ""
    pass_k = f", pass@{last.get('k')} {share(last.get('pass_at_k'))}" if last.get("k") else ""
    at_k = f"; {at_k_text(last)} (± bootstrap std over sample subsets)" if at_k_text(last) else ""
    return (
        f"Held-out accuracy {moved}{share(last.get('accuracy'))} at step {last['step']}{pass_k} "
        f"({last.get('n')} prompt{'' if last.get('n') == 1 else 's'}; the last evaluation took {last.get('eval_seconds', 0):.1f} s){at_k}"
        + (f". {last['maj_at_k_note']}" if last.get("maj_at_k_note") else "")
    )


def changed_answers_html(evals: list[dict], changed: list[dict]) -> str:
    """The held-out prompts whose greedy answer went wrong → right or right → wrong since step 0, both answers side
    by side (`changed`: `insight.eval_results.changed_answers`); empty when the run has no evaluation."""
    if not evals:
        return ""
    summary = f'<p class="wb-changed-note">{html.escape(held_out_summary(evals))}</p>'
    sources = group_texts(evals[-1])
    if sources:
        summary += f'<p class="wb-changed-note">Per data source: {html.escape("; ".join(sources))}</p>'
    if not changed:
        note = (
            "Only one evaluation so far."
            if len(evals) < 2
            else f"No held-out answer changed verdict between step {evals[0]['step']} and step {evals[-1]['step']}."
        )
        return f'<div class="wb-changed">{summary}<p class="wb-changed-note">{note}</p></div>'
    rows = []
    for item in changed:
        kind = "wb-right" if item["change"].endswith("right") else "wb-wrong"
        rows.append(
            f'<tr><td class="{kind}">{html.escape(item["change"])}</td>'
            f"<td><pre>{html.escape(str(item['prompt']))}</pre></td>"
            f"<td><pre>{html.escape(str(item['before']))}</pre></td>"
            f"<td><pre>{html.escape(str(item['after']))}</pre></td></tr>"
        )
    head = (
        f'<tr><th style="width:12%">change</th><th>prompt</th><th>step {changed[0]["first_step"]}</th>'
        f"<th>step {changed[0]['last_step']}</th></tr>"
    )
    return f'<div class="wb-changed">{summary}<table>{head}{"".join(rows)}</table></div>'
