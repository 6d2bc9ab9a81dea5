"""The Calculator tab's pure parts: calculator inputs in, what the UI shows out.

Values from the form (numbers, possibly empty) go in; HTML snippets, button
labels and a plotly figure come out, plus the framework comparison
(`frameworks_html`) and the pasted-error explainer (`explain_html`), which
never raise on bad input but show the problem naming the field. No gradio here, so tests/test_ui_logic.py
checks every piece directly and benchmarks/bench_ui_update.py times them.
Both the Calculator tab and the calculator inside the Setup tab use them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from html import escape

from workbench.calc import (
    InputError,
    Plan,
    compare_frameworks,
    explain,
    grid,
    plan,
)

# How many suggestion buttons the UI has; their labels and visibility change, their number does not.
SUGGESTION_SLOTS = 4
# Heatmap axes: at least 1..16 batches and 2..16 generations, widened to include the current choice.
HEATMAP_MIN_SPAN = 16
HEATMAP_MAX_SPAN = 64

# Optional inputs a number field shows as 0 when unset: gradio's number field
# displays an empty value as 0, so 0 is what "unset" looks like on the page.
UNSET_WHEN_ZERO = ("steps_per_generation", "generation_batch_size", "num_generations_eval", "dataset_size")


@dataclass
class PlanView:
    """A plan (or the input problem that stopped it) and the inputs it was made from."""

    inputs: dict
    plan: Plan | None = None
    input_error: InputError | None = None
    suggestions: list[dict] = field(default_factory=list)  # [{"label", "changes"}] for the buttons


def clean_value(value):
    """A form value as the calculator wants it: whole floats become ints, blanks become None."""
    if value is None or value == "":
        return None
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def make_plan_view(inputs: dict) -> PlanView:
    """Run the calculator on form values; a bad value becomes `input_error`, never an exception."""
    cleaned = {name: clean_value(value) for name, value in inputs.items()}
    for name in UNSET_WHEN_ZERO:
        if cleaned.get(name) == 0:
            cleaned[name] = None
    # Blank optional fields mean "unset"; blank required ones are reported by plan() itself.
    for name in ("max_steps",):
        if cleaned.get(name) is None and name in cleaned:
            cleaned[name] = -1
    try:
        result = plan(**cleaned)
    except InputError as exc:
        return PlanView(inputs=cleaned, input_error=exc)
    suggestions = [{"label": s.description, "changes": dict(s.changes)} for s in result.suggestions]
    return PlanView(inputs=cleaned, plan=result, suggestions=suggestions)


def badge_html(view: PlanView) -> str:
    """The valid / invalid / bad-input badge, with TRL's exact message when invalid."""
    if view.input_error is not None:
        err = view.input_error
        return (
            '<div class="wb-badge wb-badge-input" role="status">'
            f'<span class="wb-badge-title">Check the field {escape(err.field)}</span>'
            f"<code>{escape(err.rule)}</code></div>"
        )
    result = view.plan
    if result.valid:
        total = f", {result.total_steps} optimizer steps" if result.total_steps is not None else ""
        return (
            '<div class="wb-badge wb-badge-valid" role="status">'
            '<span class="wb-badge-title">Valid: TRL 1.16 accepts these settings</span>'
            f"{result.prompts_per_generation} prompt{'s' if result.prompts_per_generation != 1 else ''} x "
            f"G={result.inputs['num_generations']} completions per generation round{total}.</div>"
        )
    first, later = result.errors[0], result.errors[1:]
    more = ""
    if later:
        items = "".join(f"<li><code>{escape(e)}</code></li>" for e in later)
        more = f"<div>After fixing that, TRL would raise next:</div><ol>{items}</ol>"
    return (
        '<div class="wb-badge wb-badge-invalid" role="status">'
        '<span class="wb-badge-title">Invalid: GRPOConfig would raise</span>'
        f"<code>{escape(first)}</code>{more}</div>"
    )


def numbers_html(view: PlanView) -> str:
    """The plan's numbers as a two-column table (blank dashes where TRL cannot know them)."""
    if view.plan is None:
        return '<p class="wb-empty">Numbers appear once every field holds a valid value.</p>'
    rows = []
    for meaning, how, number in view.plan.numbers():
        rows.append(
            f'<tr><td class="wb-what">{escape(meaning)}<br><small>{escape(how)}</small></td>'
            f'<td class="wb-num">{number}</td></tr>'
        )
    return f'<table class="wb-numbers">{"".join(rows)}</table>'


def warnings_html(view: PlanView, extra: list[str] = (), notes: list[str] = ()) -> str:
    """A valid plan's warnings (plus `extra` ones: what may go wrong) in the warning colour, then its notes (plus
    `notes`: information, nothing wrong) in grey; a short line when there is neither."""
    if view.plan is None or not view.plan.valid:
        return ""
    warnings, infos = [*view.plan.warnings, *extra], [*view.plan.notes, *notes]
    if not warnings and not infos:
        return '<p class="wb-note">No warnings for these settings.</p>'
    html = ""
    if warnings:
        html += f'<div class="wb-warnings"><ul>{"".join(f"<li>{escape(w)}</li>" for w in warnings)}</ul></div>'
    if infos:
        html += f'<div class="wb-infos"><ul>{"".join(f"<li>{escape(n)}</li>" for n in infos)}</ul></div>'
    return html


def suggestion_slots(view: PlanView, slots: int = SUGGESTION_SLOTS, allowed_fields=None) -> list[dict | None]:
    """Exactly `slots` entries for the suggestion buttons: a suggestion or None (button hidden).

    `allowed_fields` keeps only suggestions whose every change the caller can apply.
    """
    usable = [s for s in view.suggestions if allowed_fields is None or set(s["changes"]) <= set(allowed_fields)]
    usable = usable[:slots]
    return usable + [None] * (slots - len(usable))


def suggestion_label(suggestion: dict) -> str:
    return f"Apply: {suggestion['label']}"


def apply_changes(values: dict, changes: dict) -> dict:
    """The form values after applying one suggestion's changes (unknown fields are ignored).

    Unsetting an optional field writes 0, which is how the page shows "unset".
    """

    def new_value(name, value):
        if name not in changes:
            return value
        return 0 if changes[name] is None and name in UNSET_WHEN_ZERO else changes[name]

    return {name: new_value(name, value) for name, value in values.items()}


def _axis(current, low: int) -> list[int]:
    top = HEATMAP_MIN_SPAN
    if isinstance(current, int) and current >= top:
        top = min(current + 2, HEATMAP_MAX_SPAN)
    start = low if not isinstance(current, int) else max(1, min(low, current))
    return list(range(start, top + 1))


def heatmap_figure(view: PlanView) -> dict:
    """Valid (per_device_train_batch_size, num_generations) pairs for the other inputs, current pair marked.

    Returns a plotly figure as a plain dict ({"data": [...], "layout": {...}}):
    building a `go.Figure` validates and deep-copies every cell, which on a
    wide grid costs more than the whole update may take. `go.Figure(spec)` turns it
    into a figure where one is wanted.
    """
    layout = dict(
        height=330,
        margin=dict(l=60, r=16, t=36, b=48),
        plot_bgcolor="#ffffff",
        paper_bgcolor="#ffffff",
        title=dict(text="Valid (batch, G) pairs for the other settings", font=dict(size=13), x=0.01),
        xaxis=dict(title=dict(text="per_device_train_batch_size"), showgrid=False, zeroline=False),
        yaxis=dict(title=dict(text="num_generations (G)"), showgrid=False, zeroline=False),
        showlegend=False,
    )
    if view.plan is None:
        layout["annotations"] = [
            dict(
                text="Fix the highlighted field to see the map",
                showarrow=False,
                xref="paper",
                yref="paper",
                x=0.5,
                y=0.5,
                font=dict(color="#94a3b8"),
            )
        ]
        return {"data": [], "layout": layout}
    v = view.plan.inputs
    batches = _axis(v["per_device_train_batch_size"], 1)
    gens = _axis(v["num_generations"], 2)
    cells = grid(
        num_processes=v["num_processes"],
        gradient_accumulation_steps=v["gradient_accumulation_steps"],
        steps_per_generation=v["steps_per_generation"],
        generation_batch_size=v["generation_batch_size"],
        do_eval=v["do_eval"],
        per_device_eval_batch_size=v["per_device_eval_batch_size"],
        num_generations_eval=v["num_generations_eval"],
        per_device_train_batch_sizes=batches,
        num_generations_values=gens,
    )
    z = [[1 if ok else 0 for ok in row] for row in cells["valid"]]
    hover = [
        [f"batch {b}, G {g}: " + (err.replace("<", "&lt;") or "valid") for b, err in zip(batches, errs)]
        for g, errs in zip(gens, cells["errors"])
    ]
    cells_trace = dict(
        type="heatmap",
        x=batches,
        y=gens,
        z=z,
        zmin=0,
        zmax=1,
        text=hover,
        hoverinfo="text",
        showscale=False,
        xgap=2,
        ygap=2,
        colorscale=[[0.0, "#eef0f5"], [0.5, "#eef0f5"], [0.5, "#6ee7b7"], [1.0, "#6ee7b7"]],
    )
    marker_trace = dict(
        type="scatter",
        x=[v["per_device_train_batch_size"]],
        y=[v["num_generations"]],
        mode="markers",
        marker=dict(
            symbol="circle-open", size=16, line=dict(width=3), color="#4f46e5" if view.plan.valid else "#dc2626"
        ),
        hoverinfo="text",
        text=["your choice: " + ("valid" if view.plan.valid else "invalid")],
    )
    layout["xaxis"].update(range=[batches[0] - 0.5, batches[-1] + 0.5], dtick=1 if len(batches) <= 24 else 4)
    layout["yaxis"].update(range=[gens[0] - 0.5, gens[-1] + 0.5], dtick=1 if len(gens) <= 24 else 4)
    return {"data": [cells_trace, marker_trace], "layout": layout}


# ---------------------------------------------------------------- frameworks and explainer


def _cell(value) -> str:
    if value is None:
        return "–"
    if isinstance(value, float):
        return f"{value:,.2f}".rstrip("0").rstrip(".")
    return escape(str(value))


def frameworks_html(inputs: dict, train_data_ratio=1.0) -> str:
    """A table with one row per framework: verdict, processes, batches and how steps are counted."""
    try:
        readings = compare_frameworks(
            train_data_ratio=train_data_ratio if train_data_ratio is not None else 1.0, **inputs
        )
    except InputError as exc:
        return f'<p class="wb-empty">No comparison until {escape(exc.field)} is fixed: {escape(exc.rule)}</p>'
    head = (
        "<tr><th>framework</th><th>verdict</th><th>train / vLLM GPUs</th><th>generation batch</th>"
        "<th>prompts per step</th><th>total steps</th><th>how steps are counted</th></tr>"
    )
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
        f"<p><b>Recognised</b>: the {escape(result.source)} error ({escape(result.kind.replace('_', ' '))}).</p>",
        f"<p><b>Numbers in it</b>: {values or 'none'}</p>" if values or result.values == {} else "",
        f"<p><b>Why</b>: {escape(result.why)}</p>",
        f'<p class="wb-note">{escape(result.note)}</p>' if result.note else "",
    ]
    if result.fixes:
        fixes = "".join(
            f"<li>{escape(fix.description)}: {fix.plan.prompts_per_generation} "
            f"prompt{'' if fix.plan.prompts_per_generation == 1 else 's'} x "
            f"G={fix.plan.inputs['num_generations']} per round</li>"
            for fix in result.fixes[:6]
        )
        parts.append(f"<p><b>Fixes</b> (smallest change first):</p><ol>{fixes}</ol>")
    inputs = dict(result.plan.inputs) if result.plan is not None else None
    if inputs is not None:
        parts.append(
            '<p class="wb-note">"Load into the calculator" sets the fields to these numbers; '
            "the suggestion buttons then apply a fix in one click.</p>"
        )
    return f'<div class="wb-explain">{"".join(parts)}</div>', inputs
