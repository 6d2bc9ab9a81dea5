"""The Setup form as plain values: the order of its entries (ctx.config_inputs), the form once some of them change,
its column mapping and its values on first open. Pure: no gradio, no I/O (ui/setup_form.py and the tab read and
write).
"""

from __future__ import annotations

from workbench.spec.config import RunConfig
from workbench.spec.data_mapping import SOLUTION_TRANSFORMS, ColumnMapping
from workbench.ui.setup_view import PICKER_REWARDS, SETTING_FIELDS, TASK_SETTING_KEYS, form_text, task_presets

REWARD_KEYS = tuple(key for name in PICKER_REWARDS for key in (f"use_{name}", f"weight_{name}"))
# The form's entries in the order of ctx.config_inputs (the hardware state follows them).
FORM_KEYS = (
    "model",
    "task",
    "dataset_name",
    "reward_file",
    *REWARD_KEYS,
    "cpu_processes",
    "gpu_ids",
    "vllm_gpu_ids",
    *SETTING_FIELDS,
)
# What choosing a task sets on the form (setup_view.task_presets): each picker reward's tick and weight, and the
# settings the task presets; its description beside them.
TASK_KEYS = (*REWARD_KEYS, *TASK_SETTING_KEYS)
EXAMPLE_COMPLETIONS = "Paris.\nThe capital of France is Paris, which is also its largest city and its cultural centre."
# How many tokens the memory estimate allows for a prompt after the chat template.
PROMPT_TOKENS_ASSUMED = 64
MODEL_REFUSED_NOTE = (
    "<p class='wb-note'>Memory estimate: none for a model this shared dashboard refuses (see Before launch).</p>"
)


def form_with(values: list, changes: dict) -> list:
    """The form's `values` (ctx.config_inputs order) once `changes` (form key -> value) land in it."""
    form = dict(zip(FORM_KEYS, values[:-1]))
    form.update(changes)
    return [form[key] for key in FORM_KEYS] + [values[-1]]


def mapping_from_form(form: dict) -> ColumnMapping:
    """The form's column mapping; an unknown transform reads as none (Before launch names it)."""
    transform = form_text(form.get("solution_transform"))
    return ColumnMapping(
        form_text(form.get("prompt_column")) or "prompt",
        form_text(form.get("solution_column")),
        transform if transform in SOLUTION_TRANSFORMS else "none",
        form_text(form.get("system_prompt")),
    )


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
