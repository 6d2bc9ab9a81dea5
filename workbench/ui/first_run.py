"""The first-run strip above the tabs: whatever tab a newcomer lands on, one button launches the default demo.

One line beside the button says what the demo does and how long it takes on this machine (ui/first_run_view.py:
the speed probe's round measured here, or that it is not measured yet), and whether other processes keep the CPU
busy now; it is worked out on each page load, since a probe may have measured since the server started.
"Launch the demo" starts the Setup tab's defaults on the hardware as it is now, through the same path as every
Launch (ui/launching.py: the owner, the sandbox and the limits of a dashboard with accounts), then shows the Train
tab, which follows the new run.

`build(ctx)` lays the strip out where it is called (app.py: above the tabs); `wire(ctx, strip)` connects its
button once the tabs exist (`ctx.components["tabs"]`).
"""

from __future__ import annotations

from dataclasses import dataclass

import gradio as gr

from workbench.errors import WorkbenchError
from workbench.ui import launching, setup_form, setup_form_view
from workbench.ui.first_run_view import demo_html, launched_html, refused_html
from workbench.ui.setup_view import setup_plan_view, speed_choice, task_dataset_size


@dataclass
class FirstRunStrip:
    line: gr.HTML
    button: gr.Button


def demo_values(runs_dir, cpu=None) -> list:
    """The Setup tab's values on first open (ctx.config_inputs order), on the hardware as NVML sees it now (and
    with `cpu`, a BusyWatch, how busy the CPU is: the last value, the hardware state, holds it)."""
    return setup_form_view.default_values(setup_form.hardware_state(runs_dir, cpu))


class FirstRun:
    """The strip's handlers, over the context."""

    def __init__(self, ctx):
        self.ctx = ctx

    def line(self) -> str:
        """The strip's sentence now: the demo as this machine would run it."""
        values = demo_values(self.ctx.runs_dir, self.ctx.cpu)
        cfg = setup_form.config_from_values(*values)
        plan = setup_plan_view(cfg, task_dataset_size(cfg.task)).plan
        return demo_html(cfg, plan, speed_choice(cfg), values[-1].get("cpu_busy"))

    def launch(self, request: gr.Request):
        try:
            run_id = launching.start_run(self.ctx, request, demo_values(self.ctx.runs_dir))
        except WorkbenchError as exc:  # refused: the demo's memory past the admin's share, too many launches
            return refused_html(str(exc)), gr.skip()
        return launched_html(run_id), gr.Tabs(selected="train")


def build(ctx) -> FirstRunStrip:
    """The strip: its line (worked out on each page load) and the button."""
    strip = FirstRun(ctx)
    with gr.Row(elem_id="wb-first-run", equal_height=False):
        line = gr.HTML(strip.line, elem_id="wb-first-run-line")
        button = gr.Button("Launch the demo", variant="primary", scale=0, min_width=200, elem_id="wb-first-run-button")
    return FirstRunStrip(line, button)


def wire(ctx, strip: FirstRunStrip) -> None:
    """The button launches the demo and shows the Train tab (once the tabs exist)."""
    strip.button.click(FirstRun(ctx).launch, outputs=[strip.line, ctx.components["tabs"]], show_progress="minimal")
