"""What a launch will do and how long it takes on this machine, in one line: the first-run strip above the tabs
(the default demo) and the Setup tab's Launch (the form's config) say it the same way.

How long comes only from what this machine measured: the speed probe's round for the run's model and shape, kept
in the server's cache (workbench/tuning/), times the rounds the run makes. Where the probe has not measured it
here, the line says so: a figure from another machine would be a promise this one may not keep. When other
processes take a share of the CPU now (sources/cpu_busy.py, measured by the server at the page's load), the line
says so too: every time here grows with it. No gradio, no I/O: the tabs look the choice and the share up and
hand them over.

After a launch the same line says where to watch it, or, when it waits in the GPU queue, its place and what it
waits for (`launched_html`); before a second demo, which demo run is there already (`live_demo_runs`,
`confirm_html`).
"""

from __future__ import annotations

import math
from html import escape
from pathlib import Path

from workbench.calc import Plan
from workbench.runstore.runfolder import FINAL_STATES, QUEUED
from workbench.sources.cpu_busy import CpuBusy
from workbench.spec.config import RunConfig
from workbench.spec.numbers import format_duration

NOT_MEASURED = (
    "how long is not measured on this machine yet: the run times its first rounds, then the Train tab shows the "
    "time left"
)


def rounds_of(plan: Plan) -> int | None:
    """Generation rounds a valid plan makes: each round is steps_per_generation x num_iterations training passes,
    each optimizer step gradient_accumulation_steps of them; None when the step count is not known."""
    if not plan.valid or not plan.total_steps or not plan.steps_per_generation:
        return None
    passes = plan.total_steps * plan.inputs["gradient_accumulation_steps"]
    return math.ceil(passes / (plan.steps_per_generation * plan.inputs.get("num_iterations", 1)))


def what_it_runs(cfg: RunConfig, plan: Plan | None) -> str:
    """`trains <model> with LoRA on <data> for <steps>`, and when it evaluates the held-out prompts."""
    data = f"the {cfg.task} task" if not cfg.dataset_name else cfg.dataset_name
    if plan is not None and plan.valid and plan.total_steps:
        length = f"{plan.total_steps} steps"
    else:
        length = f"{cfg.max_steps} steps" if cfg.max_steps > 0 else f"{cfg.num_train_epochs:g} epochs"
    evaluation = (
        f", held-out accuracy at step 0 and every {cfg.eval_steps} steps"
        if cfg.eval_strategy == "steps" and cfg.eval_size
        else ""
    )
    return f"trains {Path(cfg.model).name or cfg.model} with LoRA on {data} for {length}{evaluation}"


def how_long(rounds: int | None, round_seconds: float | None, evaluates: bool = False) -> str:
    """How long the training takes on this machine, from the probe's round here, or that it is not measured yet;
    `evaluates`: the run also answers its held-out prompts, which no round counts."""
    if not round_seconds:
        return NOT_MEASURED
    if rounds is None:
        return (
            f"a round takes {round_seconds:.1f} s on this machine (its speed probe measured it); the number of "
            f"rounds is known once the data's size is"
        )
    return (
        f"about {format_duration(rounds * round_seconds)} of training on this machine ({rounds} rounds x "
        f"{round_seconds:.1f} s, as its speed probe measured), plus loading the model"
        + (" and the held-out evaluations" if evaluates else "")
    )


def busy_note(busy: dict | None) -> str:
    """The sentence on a busy machine (`busy`: CpuBusy.to_dict() of the server's look at the CPU), or ""."""
    if not busy:
        return ""
    measured = CpuBusy(**busy)
    if not measured.is_busy():
        return ""
    note = measured.note()
    return f" {note[0].upper()}{note[1:]}."


def round_seconds(choice) -> float | None:
    """The seconds of one round with the levers a kept speed choice (tuning.choice.SpeedChoice) took, or None."""
    if choice is None:
        return None
    return choice.seconds.get(choice.chosen.label())


def evaluates(cfg: RunConfig) -> bool:
    return cfg.eval_strategy == "steps" and bool(cfg.eval_size)


def launch_line(cfg: RunConfig, plan: Plan | None, choice, busy: dict | None = None) -> str:
    """The sentence beside a Launch button: what the launch runs, how long it takes here, and whether the machine
    is busy now (`busy`: see busy_note)."""
    rounds = rounds_of(plan) if plan is not None else None
    return f"{what_it_runs(cfg, plan)}; {how_long(rounds, round_seconds(choice), evaluates(cfg))}.{busy_note(busy)}"


def launch_html(cfg: RunConfig, plan: Plan | None, choice, busy: dict | None = None) -> str:
    """The Setup tab's line above its Launch button."""
    return f'<p class="wb-note wb-launch-line">Launch {escape(launch_line(cfg, plan, choice, busy))}</p>'


def demo_html(cfg: RunConfig, plan: Plan | None, choice, busy: dict | None = None) -> str:
    """The first-run strip's line: the demo's Launch, what it does and how long it takes on this machine."""
    return (
        f'<p class="wb-first-run-line"><b>New here?</b> The demo {escape(launch_line(cfg, plan, choice, busy))} '
        f"Your own run: the Setup tab.</p>"
    )


def queued_sentence(launched) -> str:
    """A launch that waits in the GPU queue (a `launching.Launched`): its place, what it waits for, and the way out."""
    return (
        f"Queued {launched.run_id}: #{launched.queue_position} in the queue, waits for {launched.waits_for}. It "
        "starts by itself when that is free, with or without this page open; Cancel on the Train tab takes it out "
        "of the queue."
    )


def launched_html(launched) -> str:
    """After a launch (a `launching.Launched`): where to watch it, or its place in the queue when it waits there."""
    if launched.queued:
        return f'<p class="wb-first-run-line wb-warn-line wb-queued-line">{escape(queued_sentence(launched))}</p>'
    return (
        f'<p class="wb-first-run-line wb-ok-line">Launched {escape(launched.run_id)}: the Train tab shows it (its '
        f"first points appear once the model has loaded and the first step is done).</p>"
    )


def live_demo_runs(entries: list[dict], demo: RunConfig) -> list[dict]:
    """The runs among `entries` (`run_list.list_runs()`'s, newest first) that are the demo, started or waiting: its
    task on its model and no data of their own, neither ended nor a smoke test."""
    return [
        entry
        for entry in entries
        if entry.get("state") not in FINAL_STATES
        and not entry.get("smoke_test")
        and entry.get("task") == demo.task
        and entry.get("model") == demo.model
        and not (entry.get("dataset_name") or entry.get("dataset_path"))
    ]


def confirm_html(entry: dict, devices: str) -> str:
    """The question before a second demo launch: which demo run is there already, and what another would wait for."""
    state = "queued" if entry.get("state") == QUEUED else "running"
    return (
        f'<p class="wb-first-run-line wb-warn-line"><b>A demo run is already {state}</b> '
        f"({escape(str(entry.get('run_id')))}); launch another? It will wait for {escape(devices)} until the runs "
        f"ahead of it end.</p>"
    )


def refused_html(message: str) -> str:
    """A launch that was refused, with the reason (the config's field, rule and fix)."""
    return f'<p class="wb-first-run-line wb-warn-line"><b>Not launched:</b> {escape(message)}</p>'
