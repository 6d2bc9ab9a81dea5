"""The Runs tab's "Export merged model" panel: the chosen run's adapter merged into its base model.

Pick the final adapter or a checkpoint and an output folder (inside the runs
folder; `<run>/merged` by default); Export starts `python -m workbench
export-model` as a process of its own (workbench/jobs/export_model.py), so the
page never imports torch or waits on a model. A timer shows its stage while
it runs, then where it wrote and how big the folder is; Cancel ends it and
removes what it had half written. The job lives in this browser session's
`gr.State`; closing the session cancels it. On a dashboard with accounts
only a run the user may control is offered and exported, and the output
folder must lie inside that run's own folder.
"""

from __future__ import annotations

import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

import gradio as gr

from workbench.errors import WorkbenchError
from workbench.jobs import export_model, runfolder
from workbench.ui import merge_view, run_access, paths_view
from workbench.ui.context import UIContext

TICK_SECONDS = 1.0


@dataclass
class MergeJob:
    """An export under way in one browser session."""

    plan: export_model.ExportPlan
    process: subprocess.Popen = field(repr=False)
    started: float = field(default_factory=time.monotonic)


def cancel_on_close(job: MergeJob | None) -> None:
    """A closed browser session leaves no export process behind."""
    if job is not None:
        export_model.cancel_export(job.process, job.plan)


def build(ctx: UIContext, run_picker: gr.Dropdown) -> None:
    """The panel, under the Runs tab's one-run picker `run_picker`."""
    runs_dir = ctx.runs_dir
    job_state = gr.State(None, delete_callback=cancel_on_close)
    with gr.Accordion("Export merged model", open=False, elem_id="wb-merge"):
        gr.Markdown("The run's LoRA adapter merged into its base model: a standard transformers folder "
                    "(model.safetensors, config, tokenizer with its chat template) that "
                    "`AutoModelForCausalLM.from_pretrained` and vLLM load. It takes the base model's size on disk.",
                    elem_classes=["wb-note"])
        with gr.Row(equal_height=True):
            adapter = gr.Dropdown(label="Adapter", choices=[], value=None, scale=2,
                                  info="The final adapter, or a checkpoint saved during the run.")
            out = gr.Textbox(label="out", scale=4, info="A new or empty folder inside the runs folder; a relative "
                                                        "path is taken inside the run folder.")
        with gr.Row():
            export_button = gr.Button("Export merged model", variant="primary", scale=0, min_width=220)
            cancel_button = gr.Button("Cancel", variant="stop", scale=0, min_width=110, interactive=False)
        progress = gr.HTML("", css_template=merge_view.NOTE_CSS, js_on_load=None, elem_id="wb-merge-progress")
    timer = gr.Timer(TICK_SECONDS, active=False)

    def picked(request: gr.Request | None, run_id) -> Path | None:
        return run_access.picked_run_dir_for(runs_dir, run_id, ctx.viewer(request))

    def pick_run(request: gr.Request, run_id, job):
        if job is not None:  # the running export goes on; its panel keeps showing it
            return gr.skip(), gr.skip()
        folder = picked(request, run_id)
        choices = merge_view.adapter_choices(folder)
        value = choices[0][1] if choices else None
        return gr.Dropdown(choices=choices, value=value), merge_view.default_out_text(folder, value)

    def list_adapters(request: gr.Request, run_id, current):
        choices = merge_view.adapter_choices(picked(request, run_id))
        values = [value for _, value in choices]
        return gr.Dropdown(choices=choices, value=current if current in values else (values[0] if values else None))

    def default_out(request: gr.Request, run_id, choice) -> str:
        return merge_view.default_out_text(picked(request, run_id), choice)

    def job_outputs(job: MergeJob | None, shown: str) -> dict:
        running = job is not None
        return {job_state: job, timer: gr.Timer(active=running), cancel_button: gr.Button(interactive=running),
                export_button: gr.Button(interactive=not running), progress: shown}

    def start(request: gr.Request, run_id, choice, out_text, job):
        if job is not None:
            return gr.skip()
        try:
            # RunIdError names the field and the fix; another user's run reads as none
            folder = run_access.run_dir_for(runs_dir, run_id, ctx.viewer(request), control=True)
            paths_view.check_saved_config(runfolder.read_config(folder), ctx.scope_for(request))
            out_folder = merge_view.resolve_out(out_text, folder, runs_dir)
            if ctx.shared and folder.resolve() not in out_folder.parents:
                raise export_model.ExportError(field="out", rule=f"{out_folder} is outside the run folder {folder}",
                                               fix=f"on a shared dashboard an export goes into the run's own folder, "
                                                   f"e.g. {export_model.default_out(folder)}")
            plan = export_model.plan_export(folder, merge_view.checkpoint_of(choice), out_folder)
        except WorkbenchError as exc:
            return job_outputs(None, merge_view.note(f"Not started: {exc}", "error"))
        new_job = MergeJob(plan, export_model.start_export(
            plan, confine=ctx.confine_helper(folder, runfolder.read_config(folder))))
        return job_outputs(new_job, merge_view.progress_html({"stage": None}))

    def tick(job):
        if job is None:
            return {timer: gr.Timer(active=False)}
        state = export_model.read_export(job.plan.progress_path, job.process)
        shown = merge_view.progress_html(state, time.monotonic() - job.started)
        return job_outputs(None if state["done"] else job, shown)

    def cancel(job):
        if job is None:
            return gr.skip()
        export_model.cancel_export(job.process, job.plan)
        return job_outputs(None, merge_view.note("Export cancelled; nothing was left half-written.", "info"))

    outputs = [job_state, timer, cancel_button, export_button, progress]
    job_queue = dict(concurrency_id="merge-job", concurrency_limit=1)  # start, tick and cancel take turns
    run_picker.change(pick_run, inputs=[run_picker, job_state], outputs=[adapter, out], show_progress="hidden")
    adapter.focus(list_adapters, inputs=[run_picker, adapter], outputs=[adapter], show_progress="hidden")

    adapter.input(default_out, inputs=[run_picker, adapter], outputs=[out], show_progress="hidden")
    export_button.click(start, inputs=[run_picker, adapter, out, job_state], outputs=outputs,
                        show_progress="hidden", **job_queue)
    timer.tick(tick, inputs=[job_state], outputs=outputs, show_progress="hidden", trigger_mode="once", **job_queue)
    cancel_button.click(cancel, inputs=[job_state], outputs=outputs, show_progress="hidden", **job_queue)
