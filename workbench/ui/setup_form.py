"""The Setup form's values read against the machine and the files they name: the hardware now, the RunConfig they
make under the user's rules, the model on disk and its memory estimate, the data preview, and the live answers
the Setup tab's handlers give from them (the verdict of `update_plan`, the preview and the dropdowns the data
fills, the correctness choices, the rewards tried on typed completions).

ui/setup_tab.py's `SetupTab` answers with these; the first-run strip (ui/first_run.py) and the Train tab read a
config through `config_from_values` too.
"""

from __future__ import annotations

from html import escape
from pathlib import Path

import gradio as gr
import psutil

from workbench.access import run_memory
from workbench.access.paths import PathError, UserScope
from workbench.errors import WorkbenchError
from workbench.jobs import gpu_queue
from workbench.sources.gpus import list_gpus
from workbench.spec.chat import prompt_text
from workbench.spec.columns import DataChoice, DataPreview, preview
from workbench.spec.config import (
    ConfigError,
    ConfigProblem,
    RunConfig,
    data_field,
)
from workbench.spec.config_checks import path_problem, validate_config
from workbench.spec.rewards import score
from workbench.spec.tasks import TASKS
from workbench.ui import paths_view
from workbench.ui.calculator_view import warnings_html
from workbench.ui.data_preview_view import data_choices, data_preview_html
from workbench.ui.first_run_view import launch_html
from workbench.ui.paths_view import confine_path
from workbench.ui.setup_form_view import FORM_KEYS, MODEL_REFUSED_NOTE, PROMPT_TOKENS_ASSUMED, mapping_from_form
from workbench.ui.setup_view import (
    CORRECTNESS_FIELD,
    MEMORY_NOT_ON_DISK,
    PICKER_REWARDS,
    PLAN_FIELDS_SETTABLE,
    config_from_form,
    error_view,
    form_text,
    memory_html,
    memory_unavailable_html,
    parse_columns,
    parse_completions,
    problems_html,
    reward_choice,
    scores_html,
    setting_notes,
    setup_plan_view,
    speed_choice,
    speed_html,
    task_dataset_size,
)
from workbench.ui.signal_view import correctness_choices, kept_correctness
from workbench.ui.widgets import render_plan_panel


def hardware_state(runs_dir, cpu=None) -> dict:
    """GPUs as NVML sees them now and those held by running runs, and with `cpu` (a sources.cpu_busy.BusyWatch)
    other processes' share of the CPU now (plain data for a gr.State)."""
    state = {"gpus": [g.to_dict() for g in list_gpus()], "busy": sorted(gpu_queue.busy_gpu_ids(runs_dir))}
    if cpu is not None:
        state["cpu_busy"] = cpu.now().to_dict()
    return state


def gpus_of(hardware: dict):
    """The GPUs of the hardware state (`hardware_state`), as GpuInfo."""
    from workbench.sources.gpus import GpuInfo

    return [GpuInfo(**g) for g in (hardware or {}).get("gpus", [])]


def device_memory(cfg: RunConfig, hardware: dict) -> tuple[int | None, int | None, str]:
    """(free, in all) bytes of the device the run will use (the smallest chosen GPU), and "cpu" or "cuda"."""
    gpus = gpus_of(hardware)
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
    gpus = gpus_of(hardware)
    cfg = config_from_form(
        dict(zip(FORM_KEYS, form_values)), gpus_present=bool(gpus), all_gpu_ids=tuple(g.index for g in gpus)
    )
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
        name, Path(name).expanduser()
    )
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
    choice = DataChoice(
        task,
        paths["dataset_name"],
        form_text(form.get("dataset_config")),
        form_text(form.get("dataset_train_split")) or "train",
        mapping_from_form(form),
        form_text(form.get("chat_template")) or "auto",
        str(folder) if folder else "",
        seed,
    )
    return preview(choice, names, paths["reward_file"], import_reward_file=scope is None)


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

    _, in_all, device = device_memory(cfg, hardware)
    try:
        shape = model_shape(cfg)
        needed = memory_estimate(cfg, shape, device).total_bytes if shape is not None else 0
        limit = run_memory.memory_limit(in_all, run_memory.run_share(), device)
        if run_memory.memory_refusal(needed, limit, "") is None:
            return []
        field = driving_field(
            cfg.to_dict(), lambda changed: memory_estimate(changed, shape, device).total_bytes, RunConfig().to_dict()
        )
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
        return [
            *render_plan_panel(view, with_heatmap=False),
            "",
            gr.update(interactive=False),
            problems_html(exc.problems),
            "",
            False,
        ]
    problems = []
    if scope is not None:
        cfg, problems = paths_view.confine_config(cfg, scope)
    view = setup_plan_view(cfg, task_dataset_size(cfg.task) if not data_field(cfg)[1] else None)
    model_refused = paths_view.refused(problems, "model")
    problems += validate_config(cfg, import_reward_file=scope is None)
    if scope is not None and not model_refused:  # a shared dashboard refuses what an open one warns about
        problems += memory_problems(cfg, values[-1])
    free, _, device = device_memory(cfg, values[-1])
    ready = view.plan is not None and view.plan.valid and not problems
    panel = render_plan_panel(view, with_heatmap=False, allowed_fields=PLAN_FIELDS_SETTABLE)
    gpus = gpus_of(values[-1])
    choice = speed_choice(cfg)  # looked up once: the speed line and the launch line's time both read it
    # what may go wrong in the warning colour; the plan's and the settings' information, and the speed levers'
    # line, in grey
    warnings, notes = setting_notes(cfg, gpus)
    panel[-2] = warnings_html(view, extra=warnings, notes=notes) + speed_html(cfg, gpus, choice)
    memory = MODEL_REFUSED_NOTE if model_refused else memory_panel(cfg, free, device)
    return [
        *panel,
        launch_html(cfg, view.plan, choice, (values[-1] or {}).get("cpu_busy")),
        gr.update(interactive=ready),
        problems_html(problems),
        memory,
        ready,
    ]


def correctness_update(values: list) -> gr.Dropdown:
    """The correctness_reward choices follow the rewards ticked (the task's when none is)."""
    form = dict(zip(FORM_KEYS, values[:-1]))
    names = [name for name in PICKER_REWARDS if form.get(f"use_{name}")]
    task = form.get("task")
    if not names and isinstance(task, str) and task in TASKS:
        names = list(TASKS[task].reward_names)
    return gr.Dropdown(choices=correctness_choices(names), value=kept_correctness(form.get(CORRECTNESS_FIELD), names))


def try_rewards(prompt: str, completions_text: str, columns_text: str, *values, scope: UserScope | None = None) -> str:
    """Score typed completions with the chosen reward functions and weights, as the trainer would.

    On a shared dashboard (`scope` given) a reward file is never run here: only built-in rewards are tried.
    """
    try:
        cfg = config_from_values(*values, scope=scope)
    except ConfigError as exc:
        return f'<p class="wb-warn-line">{escape(str(exc))}</p>'
    if scope is not None and cfg.reward_file:
        return (
            '<p class="wb-warn-line">reward_file: on this shared dashboard a reward file\'s code runs only in '
            "the training process, never in the dashboard; the Smoke test (1 step) tries it. Clear reward_file "
            "to try the built-in rewards here.</p>"
        )
    completions = parse_completions(completions_text)
    if not completions:
        return '<p class="wb-warn-line">completions: type at least one, one per line.</p>'
    if not cfg.reward_names:
        return '<p class="wb-warn-line">reward functions: tick at least one above.</p>'
    try:
        columns = parse_columns(columns_text)
        results = score(
            cfg.reward_names,
            prompt or "",
            completions,
            weights=cfg.reward_weights,
            reward_file=cfg.reward_file or None,
            **columns,
        )
    except WorkbenchError as exc:
        return f'<p class="wb-warn-line">{escape(str(exc))}</p>'
    return scores_html(results, cfg.reward_names)


def preview_data(*values, scope: UserScope | None = None) -> list:
    """The data preview of the Setup tab's values (ctx.config_inputs order), and the choices of the dropdowns the
    data fills (dataset_config, prompt_column, solution_column); `scope` as in config_from_values."""
    *form_values, _hardware = values
    data = preview_from_form(dict(zip(FORM_KEYS, form_values)), scope)
    configs, columns, solutions = data_choices(data)
    return [
        data_preview_html(data),
        gr.update(choices=configs),
        gr.update(choices=columns),
        gr.update(choices=solutions),
    ]


def example_from_task(task_name: str) -> tuple[str, str]:
    """A prompt of the task and the columns its rewards read, to try the rewards on."""
    task = TASKS.get(task_name)
    if task is None:
        return "", ""
    row = task.build_rows(1, 0)[0]
    prompt = row["prompt"]
    text = prompt_text(prompt)
    columns = "\n".join(
        f"{k} = {', '.join(map(str, v)) if isinstance(v, list) else v}" for k, v in row.items() if k != "prompt"
    )
    return text, columns
