"""The Train tab: launch, stop and resume a run, and watch it live.

Layout, top to bottom: the run picker with Launch / Stop / Resume; a progress
bar (step, total, elapsed, remaining); a failed run's hint, error and the end
of train.log; the main curves (reward, reward std, KL, loss) beside the health
alarms and the smoothing control; the completions of a step, group by group,
with a slider over steps; then the other curves.

Liveness: the page's script (`train_view.WATCH_JS`) asks the server for the
shown run's `change_signature` at a pace tied to the run's step time
(`train_view.poll_seconds`: about four looks a step, 1 to 5 s), only while the
Train tab is open and the browser tab visible, and clicks a hidden refresh
button when the run folder changed: a Gradio event (whose frontend work grows
with the number of outputs) happens once or twice a step, not every few
seconds, and the clock moves in the page. A refresh reads only the bytes the
run wrote since the last one (`train_view.poll_run`) and redraws only what changed.
What the page knows lives in this browser session's
`gr.State` (a `train_view.RunWatch`); the run it shows is also kept in the
browser's localStorage (`gr.BrowserState`) so a reload re-attaches to it.
Nothing about runs is kept in the process: two tabs see the same run folders.
A launch whose devices another run holds waits in the GPU queue: the bar then
shows its position and what it waits for, and Stop takes it out of the queue.

On a dashboard with accounts every event asks who it comes from: the picker,
the newest run to follow and the change route hold only runs that user may
see, and Launch, Stop and Resume check the run's owner again on the server
(workbench/access/owners.py); a launched run records its user as its owner.
"""

from __future__ import annotations

import html
from dataclasses import replace

import gradio as gr

from workbench.access.owners import Viewer
from workbench.errors import WorkbenchError
from workbench.insight import figures
from workbench.insight.groups import groups_for_step
from workbench.insight.health import check_health
from workbench.jobs import launcher, runfolder
from workbench.ui import owners_view, paths_view, server_view, train_view
from workbench.ui.completions_view import render_empty_html, render_groups_html
from workbench.ui.context import UIContext
from workbench.ui.widgets import figure_payload

DEFAULT_SMOOTHING = 0.5
MAIN_FIGURES = ("reward", "reward_std", "kl", "loss")
MORE_FIGURES = ("completion_length", "clip_ratio", "entropy", "grad_norm", "learning_rate", "step_time")
# Seconds Stop waits for the trainer to save and stop before killing its process group.
STOP_TIMEOUT_S = 60.0

NOTICE_CSS = """
.wb-notice { border-radius: 8px; padding: 8px 12px; font-size: 0.9rem; white-space: pre-wrap; }
.wb-notice-error { background: #fef2f2; color: #7f1d1d; border: 1px solid #fca5a5; }
.wb-notice-info { background: #eff6ff; color: #1e3a8a; border: 1px solid #bfdbfe; }
"""


def notice_html(message: str, kind: str = "error") -> gr.HTML:
    """A note above the progress bar; hidden when empty so it leaves no gap."""
    text = f'<div class="wb-notice wb-notice-{kind}">{html.escape(message)}</div>' if message else ""
    return gr.HTML(text, visible=bool(message))


def build(ctx: UIContext) -> None:
    remembered = gr.BrowserState(None, storage_key="wb-train-run")
    watch_state = gr.State(train_view.RunWatch())
    # None follows the newest step; a step number keeps the slider where the person put it.
    pinned_state = gr.State(None)

    # The Setup tab's verdict: Launch stays disabled while the batch plan is invalid.
    plan_valid = ctx.components.get("plan_valid")
    with gr.Row(equal_height=True):
        run_picker = gr.Dropdown(label="Run shown", choices=[], value=None, scale=4, allow_custom_value=False,
                                 info="The run this page follows; Launch starts a new one from the Setup tab's settings.")
        launch_button = gr.Button("Launch", variant="primary", scale=1, min_width=110,
                                  interactive=plan_valid is None or bool(plan_valid.value))
        stop_button = gr.Button("Stop", variant="stop", scale=1, min_width=90, interactive=False)
        resume_button = gr.Button("Resume", scale=1, min_width=90, interactive=False)
    notice = gr.HTML("", css_template=NOTICE_CSS, js_on_load=None, visible=False)
    progress = gr.HTML(train_view.progress_html(None, None), css_template=train_view.PROGRESS_CSS, js_on_load=None,
                       elem_id="wb-train-progress")
    failure = gr.HTML("", css_template=train_view.FAILURE_CSS, js_on_load=None, elem_id="wb-train-failure",
                      visible=False)
    server = gr.HTML("", css_template=server_view.SERVER_CSS, js_on_load=None, elem_id="wb-train-server",
                     visible=False)  # the run's vLLM server, for generation=vllm-server / trl-server

    plots: dict[str, gr.Plot] = {}
    with gr.Row():
        with gr.Column(scale=3):
            for pair in (MAIN_FIGURES[:2], MAIN_FIGURES[2:]):
                with gr.Row():
                    for name in pair:
                        plots[name] = gr.Plot(show_label=False, elem_id=f"wb-plot-{name}")
        with gr.Column(scale=1, min_width=260):
            smoothing = gr.Slider(0.0, 0.95, value=DEFAULT_SMOOTHING, step=0.05, label="Smoothing",
                                  info="Exponential moving average of the curves; the raw points stay faint.")
            gr.Markdown("### Health", elem_classes=["wb-section"])
            alarms = gr.HTML(train_view.alarms_html([], False), css_template=train_view.ALARMS_CSS, js_on_load=None,
                             elem_id="wb-train-alarms")

    gr.Markdown("### Completions, group by group\nEach prompt's G completions side by side: every reward "
                "function's score, the total, and the advantage `(r - mean) / std` they produce.",
                elem_classes=["wb-section"])
    step_slider = gr.Slider(0, 1, value=0, step=1, label="Step", interactive=False,
                            info="Newest step while a run goes; move it to read an earlier step.")
    # Without gradio's prose styles: the cards bring their own (its table borders would box every score).
    # The app theme's plan badge shares the class name `wb-badge`; keep the card badges small pills.
    completions = gr.HTML(render_empty_html(), js_on_load=None, apply_default_css=False,
                          css_template=".wb-card .wb-badge { border: 0; padding: 0 7px; line-height: 1.6; }",
                          elem_id="wb-train-completions")

    # Closed at first, and drawn only while open: each figure redrawn costs the browser
    # CPU that, on a small machine, the training process is waiting for.
    with gr.Accordion("More metrics: completion length, clipping, entropy, grad norm, learning rate, step time",
                      open=False, elem_id="wb-train-more") as more_metrics:
        for triple in (MORE_FIGURES[:3], MORE_FIGURES[3:]):
            with gr.Row():
                for name in triple:
                    plots[name] = gr.Plot(show_label=False, elem_id=f"wb-plot-{name}")

    # Clicked by the page's script (train_view.WATCH_JS) when the run folder changed, and once the page shows
    # that change, while More metrics is open, to draw those figures too (a refresh leaves them out: each
    # output costs gradio about a millisecond per event, drawn or not).
    refresh = gr.Button("refresh", visible="hidden", elem_id=train_view.REFRESH_BUTTON_ID)
    refresh_more = gr.Button("refresh more metrics", visible="hidden", elem_id=train_view.MORE_BUTTON_ID)
    plot_list = [plots[name] for name in (*MAIN_FIGURES, *MORE_FIGURES)]
    more_plots = [plots[name] for name in MORE_FIGURES]
    view_outputs = [watch_state, pinned_state, run_picker, stop_button, resume_button, progress, failure, server,
                    alarms, step_slider, completions, *plot_list]

    runs_dir = ctx.runs_dir
    # Figures, alarms and groups as drawn for a read of a run's files, for every page showing it.
    drawn = train_view.Drawn()
    # The launcher's status (a dead process shows as failed), with a queued run's place in the GPU queue.
    read_status = launcher.status_with_queue_place

    # ------------------------------------------------------------ rendering

    def render(watch: train_view.RunWatch, pinned: int | None, smooth: float, changes: train_view.Changes,
               full: bool = False, with_more: bool = True) -> dict:
        """Outputs for what changed (everything when `full`; More metrics' figures only `with_more`)."""
        live_run = train_view.is_live(watch.status)
        watch = replace(watch, poll_seconds=train_view.poll_seconds(watch.status, watch.metrics))
        out: dict = {}
        # Always: the bar carries the signature this drawing reflects, and the page's script compares with it.
        out[progress] = train_view.progress_html(
            watch.run_id, train_view.measure_progress(watch.status, watch.metrics) if watch.run_id else None,
            watch.signature, watch.poll_seconds)
        if full or changes.status:
            log_tail = runfolder.read_log_tail(runs_dir / watch.run_id, 3000) if watch.run_id and \
                watch.status.get("state") == "failed" else ""
            failure_panel = train_view.failure_html(watch.status, log_tail)
            server_panel = server_view.server_html(watch.status, server_view.server_log_tail(
                runs_dir / watch.run_id, watch.status)) if watch.run_id else ""
            resumable = bool(watch.run_id) and not live_run and watch.status.get("state") != "finished" \
                and runfolder.last_checkpoint(runs_dir / watch.run_id) is not None
            controls = (failure_panel, server_panel, live_run, resumable)
            if full or controls != watch.controls_shown:  # a live run's status moves every step, these rarely
                out[failure] = gr.HTML(failure_panel, visible=bool(failure_panel))
                out[server] = gr.HTML(server_panel, visible=bool(server_panel))
                out[stop_button] = gr.Button(interactive=live_run)
                out[resume_button] = gr.Button(interactive=resumable)
                watch = replace(watch, controls_shown=controls)
        if full or changes.metrics:
            out.update(render_figures(watch, smooth, None if with_more else MAIN_FIGURES))
        if full or changes.metrics or changes.skipped:  # unreadable lines of the run's files show among the alarms
            skipped = tuple(sorted(watch.skipped.items()))
            out[alarms] = drawn.get(("alarms", *train_view.metrics_read(watch), skipped), lambda: train_view.alarms_html(
                check_health(metrics_of(watch), watch.config) + train_view.skipped_alarms(watch.skipped),
                bool(watch.metrics)))
        if full or changes.completions:
            out.update(render_completions(watch, pinned))
        out[watch_state] = watch
        return out

    def render_figures(watch: train_view.RunWatch, smooth: float, names: tuple[str, ...] | None = None) -> dict:
        """The figures named (default: those on screen: the main ones, and More metrics while open)."""
        if names is None:
            names = (*MAIN_FIGURES, *MORE_FIGURES) if watch.more_metrics_open else MAIN_FIGURES

        def draw() -> dict:  # as the Plot components send them, ready for any page
            built = figures.build_figures(metrics_of(watch), smooth, names)
            return {name: figure_payload(built[name]) for name in names}

        sent = drawn.get(("figures", *train_view.metrics_read(watch), float(smooth), names), draw)
        return {plots[name]: sent[name] for name in names}

    def metrics_of(watch: train_view.RunWatch):
        """The watch's metric records as a frame (it keeps one, extended a row a step), for figures and health."""
        return watch.frame if watch.frame is not None else watch.metrics

    def render_completions(watch: train_view.RunWatch, pinned: int | None) -> dict:
        steps = watch.completion_steps
        if not steps:
            return {step_slider: gr.Slider(minimum=0, maximum=1, value=0, interactive=False),
                    completions: render_empty_html()}
        step = train_view.nearest_step(steps, pinned)

        def draw() -> str:
            records = watch.newest_completions if step == steps[-1] else \
                train_view.completions_of_step(runs_dir, watch.run_id, step)
            groups = groups_for_step(records, step, watch.config.get("scale_rewards"),
                                     watch.config.get("num_generations"))
            title = f"Step {step}" + (" (newest)" if step == steps[-1] else f" of {steps[-1]}")
            return render_groups_html(groups, title)

        # A slider needs two ends; with one step so far it spans step-1..step.
        low = steps[0] if len(steps) > 1 else steps[0] - 1
        return {step_slider: gr.Slider(minimum=low, maximum=steps[-1], value=step, interactive=len(steps) > 1),
                completions: drawn.get(("groups", *train_view.completions_read(watch), step), draw)}

    def picker_shows(viewer: Viewer, run_id: str | None) -> tuple[tuple[str, ...], str | None]:
        """The runs the picker offers `viewer`, and the one it shows."""
        choices = tuple(path.name for path in owners_view.visible_run_dirs(runs_dir, viewer))
        return choices, run_id if run_id in choices else None

    def picker_update(shows: tuple[tuple[str, ...], str | None]) -> gr.Dropdown:
        return gr.Dropdown(choices=list(shows[0]), value=shows[1])

    def signature_of(viewer: Viewer, run_id: str | None) -> str:
        """The change signature over the runs `viewer` may see (the change route's, for the same viewer)."""
        return train_view.change_signature(runs_dir, run_id, status_for(viewer),
                                           owners_view.visible_run_dirs(runs_dir, viewer))

    def status_for(viewer: Viewer):
        """The status reader for `viewer`: a queued run's place, naming only runs they may see."""
        return owners_view.status_reader(read_status, runs_dir, viewer)

    def visible_entries(viewer: Viewer) -> list[dict]:
        return owners_view.visible_entries(launcher.list_runs(runs_dir), viewer)

    def attach(viewer: Viewer, run_id: str | None, newest_known: str | None, smooth: float,
               more_open: bool = False, with_more: bool = True) -> dict:
        """Start following `run_id`: read all it wrote so far and draw everything (More metrics' figures when
        that section is open and `with_more`)."""
        watch = replace(train_view.start_watching(runs_dir, run_id, newest_known), more_metrics_open=more_open,
                        signature=signature_of(viewer, run_id))
        watch, changes = train_view.poll_run(watch, runs_dir, status_for(viewer))
        out = render(watch, None, smooth, changes, full=True, with_more=with_more)
        out[pinned_state] = None
        shows = picker_shows(viewer, run_id)
        out[run_picker] = picker_update(shows)
        out[watch_state] = replace(out[watch_state], picker_shown=shows)
        return out

    # ------------------------------------------------------------ events

    def on_load(request: gr.Request, remembered_run: str | None, smooth: float):
        viewer = ctx.viewer(request)
        entries = visible_entries(viewer)
        run_id = train_view.choose_run([(e["run_id"], e) for e in entries], remembered_run)
        out = attach(viewer, run_id, entries[0]["run_id"] if entries else None, smooth)
        out[remembered] = run_id
        return out

    def on_refresh(request: gr.Request, watch: train_view.RunWatch, pinned: int | None, smooth: float):
        viewer = ctx.viewer(request)
        run_ids = [path.name for path in owners_view.visible_run_dirs(runs_dir, viewer)]
        if watch.run_id and watch.run_id not in run_ids:  # deleted from the Runs tab or another tab
            entries = visible_entries(viewer)
            out = attach(viewer, train_view.choose_run([(e["run_id"], e) for e in entries], None), watch.newest_known,
                         smooth, watch.more_metrics_open, with_more=False)
            out[notice] = notice_html(f"Run {watch.run_id} was deleted.", "info")
            return out
        before = watch.newest_known
        switch_to, newest_known = train_view.new_run_to_follow(run_ids, watch)
        if switch_to:
            out = attach(viewer, switch_to, newest_known, smooth, watch.more_metrics_open, with_more=False)
            out[remembered] = switch_to
            return out
        # Taken before reading: what lands meanwhile changes the signature, so the page asks again.
        signature = signature_of(viewer, watch.run_id)
        if newest_known != watch.newest_known:
            watch = replace(watch, newest_known=newest_known)
        new_watch, changes = train_view.poll_run(watch, runs_dir, status_for(viewer))
        if not changes.anything and signature == watch.signature:
            return {watch_state: new_watch} if newest_known != before else gr.skip()
        new_watch = replace(new_watch, signature=signature)
        out = render(new_watch, pinned, smooth, changes, with_more=False)
        if changes.status:
            shows = picker_shows(viewer, new_watch.run_id)
            if shows != new_watch.picker_shown:
                out[run_picker] = picker_update(shows)
                out[watch_state] = replace(out[watch_state], picker_shown=shows)
        if changes.metrics and not watch.metrics:  # the "first points appear once..." note has come true
            out[notice] = notice_html("")
        return out

    def on_pick(request: gr.Request, run_id: str | None, watch: train_view.RunWatch, smooth: float):
        if not run_id or run_id == watch.run_id:
            return gr.skip()
        viewer = ctx.viewer(request)
        try:
            owners_view.run_dir_for(runs_dir, run_id, viewer)  # the id comes from the browser
        except runfolder.RunIdError as exc:
            return {notice: notice_html(str(exc))}
        out = attach(viewer, run_id, watch.newest_known, smooth, watch.more_metrics_open)
        out[remembered] = run_id
        out[notice] = notice_html("")
        return out

    def on_refresh_more(watch: train_view.RunWatch, smooth: float):
        """More metrics' figures, after a refresh has read what the run added (the page's script asks)."""
        if not (watch.run_id and watch.more_metrics_open):
            return gr.skip()
        return render_figures(watch, smooth, MORE_FIGURES)

    def on_more_metrics(watch: train_view.RunWatch, smooth: float, opened: bool):
        watch = replace(watch, more_metrics_open=opened)
        out = {watch_state: watch}
        if opened and watch.run_id:
            out.update(render_figures(watch, smooth, MORE_FIGURES))
        return out

    def on_smoothing(watch: train_view.RunWatch, smooth: float):
        return render_figures(watch, smooth) if watch.run_id else gr.skip()

    def on_step(watch: train_view.RunWatch, wanted: float):
        if not watch.completion_steps:
            return gr.skip()
        step = train_view.nearest_step(watch.completion_steps, wanted)
        pinned = None if step == watch.completion_steps[-1] else step
        out = render_completions(watch, pinned)
        out[pinned_state] = pinned
        return out

    def on_launch(request: gr.Request, watch: train_view.RunWatch, smooth: float, *setup_values):
        if ctx.config_from_values is None:
            return {notice: notice_html("Set up the run in the Setup tab first.")}
        viewer = ctx.viewer(request)
        try:
            # on a shared dashboard: every path only where access/paths.py allows this user
            config = ctx.config_from_values(*setup_values, scope=ctx.scope_of(viewer))
            ctx.actions.take(viewer.name, "launch")
            run_id = launcher.start(config, runs_dir, owner=viewer.name, import_reward_file=not ctx.shared,
                                    sandboxed=ctx.sandbox_for(viewer))
        except WorkbenchError as exc:  # ConfigError and the Setup tab's input errors name field, rule and fix
            return {notice: notice_html(f"Not launched:\n{exc}")}
        out = attach(viewer, run_id, run_id, smooth, watch.more_metrics_open)
        out[remembered] = run_id
        place = launcher.queue_place(run_id, runs_dir)
        if place:
            waits_for = owners_view.waits_for_seen_by(viewer, runs_dir, place["waits_for"])
            out[notice] = notice_html(f"Queued {run_id} at position {place['queue_position']}: it waits for "
                                      f"{waits_for}. It starts by itself when that is free, with or "
                                      "without this page open; Stop takes it out of the queue.", "info")
        else:
            out[notice] = notice_html(f"Launched {run_id}. The first points appear once the model has loaded "
                                      f"and the first step is done.", "info")
        return out

    def on_stop(request: gr.Request, watch: train_view.RunWatch):
        if not watch.run_id:
            return
        viewer = ctx.viewer(request)
        try:
            owners_view.run_dir_for(runs_dir, watch.run_id, viewer, control=True)
            ctx.actions.take(viewer.name, "stop")
        except WorkbenchError as exc:  # another user's run, or too many stops and launches this minute
            yield {notice: notice_html(f"Not stopped: {exc}")}
            return
        queued = watch.status.get("state") == runfolder.QUEUED
        yield {stop_button: gr.Button(interactive=False),
               notice: notice_html("Taking it out of the queue…" if queued else
                                   "Stopping: the trainer finishes its current step and saves the adapter…", "info")}
        try:
            final = launcher.stop(watch.run_id, runs_dir, timeout=STOP_TIMEOUT_S)
        except launcher.LauncherError as exc:
            yield {notice: notice_html(str(exc))}
            return
        note = f" ({final['note']})" if final.get("note") else ""
        yield {notice: notice_html(f"Run {watch.run_id} is {final.get('state')} at step {final.get('step', 0)}"
                                   f"{note}.", "info")}

    def on_resume(request: gr.Request, watch: train_view.RunWatch):
        if not watch.run_id:
            return gr.skip()
        viewer = ctx.viewer(request)
        try:
            run_dir = owners_view.run_dir_for(runs_dir, watch.run_id, viewer, control=True)
            paths_view.check_saved_config(runfolder.read_config(run_dir), ctx.scope_of(viewer))
            ctx.actions.take(viewer.name, "resume")
            launcher.resume(watch.run_id, runs_dir, owner=viewer.name, import_reward_file=not ctx.shared,
                            sandboxed=ctx.sandbox_for(viewer))
        except WorkbenchError as exc:  # LauncherError / ConfigError say what to do
            return {notice: notice_html(f"Not resumed: {exc}")}
        return {resume_button: gr.Button(interactive=False),
                notice: notice_html(f"Resuming {watch.run_id} from its last checkpoint.", "info")}

    def on_picker_focus(request: gr.Request, watch: train_view.RunWatch):
        return picker_update(picker_shows(ctx.viewer(request), watch.run_id))

    load_outputs = [*view_outputs, remembered]
    ctx.blocks.load(on_load, inputs=[remembered, smoothing], outputs=load_outputs, show_progress="hidden")
    refresh_outputs = [output for output in [*load_outputs, notice] if output not in more_plots]
    refresh.click(on_refresh, inputs=[watch_state, pinned_state, smoothing], outputs=refresh_outputs,
                  show_progress="hidden", concurrency_limit=None, trigger_mode="once")
    refresh_more.click(on_refresh_more, inputs=[watch_state, smoothing], outputs=more_plots, show_progress="hidden",
                       concurrency_limit=None, trigger_mode="once")
    run_picker.input(on_pick, inputs=[run_picker, watch_state, smoothing], outputs=[*load_outputs, notice],
                     show_progress="hidden")
    run_picker.focus(on_picker_focus, inputs=[watch_state], outputs=[run_picker], show_progress="hidden")
    more_metrics.expand(lambda watch, smooth: on_more_metrics(watch, smooth, True), inputs=[watch_state, smoothing],
                        outputs=[watch_state, *plot_list], show_progress="hidden")
    more_metrics.collapse(lambda watch, smooth: on_more_metrics(watch, smooth, False),
                          inputs=[watch_state, smoothing], outputs=[watch_state, *plot_list], show_progress="hidden")
    smoothing.change(on_smoothing, inputs=[watch_state, smoothing], outputs=plot_list, show_progress="hidden")
    # `input`, not `release`: it fires on every way of moving the slider (drag, arrow keys, typing a number),
    # and at once, so the pin reaches the server before a timer tick can redraw the slider at the newest step.
    step_slider.input(on_step, inputs=[watch_state, step_slider], outputs=[pinned_state, step_slider, completions],
                      show_progress="hidden", trigger_mode="always_last")
    launch_button.click(on_launch, inputs=[watch_state, smoothing, *ctx.config_inputs],
                        outputs=[*load_outputs, notice], show_progress="minimal")
    stop_button.click(on_stop, inputs=[watch_state], outputs=[stop_button, notice], show_progress="hidden")
    resume_button.click(on_resume, inputs=[watch_state], outputs=[resume_button, notice], show_progress="hidden")

    if plan_valid is not None:
        plan_valid.change(lambda valid: gr.Button(interactive=bool(valid)), inputs=[plan_valid],
                          outputs=[launch_button], show_progress="hidden")
    ctx.register(train_run_picker=run_picker, train_launch=launch_button)
    ctx.page_scripts.append(train_view.WATCH_JS)

    def changes_route(user: str | None, query) -> dict:
        """The page script's question: the signature of the run it shows, over the runs this user may see."""
        return {"signature": signature_of(ctx.viewer_named(user), query.get("run") or None)}

    ctx.api_routes[f"/{train_view.CHANGES_ROUTE}"] = changes_route
