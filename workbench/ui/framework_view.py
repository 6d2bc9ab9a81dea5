"""Pure HTML for the Calculator tab's framework comparison and error explainer.

`frameworks_html` reads the same inputs as TRL 1.16, Open-R1 and ms-swift
(workbench.frameworks); `explain_html` shows what workbench.explain read from
a pasted error message. Neither raises on bad input: the problem is shown in
the returned HTML, naming the field.
"""

from __future__ import annotations

from html import escape

from workbench.calculator import InputError
from workbench.explain import explain
from workbench.frameworks import compare_frameworks


def _cell(value) -> str:
    if value is None:
        return "–"
    if isinstance(value, float):
        return f"{value:,.2f}".rstrip("0").rstrip(".")
    return escape(str(value))


def frameworks_html(inputs: dict, train_data_ratio=1.0) -> str:
    """A table with one row per framework: verdict, processes, batches and how steps are counted."""
    try:
        readings = compare_frameworks(train_data_ratio=train_data_ratio if train_data_ratio is not None else 1.0,
                                      **inputs)
    except InputError as exc:
        return f'<p class="wb-empty">No comparison until {escape(exc.field)} is fixed: {escape(exc.rule)}</p>'
    head = ("<tr><th>framework</th><th>verdict</th><th>train / vLLM GPUs</th><th>generation batch</th>"
            "<th>prompts per step</th><th>total steps</th><th>how steps are counted</th></tr>")
    rows = []
    for r in readings:
        verdict_class = "wb-ok" if r.valid else "wb-bad"
        verdict = "valid" if r.valid else escape(r.message)
        notes = "".join(f"<br><small>{escape(note)}</small>" for note in r.notes)
        rows.append(
            f"<tr><td><b>{escape(r.title)}</b>{notes}</td><td class='{verdict_class}'>{verdict}</td>"
            f"<td class='wb-num'>{r.training_processes} / {r.vllm_gpus}</td>"
            f"<td class='wb-num'>{_cell(r.generation_batch_size)}</td>"
            f"<td class='wb-num'>{_cell(r.prompts_per_step)}</td><td class='wb-num'>{_cell(r.total_steps)}</td>"
            f"<td><small>{escape(r.steps_formula)}</small></td></tr>"
        )
    return f'<table class="wb-table">{head}{"".join(rows)}</table>'


def explain_html(text: str) -> tuple[str, dict | None]:
    """What a pasted error means, and the calculator inputs that reproduce it (None if there are none)."""
    if not text or not text.strip():
        return '<p class="wb-empty">Paste an error message above and press Explain.</p>', None
    result = explain(text)
    if not result.recognised:
        return f'<div class="wb-explain"><p>{escape(result.why)}</p></div>', None
    values = ", ".join(f"<code>{escape(k)} = {escape(str(v))}</code>" for k, v in result.values.items())
    parts = [
        f"<p><b>Recognised</b>: a {escape(result.source)} error ({escape(result.kind.replace('_', ' '))}).</p>",
        f"<p><b>Numbers in it</b>: {values or 'none'}</p>" if values or result.values == {} else "",
        f"<p><b>Why</b>: {escape(result.why)}</p>",
    ]
    if result.fixes:
        fixes = "".join(
            f"<li>{escape(fix.description)}: {fix.plan.prompts_per_generation} prompts x "
            f"G={fix.plan.inputs['num_generations']} per round</li>" for fix in result.fixes[:6]
        )
        parts.append(f"<p><b>Fixes</b> (smallest change first):</p><ol>{fixes}</ol>")
    inputs = dict(result.plan.inputs) if result.plan is not None else None
    if inputs is not None:
        parts.append('<p class="wb-note">"Load into the calculator" sets the fields to these numbers; '
                     "the suggestion buttons then apply a fix in one click.</p>")
    return f'<div class="wb-explain">{"".join(parts)}</div>', inputs
