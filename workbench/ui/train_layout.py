"""The Train tab's components: `layout` makes them (a `TrainComponents`), top to bottom.

The run picker with Launch / Stop / Resume; a progress bar (step, total, elapsed, remaining); a failed run's
hint, error and the end of train.log; the main curves (reward, reward std, KL beside entropy, loss) beside the
health alarms and the smoothing control; held-out accuracy (eval.jsonl) on the training reward's step axis, with the answers that
changed since step 0; the completions of a step, group by group, with a slider over steps; then the other curves,
in a closed section. ui/train_tab.py wires the components to its handlers.

MAIN_FIGURES and MORE_FIGURES are also read from this file's source (with `ast`) by the metrics page of the docs
(cli/docs_pages.py), so they stay literal tuples.
"""

from __future__ import annotations

from dataclasses import dataclass

import gradio as gr

from workbench.ui import heldout_view, server_view, train_view
from workbench.ui.completions_view import render_empty_html
from workbench.ui.context import UIContext

DEFAULT_SMOOTHING = 0.5
MAIN_FIGURES = ("reward", "reward_std", "kl", "entropy", "loss")
MORE_FIGURES = ("completion_length", "clip_ratio", "grad_norm", "learning_rate", "step_time", "engine_mismatch")

NOTICE_CSS = """
.wb-notice { border-radius: 8px; padding: 8px 12px; font-size: 0.9rem; white-space: pre-wrap; }
.wb-notice-error { background: #fef2f2; color: #7f1d1d; border: 1px solid #fca5a5; }
.wb-notice-info { background: #eff6ff; color: #1e3a8a; border: 1px solid #bfdbfe; }
"""


@dataclass
class TrainComponents:
    """The Train tab's components, as `layout` makes them."""

    remembered: gr.BrowserState
    watch_state: gr.State
    pinned_state: gr.State  # None follows the newest step; a step number keeps the slider where the person put it
    run_picker: gr.Dropdown
    launch_button: gr.Button
    stop_button: gr.Button
    resume_button: gr.Button
    notice: gr.HTML
    progress: gr.HTML
    failure: gr.HTML
    server: gr.HTML
    plots: dict
    smoothing: gr.Slider
    alarms: gr.HTML
    held_out: gr.Plot
    changed_answers: gr.HTML
    step_slider: gr.Slider
    completions: gr.HTML
    more_metrics: gr.Accordion
    refresh: gr.Button
    refresh_more: gr.Button
    # The Explore tab's ways in (ui/explorer_tab.py wires them): the link, and the step a curve's click names.
    explore_button: gr.Button
    point_box: gr.Textbox
    point_button: gr.Button

    @property
    def plot_list(self) -> list:
        return [self.plots[name] for name in (*MAIN_FIGURES, *MORE_FIGURES)]

    @property
    def more_plots(self) -> list:
        return [self.plots[name] for name in MORE_FIGURES]

    @property
    def load_outputs(self) -> list:
        """What attaching to a run draws (the page load's outputs)."""
        return [
            self.watch_state,
            self.pinned_state,
            self.run_picker,
            self.stop_button,
            self.resume_button,
            self.progress,
            self.failure,
            self.server,
            self.alarms,
            self.held_out,
            self.changed_answers,
            self.step_slider,
            self.completions,
            *self.plot_list,
            self.remembered,
        ]


def layout(ctx: UIContext) -> TrainComponents:
    """The tab's components, top to bottom (see the module's docstring)."""
    remembered = gr.BrowserState(None, storage_key="wb-train-run")
    watch_state = gr.State(train_view.RunWatch())
    pinned_state = gr.State(None)
    # The Setup tab's verdict: Launch stays disabled while the batch plan is invalid.
    plan_valid = ctx.components.get("plan_valid")
    with gr.Row(equal_height=True):
        run_picker = gr.Dropdown(
            label="Run shown",
            choices=[],
            value=None,
            scale=4,
            allow_custom_value=False,
            info="The run this page follows; Launch starts a new one from the Setup tab's settings.",
        )
        launch_button = gr.Button(
            "Launch",
            variant="primary",
            scale=1,
            min_width=110,
            interactive=plan_valid is None or bool(plan_valid.value),
        )
        stop_button = gr.Button("Stop", variant="stop", scale=1, min_width=90, interactive=False)
        resume_button = gr.Button("Resume", scale=1, min_width=90, interactive=False)
    notice = gr.HTML("", css_template=NOTICE_CSS, js_on_load=None, visible=False)
    progress = gr.HTML(
        train_view.progress_html(None, None),
        css_template=train_view.PROGRESS_CSS,
        js_on_load=None,
        elem_id="wb-train-progress",
    )
    failure = gr.HTML(
        "", css_template=train_view.FAILURE_CSS, js_on_load=None, elem_id="wb-train-failure", visible=False
    )
    server = gr.HTML(
        "", css_template=server_view.SERVER_CSS, js_on_load=None, elem_id="wb-train-server", visible=False
    )  # the run's vLLM server, for generation=vllm-server / trl-server
    plots, smoothing, alarms = _curves_and_health()
    held_out, changed_answers = _held_out()
    step_slider, completions = _completions()
    explore_button, point_box, point_button = _explore_links()
    more_metrics = _more_metrics(plots)
    # Clicked by the page's script (train_view.WATCH_JS) when the run folder changed, and once the page shows
    # that change, while More metrics is open, to draw those figures too (a refresh leaves them out: each
    # output costs gradio about a millisecond per event, drawn or not).
    refresh = gr.Button("refresh", visible="hidden", elem_id=train_view.REFRESH_BUTTON_ID)
    refresh_more = gr.Button("refresh more metrics", visible="hidden", elem_id=train_view.MORE_BUTTON_ID)
    return TrainComponents(
        remembered,
        watch_state,
        pinned_state,
        run_picker,
        launch_button,
        stop_button,
        resume_button,
        notice,
        progress,
        failure,
        server,
        plots,
        smoothing,
        alarms,
        held_out,
        changed_answers,
        step_slider,
        completions,
        more_metrics,
        refresh,
        refresh_more,
        explore_button,
        point_box,
        point_button,
    )


def _curves_and_health() -> tuple[dict, gr.Slider, gr.HTML]:
    """The main curves, two by two (KL beside entropy: the two that say how far and how fast the policy narrows),
    beside the smoothing control and the health alarms."""
    plots: dict[str, gr.Plot] = {}
    with gr.Row():
        with gr.Column(scale=3):
            for pair in (MAIN_FIGURES[:2], MAIN_FIGURES[2:4], MAIN_FIGURES[4:]):
                with gr.Row():
                    for name in pair:
                        plots[name] = gr.Plot(show_label=False, elem_id=f"wb-plot-{name}")
        with gr.Column(scale=1, min_width=260):
            smoothing = gr.Slider(
                0.0,
                0.95,
                value=DEFAULT_SMOOTHING,
                step=0.05,
                label="Smoothing",
                info="Exponential moving average of the curves; the raw points stay faint.",
            )
            gr.Markdown("### Health", elem_classes=["wb-section"])
            alarms = gr.HTML(
                train_view.alarms_html([], False),
                css_template=train_view.ALARMS_CSS,
                js_on_load=None,
                elem_id="wb-train-alarms",
            )
    return plots, smoothing, alarms


def _held_out() -> tuple[gr.Plot, gr.HTML]:
    """Held-out accuracy beside the training reward, and the answers that changed since step 0."""
    gr.Markdown(
        "### Held-out evaluation\nGreedy answers to prompts the run never trains on (eval_strategy=steps): "
        "a training reward that rises while held-out accuracy stays flat is memorising or gaming a reward.",
        elem_classes=["wb-section"],
    )
    held_out = gr.Plot(show_label=False, elem_id="wb-plot-held-out")
    changed_answers = gr.HTML("", css_template=heldout_view.CHANGED_CSS, js_on_load=None, elem_id="wb-train-changed")
    return held_out, changed_answers


def _completions() -> tuple[gr.Slider, gr.HTML]:
    gr.Markdown(
        "### Completions, group by group\nEach prompt's G completions side by side: every reward "
        "function's score, the total, and the advantage `(r - mean) / std` they produce.",
        elem_classes=["wb-section"],
    )
    step_slider = gr.Slider(
        0,
        1,
        value=0,
        step=1,
        label="Step",
        interactive=False,
        info="Newest step while a run goes; move it to read an earlier step.",
    )
    # Without gradio's prose styles: the cards bring their own (its table borders would box every score).
    # The app theme's plan badge shares the class name `wb-badge`; keep the card badges small pills.
    completions = gr.HTML(
        render_empty_html(),
        js_on_load=None,
        apply_default_css=False,
        css_template=".wb-card .wb-badge { border: 0; padding: 0 7px; line-height: 1.6; }",
        elem_id="wb-train-completions",
    )
    return step_slider, completions


def _explore_links() -> tuple[gr.Button, gr.Textbox, gr.Button]:
    """The link to the Explore tab for the run shown, and the hidden box and button the page's click bridge
    (explorer_view.POINT_CLICK_JS) sets to the step of a clicked curve point and clicks."""
    with gr.Row():
        explore_button = gr.Button(
            "Explore every completion of this run", size="sm", scale=0, min_width=320, elem_id="wb-train-explore"
        )
        gr.Markdown("Search, filter and sort them all, or click a point of a curve above to open that step's groups.")
    point_box = gr.Textbox("", visible="hidden", elem_id="wb-train-point")
    point_button = gr.Button("open the clicked step", visible="hidden", elem_id="wb-train-point-go")
    return explore_button, point_box, point_button


def _more_metrics(plots: dict) -> gr.Accordion:
    # Closed at first, and drawn only while open: each figure redrawn costs the browser
    # CPU that, on a small machine, the training process is waiting for.
    with gr.Accordion(
        "More metrics: completion length, clipping, grad norm, learning rate, step time",
        open=False,
        elem_id="wb-train-more",
    ) as more_metrics:
        for triple in (MORE_FIGURES[:3], MORE_FIGURES[3:]):
            with gr.Row():
                for name in triple:
                    plots[name] = gr.Plot(show_label=False, elem_id=f"wb-plot-{name}")
    return more_metrics
