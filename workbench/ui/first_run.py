"""The first-run strip above the tabs: whatever tab a newcomer lands on, one button launches the default demo.

One line beside the button says what the demo does and how long it takes on this machine (ui/first_run_view.py:
the speed probe's round measured here, or that it is not measured yet), and whether other processes keep the
CPU busy now; it is worked out on each page load, since a probe may have measured since the server started.
"Launch the demo" starts the Setup tab's defaults on the
hardware as it is now, through the same path as every Launch (ui/launching.py: the owner, the sandbox and the
limits of a dashboard with accounts), then shows the Train tab, which follows the new run; when the run waits in
the GPU queue, the line says so: its place and what it waits for.

While a demo run of this user is running or queued, the button asks first: a second demo would only wait for the
first one's CPU (or GPU), and a second press is more often a person who did not see the first start. "Launch
anyway" launches it; "Open the running one" ("the queued one" while it waits) shows that run on the Train tab.

`build(ctx)` lays the strip out where it is called (app.py: above the tabs) and registers the `launched_run` state
every launch outside the Train tab names its run in; `wire(ctx, strip)` connects its buttons once the tabs exist
(`ctx.components["tabs"]`).
"""

from __future__ import annotations

from dataclasses import dataclass

import gradio as gr

from workbench.errors import WorkbenchError
from workbench.jobs import gpu_queue, queue, run_list
from workbench.runstore import runfolder
from workbench.ui import launching, run_access, setup_form, setup_form_view
from workbench.ui.first_run_view import confirm_html, demo_html, launched_html, live_demo_runs, refused_html
from workbench.ui.setup_view import setup_plan_view, speed_choice, task_dataset_size


@dataclass
class FirstRunStrip:
    line: gr.HTML
    button: gr.Button
    confirm: gr.Row  # the question before a second demo, hidden until asked
    question: gr.HTML
    anyway: gr.Button
    open_running: gr.Button
    asked_about: gr.State  # the run id the question names
    launched_run: gr.State  # a launching.Launched for the Train tab to show


def demo_values(runs_dir, cpu=None) -> list:
    """The Setup tab's values on first open (ctx.config_inputs order), on the hardware as NVML sees it now (and
    with `cpu`, a BusyWatch, how busy the CPU is: the last value, the hardware state, holds it)."""
    return setup_form_view.default_values(setup_form.hardware_state(runs_dir, cpu))


class FirstRun:
    """The strip's handlers, over the context. Each answers the strip's outputs, in `wire`'s order: the line, the
    tabs, the run for the Train tab to show, the question's row and text, the run it names and the button
    that opens it."""

    def __init__(self, ctx):
        self.ctx = ctx

    def demo_config(self):
        return setup_form.config_from_values(*demo_values(self.ctx.runs_dir))

    def line(self) -> str:
        """The strip's sentence now: the demo as this machine would run it."""
        values = demo_values(self.ctx.runs_dir, self.ctx.cpu)
        cfg = setup_form.config_from_values(*values)
        plan = setup_plan_view(cfg, task_dataset_size(cfg.task)).plan
        return demo_html(cfg, plan, speed_choice(cfg), values[-1].get("cpu_busy"))

    def press(self, request: gr.Request):
        """The button: ask first while a demo run of this user is running or queued, else launch."""
        viewer, cfg = self.ctx.viewer(request), self.demo_config()
        live = live_demo_runs(run_access.visible_entries(run_list.list_runs(self.ctx.runs_dir), viewer), cfg)
        if not live:
            return self.launch(request)
        devices = queue.describe_devices(queue.devices_of(cfg.to_dict(), gpu_queue.machine_gpus()))
        question = gr.HTML(confirm_html(live[0], devices))
        waiting = live[0].get("state") == runfolder.QUEUED
        shown = gr.Button(f"Open the {'queued' if waiting else 'running'} one")
        return gr.skip(), gr.skip(), None, gr.Row(visible=True), question, live[0]["run_id"], shown

    def launch(self, request: gr.Request):
        """Launch the demo (the question, if shown, goes) and show the Train tab, which follows the new run."""
        try:
            launched = launching.start_run(self.ctx, request, demo_values(self.ctx.runs_dir))
        except WorkbenchError as exc:  # refused: the demo's memory past the admin's share, too many launches
            return refused_html(str(exc)), gr.skip(), None, gr.Row(visible=False), gr.skip(), None, gr.skip()
        shown = gr.Tabs(selected="train")
        return launched_html(launched), shown, launched, gr.Row(visible=False), gr.skip(), None, gr.skip()

    def open_asked(self, run_id):
        """ "Open the running one": the question goes, and the Train tab shows the run it named."""
        shown = launching.Launched(run_id, new=False) if run_id else None
        return gr.skip(), gr.Tabs(selected="train"), shown, gr.Row(visible=False), gr.skip(), None, gr.skip()


def build(ctx) -> FirstRunStrip:
    """The strip: its line (worked out on each page load), the button, and the question it may ask first."""
    strip = FirstRun(ctx)
    with gr.Row(elem_id="wb-first-run", equal_height=False):
        line = gr.HTML(strip.line, elem_id="wb-first-run-line")
        button = gr.Button("Launch the demo", variant="primary", scale=0, min_width=200, elem_id="wb-first-run-button")
    with gr.Row(elem_id="wb-first-run-confirm", visible=False, equal_height=True) as confirm:
        question = gr.HTML("", elem_id="wb-first-run-question")
        anyway = gr.Button("Launch anyway", scale=0, min_width=170)
        open_running = gr.Button("Open the running one", variant="primary", scale=0, min_width=230)
    launched_run = gr.State(None)
    ctx.register(launched_run=launched_run)
    return FirstRunStrip(line, button, confirm, question, anyway, open_running, gr.State(None), launched_run)


def wire(ctx, strip: FirstRunStrip) -> None:
    """The buttons launch the demo (or ask first) and show the Train tab (once the tabs exist), which then follows
    the run launched or opened (ui/launching.py `follow_launches`)."""
    handlers = FirstRun(ctx)
    outputs = [
        strip.line,
        ctx.components["tabs"],
        strip.launched_run,
        strip.confirm,
        strip.question,
        strip.asked_about,
        strip.open_running,
    ]
    ctx.launch_events += [
        strip.button.click(handlers.press, outputs=outputs, show_progress="minimal"),
        strip.anyway.click(handlers.launch, outputs=outputs, show_progress="minimal"),
        strip.open_running.click(handlers.open_asked, inputs=[strip.asked_about], outputs=outputs),
    ]
