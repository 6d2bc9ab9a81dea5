"""The Calculator tab: TRL 1.16's batch rules, live, with one-click fixes.

Every input change calls `update_calculator` (the function the benchmark
times): the valid/invalid badge with TRL's exact message, suggestion buttons,
warnings, the numbers, a heatmap of valid (batch, G) pairs and the framework
comparison. A pasted error message is explained by workbench.calc.explain and can
be loaded into the fields. Labels are TRL's field names, so what a person
reads here is what they type into GRPOConfig.

The number fields take whole numbers (a fraction is refused by name, never rounded) but set no `minimum`:
gradio would refuse an out-of-range value with a toast that does not say
which field; the calculator's own message names the field, the rule and a fix.
"""

from __future__ import annotations

import gradio as gr

from workbench.calc import PLAN_DEFAULTS
from workbench.ui.calculator_view import (
    explain_html,
    frameworks_html,
    make_plan_view,
)
from workbench.ui.widgets import (
    PlanPanel,
    build_verdict,
    render_plan_panel,
    suggestion_applier,
    whole_number,
)

# The calculator's inputs in the order of the tab's components (and of update_calculator's arguments).
MAIN_FIELDS = (
    "per_device_train_batch_size",
    "gradient_accumulation_steps",
    "num_generations",
    "num_processes",
    "vllm_gpus",
)
RUN_FIELDS = ("dataset_size", "num_train_epochs", "max_steps", "max_completion_length", "num_iterations")
ADVANCED_FIELDS = (
    "steps_per_generation",
    "generation_batch_size",
    "do_eval",
    "per_device_eval_batch_size",
    "num_generations_eval",
)
FIELDS = MAIN_FIELDS + RUN_FIELDS + ADVANCED_FIELDS

# The calculator opens on the classic failing case (1 process x batch 1, G = 8) with the demo's data size.
START_VALUES = {
    **PLAN_DEFAULTS,
    "per_device_train_batch_size": 1,
    "num_generations": 8,
    "dataset_size": 64,
    "steps_per_generation": 0,
    "generation_batch_size": 0,
    "num_generations_eval": 0,
}

# What 0 means in the optional fields (see calculator_view.UNSET_WHEN_ZERO).
INFO = {
    "dataset_size": "0: unknown",
    "steps_per_generation": "0: = gradient_accumulation_steps",
    "generation_batch_size": "0: derived from the batch",
    "num_generations_eval": "0: = num_generations",
}


def _field(name: str):
    value = START_VALUES[name]
    if name == "do_eval":
        return gr.Checkbox(value=value, label=name, info="also check TRL's eval batch rule")
    if name == "num_train_epochs":
        return gr.Number(value=value, label=name)
    # No minimum: the calculator reports out-of-range values naming the field (see the module docstring).
    return whole_number(name, value, minimum=None, info=INFO.get(name))


def update_calculator(*values) -> list:
    """All of the tab's outputs for the field values (in FIELDS order) and the ms-swift data ratio (last)."""
    *field_values, train_data_ratio = values
    inputs = dict(zip(FIELDS, field_values))
    view = make_plan_view(inputs)
    comparison = (
        frameworks_html(view.plan.inputs, train_data_ratio)
        if view.plan is not None
        else '<p class="wb-empty">The comparison appears once every field holds a valid value.</p>'
    )
    return [*render_plan_panel(view), comparison]


def apply_suggestion(index: int, slots: list, *values) -> list:
    """The field values after clicking suggestion button `index` (unchanged if it has none)."""
    return suggestion_applier(FIELDS, index)(slots, *values)


def load_explained(inputs: dict | None, *values) -> list:
    """The field values of an explained error message (unchanged when it had none)."""
    current = dict(zip(FIELDS, values))
    if not inputs:
        return list(values)
    return [inputs.get(name, current[name]) for name in FIELDS]


def build(ctx) -> None:
    components = {}
    with gr.Row(equal_height=False):
        with gr.Column(scale=5, min_width=520):
            gr.Markdown(
                "### Is this batch plan valid for TRL 1.16?\n"
                "GRPO samples **G = num_generations** completions per prompt; each generation round of "
                "`per_device_train_batch_size x num_processes x steps_per_generation` completions must hold whole "
                "groups. Labels are GRPOConfig's field names; `vllm_gpus` counts GPUs given to a vLLM server "
                "(they do not train), `max_steps` -1 trains by epochs, 0 leaves an optional field unset.",
                elem_classes=["wb-section"],
            )
            for row in (MAIN_FIELDS[:2], MAIN_FIELDS[2:], RUN_FIELDS[:3] + ("num_iterations",)):
                with gr.Row():
                    for name in row:
                        components[name] = _field(name)
            with gr.Accordion("Completion length, generation batch and evaluation", open=False):
                with gr.Row():
                    for name in ("max_completion_length", *ADVANCED_FIELDS[:2]):
                        components[name] = _field(name)
                with gr.Row():
                    for name in ADVANCED_FIELDS[2:]:
                        components[name] = _field(name)
            heatmap = gr.Plot(show_label=False, container=False)
        with gr.Column(scale=4, min_width=400):
            gr.Markdown("### Verdict", elem_classes=["wb-section"])
            badge, buttons, suggestions, warnings = build_verdict()
            numbers = gr.HTML()
    gr.Markdown("### Explain an error message", elem_classes=["wb-section"])
    with gr.Row(equal_height=False):
        with gr.Column(scale=5):
            pasted = gr.Textbox(
                label="Error message",
                lines=3,
                placeholder=("ValueError: generation_batch_size (4) must be divisible by num_generations (8)."),
            )
            with gr.Row():
                explain_button = gr.Button("Explain", variant="primary", size="sm")
                load_button = gr.Button("Load into the calculator", size="sm")
        with gr.Column(scale=4):
            explanation = gr.HTML('<p class="wb-empty">Paste an error message and press Explain.</p>')
    explained_inputs = gr.State(None)
    panel = PlanPanel(badge, buttons, suggestions, warnings, numbers, heatmap)

    gr.Markdown("### The same inputs in TRL, Open-R1 and ms-swift", elem_classes=["wb-section"])
    with gr.Row(equal_height=False):
        with gr.Column(scale=5):
            comparison = gr.HTML()
        with gr.Column(scale=1, min_width=180):
            train_data_ratio = gr.Number(
                value=1.0, label="train_data_ratio", info="ms-swift: share of rows it trains on"
            )

    fields = [components[name] for name in FIELDS]
    outputs = [*panel.outputs, comparison]
    # No triggers: run on every change of an input and once when the page loads.
    gr.on(
        None,
        fn=update_calculator,
        inputs=[*fields, train_data_ratio],
        outputs=outputs,
        show_progress="hidden",
        trigger_mode="always_last",
    )
    for index, button in enumerate(panel.buttons):
        button.click(
            suggestion_applier(FIELDS, index),
            inputs=[panel.suggestions, *fields],
            outputs=fields,
            show_progress="hidden",
        )
    gr.on(
        [explain_button.click, pasted.submit],
        explain_html,
        inputs=pasted,
        outputs=[explanation, explained_inputs],
        show_progress="hidden",
    )
    load_button.click(load_explained, inputs=[explained_inputs, *fields], outputs=fields, show_progress="hidden")
    ctx.register(calculator_fields=components)
