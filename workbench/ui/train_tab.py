"""The Train tab: launch, stop and resume a run, and watch it live.

The layout (the picker with Launch / Stop / Resume, the progress bar, the curves beside the health alarms, the
held-out evaluation, the completions of a step, More metrics) is made by ui/train_layout.py.

Liveness: the page's script (`train_view.WATCH_JS`) asks the server for the
shown run's `change_signature` at a pace tied to the run's step time
(`train_view.poll_seconds`: about four looks a step, 1 to 5 s), only while the
Train tab is open and the browser tab visible, and clicks a hidden refresh
button when the run folder changed, at most once every
`train_view.redraw_seconds` while the run is live (further apart for a run on
the CPU, whose cores a redraw's drawing takes: `benchmarks/bench_launch_path.py`
measures it), so between redraws the script shows the
step the run has reached in the bar from the same answer, and the clock moves
in the page. A run that ends or changes state is redrawn at once. A refresh reads only the bytes the
run wrote since the last one (`insight.follow.look`) and redraws only what changed.
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

`build` lays the tab out (`train_layout.layout`) and wires its events to the methods of a
`TrainTab`, which holds the context and the components; each handler reads
its inputs as parameters and returns the outputs it changes.
"""

from __future__ import annotations

import html
import stat
from dataclasses import replace

import gradio as gr

from workbench.access.owners import Viewer
from workbench.errors import WorkbenchError
from workbench.insight import eval_results, figures, follow, overlay_figures, tokens
from workbench.insight.groups import groups_for_step
from workbench.insight.health import check_health
from workbench.jobs import gpu_queue, launcher, run_list
from workbench.runstore import checkpoint_integrity, runfolder, safe_files
from workbench.spec.chat import transcript_text
from workbench.spec.reward_choice import reward_weight_map
from workbench.ui import heldout_view, launching, paths_view, run_access, server_view, train_view
from workbench.ui.completions_view import render_empty_html, render_groups_html, step_token_views
from workbench.ui.context import UIContext
from workbench.ui.train_layout import MAIN_FIGURES, MORE_FIGURES, TrainComponents, layout
from workbench.ui.widgets import figure_payload

# Seconds Stop waits for the trainer to save and stop before killing its process group.
STOP_TIMEOUT_S = 60.0


def notice_html(message: str, kind: str = "error") -> gr.HTML:
    """A note above the progress bar; hidden when empty so it leaves no gap."""
    text = f'<div class="wb-notice wb-notice-{kind}">{html.escape(message)}</div>' if message else ""
    return gr.HTML(text, visible=bool(message))


def notice_outlived(before: dict, after: dict) -> bool:
    """Whether the note above the bar ("Resuming ... from its last checkpoint", "Stopping ...") is stale: it spoke
    of a run in flight, and the run has since reached a final state (from whatever state the page saw before: a
    short resume may go from stopped to finished between two looks)."""
    return bool(after) and before.get("state") != after.get("state") and not train_view.is_live(after)


def start_watching(runs_dir, run_id: str | None, newest_known: str | None = None) -> train_view.RunWatch:
    """A fresh watch of `run_id` (nothing read yet but its config)."""
    watch = train_view.new_watch(run_id, newest_known)
    return follow.start(runs_dir / run_id, watch) if run_id else watch


def poll_run(
    watch: train_view.RunWatch, runs_dir, read_status=runfolder.read_status
) -> tuple[train_view.RunWatch, follow.Changes]:
    """What the watched run wrote since the last poll (`follow.look`); no run, nothing changes."""
    if not watch.run_id:
        return watch, follow.Changes()
    return follow.look(watch, runs_dir / watch.run_id, read_status)


def server_log_tail(run_dir, status: dict, max_bytes: int = 2500) -> str:
    """The end of the run's own vLLM server log ('' when the server is the user's or there is none)."""
    section = status.get("vllm")
    if not isinstance(section, dict) or section.get("external"):
        return ""
    return runfolder.read_log_tail(run_dir, max_bytes, name=runfolder.VLLM_LOG_FILE)


class TrainTab:
    """The Train tab's event handlers, over the context and the components they draw."""

    def __init__(self, ctx: UIContext, ui: TrainComponents):
        self.ctx = ctx
        self.ui = ui
        self.runs_dir = ctx.runs_dir
        # Figures, alarms and groups as drawn for a read of a run's files, for every page showing it.
        self.drawn = train_view.Drawn()

    # ------------------------------------------------------------ reading, for one viewer

    @staticmethod
    def read_status(run_dir) -> dict:
        """The launcher's status (a dead process shows as failed), with a queued run's place in the GPU queue."""
        return gpu_queue.status_with_queue_place(run_dir)

    def status_for(self, viewer: Viewer):
        """The status reader for `viewer`: a queued run's place, naming only runs they may see."""
        return run_access.status_reader(self.read_status, self.runs_dir, viewer)

    def signature_of(self, viewer: Viewer, run_id: str | None) -> str:
        """The change signature over the runs `viewer` may see (the change route's, for the same viewer)."""
        return follow.change_signature(
            self.runs_dir, run_id, self.status_for(viewer), run_access.visible_run_dirs(self.runs_dir, viewer)
        )

    def has_metrics(self, run_id: str) -> bool:
        """Whether the run logged a step: its metrics file is a file of its own, not empty (a link is no one's)."""
        info = safe_files.lstat(self.runs_dir / run_id / runfolder.METRICS_FILE, root=self.runs_dir / run_id)
        return bool(info) and stat.S_ISREG(info.st_mode) and info.st_size > 0

    def visible_entries(self, viewer: Viewer) -> list[dict]:
        return run_access.visible_entries(run_list.list_runs(self.runs_dir), viewer)

    def picker_shows(self, viewer: Viewer, run_id: str | None) -> tuple[tuple[str, ...], str | None]:
        """The runs the picker offers `viewer`, and the one it shows."""
        choices = tuple(path.name for path in run_access.visible_run_dirs(self.runs_dir, viewer))
        return choices, run_id if run_id in choices else None

    @staticmethod
    def picker_update(shows: tuple[tuple[str, ...], str | None]) -> gr.Dropdown:
        return gr.Dropdown(choices=list(shows[0]), value=shows[1])

    # ------------------------------------------------------------ rendering

    def render(
        self,
        watch: train_view.RunWatch,
        pinned: int | None,
        smooth: float,
        changes: follow.Changes,
        full: bool = False,
        with_more: bool = True,
    ) -> dict:
        """Outputs for what changed (everything when `full`; More metrics' figures only `with_more`)."""
        ui = self.ui
        watch = replace(watch, poll_seconds=train_view.poll_seconds(watch.status, watch.metrics))
        out: dict = {}
        # Always: the bar carries the signature this drawing reflects, and the page's script compares with it.
        progress = train_view.measure_progress(watch.status, watch.metrics) if watch.run_id else None
        out[ui.progress] = train_view.progress_html(
            watch.run_id,
            progress,
            watch.signature,
            watch.poll_seconds,
            train_view.redraw_seconds(progress.state, watch.config) if progress else 0,
        )
        if full or changes.status:
            watch = self.render_controls(watch, full, out)
        if full or changes.metrics:
            out.update(self.render_figures(watch, smooth, None if with_more else MAIN_FIGURES))
        if full or changes.metrics or changes.skipped:  # unreadable lines of the run's files show among the alarms
            skipped = tuple(sorted(watch.skipped.items())) + tuple(sorted(watch.left_out.items()))
            evals = eval_results.read_evals(self.runs_dir / watch.run_id) if watch.run_id else []
            out[ui.alarms] = self.drawn.get(
                ("alarms", *train_view.metrics_read(watch), skipped, len(evals)),
                lambda: train_view.alarms_html(
                    check_health(metrics_of(watch), watch.config, evals)
                    + train_view.skipped_alarms(watch.skipped)
                    + train_view.left_out_alarms(watch.left_out),
                    bool(watch.metrics),
                ),
            )
        if full or changes.metrics or changes.status:  # an evaluation lands before its step's metrics, the last one
            out.update(self.render_held_out(watch, smooth))  # before the run's final state
        if full or changes.completions:
            out.update(self.render_completions(watch, pinned))
        out[ui.watch_state] = watch
        return out

    def render_controls(self, watch: train_view.RunWatch, full: bool, out: dict) -> train_view.RunWatch:
        """The failure and server panels, Stop and Resume into `out` when they changed (or `full`)."""
        ui, run_dir = self.ui, self.runs_dir / watch.run_id if watch.run_id else None
        live_run = train_view.is_live(watch.status)
        log_tail = runfolder.read_log_tail(run_dir, 3000) if run_dir and watch.status.get("state") == "failed" else ""
        failure_panel = train_view.failure_html(watch.status, log_tail)
        server_panel = server_view.server_html(watch.status, server_log_tail(run_dir, watch.status)) if run_dir else ""
        resumable = (
            bool(run_dir)
            and not live_run
            and watch.status.get("state") != "finished"
            and checkpoint_integrity.last_checkpoint(run_dir) is not None
        )
        queued = watch.status.get("state") == runfolder.QUEUED  # Stop reads Cancel: it takes the run out of the queue
        controls = (failure_panel, server_panel, live_run, resumable, queued)
        if full or controls != watch.controls_shown:  # a live run's status moves every step, these rarely
            out[ui.failure] = gr.HTML(failure_panel, visible=bool(failure_panel))
            out[ui.server] = gr.HTML(server_panel, visible=bool(server_panel))
            out[ui.stop_button] = gr.Button("Cancel" if queued else "Stop", interactive=live_run)
            out[ui.resume_button] = gr.Button(interactive=resumable)
            watch = replace(watch, controls_shown=controls)
        return watch

    def render_figures(self, watch: train_view.RunWatch, smooth: float, names: tuple[str, ...] | None = None) -> dict:
        """The figures named (default: those on screen: the main ones, and More metrics while open)."""
        if names is None:
            names = (*MAIN_FIGURES, *MORE_FIGURES) if watch.more_metrics_open else MAIN_FIGURES

        def draw() -> dict:  # as the Plot components send them, ready for any page
            built = figures.build_figures(metrics_of(watch), smooth, names)
            return {name: figure_payload(built[name]) for name in names}

        sent = self.drawn.get(("figures", *train_view.metrics_read(watch), float(smooth), names), draw)
        return {self.ui.plots[name]: sent[name] for name in names}

    def render_held_out(self, watch: train_view.RunWatch, smooth: float) -> dict:
        """The held-out figure and the changed answers, from eval.jsonl (read incrementally)."""
        evals = eval_results.read_evals(self.runs_dir / watch.run_id) if watch.run_id else []
        shown = tuple((e["step"], e.get("accuracy"), e.get("pass_at_k"), e.get("eval_seconds")) for e in evals)

        def draw() -> tuple:
            evaluates = watch.config.get("eval_strategy") == "steps"
            figure = overlay_figures.held_out_figure(evals, metrics_of(watch), smooth, evaluates)
            return figure_payload(figure), heldout_view.changed_answers_html(evals, eval_results.changed_answers(evals))

        figure, changed = self.drawn.get(("held_out", *train_view.metrics_read(watch), shown, float(smooth)), draw)
        return {self.ui.held_out: figure, self.ui.changed_answers: changed}

    def render_completions(self, watch: train_view.RunWatch, pinned: int | None) -> dict:
        ui, steps = self.ui, watch.completion_steps
        if not steps:
            return {
                ui.step_slider: gr.Slider(minimum=0, maximum=1, value=0, interactive=False),
                ui.completions: render_empty_html(),
            }
        step = train_view.nearest_step(steps, pinned)

        run_dir = self.runs_dir / watch.run_id

        def draw() -> str:
            records = watch.newest_completions if step == steps[-1] else follow.completions_of_step(run_dir, step)
            groups = groups_for_step(
                records, step, watch.config.get("scale_rewards"), watch.config.get("num_generations")
            )
            title = f"Step {step}" + (" (newest)" if step == steps[-1] else f" of {steps[-1]}")
            size = groups[0].expected_size if groups else 1
            round_tokens = tokens.tokens_of_round(run_dir, step, tokens.round_passes(watch.config))
            prompts = {index: transcript_text(record.get("prompt")) for index, record in enumerate(records)}
            earlier = tokens.earlier_of_round(run_dir, round_tokens, prompts) if round_tokens else {}
            views, header = step_token_views(round_tokens, size, step, page="train", earlier=earlier)
            return render_groups_html(groups, title, views, header, reward_weight_map(watch.config))

        # A slider needs two ends; with one step so far it spans step-1..step.
        low = steps[0] if len(steps) > 1 else steps[0] - 1
        return {
            ui.step_slider: gr.Slider(minimum=low, maximum=steps[-1], value=step, interactive=len(steps) > 1),
            ui.completions: self.drawn.get(
                ("groups", *train_view.completions_read(watch), step, tokens.tokens_read(run_dir)), draw
            ),
        }

    def attach(
        self,
        viewer: Viewer,
        run_id: str | None,
        newest_known: str | None,
        smooth: float,
        more_open: bool = False,
        with_more: bool = True,
    ) -> dict:
        """Start following `run_id`: read all it wrote so far and draw everything (More metrics' figures when
        that section is open and `with_more`)."""
        watch = replace(
            start_watching(self.runs_dir, run_id, newest_known),
            more_metrics_open=more_open,
            signature=self.signature_of(viewer, run_id),
        )
        watch, changes = poll_run(watch, self.runs_dir, self.status_for(viewer))
        out = self.render(watch, None, smooth, changes, full=True, with_more=with_more)
        out[self.ui.pinned_state] = None
        shows = self.picker_shows(viewer, run_id)
        out[self.ui.run_picker] = self.picker_update(shows)
        out[self.ui.watch_state] = replace(out[self.ui.watch_state], picker_shown=shows)
        return out

    # ------------------------------------------------------------ events

    def on_load(self, request: gr.Request, remembered_run: str | None, smooth: float):
        viewer = self.ctx.viewer(request)
        entries = self.visible_entries(viewer)
        run_id = train_view.choose_run([(e["run_id"], e) for e in entries], remembered_run, self.has_metrics)
        out = self.attach(viewer, run_id, entries[0]["run_id"] if entries else None, smooth)
        out[self.ui.remembered] = run_id
        return out

    def on_refresh(self, request: gr.Request, watch: train_view.RunWatch, pinned: int | None, smooth: float):
        ui, viewer = self.ui, self.ctx.viewer(request)
        run_ids = [path.name for path in run_access.visible_run_dirs(self.runs_dir, viewer)]
        if watch.run_id and watch.run_id not in run_ids:  # deleted from the Runs tab or another tab
            entries = self.visible_entries(viewer)
            out = self.attach(
                viewer,
                train_view.choose_run([(e["run_id"], e) for e in entries], None, self.has_metrics),
                watch.newest_known,
                smooth,
                watch.more_metrics_open,
                with_more=False,
            )
            out[ui.notice] = notice_html(f"Run {watch.run_id} was deleted.", "info")
            return out
        before = watch.newest_known
        switch_to, newest_known = train_view.new_run_to_follow(run_ids, watch)
        if switch_to:
            out = self.attach(viewer, switch_to, newest_known, smooth, watch.more_metrics_open, with_more=False)
            out[ui.remembered] = switch_to
            return out
        # Taken before reading: what lands meanwhile changes the signature, so the page asks again.
        signature = self.signature_of(viewer, watch.run_id)
        if newest_known != watch.newest_known:
            watch = replace(watch, newest_known=newest_known)
        new_watch, changes = poll_run(watch, self.runs_dir, self.status_for(viewer))
        if not changes.anything and signature == watch.signature:
            return {ui.watch_state: new_watch} if newest_known != before else gr.skip()
        new_watch = replace(new_watch, signature=signature)
        out = self.render(new_watch, pinned, smooth, changes, with_more=False)
        if changes.status:
            shows = self.picker_shows(viewer, new_watch.run_id)
            if shows != new_watch.picker_shown:
                out[ui.run_picker] = self.picker_update(shows)
                out[ui.watch_state] = replace(out[ui.watch_state], picker_shown=shows)
        if changes.metrics and not watch.metrics:  # the "first points appear once..." note has come true
            out[ui.notice] = notice_html("")
        if changes.status and notice_outlived(watch.status, new_watch.status):  # "Resuming ..." is over
            out[ui.notice] = notice_html("")
        return out

    def on_pick(self, request: gr.Request, run_id: str | None, watch: train_view.RunWatch, smooth: float):
        if not run_id or run_id == watch.run_id:
            return gr.skip()
        viewer = self.ctx.viewer(request)
        try:
            run_access.run_dir_for(self.runs_dir, run_id, viewer)  # the id comes from the browser
        except runfolder.RunIdError as exc:
            return {self.ui.notice: notice_html(str(exc))}
        out = self.attach(viewer, run_id, watch.newest_known, smooth, watch.more_metrics_open)
        out[self.ui.remembered] = run_id
        out[self.ui.notice] = notice_html("")
        return out

    def on_refresh_more(self, watch: train_view.RunWatch, smooth: float):
        """More metrics' figures, after a refresh has read what the run added (the page's script asks)."""
        if not (watch.run_id and watch.more_metrics_open):
            return gr.skip()
        return self.render_figures(watch, smooth, MORE_FIGURES)

    def on_more_metrics(self, watch: train_view.RunWatch, smooth: float, opened: bool):
        watch = replace(watch, more_metrics_open=opened)
        out = {self.ui.watch_state: watch}
        if opened and watch.run_id:
            out.update(self.render_figures(watch, smooth, MORE_FIGURES))
        return out

    def on_more_metrics_opened(self, watch: train_view.RunWatch, smooth: float):
        return self.on_more_metrics(watch, smooth, True)

    def on_more_metrics_closed(self, watch: train_view.RunWatch, smooth: float):
        return self.on_more_metrics(watch, smooth, False)

    def on_smoothing(self, watch: train_view.RunWatch, smooth: float):
        return self.render_figures(watch, smooth) if watch.run_id else gr.skip()

    def on_step(self, watch: train_view.RunWatch, wanted: float):
        if not watch.completion_steps:
            return gr.skip()
        step = train_view.nearest_step(watch.completion_steps, wanted)
        pinned = None if step == watch.completion_steps[-1] else step
        out = self.render_completions(watch, pinned)
        out[self.ui.pinned_state] = pinned
        return out

    def on_launch(self, request: gr.Request, watch: train_view.RunWatch, smooth: float, *setup_values):
        ctx, notice = self.ctx, self.ui.notice
        if ctx.config_from_values is None:
            return {notice: notice_html("Set up the run in the Setup tab first.")}
        try:  # the same path as every Launch (ui/launching.py): the user's paths, memory share and launch limit
            launched = launching.start_run(ctx, request, setup_values)
        except WorkbenchError as exc:  # ConfigError and the Setup tab's input errors name field, rule and fix
            return {notice: notice_html(f"Not launched:\n{exc}")}
        return self.show_launched(ctx.viewer(request), launched, watch, smooth)

    def on_follow(self, request: gr.Request, shown: launching.Launched | None, watch: train_view.RunWatch, smooth):
        """A launch elsewhere on the page (the first-run strip, the Setup tab) or "Open the running one": show
        that run (`shown`, a launching.Launched), as the Train tab's own Launch does."""
        if not isinstance(shown, launching.Launched):
            return gr.skip()
        viewer = self.ctx.viewer(request)
        try:
            run_access.run_dir_for(self.runs_dir, shown.run_id, viewer)  # the state is the server's, checked anyway
        except runfolder.RunIdError as exc:
            return {self.ui.notice: notice_html(str(exc))}
        return self.show_launched(viewer, shown, watch, smooth)

    def show_launched(self, viewer: Viewer, launched: launching.Launched, watch: train_view.RunWatch, smooth) -> dict:
        """Attach to a run just launched (or opened) and say where it stands: its place in the queue, when queued."""
        out = self.attach(viewer, launched.run_id, launched.run_id, smooth, watch.more_metrics_open)
        out[self.ui.remembered] = launched.run_id
        if not launched.new:
            out[self.ui.notice] = notice_html("")
        elif launched.queued:  # the bar below says what it waits for, and Cancel sits beside the picker
            out[self.ui.notice] = notice_html(
                f"Queued {launched.run_id} at #{launched.queue_position}: it starts by itself when what it waits "
                "for is free, with or without this page open.",
                "info",
            )
        else:
            out[self.ui.notice] = notice_html(
                f"Launched {launched.run_id}. The first points appear once the model has loaded and the first step "
                "is done.",
                "info",
            )
        return out

    def on_stop(self, request: gr.Request, watch: train_view.RunWatch):
        if not watch.run_id:
            return
        viewer, notice = self.ctx.viewer(request), self.ui.notice
        try:
            run_access.run_dir_for(self.runs_dir, watch.run_id, viewer, control=True)
            self.ctx.actions.take(viewer.name, "stop")
        except WorkbenchError as exc:  # another user's run, or too many stops and launches this minute
            yield {notice: notice_html(f"Not stopped: {exc}")}
            return
        queued = watch.status.get("state") == runfolder.QUEUED
        yield {
            self.ui.stop_button: gr.Button(interactive=False),
            notice: notice_html(
                "Taking it out of the queue…"
                if queued
                else "Stopping: the trainer finishes its current step and saves the adapter…",
                "info",
            ),
        }
        try:
            final = launcher.stop(watch.run_id, self.runs_dir, timeout=STOP_TIMEOUT_S)
        except launcher.LauncherError as exc:
            yield {notice: notice_html(str(exc))}
            return
        note = f" ({final['note']})" if final.get("note") else ""
        said = f"Run {watch.run_id} is {final.get('state')} at step {final.get('step', 0)}{note}."
        if queued and final.get("state") == "stopped" and not final.get("started_at"):
            said = (
                f"Cancelled {watch.run_id}: it left the queue before it started (stopped at step 0, nothing to show)."
            )
        yield {notice: notice_html(said, "info")}

    def on_resume(self, request: gr.Request, watch: train_view.RunWatch):
        if not watch.run_id:
            return gr.skip()
        ctx, viewer = self.ctx, self.ctx.viewer(request)
        try:
            run_dir = run_access.run_dir_for(self.runs_dir, watch.run_id, viewer, control=True)
            # the config the resume runs (the launcher's record of it), under the owner's rule and in their sandbox
            owner_name = run_access.run_owner(run_dir)
            owner = ctx.viewer_named(owner_name) if owner_name else viewer
            paths_view.check_saved_config(launcher.recorded_config(run_dir).to_dict(), ctx.scope_of(owner))
            ctx.actions.take(viewer.name, "resume")
            launcher.resume(
                watch.run_id,
                self.runs_dir,
                owner=viewer.name,
                import_reward_file=not ctx.shared,
                sandboxed=ctx.sandbox_for(owner),
            )
        except WorkbenchError as exc:  # LauncherError / ConfigError say what to do
            return {self.ui.notice: notice_html(f"Not resumed: {exc}")}
        return {
            self.ui.resume_button: gr.Button(interactive=False),
            self.ui.notice: notice_html(f"Resuming {watch.run_id} from its last checkpoint.", "info"),
        }

    def on_picker_focus(self, request: gr.Request, watch: train_view.RunWatch):
        return self.picker_update(self.picker_shows(self.ctx.viewer(request), watch.run_id))

    @staticmethod
    def on_plan_valid(valid: bool) -> gr.Button:
        return gr.Button(interactive=bool(valid))

    def changes_route(self, user: str | None, query) -> dict:
        """The page script's question: the signature of the run it shows, over the runs this user may see, and
        where that run stands (state, step, total), which the bar shows until the page asks for a redraw."""
        viewer = self.ctx.viewer_named(user)
        signature, status = follow.signature_and_status(
            self.runs_dir,
            query.get("run") or None,
            self.status_for(viewer),
            run_access.visible_run_dirs(self.runs_dir, viewer),
        )
        return {"signature": signature, **train_view.bar_numbers(status)}


def metrics_of(watch: train_view.RunWatch):
    """The watch's metric records as a frame (it keeps one, extended a row a step), for figures and health."""
    return watch.frame if watch.frame is not None else watch.metrics


def build(ctx: UIContext) -> None:
    """Lay the tab out and wire its events to a `TrainTab`."""
    ui = layout(ctx)
    tab = TrainTab(ctx, ui)
    watch, pinned, smoothing, notice = ui.watch_state, ui.pinned_state, ui.smoothing, ui.notice
    load_outputs = ui.load_outputs
    ctx.blocks.load(tab.on_load, inputs=[ui.remembered, smoothing], outputs=load_outputs, show_progress="hidden")
    refresh_outputs = [output for output in [*load_outputs, notice] if output not in ui.more_plots]
    ui.refresh.click(
        tab.on_refresh,
        inputs=[watch, pinned, smoothing],
        outputs=refresh_outputs,
        show_progress="hidden",
        concurrency_limit=None,
        trigger_mode="once",
    )
    ui.refresh_more.click(
        tab.on_refresh_more,
        inputs=[watch, smoothing],
        outputs=ui.more_plots,
        show_progress="hidden",
        concurrency_limit=None,
        trigger_mode="once",
    )
    ui.run_picker.input(
        tab.on_pick, inputs=[ui.run_picker, watch, smoothing], outputs=[*load_outputs, notice], show_progress="hidden"
    )
    ui.run_picker.focus(tab.on_picker_focus, inputs=[watch], outputs=[ui.run_picker], show_progress="hidden")
    ui.more_metrics.expand(
        tab.on_more_metrics_opened, inputs=[watch, smoothing], outputs=[watch, *ui.plot_list], show_progress="hidden"
    )
    ui.more_metrics.collapse(
        tab.on_more_metrics_closed, inputs=[watch, smoothing], outputs=[watch, *ui.plot_list], show_progress="hidden"
    )
    smoothing.change(tab.on_smoothing, inputs=[watch, smoothing], outputs=ui.plot_list, show_progress="hidden")
    # `input`, not `release`: it fires on every way of moving the slider (drag, arrow keys, typing a number),
    # and at once, so the pin reaches the server before a timer tick can redraw the slider at the newest step.
    ui.step_slider.input(
        tab.on_step,
        inputs=[watch, ui.step_slider],
        outputs=[pinned, ui.step_slider, ui.completions],
        show_progress="hidden",
        trigger_mode="always_last",
    )
    ui.launch_button.click(
        tab.on_launch,
        inputs=[watch, smoothing, *ctx.config_inputs],
        outputs=[*load_outputs, notice],
        show_progress="minimal",
    )
    # each user's Stop at once: one run slow to stop holds no other user's (Gradio's default runs one at a time)
    ui.stop_button.click(
        tab.on_stop, inputs=[watch], outputs=[ui.stop_button, notice], show_progress="hidden", concurrency_limit=None
    )
    ui.resume_button.click(tab.on_resume, inputs=[watch], outputs=[ui.resume_button, notice], show_progress="hidden")
    plan_valid = ctx.components.get("plan_valid")
    if plan_valid is not None:
        plan_valid.change(tab.on_plan_valid, inputs=[plan_valid], outputs=[ui.launch_button], show_progress="hidden")
    ctx.register(
        train_follow=(tab.on_follow, [ctx.components["launched_run"], watch, smoothing], [*load_outputs, notice]),
        train_run_picker=ui.run_picker,
        train_launch=ui.launch_button,
        train_explore=ui.explore_button,
        train_point_box=ui.point_box,
        train_point_button=ui.point_button,
    )
    ctx.page_scripts.append(train_view.WATCH_JS)
    ctx.api_routes[f"/{train_view.CHANGES_ROUTE}"] = tab.changes_route
