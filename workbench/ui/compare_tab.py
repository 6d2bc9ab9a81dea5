"""The Compare tab: the same probe prompts answered by the base model and by a checkpoint, side by side.

Pick a run (the current one or any past one) and one of its checkpoints; the
probe prompts come from the run's task and can be edited. "Answer side by
side" starts `python -m workbench sample` processes (see workbench/modeltools/probes.py)
so this page never waits on a model: a timer shows the answers as they come,
and Cancel kills the sampling process. The UI process itself never imports
torch. The job lives in this browser session's `gr.State`; closing the
session cancels it. On a dashboard with accounts the run picker holds the
runs the user may see, and each event checks the run id (and the checkpoint,
one of that run's own) again on the server (run_access.run_dir_for).

`build` lays the tab out (`layout`) and wires its events to the methods of a
`CompareTab`, which holds the context and the components.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import gradio as gr

from workbench.access.owners import Viewer
from workbench.errors import WorkbenchError
from workbench.insight import eval_results
from workbench.jobs import launcher
from workbench.modeltools import probes, sampling
from workbench.runstore import launch_records
from workbench.ui import compare_view, paths_view, run_access
from workbench.ui.context import UIContext

TICK_SECONDS = 1.0
DEFAULT_MAX_NEW_TOKENS = 48


def cancel_on_close(job: probes.ProbeJob | None) -> None:
    """A closed browser session leaves no sampling process behind."""
    if job is not None and job.process is not None:
        probes.cancel_job(job)


def read_sides(job: probes.ProbeJob | None) -> list[dict]:
    """Each side's sampling progress (its answers file as `sampling.read_sampling` reads it), in order."""
    return [sampling.read_sampling(side.out_path) for side in job.sides] if job is not None else []


@dataclass
class CompareComponents:
    """The Compare tab's components, as `layout` makes them."""

    job_state: gr.State
    run_picker: gr.Dropdown
    checkpoint: gr.Dropdown
    max_new_tokens: gr.Slider
    prompts_box: gr.Textbox
    answer_button: gr.Button
    cancel_button: gr.Button
    progress: gr.HTML
    table: gr.HTML
    timer: gr.Timer

    @property
    def job_outputs(self) -> list:
        return [self.job_state, self.timer, self.cancel_button, self.answer_button, self.progress, self.table]


def layout() -> CompareComponents:
    job_state = gr.State(None, delete_callback=cancel_on_close)
    gr.Markdown(
        "### Base model vs trained\nThe same prompts answered by the run's base model and by one of "
        "its checkpoints. Sampling runs in its own process, greedy (the same answer every time), so it "
        "can go on while training does; answers are kept in the run folder.",
        elem_classes=["wb-section"],
    )
    with gr.Row():
        run_picker = gr.Dropdown(label="Run", choices=[], value=None, scale=3, info="The current run or any past one.")
        checkpoint = gr.Dropdown(
            label="Checkpoint",
            choices=[],
            value=None,
            scale=2,
            elem_id="wb-compare-checkpoint",
            info="Saved every save_steps steps (save_total_limit keeps the newest); the adapter when the run stopped "
            "or finished. Picked first: the checkpoint with the best held-out accuracy, when the run evaluates.",
        )
        max_new_tokens = gr.Slider(
            8, 256, value=DEFAULT_MAX_NEW_TOKENS, step=8, label="Longest answer (tokens)", scale=2
        )
    prompts_box = gr.Textbox(
        label="Probe prompts, one per line",
        lines=4,
        max_lines=12,
        info="Filled from the run's task; edit or type your own.",
    )
    with gr.Row():
        answer_button = gr.Button("Answer side by side", variant="primary", scale=0, min_width=240)
        cancel_button = gr.Button("Cancel", variant="stop", scale=0, min_width=110, interactive=False)
        progress = gr.HTML("", css_template=compare_view.NOTE_CSS, js_on_load=None, elem_id="wb-compare-progress")
    # Without gradio's prose styles, whose dark table borders would box every answer.
    table = gr.HTML(
        compare_view.compare_html(None),
        css_template=compare_view.COMPARE_CSS,
        js_on_load=None,
        apply_default_css=False,
        elem_id="wb-compare-table",
    )
    timer = gr.Timer(TICK_SECONDS, active=False)
    return CompareComponents(
        job_state,
        run_picker,
        checkpoint,
        max_new_tokens,
        prompts_box,
        answer_button,
        cancel_button,
        progress,
        table,
        timer,
    )


class CompareTab:
    """The Compare tab's event handlers, over the context and the components they fill."""

    def __init__(self, ctx: UIContext, ui: CompareComponents):
        self.ctx = ctx
        self.ui = ui
        self.runs_dir = ctx.runs_dir

    def run_dir(self, viewer: Viewer, run_id) -> Path | None:
        """The run's folder when the id (from the browser) names one inside the runs folder that `viewer` may see."""
        return run_access.picked_run_dir_for(self.runs_dir, run_id, viewer)

    def run_ids(self, viewer: Viewer) -> list[str]:
        return [path.name for path in run_access.visible_run_dirs(self.runs_dir, viewer)]

    def checkpoint_choices(self, viewer: Viewer, run_id: str | None, current: str | None = None) -> gr.Dropdown:
        folder = self.run_dir(viewer, run_id)
        labels = [label for label, _ in probes.list_checkpoints(folder)] if folder else []
        best = eval_results.best_checkpoint_of(folder) if folder else None
        # the default: the checkpoint with the best held-out accuracy, else the newest adapter
        preferred = probes.side_label(f"checkpoint-{best['step']}") if best else None
        value = current if current in labels else preferred if preferred in labels else (labels[-1] if labels else None)
        return gr.Dropdown(choices=labels, value=value)

    def pick_run(self, viewer: Viewer, run_id: str | None) -> dict:
        folder = self.run_dir(viewer, run_id)
        config = launch_records.recorded_config(folder) if folder else {}
        return {
            self.ui.checkpoint: self.checkpoint_choices(viewer, run_id),
            self.ui.prompts_box: "\n".join(probes.default_prompts(config)),
        }

    def job_outputs(self, job: probes.ProbeJob | None) -> dict:
        ui, running = self.ui, job is not None and not job.finished
        read = read_sides(job)
        return {
            ui.job_state: job,
            ui.timer: gr.Timer(active=running),
            ui.cancel_button: gr.Button(interactive=running),
            ui.answer_button: gr.Button(interactive=not running),
            ui.progress: compare_view.progress_html(compare_view.progress_text(job, read)),
            ui.table: compare_view.compare_html(job, read),
        }

    def plan(self, request: gr.Request, run_id, checkpoint_label, prompts_text, tokens) -> probes.ProbeJob:
        """The job the Answer button starts: the run's base model, then the checkpoint picked (ProbeError if not)."""
        if not run_id:
            raise probes.ProbeError("Run: pick a run first; its base model answers on the left")
        # RunIdError names the field and the fix; sampling writes into the run folder, so: control
        folder = run_access.run_dir_for(self.runs_dir, run_id, self.ctx.viewer(request), control=True)
        prompts = probes.parse_prompts(prompts_text)
        config = run_access.run_config(folder)  # the launcher's record of it: the run may have rewritten config.json
        paths_view.check_saved_config(config, self.ctx.scope_for(request))
        chosen = dict(probes.list_checkpoints(folder))  # only the run's own checkpoint-N and adapter folders
        if checkpoint_label and (not isinstance(checkpoint_label, str) or checkpoint_label not in chosen):
            raise probes.ProbeError(
                field="checkpoint",
                rule=compare_view.gone_rule(checkpoint_label, folder.name, config.get("save_total_limit")),
                fix="pick one from the list, which now holds what the run folder has",
            )
        side = (checkpoint_label, chosen[checkpoint_label]) if checkpoint_label else None
        return probes.plan_job(
            folder, config, side, prompts, int(tokens), confine=self.ctx.confine_helper(folder, config)
        )

    # ------------------------------------------------------------ events

    def on_load(self, request: gr.Request):
        viewer = self.ctx.viewer(request)
        ids = self.run_ids(viewer)
        run_id = ids[0] if ids else None
        return {self.ui.run_picker: gr.Dropdown(choices=ids, value=run_id), **self.pick_run(viewer, run_id)}

    def on_answer(self, request: gr.Request, run_id, checkpoint_label, prompts_text, tokens, job):
        if job is not None and job.process is not None:
            probes.cancel_job(job)
        try:
            # counted with the user's runs (UserLimitError past their cap), each side's process as it starts
            with launcher.helper_job(self.runs_dir, self.ctx.viewer(request).name, "sampling") as record:
                new_job = probes.advance_job(self.plan(request, run_id, checkpoint_label, prompts_text, tokens))
                if new_job.process is not None:
                    record(new_job.process.pid)
        except WorkbenchError as exc:  # ProbeError and sampling's own checks name the field and the fix
            text = str(exc)
            return {
                **self.job_outputs(None),
                self.ui.progress: compare_view.progress_html(
                    text if text.startswith(("Run:", "Probe")) else f"Not started: {text}"
                ),
                # what the run folder holds now: a checkpoint save_total_limit removed is no longer offered
                self.ui.checkpoint: self.checkpoint_choices(self.ctx.viewer(request), run_id, checkpoint_label),
            }
        return {**self.job_outputs(new_job), self.ui.checkpoint: gr.skip()}

    def on_tick(self, request: gr.Request, job):
        if job is None:
            return {self.ui.timer: gr.Timer(active=False)}
        advanced = probes.advance_job(job)
        if advanced.process is not None and advanced.process is not job.process:  # the next side started
            launch_records.record_job(
                self.runs_dir, f"sampling-{advanced.process.pid}", self.ctx.viewer(request).name, advanced.process.pid
            )
        return self.job_outputs(advanced)

    def on_cancel(self, job):
        return self.job_outputs(probes.cancel_job(job)) if job is not None else gr.skip()

    def on_pick(self, request: gr.Request, run_id: str | None) -> dict:
        return self.pick_run(self.ctx.viewer(request), run_id)

    def on_picker_focus(self, request: gr.Request, current: str | None) -> gr.Dropdown:
        return gr.Dropdown(choices=self.run_ids(self.ctx.viewer(request)), value=current)

    def on_checkpoint_focus(self, request: gr.Request, run_id: str | None, current: str | None) -> gr.Dropdown:
        return self.checkpoint_choices(self.ctx.viewer(request), run_id, current)


def build(ctx: UIContext) -> None:
    """Lay the tab out and wire its events to a `CompareTab`."""
    ui = layout()
    tab = CompareTab(ctx, ui)
    outputs = ui.job_outputs
    # Answer, tick and Cancel take turns (one queue, one at a time): a tick that read the job just
    # before a Cancel must not write the still-running job back over the cancelled one.
    job_queue = dict(concurrency_id="compare-job", concurrency_limit=1)
    ctx.blocks.load(tab.on_load, outputs=[ui.run_picker, ui.checkpoint, ui.prompts_box], show_progress="hidden")
    ui.run_picker.input(
        tab.on_pick, inputs=[ui.run_picker], outputs=[ui.checkpoint, ui.prompts_box], show_progress="hidden"
    )
    ui.run_picker.focus(tab.on_picker_focus, inputs=[ui.run_picker], outputs=[ui.run_picker], show_progress="hidden")
    # Checkpoints appear (and save_total_limit removes old ones) while a run trains: list them again whenever the
    # tab or the list is opened.
    ctx.tab_opened["Compare"] = (tab.on_checkpoint_focus, [ui.run_picker, ui.checkpoint], [ui.checkpoint])
    ui.checkpoint.focus(
        tab.on_checkpoint_focus, inputs=[ui.run_picker, ui.checkpoint], outputs=[ui.checkpoint], show_progress="hidden"
    )
    ui.answer_button.click(
        tab.on_answer,
        inputs=[ui.run_picker, ui.checkpoint, ui.prompts_box, ui.max_new_tokens, ui.job_state],
        outputs=[*outputs, ui.checkpoint],
        show_progress="hidden",
        **job_queue,
    )
    ui.timer.tick(
        tab.on_tick, inputs=[ui.job_state], outputs=outputs, show_progress="hidden", trigger_mode="once", **job_queue
    )
    ui.cancel_button.click(tab.on_cancel, inputs=[ui.job_state], outputs=outputs, show_progress="hidden", **job_queue)
