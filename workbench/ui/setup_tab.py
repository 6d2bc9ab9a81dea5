"""The Setup tab: model, hardware, task, rewards and every GRPO/LoRA setting, checked live.

Each setting is a RunConfig field under TRL's name with FIELD_HELP as its info
text. Every change re-runs `update_plan` (the function the benchmark times):
the batch calculator fed by the chosen hardware (badge, one-click fixes,
warnings, numbers), a rough memory estimate against the device's free memory,
and every problem `validate_config` finds. "Preview command" shows the exact
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
    path_problem,
    validate_config,
)
from workbench.spec.generation import GENERATIONS
from workbench.spec.hardware import list_gpus
from workbench.spec.models import BUNDLED_MODEL, TINY_MODEL
from workbench.spec.recipes import apply_recipe, describe_changes
from workbench.spec.rewards import REWARD_ERROR_MODES, score
from workbench.spec.tasks import TASKS
from workbench.spec.trackers import REPORT_TO
from workbench.ui.calculator_view import warnings_html
from workbench.ui.setup_view import (
    BATCH_FIELDS,
    CORRECTNESS_FIELD,
    CPU_PROCESS_CHOICES,
    DATA_FIELDS,
    LORA_FIELDS,
    MEMORY_NOT_ON_DISK,
    OPTIMISER_FIELDS,
    PICKER_REWARDS,
    PLAN_FIELDS_SETTABLE,
    RECIPE_FORM_FIELDS,
    REWARD_FIELDS,
    RUN_FIELDS,
    SETTING_FIELDS,
    VLLM_FIELDS,
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
    speed_html,
    setup_plan_view,
    smoke_result_html,
    task_dataset_size,
)
from workbench.ui import download_panel, export_view, files_panel, paths_view, run_access, run_reports
from workbench.ui.signal_view import correctness_choices, kept_correctness, signal_html
from workbench.ui.paths_view import confine_path
from workbench.ui.server_view import server_command_text
from workbench.ui.widgets import build_verdict, render_plan_panel, suggestion_applier

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
# Settings a task may preset (e.g. the demo's learning rate and batch).
# (dataset_name too: a task may name its data, e.g. a hub dataset and its column mapping)
TASK_SETTING_KEYS = tuple(sorted({k for task in TASKS.values() for k in task.settings
                                  if k in (*SETTING_FIELDS, "dataset_name")}))
# What choosing a task updates: its description, each picker reward's tick and weight, its preset settings.
TASK_OUTPUTS = 1 + len(REWARD_KEYS) + len(TASK_SETTING_KEYS)
EXAMPLE_COMPLETIONS = ("Paris.\n"
                       "The capital of France is Paris, which is also its largest city and its cultural centre.")
# How many tokens the memory estimate allows for a prompt after the chat template.
PROMPT_TOKENS_ASSUMED = 64
MODEL_REFUSED_NOTE = ("<p class='wb-note'>Memory estimate: none for a model this shared dashboard refuses "
                      "(see Before launch).</p>")


def _hardware_state(runs_dir) -> dict:
    """GPUs as NVML sees them now and those held by running runs (plain data for a gr.State)."""
    return {"gpus": [g.to_dict() for g in list_gpus()], "busy": sorted(gpu_queue.busy_gpu_ids(runs_dir))}


def _gpus(hardware: dict):
    from workbench.spec.hardware import GpuInfo

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
    from workbench.spec.models import BUNDLED_MODEL, TINY_MODEL, cache_dir

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
    """Every live output of the tab: plan panel, notes, memory, problems, and plan_valid.

    `scope`: as in config_from_values; then the reward file is read, never imported,
    and a refused path is never looked into (no memory estimate for a refused model).
    """
    try:
        cfg = config_from_values(*values)
    except ConfigError as exc:
        view = error_view(exc)
        return [*render_plan_panel(view, with_heatmap=False), problems_html(exc.problems), "", False]
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
    # the plan's warnings and the settings' notes, then the speed levers' line (information, not a warning)
    panel[-2] = warnings_html(view, extra=setting_notes(cfg, gpus)) + speed_html(cfg, gpus)
    memory = (MODEL_REFUSED_NOTE if model_refused else memory_panel(cfg, free, device))
    return [*panel, problems_html(problems), memory, ready]


def benchmark_values() -> list:
    """The tab's default values, as update_plan receives them on page load (for the benchmark)."""
    defaults = RunConfig.for_task(RunConfig().task).to_dict()
    task = TASKS[defaults["task"]]
    form = {key: defaults.get(key) for key in FORM_KEYS}
    form.update({f"use_{n}": n in task.reward_names for n in PICKER_REWARDS})
    form.update({f"weight_{n}": dict(zip(task.reward_names, task.reward_weights)).get(n, 1.0) for n in PICKER_REWARDS})
    form.update(cpu_processes=1, gpu_ids=[], vllm_gpu_ids=[])
    return [form[key] for key in FORM_KEYS] + [{"gpus": [], "busy": []}]


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


def apply_task(task_name: str) -> list:
    """On choosing a task: its description, its rewards and weights, and the settings it presets."""
    task = TASKS.get(task_name) if isinstance(task_name, str) else None
    if task is None:
        return [gr.update()] * TASK_OUTPUTS
    weights = dict(zip(task.reward_names, task.reward_weights))
    reward_updates = []
    for name in PICKER_REWARDS:
        reward_updates += [gr.update(value=name in weights), gr.update(value=weights.get(name, 1.0))]
    preset = RunConfig.for_task(task_name)
    settings = [gr.update(value=getattr(preset, k)) for k in TASK_SETTING_KEYS]
    return [f"**{task.title}.** {task.description}", *reward_updates, *settings]


def on_task(task_name: str, applied: str) -> list:
    """`apply_task` for a task the form does not hold yet, then the task now applied.

    Gradio's page sends one choice of a task as up to three change events while the presets' own updates
    land (measured over a few seconds, longer on a busy machine): applied again, the presets would undo
    what was typed in between. The same task again leaves the form alone.
    """
    if task_name == applied:
        return [gr.skip()] * TASK_OUTPUTS + [applied]
    return [*apply_task(task_name), task_name]


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
    plan: tuple  # the verdict: badge, suggestion buttons, suggestions, warnings
    numbers: gr.HTML
    memory: gr.HTML
    problems: gr.HTML
    plan_valid: gr.Checkbox
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
    recipe_note: gr.HTML
    signal_button: gr.Button
    signal_result: gr.HTML
    signal_job: gr.State
    signal_timer: gr.Timer
    applied_task: gr.State  # the task whose presets the form holds (on_task)

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
        badge, buttons, suggestions, warnings = self.plan
        return [badge, *buttons, suggestions, warnings, self.numbers, self.problems, self.memory, self.plan_valid]


def layout(ctx) -> SetupComponents:
    """The form on the left (model and hardware, task and rewards, every setting), the plan on the right."""
    defaults = {**RunConfig().to_dict(), **TASKS[RunConfig().task].settings}
    form: dict = {}
    with gr.Row(equal_height=False):
        with gr.Column(scale=3, min_width=560):
            hardware, hardware_box = _model_and_hardware(ctx, form, defaults)
            task_text, data_preview = _task_and_rewards(ctx, form, defaults)
            tries = _try_rewards()
            gr.Markdown("### Batch and length", elem_classes=["wb-section"])
            _rows(form, BATCH_FIELDS, defaults)
            recipe_note = _recipe_choice(form, defaults)
            with gr.Accordion("Optimiser, loss and sampling", open=False):
                _rows(form, OPTIMISER_FIELDS, defaults)
            with gr.Accordion("LoRA", open=False):
                _rows(form, LORA_FIELDS, defaults, per_row=2)
            with gr.Accordion("Run, logging and vLLM", open=False):
                _rows(form, RUN_FIELDS + tuple(f for f in VLLM_FIELDS if f != "generation"), defaults)
        with gr.Column(scale=2, min_width=420, elem_classes=["wb-sticky"]):
            plan_column = _plan_column()
            signal = _signal_check()
    applied_task = gr.State(defaults["task"])
    return SetupComponents(form, hardware, hardware_box, task_text, data_preview, *tries, *plan_column, recipe_note,
                           *signal, applied_task)


def _model_and_hardware(ctx, form: dict, defaults: dict) -> tuple[gr.State, gr.HTML]:
    hardware_now = _hardware_state(ctx.runs_dir)
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
    with gr.Row():
        form["gpu_ids"] = gr.CheckboxGroup(choices=gpu_choices(gpus, busy), value=[], label="training GPUs",
                                           info=FIELD_HELP["gpu_ids"], visible=bool(gpus))
        form["vllm_gpu_ids"] = gr.CheckboxGroup(choices=gpu_choices(gpus, busy), value=[], label="vLLM server GPUs",
                                                info=FIELD_HELP["vllm_gpu_ids"], visible=bool(gpus))
    form["generation"] = _setting("generation", defaults["generation"])
    return hardware, hardware_box


def _task_and_rewards(ctx, form: dict, defaults: dict) -> tuple[gr.Markdown, gr.HTML]:
    gr.Markdown("### Task and rewards", elem_classes=["wb-section"])
    with gr.Row():
        form["task"] = gr.Dropdown(choices=[(f"{t.name}: {t.title}", t.name) for t in TASKS.values()],
                                   value=defaults["task"], label="task", info=FIELD_HELP["task"])
        form["dataset_name"] = gr.Textbox(
            value="", label="dataset_name", info=FIELD_HELP["dataset_name"],
            placeholder="optional: a hub id, or a file or folder from your uploads (Your files, below)"
            if ctx.shared else "optional: openai/gsm8k, data/gsm8k (a hub-layout folder) or data/my_prompts.jsonl")
    task_text = gr.Markdown(apply_task(defaults["task"])[0], elem_classes=["wb-note"])
    with gr.Accordion("The data: first rows, the column mapping, and what the model receives", open=True):
        first = preview_from_form({"task": defaults["task"], "seed": defaults["seed"]})
        _data_fields(form, defaults, first)
        data_preview = gr.HTML(data_preview_html(first), elem_id="wb-data-preview")
        download_panel.build(form["dataset_name"])
    task = TASKS[defaults["task"]]
    weights = dict(zip(task.reward_names, task.reward_weights))
    names = list(PICKER_REWARDS)
    with gr.Group(elem_classes=["wb-rewards"]):
        for start in range(0, len(names), 2):
            with gr.Row():
                for name in names[start:start + 2]:
                    form[f"use_{name}"] = gr.Checkbox(value=name in weights, label=name, scale=3,
                                                      container=False, min_width=150)
                    form[f"weight_{name}"] = gr.Number(value=weights.get(name, 1.0), show_label=False,
                                                       label=f"weight of {name}", scale=1, min_width=70,
                                                       container=False)
    form[CORRECTNESS_FIELD] = gr.Dropdown(choices=correctness_choices(list(task.reward_names)), value="",
                                          label=CORRECTNESS_FIELD, info=FIELD_HELP[CORRECTNESS_FIELD])
    with gr.Accordion("What each reward function computes, and TRL's parameters", open=False):
        gr.Markdown(rewards_help_markdown(), elem_classes=["wb-note"])
    _rows(form, REWARD_FIELDS, defaults)
    form["reward_file"] = gr.Textbox(value="", label="reward_file", info=FIELD_HELP["reward_file"],
                                     placeholder="optional: a .py file from your uploads (Your files, below)"
                                     if ctx.shared else "optional: my_rewards.py")
    files_panel.build(ctx, form["dataset_name"], form["reward_file"])
    return task_text, data_preview


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
    gr.Markdown("### GRPO variant", elem_classes=["wb-section"])
    form["recipe"] = gr.Dropdown(choices=recipe_choices(), value=defaults["recipe"], label="recipe",
                                 info=FIELD_HELP["recipe"], elem_id="wb-recipe")
    return gr.HTML(recipe_note_html(defaults["recipe"], []), elem_id="wb-recipe-note")


def _signal_check() -> tuple:
    """Will it learn? The button, the report, the running check and the timer that follows it."""
    gr.Markdown("### Will it learn?", elem_classes=["wb-section"])
    gr.Markdown(f"Samples {signal_job.DEFAULT_GROUPS} prompts x num_generations completions from the base model "
                "with these settings and scores them with the rewards: groups whose completions all score the same "
                "teach nothing.", elem_classes=["wb-note"])
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
    """The batch plan, memory, what stops a launch, the command preview, the smoke test and the cluster export."""
    gr.Markdown("### Batch plan", elem_classes=["wb-section"])
    plan = build_verdict()
    with gr.Accordion("The numbers", open=False):
        numbers = gr.HTML()
    gr.Markdown("### Memory", elem_classes=["wb-section"])
    memory = gr.HTML()
    gr.Markdown("### Before launch", elem_classes=["wb-section"])
    problems = gr.HTML()
    plan_valid = gr.Checkbox(value=False, visible=False, label="plan_valid")
    with gr.Row():
        preview_button = gr.Button("Preview command", size="sm")
        smoke_button = gr.Button("Smoke test (1 step)", size="sm", variant="primary")
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
    return (plan, numbers, memory, problems, plan_valid, preview_button, smoke_button, command, smoke_result,
            smoke_run, smoke_timer, cluster, export_button, exported, script_button, script_file)


class SetupTab:
    """The Setup tab's event handlers, over the context and the components they fill."""

    def __init__(self, ctx, ui: SetupComponents):
        self.ctx = ctx
        self.ui = ui

    def live_plan(self, request: gr.Request, *values) -> list:
        return update_plan(*values, scope=self.ctx.scope_for(request))

    def live_preview(self, request: gr.Request, *values) -> list:
        return preview_data(*values, scope=self.ctx.scope_for(request))

    def on_score(self, request: gr.Request, prompt, completions_text, columns_text, *values) -> str:
        return try_rewards(prompt, completions_text, columns_text, *values, scope=self.ctx.scope_for(request))

    def refresh_hardware(self):
        state = _hardware_state(self.ctx.runs_dir)
        gpus, busy = _gpus(state), set(state["busy"])
        choices = gpu_choices(gpus, busy)
        return state, hardware_html(gpus, busy), gr.update(choices=choices), gr.update(choices=choices)

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

    def correctness_options(self, task, current, *ticked):
        """The correctness_reward choices follow the rewards ticked (the task's when none is)."""
        names = [name for name, use in zip(PICKER_REWARDS, ticked) if use]
        if not names and isinstance(task, str) and task in TASKS:
            names = list(TASKS[task].reward_names)
        return gr.Dropdown(choices=correctness_choices(names), value=kept_correctness(current, names))

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


    def on_recipe(self, *values) -> list:
        """Choosing a recipe: its settings into the form, and a note naming each field it changed."""
        form = dict(zip(FORM_KEYS, values[:-1]))
        try:
            before = config_from_values(*values)  # reads nothing: the recipe needs the numbers only
            after, changed = apply_recipe(before, form["recipe"])
        except (ConfigError, ValueError) as exc:  # a form it cannot read, a name that is no recipe
            return [gr.update()] * len(RECIPE_FORM_FIELDS) + [recipe_note_html("", [], str(exc))]
        lines = describe_changes(before, after, [name for name in changed if name != "recipe"])
        values_now = {name: getattr(after, name) for name in RECIPE_FORM_FIELDS}
        values_now["steps_per_generation"] = values_now["steps_per_generation"] or 0  # the form's 0 is unset
        return [gr.update(value=values_now[name]) for name in RECIPE_FORM_FIELDS] + \
            [recipe_note_html(form["recipe"], lines)]

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
    form, inputs = ui.form, ui.inputs
    gr.on(None, fn=tab.live_plan, inputs=inputs, outputs=ui.plan_outputs, show_progress="hidden",
          trigger_mode="always_last")
    settable = [form[name] for name in PLAN_FIELDS_SETTABLE]
    _badge, buttons, suggestions, _warnings = ui.plan
    for index, button in enumerate(buttons):
        button.click(suggestion_applier(PLAN_FIELDS_SETTABLE, index), inputs=[suggestions, *settable],
                     outputs=settable, show_progress="hidden")
    form["task"].change(on_task, inputs=[form["task"], ui.applied_task],
                        outputs=[ui.task_text, *[form[k] for k in REWARD_KEYS], *[form[k] for k in TASK_SETTING_KEYS],
                                 ui.applied_task], show_progress="hidden")
    # The preview follows what decides the rows and the columns the rewards read.
    preview_triggers = [form[name].change for name in ("task", "dataset_name", "reward_file", "seed", "model",
                                                       *DATA_FIELDS) if name != "dataset_test_split"]
    preview_triggers += [form[f"use_{name}"].change for name in PICKER_REWARDS]
    gr.on(preview_triggers, fn=tab.live_preview, inputs=inputs, outputs=[ui.data_preview, *ui.data_dropdowns],
          show_progress="hidden", trigger_mode="always_last")
    ui.score_button.click(tab.on_score, inputs=[ui.try_prompt, ui.try_completions, ui.try_columns, *inputs],
                          outputs=ui.scores_box)
    ui.example_button.click(example_from_task, inputs=form["task"], outputs=[ui.try_prompt, ui.try_columns])
    ctx.blocks.load(tab.refresh_hardware, outputs=[ui.hardware, ui.hardware_box, form["gpu_ids"],
                                                   form["vllm_gpu_ids"]], show_progress="hidden")
    ui.preview_button.click(tab.preview, inputs=inputs, outputs=ui.command, show_progress="hidden")
    ui.export_button.click(tab.export, inputs=[*ui.cluster, *inputs], outputs=ui.exported, show_progress="hidden")
    ui.script_button.click(tab.export_script, inputs=inputs, outputs=[ui.script_file, ui.problems])
    form["recipe"].input(tab.on_recipe, inputs=inputs, outputs=[*[form[k] for k in RECIPE_FORM_FIELDS], ui.recipe_note],
                         show_progress="hidden")
    ui.smoke_button.click(tab.start_smoke, inputs=inputs, outputs=[ui.smoke_run, ui.smoke_result, ui.smoke_timer])
    ui.smoke_timer.tick(tab.poll_smoke, inputs=ui.smoke_run, outputs=[ui.smoke_result, ui.smoke_timer],
                        show_progress="hidden")
    ui.signal_button.click(tab.start_signal, inputs=[ui.signal_job, *inputs],
                           outputs=[ui.signal_job, ui.signal_result, ui.signal_timer])
    ui.signal_timer.tick(tab.poll_signal, inputs=ui.signal_job, outputs=[ui.signal_result, ui.signal_timer],
                         show_progress="hidden")
    ticks = [form[f"use_{name}"] for name in PICKER_REWARDS]
    gr.on([form["task"].change, *[t.change for t in ticks]], fn=tab.correctness_options,
          inputs=[form["task"], form[CORRECTNESS_FIELD], *ticks], outputs=form[CORRECTNESS_FIELD],
          show_progress="hidden", trigger_mode="always_last")
    ctx.config_inputs = inputs
    ctx.config_from_values = config_from_values
    ctx.register(plan_valid=ui.plan_valid, setup_form=form, setup_hardware=ui.hardware)


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
