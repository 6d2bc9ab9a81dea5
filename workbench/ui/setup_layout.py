"""The Setup tab's components: `layout` makes them (a `SetupComponents`), part by part.

What a first run needs is open: model and hardware, task and data, rewards on the left; the verdict, memory and
Launch on the right. Every other setting sits in a closed group (setup_view.ADVANCED_GROUPS), each a RunConfig field
under TRL's name with FIELD_HELP as its info text. ui/setup_tab.py wires the components to its handlers.
"""

from __future__ import annotations

import json
import typing
from dataclasses import dataclass

import gradio as gr

from workbench.jobs import signal_job
from workbench.sources.model_files import BUNDLED_MODEL, TINY_MODEL
from workbench.spec.columns import DataPreview
from workbench.spec.config import (
    CHAT_TEMPLATE_CHOICES,
    FIELD_HELP,
    IMPORTANCE_SAMPLING_LEVELS,
    LOSS_TYPES,
    LR_SCHEDULERS,
    MERGED_GENERATION,
    PACKED_DECODE,
    SCALE_REWARDS,
    SHARED_PROMPT_PASS,
    SOLUTION_TRANSFORM_CHOICES,
    RunConfig,
    field_type,
)
from workbench.spec.generation import GENERATIONS
from workbench.spec.rewards import REWARD_ERROR_MODES
from workbench.spec.tasks import TASKS
from workbench.spec.trackers import REPORT_TO
from workbench.ui import download_panel, export_view, files_panel
from workbench.ui.data_preview_view import data_choices, data_preview_html
from workbench.ui.page_text import markdown_text
from workbench.ui.setup_form import gpus_of, hardware_state, preview_from_form
from workbench.ui.setup_form_view import EXAMPLE_COMPLETIONS, FORM_KEYS
from workbench.ui.setup_view import (
    ADVANCED_GROUPS,
    CORRECTNESS_FIELD,
    CPU_PROCESS_CHOICES,
    DATA_GROUP,
    PICKER_REWARDS,
    gpu_choices,
    hardware_html,
    recipe_choices,
    recipe_note_html,
    rewards_help_markdown,
    task_description,
)
from workbench.ui.signal_view import correctness_choices
from workbench.ui.widgets import build_verdict, whole_number

CHOICES = {
    "reward_errors": REWARD_ERROR_MODES,
    "loss_type": LOSS_TYPES,
    "scale_rewards": SCALE_REWARDS,
    "lr_scheduler_type": LR_SCHEDULERS,
    "generation": GENERATIONS,
    "report_to": REPORT_TO,
    "importance_sampling_level": IMPORTANCE_SAMPLING_LEVELS,
    "solution_transform": SOLUTION_TRANSFORM_CHOICES,
    "chat_template": CHAT_TEMPLATE_CHOICES,
    "merged_generation": MERGED_GENERATION,
    "shared_prompt_pass": SHARED_PROMPT_PASS,
    "packed_decode": PACKED_DECODE,
}


@dataclass
class SetupComponents:
    """The Setup tab's components, as `layout` makes them (`form`: the settings by FORM_KEYS name)."""

    form: dict
    hardware: gr.State
    hardware_box: gr.HTML
    task_text: gr.Markdown
    data_preview: gr.HTML
    try_prompt: gr.Textbox
    try_columns: gr.Textbox
    try_completions: gr.Textbox
    score_button: gr.Button
    example_button: gr.Button
    scores_box: gr.HTML
    uploads: tuple | None  # "Your files" (a dashboard with accounts), None without
    plan: tuple  # the verdict: badge, suggestion buttons, suggestions, warnings
    numbers: gr.HTML
    memory: gr.HTML
    launch_note: gr.HTML  # what Launch runs and how long it takes here
    problems: gr.HTML
    plan_valid: gr.Checkbox
    launch_button: gr.Button
    launch_result: gr.HTML
    preview_button: gr.Button
    smoke_button: gr.Button
    command: gr.Textbox
    smoke_result: gr.HTML
    smoke_run: gr.State
    smoke_timer: gr.Timer
    cluster: list
    export_button: gr.Button
    exported: gr.Textbox
    script_button: gr.Button
    script_file: gr.File
    signal_button: gr.Button
    signal_result: gr.HTML
    signal_job: gr.State
    signal_timer: gr.Timer
    recipe_note: gr.HTML

    @property
    def data_dropdowns(self) -> list:
        """The dropdowns the chosen data fills: dataset_config, prompt_column, solution_column."""
        return [self.form[name] for name in ("dataset_config", "prompt_column", "solution_column")]

    @property
    def inputs(self) -> list:
        """The form's values in FORM_KEYS order, then the hardware state (ctx.config_inputs)."""
        return [self.form[key] for key in FORM_KEYS] + [self.hardware]

    @property
    def plan_outputs(self) -> list:
        """What `update_plan` fills, in its order."""
        badge, buttons, suggestions, warnings = self.plan
        return [
            badge,
            *buttons,
            suggestions,
            warnings,
            self.numbers,
            self.launch_note,
            self.launch_button,
            self.problems,
            self.memory,
            self.plan_valid,
        ]

    @property
    def preview_outputs(self) -> list:
        """What `SetupTab.live_preview` fills: the preview, the dropdowns the data fills, the correctness choices."""
        return [self.data_preview, *self.data_dropdowns, self.form[CORRECTNESS_FIELD]]


def layout(ctx) -> SetupComponents:
    """What a first run needs, open: model and hardware, task and data, rewards on the left; the verdict, memory and
    Launch on the right. Every other setting sits in a closed group (setup_view.ADVANCED_GROUPS)."""
    defaults = {**RunConfig().to_dict(), **TASKS[RunConfig().task].settings}
    form: dict = {}
    hardware_now = hardware_state(ctx.runs_dir)
    with gr.Row(equal_height=False):
        with gr.Column(scale=3, min_width=560):
            hardware, hardware_box = _model_and_hardware(form, defaults, hardware_now)
            task_text, data_preview, uploads = _task_and_data(ctx, form, defaults)
            tries = _rewards(form, defaults)
            recipe_note = _advanced(ctx, form, defaults, hardware_now)
        with gr.Column(scale=2, min_width=420, elem_classes=["wb-sticky"]):
            plan_column = _plan_column()
            signal = _signal_check()
    return SetupComponents(
        form, hardware, hardware_box, task_text, data_preview, *tries, uploads, *plan_column, *signal, recipe_note
    )


def _model_and_hardware(form: dict, defaults: dict, hardware_now: dict) -> tuple[gr.State, gr.HTML]:
    """The model, and the CPU processes or the training GPUs (the vLLM server's GPUs are in Generation and vLLM)."""
    gpus, busy = gpus_of(hardware_now), set(hardware_now["busy"])
    gr.Markdown("### Model and hardware", elem_classes=["wb-section"])
    with gr.Row():
        form["model"] = gr.Dropdown(
            choices=[BUNDLED_MODEL, TINY_MODEL],
            value=defaults["model"],
            allow_custom_value=True,
            label="model",
            info=FIELD_HELP["model"],
            scale=3,
        )
        form["cpu_processes"] = gr.Radio(
            choices=list(CPU_PROCESS_CHOICES),
            value=1,
            label="CPU processes",
            visible=not gpus,
            info="2 runs DDP over the CPU cores through accelerate",
            scale=2,
        )
    hardware = gr.State(hardware_now)
    hardware_box = gr.HTML(hardware_html(gpus, busy))
    form["gpu_ids"] = gr.CheckboxGroup(
        choices=gpu_choices(gpus, busy), value=[], label="training GPUs", info=FIELD_HELP["gpu_ids"], visible=bool(gpus)
    )
    return hardware, hardware_box


def _task_and_data(ctx, form: dict, defaults: dict) -> tuple:
    """The task and dataset_name, the task's description, the data's own group (closed) and, on a dashboard with
    accounts, the uploads (their parts for files_panel.wire_uploads; None without accounts)."""
    gr.Markdown("### Task and data", elem_classes=["wb-section"])
    with gr.Row():
        form["task"] = gr.Dropdown(
            choices=[(f"{t.name}: {t.title}", t.name) for t in TASKS.values()],
            value=defaults["task"],
            label="task",
            info=FIELD_HELP["task"],
        )
        form["dataset_name"] = gr.Textbox(
            value="",
            label="dataset_name",
            info="Your own data in place of the task's prompts (open the data's group below for the column mapping).",
            placeholder="optional: a hub id, or a file or folder from your uploads (Your files, below)"
            if ctx.shared
            else "optional: openai/gsm8k, data/gsm8k (a hub-layout folder) or data/my_prompts.jsonl",
        )
    task_text = gr.Markdown(task_description(defaults["task"]), elem_classes=["wb-note"])
    with gr.Accordion(DATA_GROUP, open=False):
        gr.Markdown(f"`dataset_name`: {markdown_text(FIELD_HELP['dataset_name'])}", elem_classes=["wb-note"])
        first = preview_from_form({"task": defaults["task"], "seed": defaults["seed"]})
        _data_fields(form, defaults, first)
        data_preview = gr.HTML(data_preview_html(first), elem_id="wb-data-preview")
        download_panel.build(form["dataset_name"])
    uploads = files_panel.build_uploads(ctx)
    return task_text, data_preview, uploads


def _rewards(form: dict, defaults: dict) -> tuple:
    """A tick and a weight per reward function (the task's ticked), and trying them on typed completions."""
    gr.Markdown("### Rewards", elem_classes=["wb-section"])
    task = TASKS[defaults["task"]]
    weights = dict(zip(task.reward_names, task.reward_weights))
    names = list(PICKER_REWARDS)
    with gr.Group(elem_classes=["wb-rewards"]):
        for start in range(0, len(names), 2):
            with gr.Row():
                for name in names[start : start + 2]:
                    form[f"use_{name}"] = gr.Checkbox(
                        value=name in weights, label=name, scale=1, container=False, min_width=150
                    )
                    form[f"weight_{name}"] = gr.Number(
                        value=weights.get(name, 1.0),
                        show_label=False,
                        label=f"weight of {name}",
                        scale=0,
                        min_width=64,
                        container=False,
                    )
    return _try_rewards()


def _advanced(ctx, form: dict, defaults: dict, hardware_now: dict) -> gr.HTML:
    """Every other setting, in the closed groups of setup_view.ADVANCED_GROUPS; the recipe's note."""
    gr.Markdown("### More settings", elem_classes=["wb-section"])
    recipe_note = None
    with gr.Column(elem_classes=["wb-groups"]):
        for title, names in ADVANCED_GROUPS.items():
            with gr.Accordion(title, open=False):
                if names == ("recipe",):
                    recipe_note = _recipe_choice(form, defaults)
                elif names == ("reward_file",):
                    _reward_code(ctx, form)
                elif CORRECTNESS_FIELD in names:
                    _reward_scoring(form, defaults, names)
                elif "vllm_gpu_ids" in names:
                    _generation(form, defaults, names, hardware_now)
                else:
                    _rows(form, names, defaults, per_row=2 if len(names) <= 4 else 3)
    return recipe_note


def _generation(form: dict, defaults: dict, names: tuple, hardware_now: dict) -> None:
    """The generation backend, the GPUs a vLLM server of the run's own takes (with GPUs only), and vLLM's settings."""
    gpus, busy = gpus_of(hardware_now), set(hardware_now["busy"])
    form["vllm_gpu_ids"] = gr.CheckboxGroup(
        choices=gpu_choices(gpus, busy),
        value=[],
        label="vLLM server GPUs",
        info=FIELD_HELP["vllm_gpu_ids"],
        visible=bool(gpus),
    )
    _rows(form, tuple(name for name in names if name != "vllm_gpu_ids"), defaults)


def _reward_scoring(form: dict, defaults: dict, names: tuple) -> None:
    task = TASKS[defaults["task"]]
    _rows(form, tuple(name for name in names if name != CORRECTNESS_FIELD), defaults)
    form[CORRECTNESS_FIELD] = gr.Dropdown(
        choices=correctness_choices(list(task.reward_names)),
        value="",
        label=CORRECTNESS_FIELD,
        info=FIELD_HELP[CORRECTNESS_FIELD],
    )
    gr.Markdown("**What each reward function computes, and TRL's parameters**", elem_classes=["wb-note"])
    gr.Markdown(rewards_help_markdown(), elem_classes=["wb-note"])


def _reward_code(ctx, form: dict) -> None:
    form["reward_file"] = gr.Textbox(
        value="",
        label="reward_file",
        info=FIELD_HELP["reward_file"],
        placeholder="optional: a .py file from your uploads (Your files, above)"
        if ctx.shared
        else "optional: my_rewards.py",
    )
    files_panel.build(ctx, form["reward_file"])


def _data_fields(form: dict, defaults: dict, first: DataPreview) -> None:
    """The data's config and splits, the column mapping (dropdowns the data's columns fill) and the chat template."""
    configs, columns, solutions = data_choices(first)
    with gr.Row():
        form["dataset_config"] = gr.Dropdown(
            choices=configs,
            value=defaults["dataset_config"],
            label="dataset_config",
            info=FIELD_HELP["dataset_config"],
            allow_custom_value=True,
        )
        for name in ("dataset_train_split", "dataset_test_split"):
            form[name] = gr.Textbox(value=defaults[name], label=name, info=FIELD_HELP[name])
    with gr.Row():
        form["prompt_column"] = gr.Dropdown(
            choices=columns,
            value=defaults["prompt_column"],
            label="prompt_column",
            info=FIELD_HELP["prompt_column"],
            allow_custom_value=True,
        )
        form["solution_column"] = gr.Dropdown(
            choices=solutions,
            value=defaults["solution_column"],
            label="solution_column",
            info=FIELD_HELP["solution_column"],
            allow_custom_value=True,
        )
        form["solution_transform"] = _setting("solution_transform", defaults["solution_transform"])
    with gr.Row():
        form["chat_template"] = _setting("chat_template", defaults["chat_template"])
        form["system_prompt"] = gr.Textbox(
            value=defaults["system_prompt"], label="system_prompt", lines=2, info=FIELD_HELP["system_prompt"]
        )


def _recipe_choice(form: dict, defaults: dict) -> gr.HTML:
    """The recipe dropdown (spec/recipes.py) and the note saying which fields choosing one changed."""
    form["recipe"] = gr.Dropdown(
        choices=recipe_choices(),
        value=defaults["recipe"],
        label="recipe",
        info=FIELD_HELP["recipe"],
        elem_id="wb-recipe",
    )
    return gr.HTML(recipe_note_html(defaults["recipe"], []), elem_id="wb-recipe-note")


def _signal_check() -> tuple:
    """Will it learn? The button, the report, the running check and the timer that follows it."""
    with gr.Accordion("Will it learn? A signal check before training", open=False):
        gr.Markdown(
            f"Samples {signal_job.DEFAULT_GROUPS} prompts x num_generations completions from the base model "
            "with these settings and scores them with the rewards: groups whose completions all score the "
            "same teach nothing.",
            elem_classes=["wb-note"],
        )
        button = gr.Button("Check the signal", size="sm", elem_id="wb-signal-button")
        result = gr.HTML(elem_id="wb-signal-result")
    job = gr.State(None, delete_callback=signal_job.cancel_signal_check)
    return button, result, job, gr.Timer(1.0, active=False)


def _try_rewards() -> tuple:
    """Try the rewards: prompt, columns, completions, the two buttons and the scores."""
    with gr.Accordion("Try the rewards on your own completions", open=False):
        with gr.Row():
            try_prompt = gr.Textbox(label="prompt", value="What is the capital of France?", scale=2)
            try_columns = gr.Textbox(label="columns the rewards read", lines=2, scale=1, placeholder="answer = 42")
        try_completions = gr.Textbox(
            label="completions, one per line (or separated by a --- line)", lines=3, value=EXAMPLE_COMPLETIONS
        )
        with gr.Row():
            score_button = gr.Button("Score them", variant="primary", size="sm")
            example_button = gr.Button("Take a prompt from the task", size="sm")
        scores_box = gr.HTML()
    return try_prompt, try_columns, try_completions, score_button, example_button, scores_box


def _plan_column() -> tuple:
    """The batch plan, memory, Launch with what it runs and what stops it, then (closed) the command preview and
    smoke test, the cluster export and the script."""
    gr.Markdown("### Batch plan", elem_classes=["wb-section"])
    plan = build_verdict()
    with gr.Accordion("The numbers", open=False):
        numbers = gr.HTML()
    gr.Markdown("### Memory", elem_classes=["wb-section"])
    memory = gr.HTML()
    gr.Markdown("### Launch", elem_classes=["wb-section"])
    launch_note = gr.HTML(elem_id="wb-launch-note")
    problems = gr.HTML()
    plan_valid = gr.Checkbox(value=False, visible=False, label="plan_valid")
    launch_button = gr.Button("Launch", variant="primary", interactive=False, elem_id="wb-setup-launch")
    launch_result = gr.HTML(elem_id="wb-setup-launch-result")
    with gr.Accordion("Check first: the exact command, a one-step smoke test", open=False):
        with gr.Row():
            preview_button = gr.Button("Preview command", size="sm")
            smoke_button = gr.Button("Smoke test (1 step)", size="sm")
        command = gr.Textbox(
            label="command the launch runs",
            lines=3,
            buttons=["copy"],
            interactive=False,
            placeholder="Preview command shows the exact argument list here.",
            elem_classes=["wb-command"],
        )
        smoke_result = gr.HTML()
    smoke_run = gr.State(None)
    smoke_timer = gr.Timer(1.0, active=False)
    with gr.Accordion("Export for a cluster", open=False):
        cluster = _cluster_inputs()
        export_button = gr.Button("Export bundle", size="sm")
        exported = gr.Textbox(
            label="bundle and the commands that start it",
            lines=6,
            buttons=["copy"],
            interactive=False,
            elem_classes=["wb-command"],
            placeholder="The training processes above run on each machine; the bundle goes to runs/bundles/<run id>.",
        )
    with gr.Accordion("Your own code: this setup as one Python script", open=False):
        gr.Markdown(
            "One plain script with TRL, PEFT and `datasets` only: the model, the data, the reward "
            "functions' source and GRPOConfig with every setting above.",
            elem_classes=["wb-note"],
        )
        script_button = gr.Button("Download as a Python script", size="sm", elem_id="wb-script-button")
        script_file = gr.File(label="training script", visible=False, interactive=False, elem_id="wb-script-file")
    return (
        plan,
        numbers,
        memory,
        launch_note,
        problems,
        plan_valid,
        launch_button,
        launch_result,
        preview_button,
        smoke_button,
        command,
        smoke_result,
        smoke_run,
        smoke_timer,
        cluster,
        export_button,
        exported,
        script_button,
        script_file,
    )


def _setting(name: str, value):
    kind = field_type(name)
    info = FIELD_HELP.get(name)
    if name == "steps_per_generation":
        info, value = f"{info} 0 leaves it unset.", value or 0
    if name in CHOICES and typing.get_origin(kind) is list:  # several of the choices: report_to
        return gr.CheckboxGroup(choices=list(CHOICES[name]), value=value, label=name, info=info)
    if name in CHOICES:
        return gr.Dropdown(choices=list(CHOICES[name]), value=value, label=name, info=info)
    if kind is bool:
        return gr.Checkbox(value=value, label=name, info=info)
    if kind is dict:  # JSON text: reward_params
        return gr.Textbox(
            value=json.dumps(value) if value else "",
            label=name,
            info=info,
            placeholder='{"repetition_penalty_reward": {"ngram_size": 4}}',
        )
    if kind is int or kind == (int | None):
        # Whole numbers; no gradio minimum, so validate_config names the field and the rule instead.
        return whole_number(name, value, minimum=None, info=info)
    if kind is float or kind == (float | None):  # empty stands for None (epsilon_high: same as epsilon)
        return gr.Number(value=value, label=name, info=info)
    return gr.Textbox(value=value, label=name, info=info)


def _rows(form: dict, names, defaults: dict, per_row: int = 3) -> None:
    for start in range(0, len(names), per_row):
        with gr.Row():
            for name in names[start : start + per_row]:
                form[name] = _setting(name, defaults[name])


def _cluster_inputs() -> list:
    """The export's own settings, each with its RunConfig help, in export_view.EXPORT_FIELDS order."""
    defaults = RunConfig()
    return [
        whole_number("num_machines", 1, minimum=1, info=FIELD_HELP["num_machines"]),
        gr.Textbox(value="", label="main_process_ip", info=FIELD_HELP["main_process_ip"]),
        whole_number(
            "main_process_port", defaults.main_process_port, minimum=None, info=FIELD_HELP["main_process_port"]
        ),
        gr.Dropdown(
            choices=list(export_view.BACKEND_CHOICES),
            value="ddp",
            label="distributed_backend",
            info=FIELD_HELP["distributed_backend"],
        ),
        gr.Checkbox(value=False, label="vllm_node", info=FIELD_HELP["vllm_node"]),
    ]
