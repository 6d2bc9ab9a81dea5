"""The Runs tab: every run in the runs folder, compared, inspected, deleted.

- A table of all runs (state, model, task, generation backend, steps with the best evaluated
  checkpoint, reward (final or latest), started, duration), re-read from the run folders when the tab is opened and every few
  seconds while it is open, and redrawn only when a row changed. A queued run
  shows its place in the GPU queue and what it waits for; each refresh also
  makes sure the queue has its dispatcher (`run_list.keep_queue_moving`).
- Compare: tick several runs to overlay one metric's curves on one figure (their
  held-out accuracy or pass@k too, from each run's eval.jsonl) and list the
  settings in which their configs differ.
- One run: read its completions group by group at any step, write its report
  (one HTML file, kept in the run folder and offered for download), export its
  adapter merged into the base model (workbench/ui/merge_panel.py), or delete it
  (after a confirmation; a live run must be stopped first).

Nothing is cached in the process: two browser tabs see the same runs. On a
dashboard with accounts each user's table, overlays and pickers hold only the
runs they may see (an admin's hold all, with an owner column), and every event
checks the ids the browser sends against that rule again (run_access.run_dir_for).

`build` lays the tab out (`layout`) and wires its events to the methods of a
`RunsTab`, which holds the context and the components.
"""

from __future__ import annotations

import html
from dataclasses import dataclass

import gradio as gr

from workbench.access.owners import Viewer
from workbench.insight import eval_results, follow, overlay_figures
from workbench.insight.groups import groups_for_step
from workbench.jobs import launcher, run_list
from workbench.runstore import file_cache, kept_records, launch_records, runfolder
from workbench.spec.reward_choice import reward_weight_map
from workbench.ui import merge_panel, run_access, run_reports, runs_view
from workbench.ui.completions_view import render_empty_html, render_groups_html
from workbench.ui.context import UIContext
from workbench.ui.page_text import markdown_text
from workbench.ui.widgets import figure_payload

REFRESH_SECONDS = 3.0
# (label, metric name under TRL's key) offered for overlays.
OVERLAY_METRICS = (
    ("reward", "reward"),
    ("reward std", "reward_std"),
    ("KL", "kl"),
    ("loss", "loss"),
    ("mean completion length", "completions/mean_length"),
    ("groups with no signal", "frac_reward_zero_std"),
    ("entropy", "entropy"),
    ("grad norm", "grad_norm"),
    ("learning rate", "learning_rate"),
    ("step time", "step_time"),
    ("held-out accuracy", eval_results.HELD_OUT_ACCURACY),  # eval.jsonl's curve, not a metrics.jsonl column
    ("held-out pass@k", eval_results.HELD_OUT_PASS_AT_K),
    ("held-out mean@k", eval_results.HELD_OUT_AT_K["mean_at_k"]),
    ("held-out maj@k", eval_results.HELD_OUT_AT_K["maj_at_k"]),
    ("held-out best@k", eval_results.HELD_OUT_AT_K["best_at_k"]),
)
HELD_OUT_METRICS = (
    eval_results.HELD_OUT_ACCURACY,
    eval_results.HELD_OUT_PASS_AT_K,
    *eval_results.HELD_OUT_AT_K.values(),
)

NOTE_CSS = """
.wb-runs-note { font-size: 0.9rem; border-radius: 8px; padding: 8px 12px; }
.wb-runs-note-info { background: #eff6ff; color: #1e3a8a; border: 1px solid #bfdbfe; }
.wb-runs-note-error { background: #fef2f2; color: #7f1d1d; border: 1px solid #fca5a5; }
.wb-runs-note-warn { background: #fffbeb; color: #78350f; border: 1px solid #fcd34d; }
"""
NO_RUN_PICKED = "Pick a run to read its completions."


def note_html(message: str, kind: str = "info") -> str:
    return f'<div class="wb-runs-note wb-runs-note-{kind}">{html.escape(message)}</div>' if message else ""


def with_final_reward(entry: dict) -> dict:
    """A `list_runs()` entry with its run's last logged reward (`final_reward`, from the end of metrics.jsonl)
    and its best evaluated checkpoint (`best_checkpoint`, the eval.jsonl record; None without evaluation)."""
    if not entry.get("run_dir"):
        return {**entry, "final_reward": None, "best_checkpoint": None}
    return {
        **entry,
        "final_reward": file_cache.last_metric(entry["run_dir"], "reward"),
        "best_checkpoint": eval_results.best_checkpoint_of(entry["run_dir"]),
    }


def read_rows(runs_dir, viewer: Viewer, columns: tuple[str, ...] = runs_view.COLUMNS) -> list[list]:
    runs = run_list.list_runs(runs_dir)
    run_list.keep_queue_moving(runs_dir, runs)  # a queue left without its dispatcher (a reboot) moves again
    entries = run_access.visible_entries(runs, viewer)
    if not run_access.sees_all(viewer):  # a queued run waits for runs of others too: not by their ids
        shown = [entry["run_id"] for entry in entries]
        entries = [
            {**entry, "waits_for": run_access.hide_other_runs(entry["waits_for"], shown)}
            if entry.get("waits_for")
            else entry
            for entry in entries
        ]
    return runs_view.runs_rows((runs_view.summarise_run(with_final_reward(entry)) for entry in entries), columns)


@dataclass
class RunsComponents:
    """The Runs tab's components, as `layout` makes them."""

    rows_state: gr.State
    overlaid_state: gr.State  # run id -> follow.RunMetrics of the runs this page overlays, extended as they grow
    table: gr.Dataframe
    chosen: gr.CheckboxGroup
    metric: gr.Dropdown
    smoothing: gr.Slider
    overlay: gr.Plot
    diff_note: gr.Markdown
    diff_table: gr.Dataframe
    one_run: gr.Dropdown
    report_button: gr.Button
    delete_button: gr.Button
    confirm_row: gr.Row
    confirm_text: gr.Markdown
    confirm_button: gr.Button
    cancel_button: gr.Button
    runs_note: gr.HTML
    report_file: gr.File
    step_slider: gr.Slider
    completions: gr.HTML
    timer: gr.Timer

    @property
    def refresh_inputs(self) -> list:
        return [self.rows_state, self.chosen, self.one_run, self.metric, self.smoothing, self.overlaid_state]

    @property
    def refresh_outputs(self) -> list:
        return [
            self.rows_state,
            self.table,
            self.chosen,
            self.one_run,
            self.overlay,
            self.overlaid_state,
            self.diff_note,
            self.diff_table,
            self.step_slider,
            self.completions,
        ]


def layout(ctx: UIContext) -> RunsComponents:
    """The table of all runs, the comparison of several, then one run (see the module's docstring)."""
    columns = runs_view.SHARED_COLUMNS if ctx.shared else runs_view.COLUMNS
    widths = runs_view.SHARED_COLUMN_WIDTHS if ctx.shared else runs_view.COLUMN_WIDTHS
    rows_state, overlaid_state = gr.State([]), gr.State({})
    gr.Markdown(
        "### All runs\nRead from the run folders; updates by itself while runs go.", elem_classes=["wb-section"]
    )
    gr.Markdown(runs_view.runs_folder_note(ctx.runs_dir), elem_classes=["wb-note"], elem_id="wb-runs-folder")
    table = gr.Dataframe(
        headers=list(columns),
        value=[],
        datatype="str",
        interactive=False,
        wrap=True,
        max_height=320,
        elem_id="wb-runs-table",
        column_widths=list(widths),
    )
    chosen, metric, smoothing, overlay, diff_note, diff_table = _comparison()
    gr.Markdown("### One run", elem_classes=["wb-section"])
    with gr.Row(equal_height=True):
        one_run = gr.Dropdown(
            label="Run",
            choices=[],
            value=None,
            scale=4,
            elem_id="wb-runs-one",
            info="Read its completions group by group, or delete it.",
        )
        report_button = gr.Button("Report", scale=1, min_width=110, elem_id="wb-runs-report-button")
        delete_button = gr.Button("Delete run…", variant="stop", scale=1, min_width=130)
    with gr.Row(visible=False, elem_id="wb-runs-confirm") as confirm_row:
        confirm_text = gr.Markdown("")
        confirm_button = gr.Button("Yes, delete it", variant="stop", min_width=140, scale=0)
        cancel_button = gr.Button("Cancel", min_width=100, scale=0)
    runs_note = gr.HTML("", css_template=NOTE_CSS, js_on_load=None)
    report_file = gr.File(
        label="Run report (HTML, opens offline)", visible=False, interactive=False, elem_id="wb-runs-report"
    )
    merge_panel.build(ctx, one_run)  # export the picked run's adapter merged into its base model
    step_slider = gr.Slider(
        0, 1, value=0, step=1, label="Step", interactive=False, info="Pick a step to read its groups of completions."
    )
    completions = gr.HTML(
        render_empty_html(NO_RUN_PICKED),
        js_on_load=None,
        apply_default_css=False,
        css_template=".wb-card .wb-badge { border: 0; padding: 0 7px; line-height: 1.6; }",
        elem_id="wb-runs-completions",
    )
    timer = gr.Timer(REFRESH_SECONDS, active=False)  # runs while the Runs tab is open and the page visible
    return RunsComponents(
        rows_state,
        overlaid_state,
        table,
        chosen,
        metric,
        smoothing,
        overlay,
        diff_note,
        diff_table,
        one_run,
        report_button,
        delete_button,
        confirm_row,
        confirm_text,
        confirm_button,
        cancel_button,
        runs_note,
        report_file,
        step_slider,
        completions,
        timer,
    )


def _comparison() -> tuple:
    """Compare runs: the runs ticked, the metric and smoothing, the overlay and the settings that differ."""
    gr.Markdown("### Compare runs", elem_classes=["wb-section"])
    with gr.Row():
        chosen = gr.CheckboxGroup(
            label="Runs to compare",
            choices=[],
            scale=3,
            info="Tick two or more to overlay their curves and see how their settings differ.",
        )
        with gr.Column(scale=1, min_width=220):
            metric = gr.Dropdown(label="Metric", choices=list(OVERLAY_METRICS), value="reward")
            smoothing = gr.Slider(0.0, 0.95, value=0.0, step=0.05, label="Smoothing")
    with gr.Row():
        overlay = gr.Plot(show_label=False, elem_id="wb-runs-overlay", scale=3)
        with gr.Column(scale=2):
            diff_note = gr.Markdown("Tick two or more runs to see the settings that differ.", elem_classes=["wb-note"])
            diff_table = gr.Dataframe(
                headers=["setting"],
                value=[],
                datatype="str",
                interactive=False,
                wrap=True,
                max_height=300,
                label="Settings that differ",
                elem_id="wb-runs-diff",
            )
    return chosen, metric, smoothing, overlay, diff_note, diff_table


class RunsTab:
    """The Runs tab's event handlers, over the context and the components they draw."""

    def __init__(self, ctx: UIContext, ui: RunsComponents):
        self.ctx = ctx
        self.ui = ui
        self.runs_dir = ctx.runs_dir
        self.columns = runs_view.SHARED_COLUMNS if ctx.shared else runs_view.COLUMNS

    # ------------------------------------------------------------ helpers

    def inside(self, viewer: Viewer, run_ids) -> list[str]:
        """The ids that name run folders inside the runs folder that `viewer` may see (ids come from the
        browser: never trusted)."""
        kept = []
        for run_id in run_ids if isinstance(run_ids, list) else []:
            try:
                kept.append(run_access.run_dir_for(self.runs_dir, run_id, viewer).name)
            except runfolder.RunIdError:
                pass
        return kept

    def overlay_figure(
        self, viewer: Viewer, run_ids: list[str], metric_name: str, smooth: float, overlaid: dict
    ) -> dict:
        """The overlay and this page's read of each run on it (only what each run added since is read)."""
        if metric_name in HELD_OUT_METRICS:  # each run's eval.jsonl, read through the process's cache
            runs = {
                run_id: eval_results.as_metrics(eval_results.read_evals(self.runs_dir / run_id))
                for run_id in self.inside(viewer, run_ids)
            }
            return {self.ui.overlay: figure_payload(overlay_figures.overlay_runs(runs, metric_name, smooth))}
        read = {
            run_id: follow.read_metrics(self.runs_dir / run_id, overlaid.get(run_id))
            for run_id in self.inside(viewer, run_ids)
        }
        figure = overlay_figures.overlay_runs(
            {run_id: metrics.frame for run_id, metrics in read.items()}, metric_name, smooth
        )
        cut = [run_id for run_id, metrics in read.items() if metrics.left_out]
        if cut:  # each reader keeps the newest records only (runstore/kept_records.py): say so, and the settings
            figure.add_annotation(
                text=f"Older steps left out of {', '.join(cut)} (limits: {kept_records.RECORDS_ENV}, "
                f"{kept_records.BYTES_ENV})",
                xref="paper",
                yref="paper",
                x=0,
                y=1.08,
                showarrow=False,
                font={"size": 11},
            )
        return {self.ui.overlay: figure_payload(figure), self.ui.overlaid_state: read}

    def diff_outputs(self, viewer: Viewer, run_ids: list[str]) -> dict:
        run_ids = self.inside(viewer, run_ids)
        headers, rows = runs_view.config_diff({r: launch_records.recorded_config(self.runs_dir / r) for r in run_ids})
        if len(run_ids) < 2:
            note = "Tick two or more runs to see the settings that differ."
        elif not rows:
            note = "These runs have the same settings."
        else:
            note = "1 setting differs." if len(rows) == 1 else f"{len(rows)} settings differ."
        return {self.ui.diff_note: note, self.ui.diff_table: gr.Dataframe(headers=headers, value=rows)}

    def completions_view(self, viewer: Viewer, run_id: str | None, wanted: float | None) -> dict:
        ui = self.ui
        run_id = next(iter(self.inside(viewer, [run_id])), None)
        if not run_id:
            return {
                ui.step_slider: gr.Slider(minimum=0, maximum=1, value=0, interactive=False),
                ui.completions: render_empty_html(NO_RUN_PICKED),
            }
        run_dir = self.runs_dir / run_id
        steps = follow.completion_steps(run_dir)
        if not steps:
            return {
                ui.step_slider: gr.Slider(minimum=0, maximum=1, value=0, interactive=False),
                ui.completions: render_empty_html("This run has no completions yet."),
            }
        step = min(steps, key=lambda s: (abs(s - wanted), s)) if wanted is not None else steps[-1]
        config = launch_records.recorded_config(run_dir)
        records = follow.records_of_step(run_dir, step)
        groups = groups_for_step(records, step, config.get("scale_rewards"), config.get("num_generations"))
        low = steps[0] if len(steps) > 1 else steps[0] - 1
        return {
            ui.step_slider: gr.Slider(minimum=low, maximum=steps[-1], value=step, interactive=len(steps) > 1),
            ui.completions: render_groups_html(
                groups, f"{run_id} · step {step} of {steps[-1]}", weights=reward_weight_map(config)
            ),
        }

    def refresh(
        self,
        viewer: Viewer,
        rows: list,
        selected: list[str],
        run_id: str | None,
        metric_name: str,
        smooth: float,
        overlaid: dict,
        force: bool = False,
    ):
        ui = self.ui
        new_rows = read_rows(self.runs_dir, viewer, self.columns)
        if new_rows == rows and not force:
            return gr.skip()
        ids = [row[0] for row in new_rows]
        kept = [r for r in selected or [] if r in ids]
        out = {
            ui.rows_state: new_rows,
            ui.table: new_rows,
            ui.chosen: gr.CheckboxGroup(choices=ids, value=kept),
            ui.one_run: gr.Dropdown(choices=ids, value=run_id if run_id in ids else None),
        }
        if kept or kept != selected or force:
            out.update(self.overlay_figure(viewer, kept, metric_name, smooth, overlaid))
        if kept != selected or force:
            out.update(self.diff_outputs(viewer, kept))
        if run_id and run_id not in ids:
            out.update(self.completions_view(viewer, None, None))
        return out

    # ------------------------------------------------------------ events

    def on_load(self, request: gr.Request, *values):
        return self.refresh(self.ctx.viewer(request), *values, force=True)

    def on_tick(self, request: gr.Request, *values):
        return self.refresh(self.ctx.viewer(request), *values)

    def on_choose(self, request: gr.Request, selected: list[str], metric_name: str, smooth: float, overlaid: dict):
        viewer = self.ctx.viewer(request)
        return {
            **self.overlay_figure(viewer, selected, metric_name, smooth, overlaid),
            **self.diff_outputs(viewer, selected),
        }

    def on_metric(self, request: gr.Request, selected: list[str], metric_name: str, smooth: float, overlaid: dict):
        return self.overlay_figure(self.ctx.viewer(request), selected, metric_name, smooth, overlaid)

    def on_one_run(self, request: gr.Request, run_id: str | None):
        return {
            **self.completions_view(self.ctx.viewer(request), run_id, None),
            self.ui.confirm_row: gr.Row(visible=False),
            self.ui.runs_note: "",
        }

    def on_step(self, request: gr.Request, run_id: str | None, wanted: float | None):
        return self.completions_view(self.ctx.viewer(request), run_id, wanted)

    def ask_to_delete(self, request: gr.Request, run_id: str | None):
        ui = self.ui
        if not run_id:
            return {
                ui.runs_note: note_html("Pick the run to delete first.", "warn"),
                ui.confirm_row: gr.Row(visible=False),
            }
        try:
            run_access.run_dir_for(self.runs_dir, run_id, self.ctx.viewer(request), control=True)
        except runfolder.RunIdError as exc:
            return {ui.runs_note: note_html(f"Not deleted: {exc}", "error"), ui.confirm_row: gr.Row(visible=False)}
        return {
            ui.confirm_row: gr.Row(visible=True),
            ui.runs_note: "",
            ui.confirm_text: f"Delete **{markdown_text(run_id)}** and every file in its folder (checkpoints, adapter, logs)? "
            f"This cannot be undone.",
        }

    def delete(
        self,
        request: gr.Request,
        run_id: str | None,
        rows: list,
        selected: list[str],
        metric_name: str,
        smooth: float,
        overlaid: dict,
    ):
        ui = self.ui
        hide = {ui.confirm_row: gr.Row(visible=False)}
        if not run_id:
            return hide
        viewer = self.ctx.viewer(request)
        try:
            launcher.delete_run(run_access.run_dir_for(self.runs_dir, run_id, viewer, control=True).name, self.runs_dir)
        except (launcher.LauncherError, runfolder.RunIdError) as exc:
            return {**hide, ui.runs_note: note_html(f"Not deleted: {exc}", "error")}
        out = self.refresh(viewer, rows, selected, None, metric_name, smooth, overlaid, force=True)
        out.update(self.completions_view(viewer, None, None))
        out[ui.one_run] = gr.Dropdown(choices=[row[0] for row in out[ui.rows_state]], value=None)
        return {**out, **hide, ui.runs_note: note_html(f"Deleted {run_id}.")}

    @staticmethod
    def on_cancel() -> gr.Row:
        return gr.Row(visible=False)

    def write_report(self, request: gr.Request, run_id: str | None):
        """The picked run's report, written into its folder and offered for download."""
        ui = self.ui
        try:
            run_dir = run_access.run_dir_for(self.runs_dir, run_id, self.ctx.viewer(request), control=True)
        except runfolder.RunIdError:
            return {
                ui.report_file: gr.File(value=None, visible=False),
                ui.runs_note: note_html("Pick the run whose report to write first.", "warn"),
            }
        try:
            written, download = run_reports.write_report(run_dir)
        except OSError as exc:
            return {
                ui.report_file: gr.File(value=None, visible=False),
                ui.runs_note: note_html(f"The report could not be written: {exc}", "error"),
            }
        return {
            ui.report_file: gr.File(value=str(download), visible=True),
            ui.runs_note: note_html(
                f"Report written to {written}: one HTML file with the curves, groups and "
                f"settings, readable in any browser without a network."
            ),
        }

    @staticmethod
    def hide_report() -> gr.File:
        return gr.File(value=None, visible=False)


def build(ctx: UIContext) -> None:
    """Lay the tab out and wire its events to a `RunsTab`."""
    ui = layout(ctx)
    tab = RunsTab(ctx, ui)
    refresh_inputs, refresh_outputs = ui.refresh_inputs, ui.refresh_outputs
    ctx.blocks.load(tab.on_load, inputs=refresh_inputs, outputs=refresh_outputs, show_progress="hidden")
    ui.timer.tick(
        tab.on_tick,
        inputs=refresh_inputs,
        outputs=refresh_outputs,
        show_progress="hidden",
        concurrency_limit=None,
        trigger_mode="once",
    )
    ctx.tab_timers["Runs"] = ui.timer
    ctx.tab_opened["Runs"] = (tab.on_tick, refresh_inputs, refresh_outputs)  # fresh rows at once, not a tick later
    overlay_inputs = [ui.chosen, ui.metric, ui.smoothing, ui.overlaid_state]
    ui.chosen.input(
        tab.on_choose,
        inputs=overlay_inputs,
        outputs=[ui.overlay, ui.overlaid_state, ui.diff_note, ui.diff_table],
        show_progress="hidden",
    )
    for control in (ui.metric, ui.smoothing):
        control.input(
            tab.on_metric, inputs=overlay_inputs, outputs=[ui.overlay, ui.overlaid_state], show_progress="hidden"
        )
    ui.one_run.input(
        tab.on_one_run,
        inputs=[ui.one_run],
        outputs=[ui.step_slider, ui.completions, ui.confirm_row, ui.runs_note],
        show_progress="hidden",
    )
    # `input` also fires for arrow keys and a typed number, which `release` misses.
    ui.step_slider.input(
        tab.on_step,
        inputs=[ui.one_run, ui.step_slider],
        outputs=[ui.step_slider, ui.completions],
        show_progress="hidden",
        trigger_mode="always_last",
    )
    ui.delete_button.click(
        tab.ask_to_delete,
        inputs=[ui.one_run],
        outputs=[ui.confirm_row, ui.confirm_text, ui.runs_note],
        show_progress="hidden",
    )
    ui.cancel_button.click(tab.on_cancel, outputs=[ui.confirm_row], show_progress="hidden")
    ui.confirm_button.click(
        tab.delete,
        inputs=[ui.one_run, ui.rows_state, *overlay_inputs],
        outputs=[*refresh_outputs, ui.confirm_row, ui.runs_note],
        show_progress="hidden",
    )
    ui.report_button.click(
        tab.write_report, inputs=[ui.one_run], outputs=[ui.report_file, ui.runs_note], show_progress="minimal"
    )
    ui.one_run.input(tab.hide_report, outputs=[ui.report_file], show_progress="hidden")
