"""The Runs tab: every run in the runs folder, compared, inspected, deleted.

- A table of all runs (state, model, task, generation backend, steps, final reward, started,
  duration), re-read from the run folders when the tab is opened and every few
  seconds while it is open, and redrawn only when a row changed. A queued run
  shows its place in the GPU queue and what it waits for; each refresh also
  makes sure the queue has its dispatcher (`launcher.keep_queue_moving`).
- Compare: tick several runs to overlay one metric's curves on one figure and
  list the settings in which their configs differ.
- One run: read its completions group by group at any step, write its report
  (one HTML file, kept in the run folder and offered for download), export its
  adapter merged into the base model (workbench/ui/merge_panel.py), or delete it
  (after a confirmation; a live run must be stopped first).

Nothing is cached in the process: two browser tabs see the same runs. On a
dashboard with accounts each user's table, overlays and pickers hold only the
runs they may see (an admin's hold all, with an owner column), and every event
checks the ids the browser sends against that rule again (run_access.run_dir_for).
"""

from __future__ import annotations

import html

import gradio as gr

from workbench.access.owners import Viewer
from workbench.insight import figures
from workbench.insight.groups import groups_for_step
from workbench.jobs import launcher, runfolder
from workbench.ui import merge_panel, run_access, runs_view
from workbench.ui.completions_view import render_empty_html, render_groups_html
from workbench.ui.context import UIContext
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
)

NOTE_CSS = """
.wb-runs-note { font-size: 0.9rem; border-radius: 8px; padding: 8px 12px; }
.wb-runs-note-info { background: #eff6ff; color: #1e3a8a; border: 1px solid #bfdbfe; }
.wb-runs-note-error { background: #fef2f2; color: #7f1d1d; border: 1px solid #fca5a5; }
.wb-runs-note-warn { background: #fffbeb; color: #78350f; border: 1px solid #fcd34d; }
"""


def note_html(message: str, kind: str = "info") -> str:
    return f'<div class="wb-runs-note wb-runs-note-{kind}">{html.escape(message)}</div>' if message else ""


def read_rows(runs_dir, viewer: Viewer, columns: tuple[str, ...] = runs_view.COLUMNS) -> list[list]:
    runs = launcher.list_runs(runs_dir)
    launcher.keep_queue_moving(runs_dir, runs)  # a queue left without its dispatcher (a reboot) moves again
    entries = run_access.visible_entries(runs, viewer)
    if not run_access.sees_all(viewer):  # a queued run waits for runs of others too: not by their ids
        shown = [entry["run_id"] for entry in entries]
        entries = [{**entry, "waits_for": run_access.hide_other_runs(entry["waits_for"], shown)}
                   if entry.get("waits_for") else entry for entry in entries]
    return runs_view.runs_rows((runs_view.summarise_run(entry) for entry in entries), columns)


def build(ctx: UIContext) -> None:
    runs_dir = ctx.runs_dir
    columns = runs_view.SHARED_COLUMNS if ctx.shared else runs_view.COLUMNS
    widths = runs_view.SHARED_COLUMN_WIDTHS if ctx.shared else runs_view.COLUMN_WIDTHS
    rows_state = gr.State([])
    # run id -> runs_view.RunMetrics of the runs this page overlays, extended as they grow
    overlaid_state = gr.State({})

    gr.Markdown("### All runs\nRead from the run folders; updates by itself while runs go.",
                elem_classes=["wb-section"])
    gr.Markdown(runs_view.runs_folder_note(runs_dir), elem_classes=["wb-note"], elem_id="wb-runs-folder")
    table = gr.Dataframe(headers=list(columns), value=[], datatype="str", interactive=False,
                         wrap=True, max_height=320, elem_id="wb-runs-table",
                         column_widths=list(widths))

    gr.Markdown("### Compare runs", elem_classes=["wb-section"])
    with gr.Row():
        chosen = gr.CheckboxGroup(label="Runs to compare", choices=[], scale=3,
                                  info="Tick two or more to overlay their curves and see how their settings differ.")
        with gr.Column(scale=1, min_width=220):
            metric = gr.Dropdown(label="Metric", choices=list(OVERLAY_METRICS), value="reward")
            smoothing = gr.Slider(0.0, 0.95, value=0.0, step=0.05, label="Smoothing")
    with gr.Row():
        overlay = gr.Plot(show_label=False, elem_id="wb-runs-overlay", scale=3)
        with gr.Column(scale=2):
            diff_note = gr.Markdown("Tick two or more runs to see the settings that differ.",
                                    elem_classes=["wb-note"])
            diff_table = gr.Dataframe(headers=["setting"], value=[], datatype="str", interactive=False, wrap=True,
                                      max_height=300, label="Settings that differ", elem_id="wb-runs-diff")

    gr.Markdown("### One run", elem_classes=["wb-section"])
    with gr.Row(equal_height=True):
        one_run = gr.Dropdown(label="Run", choices=[], value=None, scale=4, elem_id="wb-runs-one",
                              info="Read its completions group by group, or delete it.")
        report_button = gr.Button("Report", scale=1, min_width=110, elem_id="wb-runs-report-button")
        delete_button = gr.Button("Delete run…", variant="stop", scale=1, min_width=130)
    with gr.Row(visible=False, elem_id="wb-runs-confirm") as confirm_row:
        confirm_text = gr.Markdown("")
        confirm_button = gr.Button("Yes, delete it", variant="stop", min_width=140, scale=0)
        cancel_button = gr.Button("Cancel", min_width=100, scale=0)
    runs_note = gr.HTML("", css_template=NOTE_CSS, js_on_load=None)
    report_file = gr.File(label="Run report (HTML, opens offline)", visible=False, interactive=False,
                          elem_id="wb-runs-report")
    merge_panel.build(ctx, one_run)  # export the picked run's adapter merged into its base model
    step_slider = gr.Slider(0, 1, value=0, step=1, label="Step", interactive=False,
                            info="Pick a step to read its groups of completions.")
    completions = gr.HTML(render_empty_html("Pick a run to read its completions."), js_on_load=None,
                          apply_default_css=False,
                          css_template=".wb-card .wb-badge { border: 0; padding: 0 7px; line-height: 1.6; }",
                          elem_id="wb-runs-completions")
    timer = gr.Timer(REFRESH_SECONDS, active=False)  # runs while the Runs tab is open and the page visible

    # ------------------------------------------------------------ helpers

    def inside(viewer: Viewer, run_ids) -> list[str]:
        """The ids that name run folders inside the runs folder that `viewer` may see (ids come from the
        browser: never trusted)."""
        kept = []
        for run_id in run_ids if isinstance(run_ids, list) else []:
            try:
                kept.append(run_access.run_dir_for(runs_dir, run_id, viewer).name)
            except runfolder.RunIdError:
                pass
        return kept

    def overlay_figure(viewer: Viewer, run_ids: list[str], metric_name: str, smooth: float, overlaid: dict) -> dict:
        """The overlay and this page's read of each run on it (only what each run added since is read)."""
        read = {run_id: runs_view.read_run_metrics(runs_dir / run_id, overlaid.get(run_id))
                for run_id in inside(viewer, run_ids)}
        figure = figures.overlay_runs({run_id: metrics.frame for run_id, metrics in read.items()}, metric_name, smooth)
        return {overlay: figure_payload(figure), overlaid_state: read}

    def diff_outputs(viewer: Viewer, run_ids: list[str]) -> dict:
        run_ids = inside(viewer, run_ids)
        headers, rows = runs_view.config_diff({r: runfolder.read_config(runs_dir / r) for r in run_ids})
        if len(run_ids) < 2:
            note = "Tick two or more runs to see the settings that differ."
        elif not rows:
            note = "These runs have the same settings."
        else:
            note = "1 setting differs." if len(rows) == 1 else f"{len(rows)} settings differ."
        return {diff_note: note, diff_table: gr.Dataframe(headers=headers, value=rows)}

    def completions_view(viewer: Viewer, run_id: str | None, wanted: float | None) -> dict:
        run_id = next(iter(inside(viewer, [run_id])), None)
        if not run_id:
            return {step_slider: gr.Slider(minimum=0, maximum=1, value=0, interactive=False),
                    completions: render_empty_html("Pick a run to read its completions.")}
        steps = runs_view.completion_steps(runs_dir / run_id)
        if not steps:
            return {step_slider: gr.Slider(minimum=0, maximum=1, value=0, interactive=False),
                    completions: render_empty_html("This run has no completions yet.")}
        step = min(steps, key=lambda s: (abs(s - wanted), s)) if wanted is not None else steps[-1]
        config = runfolder.read_config(runs_dir / run_id)
        records = runs_view.completions_of_step(runs_dir / run_id, step)
        groups = groups_for_step(records, step, config.get("scale_rewards"), config.get("num_generations"))
        low = steps[0] if len(steps) > 1 else steps[0] - 1
        return {step_slider: gr.Slider(minimum=low, maximum=steps[-1], value=step, interactive=len(steps) > 1),
                completions: render_groups_html(groups, f"{run_id} · step {step} of {steps[-1]}")}

    def refresh(viewer: Viewer, rows: list, selected: list[str], run_id: str | None, metric_name: str,
                smooth: float, overlaid: dict, force: bool = False):
        new_rows = read_rows(runs_dir, viewer, columns)
        if new_rows == rows and not force:
            return gr.skip()
        ids = [row[0] for row in new_rows]
        kept = [r for r in selected or [] if r in ids]
        out = {rows_state: new_rows, table: new_rows,
               chosen: gr.CheckboxGroup(choices=ids, value=kept),
               one_run: gr.Dropdown(choices=ids, value=run_id if run_id in ids else None)}
        if kept or kept != selected or force:
            out.update(overlay_figure(viewer, kept, metric_name, smooth, overlaid))
        if kept != selected or force:
            out.update(diff_outputs(viewer, kept))
        if run_id and run_id not in ids:
            out.update(completions_view(viewer, None, None))
        return out

    # ------------------------------------------------------------ events

    def on_load(request: gr.Request, *values):
        return refresh(ctx.viewer(request), *values, force=True)

    def on_tick(request: gr.Request, *values):
        return refresh(ctx.viewer(request), *values)

    refresh_inputs = [rows_state, chosen, one_run, metric, smoothing, overlaid_state]
    refresh_outputs = [rows_state, table, chosen, one_run, overlay, overlaid_state, diff_note, diff_table, step_slider,
                       completions]
    ctx.blocks.load(on_load, inputs=refresh_inputs, outputs=refresh_outputs, show_progress="hidden")
    timer.tick(on_tick, inputs=refresh_inputs, outputs=refresh_outputs, show_progress="hidden",
               concurrency_limit=None, trigger_mode="once")
    ctx.tab_timers["Runs"] = timer
    ctx.tab_opened["Runs"] = (on_tick, refresh_inputs, refresh_outputs)  # fresh rows at once, not a tick later

    def on_choose(request: gr.Request, selected: list[str], metric_name: str, smooth: float, overlaid: dict):
        viewer = ctx.viewer(request)
        return {**overlay_figure(viewer, selected, metric_name, smooth, overlaid), **diff_outputs(viewer, selected)}

    def on_metric(request: gr.Request, selected: list[str], metric_name: str, smooth: float, overlaid: dict):
        return overlay_figure(ctx.viewer(request), selected, metric_name, smooth, overlaid)

    chosen.input(on_choose, inputs=[chosen, metric, smoothing, overlaid_state],
                 outputs=[overlay, overlaid_state, diff_note, diff_table], show_progress="hidden")
    for control in (metric, smoothing):
        control.input(on_metric, inputs=[chosen, metric, smoothing, overlaid_state],
                      outputs=[overlay, overlaid_state], show_progress="hidden")

    def on_one_run(request: gr.Request, run_id: str | None):
        return {**completions_view(ctx.viewer(request), run_id, None), confirm_row: gr.Row(visible=False),
                runs_note: ""}

    def on_step(request: gr.Request, run_id: str | None, wanted: float | None):
        return completions_view(ctx.viewer(request), run_id, wanted)

    one_run.input(on_one_run, inputs=[one_run], outputs=[step_slider, completions, confirm_row, runs_note],
                  show_progress="hidden")
    # `input` also fires for arrow keys and a typed number, which `release` misses.
    step_slider.input(on_step, inputs=[one_run, step_slider], outputs=[step_slider, completions],
                      show_progress="hidden", trigger_mode="always_last")

    def ask_to_delete(request: gr.Request, run_id: str | None):
        if not run_id:
            return {runs_note: note_html("Pick the run to delete first.", "warn"), confirm_row: gr.Row(visible=False)}
        try:
            run_access.run_dir_for(runs_dir, run_id, ctx.viewer(request), control=True)
        except runfolder.RunIdError as exc:
            return {runs_note: note_html(f"Not deleted: {exc}", "error"), confirm_row: gr.Row(visible=False)}
        return {confirm_row: gr.Row(visible=True), runs_note: "",
                confirm_text: f"Delete **{run_id}** and every file in its folder (checkpoints, adapter, logs)? "
                              f"This cannot be undone."}

    def delete(request: gr.Request, run_id: str | None, rows: list, selected: list[str], metric_name: str,
               smooth: float, overlaid: dict):
        hide = {confirm_row: gr.Row(visible=False)}
        if not run_id:
            return hide
        viewer = ctx.viewer(request)
        try:
            launcher.delete_run(run_access.run_dir_for(runs_dir, run_id, viewer, control=True).name, runs_dir)
        except (launcher.LauncherError, runfolder.RunIdError) as exc:
            return {**hide, runs_note: note_html(f"Not deleted: {exc}", "error")}
        out = refresh(viewer, rows, selected, None, metric_name, smooth, overlaid, force=True)
        out.update(completions_view(viewer, None, None))
        out[one_run] = gr.Dropdown(choices=[row[0] for row in out[rows_state]], value=None)
        return {**out, **hide, runs_note: note_html(f"Deleted {run_id}.")}

    delete_button.click(ask_to_delete, inputs=[one_run], outputs=[confirm_row, confirm_text, runs_note],
                        show_progress="hidden")
    cancel_button.click(lambda: gr.Row(visible=False), outputs=[confirm_row], show_progress="hidden")
    confirm_button.click(delete, inputs=[one_run, rows_state, chosen, metric, smoothing, overlaid_state],
                         outputs=[*refresh_outputs, confirm_row, runs_note], show_progress="hidden")

    def write_report(request: gr.Request, run_id: str | None):
        """The picked run's report, written into its folder and offered for download."""
        try:
            run_dir = run_access.run_dir_for(runs_dir, run_id, ctx.viewer(request), control=True)
        except runfolder.RunIdError:
            return {report_file: gr.File(value=None, visible=False),
                    runs_note: note_html("Pick the run whose report to write first.", "warn")}
        try:
            written, download = runs_view.write_report(run_dir)
        except OSError as exc:
            return {report_file: gr.File(value=None, visible=False),
                    runs_note: note_html(f"The report could not be written: {exc}", "error")}
        return {report_file: gr.File(value=str(download), visible=True),
                runs_note: note_html(f"Report written to {written}: one HTML file with the curves, groups and "
                                     f"settings, readable in any browser without a network.")}

    report_button.click(write_report, inputs=[one_run], outputs=[report_file, runs_note], show_progress="minimal")
    one_run.input(lambda: gr.File(value=None, visible=False), outputs=[report_file], show_progress="hidden")
