"""The Runs tab's "Export merged model" panel: the chosen run's adapter merged into its base model.

Pick the final adapter or a checkpoint (by default the checkpoint with the best
held-out accuracy when the run evaluates, else the final adapter) and an output folder (inside the runs
folder; `<run>/merged` by default); Export starts `python -m workbench
export-model` as a process of its own (workbench/modeltools/export_model.py), so the
page never imports torch or waits on a model. A timer shows its stage while
it runs, then where it wrote and how big the folder is; Cancel ends it and
removes what it had half written. The job lives in this browser session's
`gr.State`; closing the session cancels it. On a dashboard with accounts
only a run the user may control is offered and exported, and the output
folder must lie inside that run's own folder.

`build` lays the panel out and wires its events to the methods of a
`MergePanel`; `adapter_choices` and `resolve_out` read the run folder for
the pure parts in ui/merge_view.py.
"""

from __future__ import annotations

import os
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

import gradio as gr

from workbench.errors import WorkbenchError
from workbench.insight import eval_results
from workbench.jobs import launcher
from workbench.modeltools import export_model
from workbench.runstore import runfolder
from workbench.ui import merge_view, paths_view, run_access
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


def adapter_choices(run_dir: Path | None) -> list[tuple[str, str]]:
    """(label, value) for each adapter of the run that can be merged, the default first: the checkpoint with the
    best held-out accuracy when the run evaluates, then the final adapter, then the other checkpoints, newest first."""
    if run_dir is None or not run_dir.is_dir():
        return []
    final = [("final adapter", merge_view.FINAL)] if export_model.has_adapter(run_dir / runfolder.ADAPTER_DIR) else []
    best = eval_results.best_checkpoint_of(run_dir)
    checkpoints = [
        (merge_view.checkpoint_label(step, best), str(step))
        for step in reversed(export_model.checkpoint_steps(run_dir))
    ]
    first = [choice for choice in checkpoints if best and choice[1] == str(best["step"])]
    return first + final + [choice for choice in checkpoints if choice not in first]


def resolve_out(text: str, run_dir: Path, runs_dir: Path) -> Path:
    """The output folder typed in the tab: relative to the run folder, and inside the runs folder; ExportError otherwise.

    By its words alone (`..` taken away, no link looked up): every folder below the run's or the runs folder on
    the way is then opened without following a link (export_model.check_out), where a check by its resolved
    path would hold only until the run's code swaps a folder for a link.
    """
    text = (text or "").strip()
    if not text:
        raise export_model.ExportError(
            field="out", rule="no output folder given", fix=f"use {export_model.default_out(run_dir)}"
        )
    path = Path(text).expanduser()
    path = Path(os.path.normpath(path if path.is_absolute() else Path(run_dir).absolute() / path))
    root = Path(os.path.abspath(runs_dir))
    if path == root or root not in path.parents:
        raise export_model.ExportError(
            field="out",
            rule=f"{path} is outside the runs folder {root}",
            fix="the dashboard writes only there (e.g. into the run folder); "
            "`python -m workbench export-model` writes anywhere",
        )
    return path


@dataclass
class MergeComponents:
    """The panel's components, as `layout` makes them."""

    job_state: gr.State
    adapter: gr.Dropdown
    out: gr.Textbox
    export_button: gr.Button
    cancel_button: gr.Button
    progress: gr.HTML
    timer: gr.Timer

    @property
    def job_outputs(self) -> list:
        return [self.job_state, self.timer, self.cancel_button, self.export_button, self.progress]


def layout() -> MergeComponents:
    job_state = gr.State(None, delete_callback=cancel_on_close)
    with gr.Accordion("Export merged model", open=False, elem_id="wb-merge"):
        gr.Markdown(
            "The run's LoRA adapter merged into its base model: a standard transformers folder "
            "(model.safetensors, config, tokenizer with its chat template) that "
            "`AutoModelForCausalLM.from_pretrained` and vLLM load. It takes the base model's size on disk.",
            elem_classes=["wb-note"],
        )
        with gr.Row(equal_height=True):
            adapter = gr.Dropdown(
                label="Adapter",
                choices=[],
                value=None,
                scale=2,
                info="The final adapter, or a checkpoint saved during the run.",
            )
            out = gr.Textbox(
                label="out",
                scale=4,
                info="A new or empty folder inside the runs folder; a relative path is taken inside the run folder.",
            )
        with gr.Row():
            export_button = gr.Button("Export merged model", variant="primary", scale=0, min_width=220)
            cancel_button = gr.Button("Cancel", variant="stop", scale=0, min_width=110, interactive=False)
        progress = gr.HTML("", css_template=merge_view.NOTE_CSS, js_on_load=None, elem_id="wb-merge-progress")
    timer = gr.Timer(TICK_SECONDS, active=False)
    return MergeComponents(job_state, adapter, out, export_button, cancel_button, progress, timer)


class MergePanel:
    """The panel's event handlers, over the context and the components they fill."""

    def __init__(self, ctx: UIContext, ui: MergeComponents):
        self.ctx = ctx
        self.ui = ui
        self.runs_dir = ctx.runs_dir

    def picked(self, request: gr.Request | None, run_id) -> Path | None:
        return run_access.picked_run_dir_for(self.runs_dir, run_id, self.ctx.viewer(request))

    def job_outputs(self, job: MergeJob | None, shown: str) -> dict:
        ui, running = self.ui, job is not None
        return {
            ui.job_state: job,
            ui.timer: gr.Timer(active=running),
            ui.cancel_button: gr.Button(interactive=running),
            ui.export_button: gr.Button(interactive=not running),
            ui.progress: shown,
        }

    def pick_run(self, request: gr.Request, run_id, job):
        if job is not None:  # the running export goes on; its panel keeps showing it
            return gr.skip(), gr.skip()
        folder = self.picked(request, run_id)
        choices = adapter_choices(folder)
        value = choices[0][1] if choices else None
        return gr.Dropdown(choices=choices, value=value), merge_view.default_out_text(folder, value)

    def list_adapters(self, request: gr.Request, run_id, current):
        choices = adapter_choices(self.picked(request, run_id))
        values = [value for _, value in choices]
        return gr.Dropdown(choices=choices, value=current if current in values else (values[0] if values else None))

    def default_out(self, request: gr.Request, run_id, choice) -> str:
        return merge_view.default_out_text(self.picked(request, run_id), choice)

    def start(self, request: gr.Request, run_id, choice, out_text, job):
        if job is not None:
            return gr.skip()
        ctx = self.ctx
        try:
            # RunIdError names the field and the fix; another user's run reads as none
            folder = run_access.run_dir_for(self.runs_dir, run_id, ctx.viewer(request), control=True)
            paths_view.check_saved_config(run_access.run_config(folder), ctx.scope_for(request))
            out_folder = resolve_out(out_text, folder, self.runs_dir)
            if ctx.shared and Path(os.path.abspath(folder)) not in out_folder.parents:
                raise export_model.ExportError(
                    field="out",
                    rule=f"{out_folder} is outside the run folder {folder}",
                    fix=f"on a shared dashboard an export goes into the run's own folder, "
                    f"e.g. {export_model.default_out(folder)}",
                )
            # the launcher's record names the model; nothing below the run's folder (shared) or the runs
            # folder is followed through a link, now or when the export writes
            within = folder if ctx.shared else self.runs_dir
            config = run_access.run_config(folder)
            plan = export_model.plan_export(
                folder, merge_view.checkpoint_of(choice), out_folder, within=within, config=config
            )
        except WorkbenchError as exc:
            return self.job_outputs(None, merge_view.note(f"Not started: {exc}", "error"))
        try:
            with launcher.helper_job(self.runs_dir, ctx.viewer(request).name, "export") as record:
                process = export_model.start_export(
                    plan, confine=ctx.confine_helper(folder, run_access.run_config(folder))
                )
                record(process.pid)
        except WorkbenchError as exc:  # UserLimitError: the user's runs and jobs fill their cap
            return self.job_outputs(None, merge_view.note(f"Not started: {exc}", "error"))
        new_job = MergeJob(plan, process)
        return self.job_outputs(new_job, merge_view.progress_html({"stage": None}))

    def tick(self, job):
        if job is None:
            return {self.ui.timer: gr.Timer(active=False)}
        state = export_model.read_export(job.plan.progress_path, job.process, root=job.plan.root)
        shown = merge_view.progress_html(state, time.monotonic() - job.started)
        return self.job_outputs(None if state["done"] else job, shown)

    def cancel(self, job):
        if job is None:
            return gr.skip()
        export_model.cancel_export(job.process, job.plan)
        return self.job_outputs(None, merge_view.note("Export cancelled; nothing was left half-written.", "info"))


def build(ctx: UIContext, run_picker: gr.Dropdown) -> None:
    """The panel, under the Runs tab's one-run picker `run_picker`."""
    ui = layout()
    panel = MergePanel(ctx, ui)
    outputs = ui.job_outputs
    job_queue = dict(concurrency_id="merge-job", concurrency_limit=1)  # start, tick and cancel take turns
    run_picker.change(
        panel.pick_run, inputs=[run_picker, ui.job_state], outputs=[ui.adapter, ui.out], show_progress="hidden"
    )
    ui.adapter.focus(panel.list_adapters, inputs=[run_picker, ui.adapter], outputs=[ui.adapter], show_progress="hidden")
    ui.adapter.input(panel.default_out, inputs=[run_picker, ui.adapter], outputs=[ui.out], show_progress="hidden")
    ui.export_button.click(
        panel.start,
        inputs=[run_picker, ui.adapter, ui.out, ui.job_state],
        outputs=outputs,
        show_progress="hidden",
        **job_queue,
    )
    ui.timer.tick(
        panel.tick, inputs=[ui.job_state], outputs=outputs, show_progress="hidden", trigger_mode="once", **job_queue
    )
    ui.cancel_button.click(panel.cancel, inputs=[ui.job_state], outputs=outputs, show_progress="hidden", **job_queue)
