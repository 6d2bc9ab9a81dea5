"""Pure functions behind the Setup tab: form values to a RunConfig, and what to show about it.

The Setup tab's fields hold RunConfig values under TRL's names, plus a few
form-only entries (one checkbox and weight per reward function, CPU
processes, training GPUs). `config_from_form` turns them into a RunConfig or
a ConfigError naming the field; the rest render hardware, problems, the
launch command, reward scores and a smoke test's outcome as HTML (the data
preview's HTML is ui/data_preview_view.py's). No gradio here:
tests/test_ui_logic.py checks these directly.
"""

from __future__ import annotations

import typing
from functools import cache
from html import escape
from pathlib import Path

from workbench.calc import InputError
from workbench.errors import WorkbenchError
from workbench.sources.gpus import GpuInfo, runs_on_cpu
from workbench.spec.config import ConfigError, ConfigProblem, RunConfig, field_type
from workbench.spec.config_checks import plan_for
from workbench.spec.recipes import RECIPES, VARIANT_FIELDS
from workbench.spec.rewards import REWARDS, describe_rewards, describe_trl_rewards
from workbench.spec.rewards.trl_reward_library import TRL_REWARDS
from workbench.spec.speed import speed_notes
from workbench.spec.tasks import TASKS
from workbench.ui.calculator_view import PlanView
from workbench.ui.page_text import markdown_text

# RunConfig fields the Setup tab shows as settings, grouped as on the page.
BATCH_FIELDS = (
    "per_device_train_batch_size",
    "gradient_accumulation_steps",
    "num_generations",
    "steps_per_generation",
    "max_completion_length",
    "max_steps",
    "num_train_epochs",
    "num_iterations",
)
OPTIMISER_FIELDS = (
    "learning_rate",
    "lr_scheduler_type",
    "warmup_steps",
    "beta",
    "epsilon",
    "loss_type",
    "scale_rewards",
    "epsilon_high",
    "importance_sampling_level",
    "mask_truncated_completions",
    "top_entropy_quantile",
    "entropy_coef",
    "use_adaptive_entropy",
    "entropy_target",
    "temperature",
    "top_p",
    "top_k",
    "repetition_penalty",
)
LORA_FIELDS = ("lora_r", "lora_alpha", "lora_dropout", "lora_target_modules")
RUN_FIELDS = (
    "run_name",
    "logging_steps",
    "record_tokens",
    "save_steps",
    "save_total_limit",
    "seed",
    "bf16",
    "merged_generation",
    "shared_prompt_pass",
    "packed_decode",
    "gradient_checkpointing",
    "report_to",
    "eval_strategy",
    "eval_steps",
    "eval_size",
    "eval_pass_k",
    "eval_group_column",
    "best_checkpoint_metric",
)
# How rewards are scored besides which: TRL rewards' parameters, failures, a reward model.
REWARD_FIELDS = ("reward_params", "reward_errors", "reward_failure_score", "reward_model", "reward_model_weight")
VLLM_FIELDS = (
    "generation",
    "vllm_server_base_url",
    "vllm_max_model_len",
    "vllm_gpu_memory_utilization",
    "vllm_tensor_parallel_size",
)
# The data's config, splits, column mapping and chat template (laid out beside dataset_name).
DATA_FIELDS = (
    "dataset_config",
    "dataset_train_split",
    "dataset_test_split",
    "prompt_column",
    "solution_column",
    "solution_transform",
    "chat_template",
    "system_prompt",
)
# The reward whose full marks mean a right answer: a dropdown of the rewards ticked (ui/signal_view.py).
CORRECTNESS_FIELD = "correctness_reward"
SETTING_FIELDS = (
    BATCH_FIELDS
    + OPTIMISER_FIELDS
    + LORA_FIELDS
    + RUN_FIELDS
    + VLLM_FIELDS
    + ("recipe",)
    + DATA_FIELDS
    + REWARD_FIELDS
    + (CORRECTNESS_FIELD,)
)
# The reward picker's functions: the workbench's own, then TRL's library (its parameters in reward_params).
PICKER_REWARDS = (*REWARDS, *TRL_REWARDS)
# What choosing a recipe may change on the form (spec/recipes.py), in the order its handler fills them.
RECIPE_FORM_FIELDS = (*VARIANT_FIELDS, "steps_per_generation")
# Settings that may be left blank (None): steps_per_generation, save_total_limit.
OPTIONAL_FIELDS = tuple(name for name in SETTING_FIELDS if type(None) in typing.get_args(field_type(name)))
# Plan inputs a suggestion button may change on this tab (processes follow the hardware picker).
PLAN_FIELDS_SETTABLE = (
    "per_device_train_batch_size",
    "gradient_accumulation_steps",
    "num_generations",
    "steps_per_generation",
)
CPU_PROCESS_CHOICES = (1, 2)
# The Setup tab on first open shows what a first run needs (model, hardware, task and data, rewards, the verdict,
# memory, Launch); every other setting sits in one of these groups, closed, by its title (the browser tests open
# a field's group by this table: `group_of`).
DATA_GROUP = "The data: first rows, column mapping, and what the model receives"
ADVANCED_GROUPS = {
    "Batch and length": BATCH_FIELDS,
    "GRPO variant (a recipe of settings)": ("recipe",),
    "Optimiser, loss and sampling": OPTIMISER_FIELDS,
    "LoRA": LORA_FIELDS,
    "Run: logging, checkpoints, precision, speed, evaluation": RUN_FIELDS,
    "Generation and vLLM": ("vllm_gpu_ids", *VLLM_FIELDS),
    "Reward scoring: parameters, failures, a reward model, which reward means right": REWARD_FIELDS
    + (CORRECTNESS_FIELD,),
    "Your own reward code": ("reward_file",),
}
# Settings a task may preset (e.g. the demo's learning rate and batch; dataset_name too: a task may name its data,
# e.g. a hub dataset and its column mapping).
TASK_SETTING_KEYS = tuple(
    sorted({k for task in TASKS.values() for k in task.settings if k in (*SETTING_FIELDS, "dataset_name")})
)


def group_of(field: str) -> str | None:
    """The title of the closed group that holds `field` on the Setup tab; None for a field shown on first open."""
    if field in DATA_FIELDS:
        return DATA_GROUP
    return next((title for title, fields in ADVANCED_GROUPS.items() if field in fields), None)


def task_presets(task_name) -> dict | None:
    """What choosing `task_name` sets on the form: each picker reward's tick and weight, and the settings the task
    presets (the rest of TASK_SETTING_KEYS back to RunConfig's defaults); None for a name that is no task."""
    task = TASKS.get(task_name) if isinstance(task_name, str) else None
    if task is None:
        return None
    weights = dict(zip(task.reward_names, task.reward_weights))
    values = {}
    for name in PICKER_REWARDS:
        values[f"use_{name}"], values[f"weight_{name}"] = name in weights, weights.get(name, 1.0)
    preset = RunConfig.for_task(task_name)
    values.update({key: getattr(preset, key) for key in TASK_SETTING_KEYS})
    return values


def task_description(task_name) -> str:
    """The chosen task's title and description (Markdown)."""
    task = TASKS.get(task_name) if isinstance(task_name, str) else None
    return f"**{markdown_text(task.title)}.** {markdown_text(task.description)}" if task else ""


# ---------------------------------------------------------------- hardware


def gpu_label(gpu: GpuInfo) -> str:
    """A GPU as the pickers offer it: short, so two fit a line (its name is in the hardware table)."""
    return f"GPU {gpu.index}: {gpu.free_mb / 1024:.1f} of {gpu.total_mb / 1024:.1f} GiB free, {gpu.utilization}% busy"


BUSY_NOTE = "held by a run: a launch on it waits in the queue"


def gpu_choices(gpus: list[GpuInfo], busy: set[int]) -> list[tuple[str, int]]:
    """(label, index) for every GPU; one a running run holds says that a launch on it waits in the queue."""
    return [(gpu_label(gpu) + (f" ({BUSY_NOTE})" if gpu.index in busy else ""), gpu.index) for gpu in gpus]


def hardware_html(gpus: list[GpuInfo], busy: set[int]) -> str:
    """One line without GPUs; otherwise one line of what they hold in all, and (closed until opened, so a machine
    of many GPUs keeps the Setup tab short) a table with each GPU's memory, load and whether a run holds it."""
    if not gpus:
        return (
            '<p class="wb-note"><b>No GPU found</b> (NVIDIA\'s management library sees none): runs train on '
            "the CPU, with 1 or 2 processes.</p>"
        )
    rows = "".join(
        f"<tr><td>{gpu.index}</td><td>{escape(gpu.name)}</td><td class='wb-num'>{gpu.free_mb:,} / {gpu.total_mb:,} MB"
        f"</td><td class='wb-num'>{gpu.utilization}%</td>"
        + (f"<td class='wb-bad'>{BUSY_NOTE}</td>" if gpu.index in busy else "<td class='wb-ok'>free</td>")
        + "</tr>"
        for gpu in gpus
    )
    held = sum(gpu.index in busy for gpu in gpus)
    summary = (
        f"<b>{len(gpus)} GPU{'s' if len(gpus) > 1 else ''}</b>: {sum(g.free_mb for g in gpus) / 1024:,.1f} of "
        f"{sum(g.total_mb for g in gpus) / 1024:,.1f} GiB free" + (f", {held} held by runs" if held else "")
    )
    return (
        f'<details class="wb-note wb-gpus"><summary>{summary}</summary><table class="wb-table"><tr><th>GPU</th>'
        f"<th>name</th><th>free / total</th><th>load</th><th>state</th></tr>{rows}</table></details>"
    )


# ---------------------------------------------------------------- form -> RunConfig


def reward_choice(form: dict) -> tuple[list[str], list[float]]:
    """The ticked reward functions and their weights, in the picker's order."""
    names, weights = [], []
    for name in PICKER_REWARDS:
        if form.get(f"use_{name}"):
            names.append(name)
            weight = form.get(f"weight_{name}")
            weights.append(1.0 if weight is None else weight)
    return names, weights


def rewards_help_markdown() -> str:
    """What each reward of the picker computes; TRL's with their parameters, set in reward_params."""
    own = "\n".join(f"- `{name}`: {markdown_text(text)}" for name, text in describe_rewards().items())
    trl = "\n".join(f"- `{name}`: {markdown_text(text)}" for name, text in describe_trl_rewards().items())
    return (
        f"{own}\n\n**TRL's own rewards** (`trl.rewards`; they run in the training process, so *Try the "
        f"rewards* leaves them out: the Smoke test tries them). Set a parameter in `reward_params`, e.g. "
        f'`{{"repetition_penalty_reward": {{"ngram_size": 4}}}}`:\n{trl}'
    )


def hardware_choice(form: dict, gpus_present: bool, all_gpu_ids: tuple[int, ...] = ()) -> dict:
    """device, the GPU split (gpu_ids train, vllm_gpu_ids serve vLLM) and num_processes from the hardware picker.

    No training GPU ticked means one process; when vLLM has GPUs of its own, that
    process takes the first GPU left to training, never one of vLLM's.
    """
    if not gpus_present:
        processes = form.get("cpu_processes") or 1
        if processes not in CPU_PROCESS_CHOICES:
            raise ConfigError(
                [
                    ConfigProblem(
                        "cpu_processes",
                        f"must be one of {CPU_PROCESS_CHOICES}, got {processes!r:.40}",
                        "pick 1 or 2 processes",
                    )
                ]
            )
        return {"device": "cpu", "gpu_ids": [], "vllm_gpu_ids": [], "num_processes": int(processes)}
    gpu_ids = _gpu_id_list(form.get("gpu_ids"), "gpu_ids")
    vllm_gpu_ids = _gpu_id_list(form.get("vllm_gpu_ids"), "vllm_gpu_ids")
    if vllm_gpu_ids and not gpu_ids:
        gpu_ids = [i for i in all_gpu_ids if i not in vllm_gpu_ids][:1]
    return {"device": "auto", "gpu_ids": gpu_ids, "vllm_gpu_ids": vllm_gpu_ids, "num_processes": max(1, len(gpu_ids))}


def _is_gpu_index(value) -> bool:
    """A whole number, or its digits as text (a checkbox group sends either)."""
    if isinstance(value, str):
        return value.isdecimal() and len(value) < 6
    return isinstance(value, int) and not isinstance(value, bool)


def _gpu_id_list(values, field: str) -> list[int]:
    """GPU indices from the picker, sorted; ConfigError for anything that is not a list of whole numbers."""
    values = values or []
    if not isinstance(values, list) or not all(_is_gpu_index(v) for v in values):
        raise ConfigError(
            [
                ConfigProblem(
                    field, f"must be a list of GPU indices, got {values!r:.40}", "tick GPUs in the hardware picker"
                )
            ]
        )
    return sorted(int(v) for v in values)


def form_text(value) -> str:
    """A text field's value, stripped; a non-text value (only a hand-made request sends one) as its text."""
    return value.strip() if isinstance(value, str) else ("" if value is None else str(value))


def config_from_form(form: dict, gpus_present: bool, all_gpu_ids: tuple[int, ...] = ()) -> RunConfig:
    """A RunConfig from the Setup tab's values; ConfigError naming the field when one cannot be read."""
    names, weights = reward_choice(form)
    values = {name: form[name] for name in SETTING_FIELDS if name in form}
    if values.get("steps_per_generation") == 0:  # how the page shows "unset" (calculator_view.UNSET_WHEN_ZERO)
        values["steps_per_generation"] = None
    # A blank optional field is unset; a blank text field is its default.
    values = {name: value for name, value in values.items() if not (value is None and name not in OPTIONAL_FIELDS)}
    values.update(
        model=form_text(form.get("model")) or RunConfig().model,
        task=form.get("task") or RunConfig().task,
        dataset_name=form_text(form.get("dataset_name")),
        dataset_path=form_text(form.get("dataset_path")),  # the older name: only a hand-made request sends it
        reward_file=form_text(form.get("reward_file")),
        reward_names=names,
        reward_weights=weights,
        **hardware_choice(form, gpus_present, all_gpu_ids),
    )
    blank_required = [
        name for name in SETTING_FIELDS if name in form and form[name] is None and name not in OPTIONAL_FIELDS
    ]
    if blank_required:
        name = blank_required[0]
        raise ConfigError([ConfigProblem(name, "is empty", f"enter a value (default {RunConfig().to_dict()[name]!r})")])
    return RunConfig.from_dict(values)


def setup_plan_view(cfg: RunConfig, dataset_size: int | None) -> PlanView:
    """The calculator's verdict on a config, as the Calculator tab shows it."""
    try:
        result = plan_for(cfg, dataset_size=dataset_size)
    except InputError as exc:
        return PlanView(inputs={}, input_error=exc)
    suggestions = [{"label": s.description, "changes": dict(s.changes)} for s in result.suggestions]
    return PlanView(inputs=result.inputs, plan=result, suggestions=suggestions)


def error_view(exc: ConfigError) -> PlanView:
    """A PlanView that shows a form value that cannot be read (the badge names the field)."""
    first = exc.problems[0]
    return PlanView(inputs={}, input_error=InputError(first.field, f"{first.rule}; {first.fix}".rstrip("; ")))


# ---------------------------------------------------------------- what to show


def problems_html(problems: list[ConfigProblem]) -> str:
    """Everything that would stop a launch, as a list naming field, rule and fix."""
    if not problems:
        return '<p class="wb-ok-line">Ready to launch: every check passes.</p>'
    items = "".join(
        f"<li><b>{escape(p.field)}</b>: {escape(p.rule)}" + (f" - <i>{escape(p.fix)}</i>" if p.fix else "") + "</li>"
        for p in problems
    )
    return f'<div class="wb-problems"><b>Not ready to launch:</b><ul>{items}</ul></div>'


def speed_choice(cfg: RunConfig):
    """This machine's kept speed choice for the run (a tuning.choice.SpeedChoice, with the seconds of a round it
    measured), or None when the probe has not measured this model and shape here (workbench/tuning/)."""
    from workbench.tuning.for_config import kept_choice

    return kept_choice(cfg)


def kept_speed_choice(cfg: RunConfig, choice=None) -> tuple[dict | None, str]:
    """This machine's kept speed choice for the run (RunConfig values) and its one-line summary; (None, "") when the
    probe has not measured this model and shape here. `choice`: the one `speed_choice` found, when looked up already."""
    choice = choice if choice is not None else speed_choice(cfg)
    return (choice.chosen.settings(), choice.summary()) if choice else (None, "")


def speed_html(cfg: RunConfig, gpus: list[GpuInfo] | tuple = (), choice=None) -> str:
    """The speed levers' line, as information: what auto chose on this machine (or that it measures at launch);
    `choice` as in kept_speed_choice."""
    lines = speed_notes(cfg, runs_on_cpu(cfg.device, gpus_present=bool(gpus)), *kept_speed_choice(cfg, choice))
    return "".join(f'<p class="wb-note wb-speed">{escape(line)}</p>' for line in lines)


def setting_notes(cfg: RunConfig, gpus: list[GpuInfo] | tuple = ()) -> tuple[list[str], list[str]]:
    """Plain words about settings whose effect is easy to miss, as (warnings, notes): a rate that may teach a LoRA
    nothing is a warning; beta = 0 (no KL term) and where vLLM runs are information."""
    from workbench.ui.server_view import split_text

    notes = [text for text in [split_text(cfg, list(gpus))] if text]
    if cfg.beta == 0:
        notes.append(
            "beta = 0: no KL penalty, no reference model pass and no 'kl' plot. "
            + (
                "With one iteration the grpo loss is ~0 by construction (advantages sum to zero per group)."
                if cfg.loss_type == "grpo" and cfg.num_iterations == 1
                else ""
            )
        )
    warnings = []
    if cfg.learning_rate < 1e-5:
        warnings.append(
            f"learning_rate {cfg.learning_rate:g} is a full fine-tuning rate; LoRA usually wants 1e-4 to 1e-3."
        )
    return warnings, [n.strip() for n in notes]


# The launch environment's variables the command preview shows, in this order.
LAUNCH_VARIABLES = ("CUDA_VISIBLE_DEVICES", "OMP_NUM_THREADS", "WORKBENCH_ALLOCATOR")


def command_text(command: list[str], env: dict, server: str = "") -> str:
    """The launch command as one shell line, after the settings the launcher starts it with.

    `env` is the launch environment (workbench.jobs.commands.launch_env); only the
    variables that shape the run are shown: GPU visibility, CPU threads, allocator.
    `server`: the vLLM server the run starts beside it (server_view.server_command_text), shown after it.
    """
    from workbench.ui.server_view import shell_line

    line = shell_line(command, env, LAUNCH_VARIABLES)
    return f"# training\n{line}\n\n{server}" if server else line


def preview_label(cfg: RunConfig) -> str:
    """The label of the run id a run started now would get (`runfolder.new_run_id(label)`)."""
    return cfg.run_name or f"{cfg.task}-{Path(cfg.model).name}"


def parse_completions(text: str) -> list[str]:
    """Completions typed one per line (a line with only --- separates multi-line ones)."""
    text = (text or "").strip()
    if not text:
        return []
    if "\n---" in text:
        return [part.strip() for part in text.split("\n---") if part.strip()]
    return [line.strip() for line in text.splitlines() if line.strip()]


def parse_columns(text: str) -> dict:
    """Dataset columns for the rewards, typed as `name = value` lines (e.g. `answer = 42`)."""
    columns = {}
    for number, line in enumerate((text or "").splitlines(), start=1):
        if not line.strip():
            continue
        name, sep, value = line.partition("=")
        if not sep or not name.strip():
            raise WorkbenchError(
                f"columns, line {number}: {line.strip()!r} is not `name = value`; write e.g. answer = 42"
            )
        columns[name.strip()] = value.strip()
    return columns


def scores_html(results: list[dict], names: list[str]) -> str:
    """A table: each completion, each reward function's score, and the weighted total."""

    def cell(value):
        return "–" if value is None else f"{value:.3f}"

    head = "".join(f"<th>{escape(n)}</th>" for n in names)
    rows = "".join(
        f"<tr><td>{escape(str(r['completion']))}</td>"
        + "".join(f"<td class='wb-num'>{cell(r['rewards'][n])}</td>" for n in names)
        + f"<td class='wb-num'><b>{cell(r['reward'])}</b></td></tr>"
        for r in results
    )
    return f'<table class="wb-table"><tr><th>completion</th>{head}<th>total</th></tr>{rows}</table>'


def smoke_result_html(status: dict) -> str:
    """A smoke test's state while it runs, and its outcome (or its error and log tail) when it ends."""
    state = status.get("state", "starting")
    run = escape(str(status.get("run_id", "")))
    if state == "finished":
        return (
            f'<div class="wb-badge wb-badge-valid"><span class="wb-badge-title">Smoke test passed</span>'
            f"One real optimizer step ran with these settings (run {run}).</div>"
        )
    if state in ("failed", "stopped"):
        error = status.get("error") or {}
        parts = [f'<span class="wb-badge-title">Smoke test {escape(state)}</span>']
        if error.get("hint"):
            parts.append(f"<div>{escape(str(error['hint']))}</div>")
        if error.get("message"):
            parts.append(f"<code>{escape(str(error.get('type', '')))}: {escape(str(error['message']))}</code>")
        tail = error.get("traceback_tail") or status.get("log_tail") or ""
        if tail:
            parts.append(
                f"<details><summary>end of train.log</summary><pre>{escape(str(tail)[-2000:])}</pre></details>"
            )
        return f'<div class="wb-badge wb-badge-invalid">{"".join(parts)}</div>'
    step = status.get("step")
    if state == "queued" and status.get("waits_for"):
        return (
            f'<p class="wb-note">Smoke test queued at position {escape(str(status.get("queue_position")))}: '
            f"it waits for {escape(str(status['waits_for']))} ... (run {run})</p>"
        )
    return (
        f'<p class="wb-note">Smoke test {escape(state.replace("_", " "))}'
        + (f", step {step}" if step else "")
        + f" ... (run {run})</p>"
    )


# ---------------------------------------------------------------- task data and memory


@cache  # built-in tasks never change while the app runs
def task_dataset_size(task_name: str) -> int | None:
    """Prompts a built-in task trains on (its default size, or all rows it has); None if unknown."""
    from workbench.spec.tasks import TASKS

    task = TASKS.get(task_name)
    if task is None:
        return None
    if task.default_size is not None:
        return task.default_size
    return len(task.build_rows(None, 0))


MEMORY_NOT_ON_DISK = (
    '<p class="wb-note">Memory estimate: the model\'s config.json is not on disk yet (the '
    "bundled model is converted on its first run or smoke test; hub models once downloaded).</p>"
)


def memory_unavailable_html(problem: WorkbenchError) -> str:
    """Why there is no memory estimate (the model's config could not be read or used)."""
    return f'<p class="wb-note">Memory estimate unavailable: {escape(str(problem))}</p>'


def memory_html(estimate, free_bytes: int | None, max_prompt_length: int = 64) -> str:
    """The rough memory estimate (`spec.memory.estimate_for_config`) for one training process, with a warning
    past the device's free memory."""
    rows = "".join(
        f"<tr><td>{escape(t.name)}</td><td>{escape(t.phase)}</td><td class='wb-num'>{t.bytes / 2**20:,.0f} MB</td></tr>"
        for t in estimate.terms
        if t.bytes >= 2**20
    )
    warning = estimate.check_fits(free_bytes)
    head = (
        f"<p><b>About {estimate.total_gib:.2f} GiB</b> per training process at its peak ({escape(estimate.peak_phase)}"
        f" phase), prompts up to {max_prompt_length} tokens"
        + (f"; {free_bytes / 2**30:.1f} GiB free" if free_bytes else "")
        + ".</p>"
    )
    warn = f'<p class="wb-warn-line">{escape(warning)}</p>' if warning else ""
    table = (
        f'<details><summary>breakdown</summary><table class="wb-table"><tr><th>term</th><th>phase</th>'
        f"<th>memory</th></tr>{rows}</table></details>"
    )
    return f'<div class="wb-memory">{head}{warn}{table}</div>'


# ---------------------------------------------------------------- recipes


def recipe_choices() -> list[tuple[str, str]]:
    """The recipe dropdown: (label, value) pairs, "" for none."""
    return [("none (your own settings)", ""), *((f"{r.title}: {r.name}", r.name) for r in RECIPES.values())]


def recipe_note_html(name: str, lines: list[str], error: str = "") -> str:
    """What choosing recipe `name` did: the fields it changed (`describe_changes` lines), or why it could not."""
    if error:
        return f"<p class='wb-note'>Recipe not applied: {escape(error)}</p>"
    if not name:
        return "<p class='wb-note'>No recipe: the settings below are your own.</p>"
    recipe = RECIPES[name]
    head = f"<b>{escape(recipe.title)}</b> ({escape(recipe.source)}): {escape(recipe.summary)}."
    if not lines:
        return f"<p class='wb-note'>{head} The form already had its settings.</p>"
    items = "".join(f"<li><code>{escape(line)}</code></li>" for line in lines)
    extra = (
        " It needs the policy ratio to move off 1, so each generation round is now split over several "
        "optimizer steps (see the batch plan)."
        if recipe.needs_off_policy and any(line.startswith("steps_per_generation") for line in lines)
        else ""
    )
    return f"<div class='wb-note'>{head} Changed {len(lines)} field(s):<ul>{items}</ul>{escape(extra)}</div>"
