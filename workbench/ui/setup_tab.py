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

import json
import re
import tempfile
import typing
from dataclasses import dataclass
from html import escape
from pathlib import Path

import gradio as gr
import psutil

from workbench.access import run_memory
from workbench.access.paths import PathError, UserScope
from workbench.errors import WorkbenchError
from workbench.jobs import bundle, commands, gpu_queue, launcher, signal_job
from workbench.runstore import runfolder
from workbench.spec.chat import prompt_text
from workbench.spec.columns import DataChoice, DataPreview, preview
from workbench.spec.data_mapping import SOLUTION_TRANSFORMS, ColumnMapping
from workbench.spec.config import (
    FIELD_HELP,
    CHAT_TEMPLATE_CHOICES,
    IMPORTANCE_SAMPLING_LEVELS,
    LOSS_TYPES,
    MERGED_GENERATION,
    PACKED_DECODE,
    SHARED_PROMPT_PASS,
    LR_SCHEDULERS,
    SCALE_REWARDS,
    SOLUTION_TRANSFORM_CHOICES,
    ConfigError,
    ConfigProblem,
    RunConfig,
    data_field,
    field_type,
)
from workbench.spec.config_checks import path_problem, validate_config
from workbench.spec.generation import GENERATIONS
from workbench.sources.gpus import list_gpus
from workbench.sources.model_files import BUNDLED_MODEL, TINY_MODEL
from workbench.spec.recipes import apply_recipe, describe_changes
from workbench.spec.rewards import REWARD_ERROR_MODES, score
from workbench.spec.tasks import TASKS
from workbench.spec.trackers import REPORT_TO
from workbench.ui.calculator_view import warnings_html
from workbench.ui.setup_view import (
    ADVANCED_GROUPS,
    CORRECTNESS_FIELD,
    CPU_PROCESS_CHOICES,
    DATA_FIELDS,
    DATA_GROUP,
    MEMORY_NOT_ON_DISK,
    PICKER_REWARDS,
    PLAN_FIELDS_SETTABLE,
    RECIPE_FORM_FIELDS,
    SETTING_FIELDS,
    TASK_SETTING_KEYS,
    command_text,
    config_from_form,
    data_choices,
    data_preview_html,
    error_view,
    form_text,
    gpu_choices,
    hardware_html,
    memory_html,
    memory_unavailable_html,
    parse_columns,
    parse_completions,
    preview_label,
    problems_html,
    recipe_choices,
    recipe_note_html,
    reward_choice,
    rewards_help_markdown,
    scores_html,
    setting_notes,
    speed_choice,
    speed_html,
    setup_plan_view,
    smoke_result_html,
    task_dataset_size,
    task_description,
    task_presets,
)
from workbench.ui import download_panel, export_view, files_panel, launching, paths_view, run_access, run_reports
from workbench.ui.calculator_view import apply_changes
from workbench.ui.first_run_view import launch_html, launched_html, refused_html
from workbench.ui.signal_view import correctness_choices, kept_correctness, signal_html
from workbench.ui.paths_view import confine_path
from workbench.ui.server_view import server_command_text
from workbench.ui.widgets import build_verdict, render_plan_panel

CHOICES = {"reward_errors": REWARD_ERROR_MODES, "loss_type": LOSS_TYPES, "scale_rewards": SCALE_REWARDS,
           "lr_scheduler_type": LR_SCHEDULERS,
           "generation": GENERATIONS, "report_to": REPORT_TO, "importance_sampling_level": IMPORTANCE_SAMPLING_LEVELS,
           "solution_transform": SOLUTION_TRANSFORM_CHOICES, "chat_template": CHAT_TEMPLATE_CHOICES,
           "merged_generation": MERGED_GENERATION, "shared_prompt_pass": SHARED_PROMPT_PASS,
           "packed_decode": PACKED_DECODE}
REWARD_KEYS = tuple(key for name in PICKER_REWARDS for key in (f"use_{name}", f"weight_{name}"))
# The form's entries in the order of ctx.config_inputs (the hardware state follows them).
FORM_KEYS = ("model", "task", "dataset_name", "reward_file", *REWARD_KEYS, "cpu_processes", "gpu_ids",
             "vllm_gpu_ids", *SETTING_FIELDS)
# What choosing a task sets on the form (setup_view.task_presets): each picker reward's tick and weight, and the
# settings the task presets; its description beside them.
TASK_KEYS = (*REWARD_KEYS, *TASK_SETTING_KEYS)
EXAMPLE_COMPLETIONS = ("Paris.\n"
                       "The capital of France is Paris, which is also its largest city and its cultural centre.")
# How many tokens the memory estimate allows for a prompt after the chat template.
PROMPT_TOKENS_ASSUMED = 64
MODEL_REFUSED_NOTE = ("<p class='wb-note'>Memory estimate: none for a model this shared dashboard refuses "
                      "(see Before launch).</p>")


def hardware_state(runs_dir) -> dict:
    """GPUs as NVML sees them now and those held by running runs (plain data for a gr.State)."""
    return {"gpus": [g.to_dict() for g in list_gpus()], "busy": sorted(gpu_queue.busy_gpu_ids(runs_dir))}


def _gpus(hardware: dict):
    from workbench.sources.gpus import GpuInfo

    return [GpuInfo(**g) for g in (hardware or {}).get("gpus", [])]


def _device_memory(cfg: RunConfig, hardware: dict) -> tuple[int | None, int | None, str]:
    """(free, in all) bytes of the device the run will use (the smallest chosen GPU), and "cpu" or "cuda"."""
    gpus = _gpus(hardware)
    if not gpus or cfg.device == "cpu":
        memory = psutil.virtual_memory()
        return memory.available, memory.total, "cpu"
    chosen = [g for g in gpus if not cfg.gpu_ids or g.index in cfg.gpu_ids]
    if not chosen:
        return None, None, "cuda"
    return min(g.free_mb for g in chosen) * 2**20, min(g.total_mb for g in chosen) * 2**20, "cuda"


def config_from_values(*values, scope: UserScope | None = None, launching: bool = False) -> RunConfig:
    """The RunConfig of the Setup tab's values (ctx.config_inputs order); raises ConfigError naming the field.

    `scope`: what the user may name on a shared dashboard (ctx.scope_of): every
    path must pass access/paths.py's rule (and becomes absolute), the vLLM
    server address access/hosts.py's. `launching` (a launch or a smoke test
    there): a run whose memory estimate is past the limit is refused too
    (`memory_problems`).
    """
    *form_values, hardware = values
    gpus = _gpus(hardware)
    cfg = config_from_form(dict(zip(FORM_KEYS, form_values)), gpus_present=bool(gpus),
                           all_gpu_ids=tuple(g.index for g in gpus))
    if scope is None:
        return cfg
    cfg, problems = paths_view.confine_config(cfg, scope)
    if launching and not problems:
        problems = memory_problems(cfg, hardware)
    if problems:
        raise ConfigError(problems)
    return cfg


def local_model_folder(model: str) -> Path | None:
    """The model's folder when it is already on disk (the bundled and tiny models once converted)."""
    from workbench.sources.model_files import BUNDLED_MODEL, TINY_MODEL, cache_dir

    name = (model or BUNDLED_MODEL).strip()
    folder = {BUNDLED_MODEL: cache_dir() / BUNDLED_MODEL, TINY_MODEL: cache_dir() / f"{TINY_MODEL}-seed0"}.get(
        name, Path(name).expanduser())
    try:
        return folder if (folder / "config.json").is_file() else None
    except OSError:  # a name no file system can look up (the plan panel already says why)
        return None


def preview_from_form(form: dict, scope: UserScope | None = None) -> DataPreview:
    """The first rows of the form's data, the columns its rewards read, and the first row as the model receives it
    (the task's rewards when none is ticked).

    `scope`: what the user may name on a shared dashboard: only paths access/paths.py allows are read, and
    the reward file's columns come from its source, never from running it.
    """
    from workbench.spec.tasks import TASKS

    task = form.get("task") or RunConfig().task
    if not isinstance(task, str):  # only a hand-made request sends one
        return DataPreview("the chosen task", error="task: is not text; pick a built-in task, or give dataset_name")
    paths = {name: form_text(form.get(name)) for name in ("dataset_name", "reward_file", "model")}
    for name, value in paths.items():
        problem = path_problem(name, value)
        if problem is not None:  # too long to look up: the plan panel names it too
            return DataPreview(f"that {name}", error=str(problem))
        if scope is not None:
            try:
                paths[name] = confine_path(name, value, scope)
            except PathError as exc:  # nothing the rule refuses is read
                if name == "model":  # no tokenizer to show the text with; the rows still show
                    paths[name] = ""
                    continue
                return DataPreview(f"that {name}", error=str(exc))
    names = reward_choice(form)[0] or (list(TASKS[task].reward_names) if task in TASKS else [])
    seed = form.get("seed")
    seed = int(seed) if isinstance(seed, (int, float)) and seed == seed and 0 <= seed < 2**32 else 0
    folder = local_model_folder(paths["model"]) if paths["model"] or scope is None else None
    choice = DataChoice(task, paths["dataset_name"], form_text(form.get("dataset_config")),
                        form_text(form.get("dataset_train_split")) or "train", _mapping_from_form(form),
                        form_text(form.get("chat_template")) or "auto", str(folder) if folder else "", seed)
    return preview(choice, names, paths["reward_file"], import_reward_file=scope is None)


def _mapping_from_form(form: dict) -> ColumnMapping:
    """The form's column mapping; an unknown transform reads as none (Before launch names it)."""
    transform = form_text(form.get("solution_transform"))
    return ColumnMapping(form_text(form.get("prompt_column")) or "prompt", form_text(form.get("solution_column")),
                         transform if transform in SOLUTION_TRANSFORMS else "none",
                         form_text(form.get("system_prompt")))


def memory_estimate(cfg: RunConfig | dict, shape, device: str):
    """The estimate of `cfg` (a RunConfig or its dict) for a model of `shape`; WorkbenchError for values the
    estimate cannot take (validate_config names them)."""
    from workbench.spec.memory import estimate_for_config

    return estimate_for_config(cfg, shape, max_prompt_length=PROMPT_TOKENS_ASSUMED, device=device)


def model_shape(cfg: RunConfig):
    """The shape of the model on disk (its config.json read); None when it is not on disk yet; WorkbenchError when
    its config cannot be used."""
    from workbench.spec.memory import from_model_dir

    folder = local_model_folder(cfg.model)
    return from_model_dir(folder) if folder is not None else None


def memory_panel(cfg: RunConfig, free_bytes: int | None, device: str) -> str:
    """The memory estimate for the model on disk (its config.json read), or why there is none."""
    try:
        shape = model_shape(cfg)
        if shape is None:
            return MEMORY_NOT_ON_DISK
        estimate = memory_estimate(cfg, shape, device)
    except WorkbenchError as exc:
        return memory_unavailable_html(exc)
    return memory_html(estimate, free_bytes, PROMPT_TOKENS_ASSUMED)


def memory_problems(cfg: RunConfig, hardware: dict) -> list[ConfigProblem]:
    """On a shared dashboard: the run refused when its memory estimate is past its device's memory in all or the
    admin's share per run (access/run_memory.py), naming the setting that drives the estimate; [] when it fits or
    there is no estimate (a model not on disk yet, values validate_config refuses)."""
    from workbench.spec.memory import driving_field

    _, in_all, device = _device_memory(cfg, hardware)
    try:
        shape = model_shape(cfg)
        needed = memory_estimate(cfg, shape, device).total_bytes if shape is not None else 0
        limit = run_memory.memory_limit(in_all, run_memory.run_share(), device)
        if run_memory.memory_refusal(needed, limit, "") is None:
            return []
        field = driving_field(cfg.to_dict(), lambda changed: memory_estimate(changed, shape, device).total_bytes,
                              RunConfig().to_dict())
    except WorkbenchError as exc:  # the estimate cannot take a value (validate_config names it), or a bad share
        return [ConfigProblem(exc.field, exc.rule, exc.fix)] if exc.field == run_memory.MAX_RUN_MEMORY_ENV else []
    refusal = run_memory.memory_refusal(needed, limit, field)
    return [ConfigProblem(refusal.field, refusal.rule, refusal.fix)]


def update_plan(*values, scope: UserScope | None = None) -> list:
    """Every live output of the tab: plan panel, what Launch runs (and the button), problems, memory, and plan_valid.

    `scope`: as in config_from_values; then the reward file is read, never imported,
    and a refused path is never looked into (no memory estimate for a refused model).
    """
    try:
        cfg = config_from_values(*values)
    except ConfigError as exc:
        view = error_view(exc)
        return [*render_plan_panel(view, with_heatmap=False), "", gr.update(interactive=False),
                problems_html(exc.problems), "", False]
    problems = []
    if scope is not None:
        cfg, problems = paths_view.confine_config(cfg, scope)
    view = setup_plan_view(cfg, task_dataset_size(cfg.task) if not data_field(cfg)[1] else None)
    model_refused = paths_view.refused(problems, "model")
    problems += validate_config(cfg, import_reward_file=scope is None)
    if scope is not None and not model_refused:  # a shared dashboard refuses what an open one warns about
        problems += memory_problems(cfg, values[-1])
    free, _, device = _device_memory(cfg, values[-1])
    ready = view.plan is not None and view.plan.valid and not problems
    panel = render_plan_panel(view, with_heatmap=False, allowed_fields=PLAN_FIELDS_SETTABLE)
    gpus = _gpus(values[-1])
    choice = speed_choice(cfg)  # looked up once: the speed line and the launch line's time both read it
    # what may go wrong in the warning colour; the plan's and the settings' information, and the speed levers'
    # line, in grey
    warnings, notes = setting_notes(cfg, gpus)
    panel[-2] = warnings_html(view, extra=warnings, notes=notes) + speed_html(cfg, gpus, choice)
    memory = (MODEL_REFUSED_NOTE if model_refused else memory_panel(cfg, free, device))
    return [*panel, launch_html(cfg, view.plan, choice), gr.update(interactive=ready), problems_html(problems),
            memory, ready]


def default_values(hardware: dict) -> list:
    """The tab's values on first open (ctx.config_inputs order), with `hardware` as the hardware state."""
    defaults = RunConfig.for_task(RunConfig().task).to_dict()
    form = {key: defaults.get(key) for key in FORM_KEYS}
    form.update(task_presets(defaults["task"]))
    form.update(cpu_processes=1, gpu_ids=[], vllm_gpu_ids=[])
    return [form[key] for key in FORM_KEYS] + [hardware]


def benchmark_values() -> list:
    """The tab's default values, as update_plan receives them on page load on a CPU machine (for the benchmark)."""
    return default_values({"gpus": [], "busy": []})


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
        return gr.Textbox(value=json.dumps(value) if value else "", label=name, info=info,
                          placeholder='{"repetition_penalty_reward": {"ngram_size": 4}}')
    if kind is int or kind == (int | None):
        # Whole numbers; no gradio minimum, so validate_config names the field and the rule instead.
        return gr.Number(value=value, label=name, info=info, precision=0)
    if kind is float or kind == (float | None):  # empty stands for None (epsilon_high: same as epsilon)
        return gr.Number(value=value, label=name, info=info)
    return gr.Textbox(value=value, label=name, info=info)


def _rows(form: dict, names, defaults: dict, per_row: int = 3) -> None:
    for start in range(0, len(names), per_row):
        with gr.Row():
            for name in names[start:start + per_row]:
                form[name] = _setting(name, defaults[name])


def form_with(values: list, changes: dict) -> list:
    """The form's `values` (ctx.config_inputs order) once `changes` (form key -> value) land in it."""
    form = dict(zip(FORM_KEYS, values[:-1]))
    form.update(changes)
    return [form[key] for key in FORM_KEYS] + [values[-1]]


def correctness_update(values: list) -> gr.Dropdown:
    """The correctness_reward choices follow the rewards ticked (the task's when none is)."""
    form = dict(zip(FORM_KEYS, values[:-1]))
    names = [name for name in PICKER_REWARDS if form.get(f"use_{name}")]
    task = form.get("task")
    if not names and isinstance(task, str) and task in TASKS:
        names = list(TASKS[task].reward_names)
    return gr.Dropdown(choices=correctness_choices(names), value=kept_correctness(form.get(CORRECTNESS_FIELD), names))


def try_rewards(prompt: str, completions_text: str, columns_text: str, *values,
                scope: UserScope | None = None) -> str:
    """Score typed completions with the chosen reward functions and weights, as the trainer would.

    On a shared dashboard (`scope` given) a reward file is never run here: only built-in rewards are tried.
    """
    try:
        cfg = config_from_values(*values, scope=scope)
    except ConfigError as exc:
        return f'<p class="wb-warn-line">{escape(str(exc))}</p>'
    if scope is not None and cfg.reward_file:
        return ('<p class="wb-warn-line">reward_file: on this shared dashboard a reward file\'s code runs only in '
                "the training process, never in the dashboard; the Smoke test (1 step) tries it. Clear reward_file "
                "to try the built-in rewards here.</p>")
    completions = parse_completions(completions_text)
    if not completions:
        return '<p class="wb-warn-line">completions: type at least one, one per line.</p>'
    if not cfg.reward_names:
        return '<p class="wb-warn-line">reward functions: tick at least one above.</p>'
    try:
        columns = parse_columns(columns_text)
        results = score(cfg.reward_names, prompt or "", completions, weights=cfg.reward_weights,
                        reward_file=cfg.reward_file or None, **columns)
    except WorkbenchError as exc:
        return f'<p class="wb-warn-line">{escape(str(exc))}</p>'
    return scores_html(results, cfg.reward_names)


def preview_data(*values, scope: UserScope | None = None) -> list:
    """The data preview of the Setup tab's values (ctx.config_inputs order), and the choices of the dropdowns the
    data fills (dataset_config, prompt_column, solution_column); `scope` as in config_from_values."""
    *form_values, _hardware = values
    data = preview_from_form(dict(zip(FORM_KEYS, form_values)), scope)
    configs, columns, solutions = data_choices(data)
    return [data_preview_html(data), gr.update(choices=configs), gr.update(choices=columns),
            gr.update(choices=solutions)]


def example_from_task(task_name: str) -> tuple[str, str]:
    """A prompt of the task and the columns its rewards read, to try the rewards on."""
    task = TASKS.get(task_name)
    if task is None:
        return "", ""
    row = task.build_rows(1, 0)[0]
    prompt = row["prompt"]
    text = prompt_text(prompt)
    columns = "\n".join(f"{k} = {', '.join(map(str, v)) if isinstance(v, list) else v}"
                        for k, v in row.items() if k != "prompt")
    return text, columns


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
        return [badge, *buttons, suggestions, warnings, self.numbers, self.launch_note, self.launch_button,
                self.problems, self.memory, self.plan_valid]

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
    return SetupComponents(form, hardware, hardware_box, task_text, data_preview, *tries, uploads, *plan_column,
                           *signal, recipe_note)


def _model_and_hardware(form: dict, defaults: dict, hardware_now: dict) -> tuple[gr.State, gr.HTML]:
    """The model, and the CPU processes or the training GPUs (the vLLM server's GPUs are in Generation and vLLM)."""
    gpus, busy = _gpus(hardware_now), set(hardware_now["busy"])
    gr.Markdown("### Model and hardware", elem_classes=["wb-section"])
    with gr.Row():
        form["model"] = gr.Dropdown(
            choices=[BUNDLED_MODEL, TINY_MODEL], value=defaults["model"], allow_custom_value=True,
            label="model", info=FIELD_HELP["model"], scale=3)
        form["cpu_processes"] = gr.Radio(
            choices=list(CPU_PROCESS_CHOICES), value=1, label="CPU processes", visible=not gpus,
            info="2 runs DDP over the CPU cores through accelerate", scale=2)
    hardware = gr.State(hardware_now)
    hardware_box = gr.HTML(hardware_html(gpus, busy))
    form["gpu_ids"] = gr.CheckboxGroup(choices=gpu_choices(gpus, busy), value=[], label="training GPUs",
                                       info=FIELD_HELP["gpu_ids"], visible=bool(gpus))
    return hardware, hardware_box


def _task_and_data(ctx, form: dict, defaults: dict) -> tuple:
    """The task and dataset_name, the task's description, the data's own group (closed) and, on a dashboard with
    accounts, the uploads (their parts for files_panel.wire_uploads; None without accounts)."""
    gr.Markdown("### Task and data", elem_classes=["wb-section"])
    with gr.Row():
        form["task"] = gr.Dropdown(choices=[(f"{t.name}: {t.title}", t.name) for t in TASKS.values()],
                                   value=defaults["task"], label="task", info=FIELD_HELP["task"])
        form["dataset_name"] = gr.Textbox(
            value="", label="dataset_name",
            info="Your own data in place of the task's prompts (open the data's group below for the column mapping).",
            placeholder="optional: a hub id, or a file or folder from your uploads (Your files, below)"
            if ctx.shared else "optional: openai/gsm8k, data/gsm8k (a hub-layout folder) or data/my_prompts.jsonl")
    task_text = gr.Markdown(task_description(defaults["task"]), elem_classes=["wb-note"])
    with gr.Accordion(DATA_GROUP, open=False):
        gr.Markdown(f"`dataset_name`: {FIELD_HELP['dataset_name']}", elem_classes=["wb-note"])
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
                for name in names[start:start + 2]:
                    form[f"use_{name}"] = gr.Checkbox(value=name in weights, label=name, scale=1,
                                                      container=False, min_width=150)
                    form[f"weight_{name}"] = gr.Number(value=weights.get(name, 1.0), show_label=False,
                                                       label=f"weight of {name}", scale=0, min_width=64,
                                                       container=False)
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
    gpus, busy = _gpus(hardware_now), set(hardware_now["busy"])
    form["vllm_gpu_ids"] = gr.CheckboxGroup(choices=gpu_choices(gpus, busy), value=[], label="vLLM server GPUs",
                                            info=FIELD_HELP["vllm_gpu_ids"], visible=bool(gpus))
    _rows(form, tuple(name for name in names if name != "vllm_gpu_ids"), defaults)


def _reward_scoring(form: dict, defaults: dict, names: tuple) -> None:
    task = TASKS[defaults["task"]]
    _rows(form, tuple(name for name in names if name != CORRECTNESS_FIELD), defaults)
    form[CORRECTNESS_FIELD] = gr.Dropdown(choices=correctness_choices(list(task.reward_names)), value="",
                                          label=CORRECTNESS_FIELD, info=FIELD_HELP[CORRECTNESS_FIELD])
    gr.Markdown("**What each reward function computes, and TRL's parameters**", elem_classes=["wb-note"])
    gr.Markdown(rewards_help_markdown(), elem_classes=["wb-note"])


def _reward_code(ctx, form: dict) -> None:
    form["reward_file"] = gr.Textbox(value="", label="reward_file", info=FIELD_HELP["reward_file"],
                                     placeholder="optional: a .py file from your uploads (Your files, above)"
                                     if ctx.shared else "optional: my_rewards.py")
    files_panel.build(ctx, form["reward_file"])


def _data_fields(form: dict, defaults: dict, first: DataPreview) -> None:
    """The data's config and splits, the column mapping (dropdowns the data's columns fill) and the chat template."""
    configs, columns, solutions = data_choices(first)
    with gr.Row():
        form["dataset_config"] = gr.Dropdown(choices=configs, value=defaults["dataset_config"], label="dataset_config",
                                             info=FIELD_HELP["dataset_config"], allow_custom_value=True)
        for name in ("dataset_train_split", "dataset_test_split"):
            form[name] = gr.Textbox(value=defaults[name], label=name, info=FIELD_HELP[name])
    with gr.Row():
        form["prompt_column"] = gr.Dropdown(choices=columns, value=defaults["prompt_column"], label="prompt_column",
                                            info=FIELD_HELP["prompt_column"], allow_custom_value=True)
        form["solution_column"] = gr.Dropdown(choices=solutions, value=defaults["solution_column"],
                                              label="solution_column", info=FIELD_HELP["solution_column"],
                                              allow_custom_value=True)
        form["solution_transform"] = _setting("solution_transform", defaults["solution_transform"])
    with gr.Row():
        form["chat_template"] = _setting("chat_template", defaults["chat_template"])
        form["system_prompt"] = gr.Textbox(value=defaults["system_prompt"], label="system_prompt", lines=2,
                                           info=FIELD_HELP["system_prompt"])


def _recipe_choice(form: dict, defaults: dict) -> gr.HTML:
    """The recipe dropdown (spec/recipes.py) and the note saying which fields choosing one changed."""
    form["recipe"] = gr.Dropdown(choices=recipe_choices(), value=defaults["recipe"], label="recipe",
                                 info=FIELD_HELP["recipe"], elem_id="wb-recipe")
    return gr.HTML(recipe_note_html(defaults["recipe"], []), elem_id="wb-recipe-note")


def _signal_check() -> tuple:
    """Will it learn? The button, the report, the running check and the timer that follows it."""
    with gr.Accordion("Will it learn? A signal check before training", open=False):
        gr.Markdown(f"Samples {signal_job.DEFAULT_GROUPS} prompts x num_generations completions from the base model "
                    "with these settings and scores them with the rewards: groups whose completions all score the "
                    "same teach nothing.", elem_classes=["wb-note"])
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
        try_completions = gr.Textbox(label="completions, one per line (or separated by a --- line)",
                                     lines=3, value=EXAMPLE_COMPLETIONS)
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
        command = gr.Textbox(label="command the launch runs", lines=3, buttons=["copy"], interactive=False,
                             placeholder="Preview command shows the exact argument list here.",
                             elem_classes=["wb-command"])
        smoke_result = gr.HTML()
    smoke_run = gr.State(None)
    smoke_timer = gr.Timer(1.0, active=False)
    with gr.Accordion("Export for a cluster", open=False):
        cluster = _cluster_inputs()
        export_button = gr.Button("Export bundle", size="sm")
        exported = gr.Textbox(label="bundle and the commands that start it", lines=6, buttons=["copy"],
                              interactive=False, elem_classes=["wb-command"],
                              placeholder="The training processes above run on each machine; the "
                                          "bundle goes to runs/bundles/<run id>.")
    with gr.Accordion("Your own code: this setup as one Python script", open=False):
        gr.Markdown("One plain script with TRL, PEFT and `datasets` only: the model, the data, the reward "
                    "functions' source and GRPOConfig with every setting above.", elem_classes=["wb-note"])
        script_button = gr.Button("Download as a Python script", size="sm", elem_id="wb-script-button")
        script_file = gr.File(label="training script", visible=False, interactive=False, elem_id="wb-script-file")
    return (plan, numbers, memory, launch_note, problems, plan_valid, launch_button, launch_result, preview_button,
            smoke_button, command, smoke_result, smoke_run, smoke_timer, cluster, export_button, exported,
            script_button, script_file)


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
        return [task_description(values[FORM_KEYS.index("task")]),
                *[gr.update(value=changes[key]) for key in TASK_KEYS], *self.form_settled(request, *settled)]

    def on_recipe(self, request: gr.Request, *values) -> list:
        """Choosing a recipe: its settings into the form, the verdict of the form with them, and a note naming each
        field it changed."""
        form = dict(zip(FORM_KEYS, values[:-1]))
        try:
            before = config_from_values(*values)  # reads nothing: the recipe needs the numbers only
            after, changed = apply_recipe(before, form["recipe"])
        except (ConfigError, ValueError) as exc:  # a form it cannot read, a name that is no recipe
            return ([gr.skip()] * (len(RECIPE_FORM_FIELDS) + len(self.ui.plan_outputs))
                    + [recipe_note_html("", [], str(exc))])
        lines = describe_changes(before, after, [name for name in changed if name != "recipe"])
        values_now = {name: getattr(after, name) for name in RECIPE_FORM_FIELDS}
        values_now["steps_per_generation"] = values_now["steps_per_generation"] or 0  # the form's 0 is unset
        return ([gr.update(value=values_now[name]) for name in RECIPE_FORM_FIELDS]
                + self.live_plan(request, *form_with(list(values), values_now))
                + [recipe_note_html(form["recipe"], lines)])

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
        state = hardware_state(self.ctx.runs_dir)
        gpus, busy = _gpus(state), set(state["busy"])
        choices = gpu_choices(gpus, busy)
        return [state, hardware_html(gpus, busy), gr.update(choices=choices), gr.update(choices=choices),
                *self.live_plan(request, *values[:-1], state)]

    def launch(self, request: gr.Request, *values):
        """Launch the form's config (ui/launching.py) and show the Train tab, which follows the new run."""
        try:
            run_id = launching.start_run(self.ctx, request, values)
        except WorkbenchError as exc:  # the config's field, rule and fix, or too many launches this minute
            return refused_html(str(exc)), gr.skip()
        return launched_html(run_id), gr.Tabs(selected="train")

    def preview(self, request: gr.Request, *values):
        try:
            cfg = config_from_values(*values, scope=self.ctx.scope_for(request))
        except ConfigError as exc:
            return f"Cannot build the command: {exc}"
        run_dir = self.ctx.runs_dir / runfolder.new_run_id(preview_label(cfg))  # not created
        return command_text(commands.build_command(cfg, run_dir), commands.launch_env(cfg),
                            server_command_text(cfg))


    def start_smoke(self, request: gr.Request, *values):
        ctx, viewer = self.ctx, self.ctx.viewer(request)
        try:
            config = config_from_values(*values, scope=ctx.scope_of(viewer), launching=True)
            ctx.actions.take(viewer.name, "smoke test")  # a refusal shows as the page's message
            run_id = launcher.smoke_test(config, ctx.runs_dir, owner=viewer.name, import_reward_file=not ctx.shared,
                                         sandboxed=ctx.sandbox_for(viewer))
        except ConfigError as exc:
            return None, problems_html(exc.problems), gr.Timer(active=False)
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
            started = signal_job.start_signal_check(config, ctx.runs_dir, policy=ctx.sandbox_for(viewer),
                                                    owner=viewer.name)
        except ConfigError as exc:  # a UserLimitError shows as the page's message, as for a smoke test
            return None, problems_html(exc.problems), gr.Timer(active=False)
        return started, signal_html({"state": "running"}), gr.Timer(active=True)

    def poll_signal(self, job):
        if job is None:
            return gr.skip(), gr.Timer(active=False)
        state = signal_job.read_signal_check(job)
        return signal_html(state), gr.Timer(active=state["state"] == "running")

    def export(self, request: gr.Request, *values):
        cluster = self.ui.cluster
        try:
            cfg = config_from_values(*values[len(cluster):], scope=self.ctx.scope_for(request))
            cfg = export_view.cluster_config(cfg, *values[:len(cluster)])
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
            return gr.File(value=None, visible=False), problems_html(getattr(exc, "problems", None) or
                                                                      [ConfigProblem("script", str(exc), "")])
        folder = Path(tempfile.mkdtemp(prefix="script-", dir=run_reports.reports_root()))
        path = folder / f"train_{re.sub(r'[^A-Za-z0-9_.-]', '_', label)}.py"
        path.write_text(text, encoding="utf-8")
        return gr.File(value=str(path), visible=True), gr.update()


def build(ctx) -> None:
    """Lay the tab out, wire its events to a `SetupTab`, and register what the Train tab needs."""
    ui = layout(ctx)
    tab = SetupTab(ctx, ui)
    _wire_form(ctx, ui, tab)
    ui.score_button.click(tab.on_score, inputs=[ui.try_prompt, ui.try_completions, ui.try_columns, *ui.inputs],
                          outputs=ui.scores_box)
    ui.example_button.click(example_from_task, inputs=ui.form["task"], outputs=[ui.try_prompt, ui.try_columns])
    ui.launch_button.click(tab.launch, inputs=ui.inputs, outputs=[ui.launch_result, ctx.components["tabs"]],
                           show_progress="minimal")
    ui.preview_button.click(tab.preview, inputs=ui.inputs, outputs=ui.command, show_progress="hidden")
    ui.export_button.click(tab.export, inputs=[*ui.cluster, *ui.inputs], outputs=ui.exported, show_progress="hidden")
    ui.script_button.click(tab.export_script, inputs=ui.inputs, outputs=[ui.script_file, ui.problems])
    ui.smoke_button.click(tab.start_smoke, inputs=ui.inputs, outputs=[ui.smoke_run, ui.smoke_result, ui.smoke_timer])
    ui.smoke_timer.tick(tab.poll_smoke, inputs=ui.smoke_run, outputs=[ui.smoke_result, ui.smoke_timer],
                        show_progress="hidden")
    ui.signal_button.click(tab.start_signal, inputs=[ui.signal_job, *ui.inputs],
                           outputs=[ui.signal_job, ui.signal_result, ui.signal_timer])
    ui.signal_timer.tick(tab.poll_signal, inputs=ui.signal_job, outputs=[ui.signal_result, ui.signal_timer],
                         show_progress="hidden")
    ctx.config_inputs = ui.inputs
    ctx.config_from_values = config_from_values
    ctx.register(plan_valid=ui.plan_valid, setup_form=ui.form, setup_hardware=ui.hardware)


def _wire_form(ctx, ui: SetupComponents, tab: SetupTab) -> None:
    """The form's events: one per person's action, each answering with the verdict of the form it leaves (see
    SetupTab). `edited` picks the events of a person's edit; a value a handler sets starts nothing."""
    form, inputs = ui.form, ui.inputs
    edits = [event for key in FORM_KEYS if key not in ("task", "recipe") for event in edited(form[key])]
    gr.on(edits, fn=tab.live_plan, inputs=inputs, outputs=ui.plan_outputs, show_progress="hidden",
          trigger_mode="always_last")
    # The preview follows what decides the rows and the columns the rewards read (the correctness choices follow
    # the rewards ticked).
    preview_keys = ["dataset_name", "seed", "model", *[k for k in DATA_FIELDS if k != "dataset_test_split"],
                    *[f"use_{name}" for name in PICKER_REWARDS]]
    gr.on([event for key in preview_keys for event in edited(form[key])], fn=tab.live_preview, inputs=inputs,
          outputs=ui.preview_outputs, show_progress="hidden", trigger_mode="always_last")
    gr.on(edited(form["task"]), tab.on_task, inputs=inputs,
          outputs=[ui.task_text, *[form[k] for k in TASK_KEYS], *ui.plan_outputs, *ui.preview_outputs],
          show_progress="hidden", trigger_mode="always_last")
    gr.on(edited(form["recipe"]), tab.on_recipe, inputs=inputs,
          outputs=[*[form[k] for k in RECIPE_FORM_FIELDS], *ui.plan_outputs, ui.recipe_note],
          show_progress="hidden", trigger_mode="always_last")
    settable = [form[name] for name in PLAN_FIELDS_SETTABLE]
    _badge, buttons, suggestions, _warnings = ui.plan
    for index, button in enumerate(buttons):
        button.click(tab.suggestion(index), inputs=[suggestions, *inputs], outputs=[*settable, *ui.plan_outputs],
                     show_progress="hidden")
    ctx.blocks.load(tab.refresh_hardware, inputs=inputs,
                    outputs=[ui.hardware, ui.hardware_box, form["gpu_ids"], form["vllm_gpu_ids"], *ui.plan_outputs],
                    show_progress="hidden")
    uploaded = files_panel.wire_uploads(ui.uploads, form["dataset_name"], form["reward_file"])
    if uploaded is not None:  # an upload fills dataset_name or reward_file: the verdict and preview of them
        uploaded.success(tab.form_settled, inputs=inputs, outputs=[*ui.plan_outputs, *ui.preview_outputs],
                            show_progress="hidden")


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


def _cluster_inputs() -> list:
    """The export's own settings, each with its RunConfig help, in export_view.EXPORT_FIELDS order."""
    defaults = RunConfig()
    return [gr.Number(value=1, precision=0, minimum=1, label="num_machines", info=FIELD_HELP["num_machines"]),
            gr.Textbox(value="", label="main_process_ip", info=FIELD_HELP["main_process_ip"]),
            gr.Number(value=defaults.main_process_port, precision=0, label="main_process_port",
                      info=FIELD_HELP["main_process_port"]),
            gr.Dropdown(choices=list(export_view.BACKEND_CHOICES), value="ddp", label="distributed_backend",
                        info=FIELD_HELP["distributed_backend"]),
            gr.Checkbox(value=False, label="vllm_node", info=FIELD_HELP["vllm_node"])]
