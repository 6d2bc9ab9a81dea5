"""Small component builders shared by the tabs.

`PlanPanel` is the calculator's output side (badge, suggestion buttons,
warnings, numbers, heatmap): the Calculator tab and the Setup tab each build
one and feed it their own inputs. `render_plan_panel` is the pure half: a
PlanView in, the values for the panel's outputs out.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import gradio as gr

from workbench.insight.figure_drawing import figure_json
from workbench.ui import gradio_compat
from workbench.ui.calculator_view import (
    SUGGESTION_SLOTS,
    PlanView,
    apply_changes,
    badge_html,
    heatmap_figure,
    numbers_html,
    suggestion_label,
    suggestion_slots,
    warnings_html,
)


def whole_number(label: str, value, minimum: int | None = 1, info: str | None = None, **kwargs) -> gr.Number:
    """A number field for a whole number: gradio checks the minimum, and hands a fraction on as it is typed
    (precision=0 would round 2.5 to 2 while the field still shows 2.5), so the handler refuses it by the field's
    name (RunConfig and the calculator's checks: "must be a whole number, got 2.5")."""
    return gr.Number(value=value, label=label, precision=None, minimum=minimum, step=1, info=info, **kwargs)


@dataclass
class PlanPanel:
    """The components that show a plan; `outputs` is their order in `render_plan_panel`'s result."""

    badge: gr.HTML
    buttons: list[gr.Button]
    suggestions: gr.State  # the changes behind each visible button
    warnings: gr.HTML
    numbers: gr.HTML
    heatmap: gr.Plot | None

    @property
    def outputs(self) -> list:
        extra = [self.heatmap] if self.heatmap is not None else []
        return [self.badge, *self.buttons, self.suggestions, self.warnings, self.numbers, *extra]


def build_badge_and_suggestions() -> tuple[gr.HTML, list[gr.Button], gr.State]:
    """The verdict badge and the fixed row of suggestion buttons (hidden until a plan is invalid)."""
    badge = gr.HTML(elem_classes=["wb-badge-holder"])
    buttons = []
    with gr.Column(elem_classes=["wb-suggestions"]):
        for index in range(SUGGESTION_SLOTS):
            buttons.append(
                gr.Button(
                    visible=False,
                    size="sm",
                    variant="secondary",
                    elem_classes=["wb-suggestion"],
                    elem_id=f"wb-suggestion-{index}",
                )
            )
    return badge, buttons, gr.State([])


def build_verdict() -> tuple[gr.HTML, list[gr.Button], gr.State, gr.HTML]:
    """Badge, suggestion buttons (with their state) and warnings, stacked in the current column."""
    badge, buttons, suggestions = build_badge_and_suggestions()
    warnings = gr.HTML(elem_classes=["wb-warnings-holder"])
    return badge, buttons, suggestions, warnings


def plot_payload(spec: dict):
    """A plotly figure given as a plain dict, in the form gr.Plot sends to the browser.

    The same JSON gradio would make from a `go.Figure`, without building one.
    """
    return gradio_compat.plotly_value(json.dumps(spec))


def figure_payload(fig):
    """A plotly figure (`go.Figure`) in the form gr.Plot sends to the browser, its numbers as plain lists
    (`figure_drawing.figure_json`), made faster than gradio makes it."""
    return gradio_compat.plotly_value(figure_json(fig))


def render_plan_panel(view: PlanView, with_heatmap: bool = True, allowed_fields=None) -> list:
    """Values for PlanPanel.outputs from a PlanView (pure apart from building gradio updates)."""
    slots = suggestion_slots(view, allowed_fields=allowed_fields)
    # gr.update (a dict) rather than gr.Button(...): building a component per answer costs milliseconds.
    button_updates = [
        gr.update(value=suggestion_label(s), visible=True) if s else gr.update(visible=False) for s in slots
    ]
    changes = [s["changes"] if s else None for s in slots]
    values = [badge_html(view), *button_updates, changes, warnings_html(view), numbers_html(view)]
    if with_heatmap:
        values.append(plot_payload(heatmap_figure(view)))
    return values


def suggestion_applier(fields: tuple[str, ...], index: int):
    """The handler of a verdict's suggestion button `index`: the values of `fields` (its inputs after the
    suggestions) once that suggestion's changes are made; unchanged when the button has none."""

    def apply_suggestion(slots: list, *values) -> list:
        current = dict(zip(fields, values))
        changes = slots[index] if index < len(slots) and slots[index] else {}
        return list(apply_changes(current, changes).values())

    return apply_suggestion
