"""The Setup tab: model, hardware, task, rewards and every GRPO/LoRA setting, checked live.

On first open it shows what a first run needs: model and hardware, task and data, the rewards, the batch plan's
verdict, memory, and Launch with one line on what it runs and how long that takes on this machine
(ui/first_run_view.py). Every other setting sits in a named group, closed (setup_view.ADVANCED_GROUPS), so the
page at 1400x1000 stays under 2,000 px (benchmarks/bench_setup_page.py measures it).

Each setting is a RunConfig field under TRL's name with FIELD_HELP as its info
text. Every edit re-runs `update_plan` (the function the benchmark times):
the batch calculator fed by the chosen hardware (badge, one-click fixes,
warnings, and information in grey, numbers), a rough memory estimate against the device's free memory,
and every problem `validate_config` finds. One person's action is one event (`SetupTab`): a task, a recipe or a
suggestion answers with the fields it sets and the verdict of them together. Launch starts the form's run
(ui/launching.py) and shows the Train tab; "Preview command" shows the exact
argument list the launch runs; "Smoke test" starts one real step in the
background and a timer reports its outcome, so the page never blocks.

The data part names `dataset_name` (a hub id, a hub-layout folder, a
`save_to_disk` folder or a file), its config and splits, and the column
mapping; its preview shows the chosen split's first rows, fills the config and
column dropdowns from what the data has, and shows the exact text the model
receives for the first row (spec/columns.py, spec/data_mapping.py).

The parts: ui/setup_layout.py makes the components, ui/setup_form.py reads the form against the machine and
the files it names (the verdict, the preview, the memory estimate), ui/setup_form_view.py holds the form's
order and plain values; this module holds the handlers (`SetupTab`) and the wiring (`build`).

For the Train tab this tab registers `ctx.config_inputs` (its inputs, the
hardware state last), `ctx.config_from_values(*values, scope=None, launching=False) -> RunConfig`
and `ctx.components["plan_valid"]`, a hidden checkbox that is True only when
the batch plan is valid and nothing else stops a launch.

On a dashboard with accounts the tab has "Your files": uploads into the
user's folder (ui/uploads_view.py). Every path field (model, dataset_name,
reward_file) may name only what access/paths.py allows, checked before
anything reads it (ui/paths_view.py). The chosen reward file's code is
shown, read-only, and is never imported here: checks read its source, and
only the training process runs it.
"""

from __future__ import annotations

import re
import tempfile
from pathlib import Path

import gradio as gr

from workbench.errors import WorkbenchError
from workbench.jobs import bundle, commands, gpu_queue, launcher, signal_job
from workbench.runstore import runfolder
from workbench.spec.config import (
    ConfigError,
    ConfigProblem,
    RunConfig,
)
from workbench.spec.recipes import apply_recipe, describe_changes
from workbench.ui import export_view, files_panel, launching, run_access, run_reports
from workbench.ui.calculator_view import apply_changes
from workbench.ui.first_run_view import launched_html, refused_html
from workbench.ui.server_view import server_command_text
from workbench.ui.setup_form import (
    config_from_values,
    correctness_update,
    example_from_task,
    gpus_of,
    hardware_state,
    preview_data,
    preview_from_form,
    try_rewards,
    update_plan,
)
from workbench.ui.setup_form_view import FORM_KEYS, TASK_KEYS, benchmark_values, default_values, form_with
from workbench.ui.setup_layout import SetupComponents, layout
from workbench.ui.setup_view import (
    DATA_FIELDS,
    PICKER_REWARDS,
    PLAN_FIELDS_SETTABLE,
    RECIPE_FORM_FIELDS,
    command_text,
    gpu_choices,
    hardware_html,
    preview_label,
    problems_html,
    recipe_note_html,
    smoke_result_html,
    task_description,
    task_presets,
)
from workbench.ui.signal_view import signal_html

# What this module offered before its parts moved out, still importable from here (the tests, the benchmarks and
# notebooks read the form through setup_tab): the form's order and values, and the functions over them.
__all__ = [
    "FORM_KEYS",
    "RunConfig",
    "SetupComponents",
    "SetupTab",
    "benchmark_values",
    "build",
    "config_from_values",
    "default_values",
    "edited",
    "hardware_state",
    "layout",
    "preview_data",
    "preview_from_form",
    "update_plan",
]


class SetupTab:
    """The Setup tab's event handlers, over the context and the components they fill.

    One person's action is one event: a handler that changes the form (a task, a recipe, a suggestion, the
    hardware on page load) answers with the verdict of the form as it leaves it, in the same response, and the
    form's own events listen to `input` (a person's edit), never to `change`, so no value a handler sets starts
    another event. Gradio sends one request per event, chained ones included: a task choice used to start about
    30 of them, in waves, over several seconds, and a loop of them on a busy machine.
    """

    def __init__(self, ctx, ui: SetupComponents):
        self.ctx = ctx
        self.ui = ui

    def live_plan(self, request: gr.Request, *values) -> list:
        return update_plan(*values, scope=self.ctx.scope_for(request))

    def live_preview(self, request: gr.Request, *values) -> list:
        return [*preview_data(*values, scope=self.ctx.scope_for(request)), correctness_update(list(values))]

    def on_score(self, request: gr.Request, prompt, completions_text, columns_text, *values) -> str:
        return try_rewards(prompt, completions_text, columns_text, *values, scope=self.ctx.scope_for(request))

    def form_settled(self, request: gr.Request, *values) -> list:
        """The verdict and the data preview of the form as it is (after an upload filled its paths)."""
        return [*self.live_plan(request, *values), *self.live_preview(request, *values)]

    def on_task(self, request: gr.Request, *values) -> list:
        """Choosing a task: its description, its rewards and preset settings, and the verdict and data preview of
        the form with them, in one answer."""
        changes = task_presets(values[FORM_KEYS.index("task")])
        if changes is None:  # no task of this name (only a hand-made request sends one)
            return [gr.skip()] * (1 + len(TASK_KEYS) + len(self.ui.plan_outputs) + len(self.ui.preview_outputs))
        settled = form_with(list(values), changes)
        return [
            task_description(values[FORM_KEYS.index("task")]),
            *[gr.update(value=changes[key]) for key in TASK_KEYS],
            *self.form_settled(request, *settled),
        ]

    def on_recipe(self, request: gr.Request, *values) -> list:
        """Choosing a recipe: its settings into the form, the verdict of the form with them, and a note naming each
        field it changed."""
        form = dict(zip(FORM_KEYS, values[:-1]))
        try:
            before = config_from_values(*values)  # reads nothing: the recipe needs the numbers only
            after, changed = apply_recipe(before, form["recipe"])
        except (ConfigError, ValueError) as exc:  # a form it cannot read, a name that is no recipe
            return [gr.skip()] * (len(RECIPE_FORM_FIELDS) + len(self.ui.plan_outputs)) + [
                recipe_note_html("", [], str(exc))
            ]
        lines = describe_changes(before, after, [name for name in changed if name != "recipe"])
        values_now = {name: getattr(after, name) for name in RECIPE_FORM_FIELDS}
        values_now["steps_per_generation"] = values_now["steps_per_generation"] or 0  # the form's 0 is unset
        return (
            [gr.update(value=values_now[name]) for name in RECIPE_FORM_FIELDS]
            + self.live_plan(request, *form_with(list(values), values_now))
            + [recipe_note_html(form["recipe"], lines)]
        )

    def suggestion(self, index: int):
        """The handler of the verdict's suggestion button `index`: the form's fields once its changes are made,
        and the verdict of the form with them."""

        def apply_suggestion(request: gr.Request, slots: list, *values) -> list:
            form = dict(zip(FORM_KEYS, values[:-1]))
            changes = slots[index] if isinstance(slots, list) and index < len(slots) and slots[index] else {}
            fixed = apply_changes({name: form[name] for name in PLAN_FIELDS_SETTABLE}, changes)
            return [*fixed.values(), *self.live_plan(request, *form_with(list(values), fixed))]

        return apply_suggestion

    def refresh_hardware(self, request: gr.Request, *values):
        """On page load: the GPUs as they are now, and the verdict of the form on them."""
        state = hardware_state(self.ctx.runs_dir, self.ctx.cpu)
        gpus, busy = gpus_of(state), set(state["busy"])
        choices = gpu_choices(gpus, busy)
        return [
            state,
            hardware_html(gpus, busy),
            gr.update(choices=choices),
            gr.update(choices=choices),
            *self.live_plan(request, *values[:-1], state),
        ]

    def example(self, task_name):
        """A prompt of the chosen task and the columns its rewards read, to try the rewards on."""
        return example_from_task(task_name)

    def launch(self, request: gr.Request, *values):
        """Launch the form's config (ui/launching.py) and show the Train tab, which follows the new run (its place in
        the GPU queue, when it waits there, in the line under the button)."""
        try:
            launched = launching.start_run(self.ctx, request, values)
        except WorkbenchError as exc:  # the config's field, rule and fix, or too many launches this minute
            return refused_html(str(exc)), gr.skip(), None
        return launched_html(launched), gr.Tabs(selected="train"), launched

    def preview(self, request: gr.Request, *values):
        try:
            cfg = config_from_values(*values, scope=self.ctx.scope_for(request))
        except ConfigError as exc:
            return f"Cannot build the command: {exc}"
        run_dir = self.ctx.runs_dir / runfolder.new_run_id(preview_label(cfg))  # not created
        return command_text(commands.build_command(cfg, run_dir), commands.launch_env(cfg), server_command_text(cfg))

    def start_smoke(self, request: gr.Request, *values):
        ctx, viewer = self.ctx, self.ctx.viewer(request)
        try:
            config = config_from_values(*values, scope=ctx.scope_of(viewer), launching=True)
            ctx.actions.take(viewer.name, "smoke test")  # a refusal shows as the page's message
            run_id = launcher.smoke_test(
                config,
                ctx.runs_dir,
                owner=viewer.name,
                import_reward_file=not ctx.shared,
                sandboxed=ctx.sandbox_for(viewer),
            )
        except WorkbenchError as exc:  # the config, the user's cap or their disk total: the page's message
            return None, problems_html(refusal_problems(exc)), gr.Timer(active=False)
        return run_id, smoke_result_html({"state": "starting", "run_id": run_id}), gr.Timer(active=True)

    def poll_smoke(self, request: gr.Request, run_id):
        if not run_id:
            return gr.skip(), gr.Timer(active=False)
        ctx = self.ctx
        read_status = run_access.status_reader(gpu_queue.status_with_queue_place, ctx.runs_dir, ctx.viewer(request))
        try:
            status = read_status(runfolder.run_dir_in(ctx.runs_dir, run_id))
        except runfolder.RunIdError:  # deleted meanwhile (the Runs tab)
            return gr.skip(), gr.Timer(active=False)
        final = status.get("state") in runfolder.FINAL_STATES
        return smoke_result_html(status), gr.Timer(active=not final)

    def start_signal(self, request: gr.Request, job, *values):
        """Check the signal of the form's config in a background process (in the sandbox on a shared dashboard)."""
        ctx, viewer = self.ctx, self.ctx.viewer(request)
        signal_job.cancel_signal_check(job)  # one check per page at a time: the newest settings win
        try:
            config = config_from_values(*values, scope=ctx.scope_of(viewer))
            ctx.actions.take(viewer.name, "signal check")  # it loads a model: counted like a smoke test
            started = signal_job.start_signal_check(
                config, ctx.runs_dir, policy=ctx.sandbox_for(viewer), owner=viewer.name
            )
        except WorkbenchError as exc:  # the config, the user's cap or their disk total: the page's message
            return None, problems_html(refusal_problems(exc)), gr.Timer(active=False)
        return started, signal_html({"state": "running"}), gr.Timer(active=True)

    def poll_signal(self, job):
        if job is None:
            return gr.skip(), gr.Timer(active=False)
        state = signal_job.read_signal_check(job)
        return signal_html(state), gr.Timer(active=state["state"] == "running")

    def export(self, request: gr.Request, *values):
        cluster = self.ui.cluster
        try:
            cfg = config_from_values(*values[len(cluster) :], scope=self.ctx.scope_for(request))
            cfg = export_view.cluster_config(cfg, *values[: len(cluster)])
            run_id = runfolder.new_run_id(cfg.run_name or cfg.task)
            folder = export_view.bundle_folder(self.ctx.runs_dir, run_id)
            written = bundle.write_bundle(cfg, folder, run_id, import_reward_file=not self.ctx.shared)
        except WorkbenchError as exc:
            return f"Cannot export: {exc}"
        return export_view.export_text(written.folder, written.run_id, written.commands, self.ctx.runs_dir)

    def export_script(self, request: gr.Request, *values):
        """This setup as one Python script, offered for download (a private folder, ui/cleanup.py empties it)."""
        from workbench.insight import script_export

        try:
            cfg = config_from_values(*values, scope=self.ctx.scope_for(request))
            label = preview_label(cfg)
            text = script_export.build_script(script_export.script_inputs(cfg, title=f"a {label} setup"))
        except WorkbenchError as exc:
            return gr.File(value=None, visible=False), problems_html(
                getattr(exc, "problems", None) or [ConfigProblem("script", str(exc), "")]
            )
        folder = Path(tempfile.mkdtemp(prefix="script-", dir=run_reports.reports_root()))
        path = folder / f"train_{re.sub(r'[^A-Za-z0-9_.-]', '_', label)}.py"
        path.write_text(text, encoding="utf-8")
        return gr.File(value=str(path), visible=True), gr.update()


def refusal_problems(exc: WorkbenchError) -> list[ConfigProblem]:
    """A refusal as the problems the page lists: a ConfigError's own, else its field, rule and fix."""
    return getattr(exc, "problems", None) or [ConfigProblem(exc.field, exc.rule, exc.fix)]


def build(ctx) -> None:
    """Lay the tab out, wire its events to a `SetupTab`, and register what the Train tab needs."""
    ui = layout(ctx)
    tab = SetupTab(ctx, ui)
    _wire_form(ctx, ui, tab)
    ui.score_button.click(
        tab.on_score, inputs=[ui.try_prompt, ui.try_completions, ui.try_columns, *ui.inputs], outputs=ui.scores_box
    )
    ui.example_button.click(tab.example, inputs=ui.form["task"], outputs=[ui.try_prompt, ui.try_columns])
    launched = ui.launch_button.click(  # the Train tab then shows the run (ui/launching.py `follow_launches`)
        tab.launch,
        inputs=ui.inputs,
        outputs=[ui.launch_result, ctx.components["tabs"], ctx.components["launched_run"]],
        show_progress="minimal",
    )
    ctx.launch_events.append(launched)
    ui.preview_button.click(tab.preview, inputs=ui.inputs, outputs=ui.command, show_progress="hidden")
    ui.export_button.click(tab.export, inputs=[*ui.cluster, *ui.inputs], outputs=ui.exported, show_progress="hidden")
    ui.script_button.click(tab.export_script, inputs=ui.inputs, outputs=[ui.script_file, ui.problems])
    ui.smoke_button.click(tab.start_smoke, inputs=ui.inputs, outputs=[ui.smoke_run, ui.smoke_result, ui.smoke_timer])
    ui.smoke_timer.tick(
        tab.poll_smoke, inputs=ui.smoke_run, outputs=[ui.smoke_result, ui.smoke_timer], show_progress="hidden"
    )
    ui.signal_button.click(
        tab.start_signal, inputs=[ui.signal_job, *ui.inputs], outputs=[ui.signal_job, ui.signal_result, ui.signal_timer]
    )
    ui.signal_timer.tick(
        tab.poll_signal, inputs=ui.signal_job, outputs=[ui.signal_result, ui.signal_timer], show_progress="hidden"
    )
    ctx.config_inputs = ui.inputs
    ctx.config_from_values = config_from_values
    ctx.register(plan_valid=ui.plan_valid, setup_form=ui.form, setup_hardware=ui.hardware)


def _wire_form(ctx, ui: SetupComponents, tab: SetupTab) -> None:
    """The form's events: one per person's action, each answering with the verdict of the form it leaves (see
    SetupTab). `edited` picks the events of a person's edit; a value a handler sets starts nothing."""
    form, inputs = ui.form, ui.inputs
    edits = [event for key in FORM_KEYS if key not in ("task", "recipe") for event in edited(form[key])]
    gr.on(
        edits,
        fn=tab.live_plan,
        inputs=inputs,
        outputs=ui.plan_outputs,
        show_progress="hidden",
        trigger_mode="always_last",
    )
    # The preview follows what decides the rows and the columns the rewards read (the correctness choices follow
    # the rewards ticked).
    preview_keys = [
        "dataset_name",
        "seed",
        "model",
        *[k for k in DATA_FIELDS if k != "dataset_test_split"],
        *[f"use_{name}" for name in PICKER_REWARDS],
    ]
    gr.on(
        [event for key in preview_keys for event in edited(form[key])],
        fn=tab.live_preview,
        inputs=inputs,
        outputs=ui.preview_outputs,
        show_progress="hidden",
        trigger_mode="always_last",
    )
    gr.on(
        edited(form["task"]),
        tab.on_task,
        inputs=inputs,
        outputs=[ui.task_text, *[form[k] for k in TASK_KEYS], *ui.plan_outputs, *ui.preview_outputs],
        show_progress="hidden",
        trigger_mode="always_last",
    )
    gr.on(
        edited(form["recipe"]),
        tab.on_recipe,
        inputs=inputs,
        outputs=[*[form[k] for k in RECIPE_FORM_FIELDS], *ui.plan_outputs, ui.recipe_note],
        show_progress="hidden",
        trigger_mode="always_last",
    )
    settable = [form[name] for name in PLAN_FIELDS_SETTABLE]
    _badge, buttons, suggestions, _warnings = ui.plan
    for index, button in enumerate(buttons):
        button.click(
            tab.suggestion(index),
            inputs=[suggestions, *inputs],
            outputs=[*settable, *ui.plan_outputs],
            show_progress="hidden",
        )
    ctx.blocks.load(
        tab.refresh_hardware,
        inputs=inputs,
        outputs=[ui.hardware, ui.hardware_box, form["gpu_ids"], form["vllm_gpu_ids"], *ui.plan_outputs],
        show_progress="hidden",
    )
    uploaded = files_panel.wire_uploads(ui.uploads, form["dataset_name"], form["reward_file"])
    if uploaded is not None:  # an upload fills dataset_name or reward_file: the verdict and preview of them
        uploaded.success(
            tab.form_settled, inputs=inputs, outputs=[*ui.plan_outputs, *ui.preview_outputs], show_progress="hidden"
        )


def edited(component) -> list:
    """The events of a person's edit of a form field: `input`, with two exceptions of Gradio's page. A dropdown of
    fixed choices sends `input` twice for one choice (as the option is picked, again as its list closes): `select`
    once instead. A text box sends `input` from key presses only, so a path pasted with the mouse would send
    nothing: `blur` too, as the person leaves the box."""
    if isinstance(component, gr.Dropdown) and not component.allow_custom_value and not component.multiselect:
        return [component.select]
    if isinstance(component, gr.Textbox):
        return [component.input, component.blur]
    return [component.input]
