"""A run as one HTML file to hand on: settings, batch plan, curves, health, groups, base vs trained.

`build_report(run)` takes what a run folder holds, already read (`RunContents`),
and returns one HTML document that needs nothing else: plotly.js is inlined
once and draws every figure, the styles sit in the page, and no address
outside the file is named (no CDN, no web font), so it opens in any browser
without a network. Its sections, in order:

- the run at a glance: state, model, task, steps, duration, and a failed run's error;
- the settings in plain words, with each field's help (`spec.config.FIELD_HELP`);
- the batch plan as the Calculator tab counts it (`spec.config.plan_for`, `Plan.numbers()`);
- reward, reward spread, KL, loss and completion-length curves (`figures`);
- the health notes (`health.check_health`), and a note for each run file with
  lines that could not be read (skipped by the reader, `spec.run_records`);
- completion groups with their advantages (`groups`, drawn as the dashboard's
  cards by `group_cards`): the first, middle and last step with completions,
  then the best and the worst group of the run, the whole groups with the
  highest and the lowest mean total reward over every step (the earliest one
  when several tie);
- the base model's and the trained adapter's answers on the probe prompts,
  when the Compare tab sampled them (`jobs.probes.stored_comparisons` reads them).

Every text that comes from the run (its name, settings, prompts, completions,
reward names, errors) is escaped: the file shows it and never runs it. The
figures' data is JSON inside a script, where plotly writes `<` as `\\u003c`.

Pure: no file is read here, and no gradio or torch is imported. `python -m
workbench report` and the Runs tab's Report button read the run folder and
write the file.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime
from html import escape
from typing import Any, Iterable, Mapping

from workbench.insight import figures
from workbench.insight.group_cards import STYLE as CARDS_STYLE
from workbench.insight.group_cards import render_group
from workbench.insight.groups import GroupView, available_steps, format_number, format_signed, groups_for_step
from workbench.insight.health import RECENT_WINDOW, check_health
from workbench.insight.resumed import merge_metrics
from workbench.spec.chat import transcript_text
from workbench.spec.config import FIELD_HELP, RunConfig, plan_for
from workbench.spec.numbers import finite_number, format_duration
from workbench.spec.run_records import Skipped, completion_problem, metric_problem, well_formed
from workbench.spec.tasks import TASKS

# The curves of the report, as named in figures.FIGURE_BUILDERS, in reading order.
CURVES = ("reward", "reward_std", "kl", "loss", "completion_length")
# The settings the report lists first (the rest sit in a folded table), in reading order.
KEY_SETTINGS = (
    "model", "task", "dataset_path", "reward_names", "reward_weights", "learning_rate", "beta", "loss_type",
    "scale_rewards", "num_generations", "per_device_train_batch_size", "gradient_accumulation_steps",
    "num_processes", "max_completion_length", "temperature", "num_iterations", "max_steps", "lora_r",
    "lora_alpha", "generation", "seed",
)
# A step with more prompts than this shows its first ones only: a report is read, not searched.
MAX_GROUPS_PER_STEP = 3
# Plotly's own settings for every figure: no link to plotly's site, resize with the page.
PLOT_CONFIG = {"displaylogo": False, "responsive": True}

PAGE_STYLE = """
<style>
:root { color-scheme: light; }
body { margin: 0; background: #f6f7fb; color: #1f2937;
  font: 15px/1.5 Inter, system-ui, -apple-system, 'Segoe UI', Helvetica, Arial, sans-serif; }
main { max-width: 1120px; margin: 0 auto; padding: 24px 24px 48px; }
header.wb-report-head { background: #312e81; color: #fff; padding: 22px 24px 18px; }
header.wb-report-head .wb-inner { max-width: 1120px; margin: 0 auto; }
header.wb-report-head h1 { margin: 0 0 2px; font-size: 24px; overflow-wrap: anywhere; }
header.wb-report-head p { margin: 0 0 10px; color: #c7d2fe; }
.wb-facts { display: flex; flex-wrap: wrap; gap: 6px 8px; margin: 0; padding: 0; list-style: none; }
.wb-facts li { background: rgba(255,255,255,0.12); border-radius: 999px; padding: 2px 12px; font-size: 13px;
  overflow-wrap: anywhere; }
.wb-facts b { font-weight: 600; color: #e0e7ff; margin-right: 4px; }
nav.wb-toc { margin: 0 0 8px; font-size: 14px; display: flex; flex-wrap: wrap; gap: 4px 14px; }
nav.wb-toc a { color: #4338ca; text-decoration: none; }
section.wb-section { background: #fff; border: 1px solid #e5e7eb; border-radius: 10px; padding: 16px 20px;
  margin: 16px 0; }
section.wb-section h2 { margin: 0 0 8px; font-size: 19px; color: #111827; }
section.wb-section h3 { margin: 18px 0 6px; font-size: 15px; color: #1f2937; }
.wb-lead { margin: 0 0 12px; max-width: 80ch; }
.wb-muted { color: #6b7280; }
table.wb-table { border-collapse: collapse; width: 100%; font-size: 14px; }
table.wb-table th { text-align: left; font-weight: 600; color: #374151; background: #f3f4f6; padding: 6px 8px; }
table.wb-table td { padding: 6px 8px; border-top: 1px solid #eef0f3; vertical-align: top; overflow-wrap: anywhere; }
table.wb-table td.wb-value { font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; font-size: 13px;
  white-space: pre-wrap; }
table.wb-table td.wb-num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; font-weight: 600; }
table.wb-table small { color: #6b7280; }
table.wb-settings td:first-child { white-space: nowrap; }
table.wb-settings td.wb-value { width: 18%; }
table.wb-plan { max-width: 760px; }
details { margin-top: 10px; }
summary { cursor: pointer; color: #4338ca; }
.wb-verdict { border-radius: 8px; padding: 8px 12px; margin: 0 0 12px; }
.wb-verdict-valid { background: #ecfdf5; color: #065f46; border: 1px solid #a7f3d0; }
.wb-verdict-invalid { background: #fef2f2; color: #7f1d1d; border: 1px solid #fca5a5; }
.wb-figures { display: grid; grid-template-columns: repeat(auto-fit, minmax(420px, 1fr)); gap: 12px; }
.wb-figure { border: 1px solid #eef0f3; border-radius: 8px; min-height: 300px; }
.wb-alarm { border-radius: 8px; padding: 8px 12px; margin: 0 0 8px; border-left: 4px solid; background: #f8fafc; }
.wb-alarm b { display: block; }
.wb-alarm-error { border-color: #dc2626; background: #fef2f2; }
.wb-alarm-warning { border-color: #d97706; background: #fffbeb; }
.wb-alarm-info { border-color: #2563eb; background: #eff6ff; }
.wb-calm { color: #047857; background: #ecfdf5; border-radius: 8px; padding: 8px 12px; }
.wb-error { color: #7f1d1d; background: #fef2f2; border: 1px solid #fca5a5; border-radius: 8px; padding: 8px 12px;
  white-space: pre-wrap; overflow-wrap: anywhere; }
.wb-groups-block { margin: 0 0 8px; }
table.wb-probes { table-layout: fixed; }
table.wb-probes td { white-space: pre-wrap; }
footer { color: #6b7280; font-size: 13px; margin-top: 24px; overflow-wrap: anywhere; }
</style>
"""


@dataclass
class RunContents:
    """What a report is made of: a run folder's files, already read (`runfolder.read_run`)."""

    name: str                     # the run's id: its folder's name
    config: dict                  # config.json
    status: dict                  # status.json
    metrics: list[dict]           # metrics.jsonl, as written
    completions: list[dict]       # completions.jsonl, as written
    comparisons: list = field(default_factory=list)  # probes.Comparison: label, max_new_tokens, prompts, base, trained
    folder: str = ""              # where the run folder lies, named in the footer
    skipped: dict = field(default_factory=dict)  # lines of each file the reader could not read: {name: Skipped}


# ---------------------------------------------------------------- small helpers

def _text(value: Any) -> str:
    """A setting or a fact as escaped text: lists joined, empty values said."""
    if value is None or value == "" or value == []:
        return "(none)"
    if isinstance(value, (list, tuple)):
        return escape(", ".join(str(item) for item in value))
    return escape(str(value))


def _when(timestamp: float | None) -> str:
    try:
        return datetime.fromtimestamp(timestamp).strftime("%Y-%m-%d %H:%M") if timestamp else "—"
    except (OverflowError, OSError, ValueError):  # a status.json from no clock this machine knows
        return "—"


def _section(anchor: str, title: str, body: str) -> str:
    return f'<section class="wb-section" id="{anchor}"><h2>{escape(title)}</h2>{body}</section>'


def _plural(count: float, noun: str) -> str:
    return f"{count:g} {noun}{'' if count == 1 else 's'}"


# ---------------------------------------------------------------- the run at a glance

def _steps_text(status: Mapping, metrics: list[dict]) -> str:
    step = finite_number(status.get("step"))
    total = finite_number(status.get("total_steps"))
    if step is None and metrics:
        step = finite_number(metrics[-1].get("step"))
    if step is None:
        return "no step yet"
    return f"{int(step)} of {int(total)}" if total else str(int(step))


def _head(run: RunContents, metrics: list[dict]) -> str:
    config, status = run.config, run.status
    started, ended = finite_number(status.get("started_at")), finite_number(status.get("updated_at"))
    task = config.get("task") or ""
    if config.get("dataset_path"):
        task = f"{config['dataset_path']} (file)"
    facts = [
        ("state", status.get("state") or "unknown"),
        ("model", config.get("model") or "unknown"),
        ("task", task or "unknown"),
        ("steps", _steps_text(status, metrics)),
        ("started", _when(started)),
        ("duration", format_duration(ended - started) if started and ended else "—"),
    ]
    items = "".join(f"<li><b>{escape(label)}</b>{escape(str(value))}</li>" for label, value in facts)
    return (f'<header class="wb-report-head"><div class="wb-inner"><h1>{escape(run.name)}</h1>'
            f"<p>GRPO run report: LoRA fine-tuning with TRL's GRPOTrainer</p>"
            f'<ul class="wb-facts">{items}</ul></div></header>')


def _outcome_words(run: RunContents, metrics: list[dict]) -> str:
    """What the run did to the reward, and whether it is still going."""
    parts = []
    rewards = [(r.get("step"), finite_number(r.get("reward"))) for r in metrics if finite_number(r.get("reward")) is not None]
    if len(rewards) >= 2:
        (first_step, first), (last_step, last) = rewards[0], rewards[-1]
        parts.append(f"The mean reward went from {format_number(first)} at step {first_step} to "
                     f"{format_number(last)} at step {last_step} ({format_signed(last - first)}).")
    elif rewards:
        parts.append(f"One step logged a reward: {format_number(rewards[0][1])} at step {rewards[0][0]}.")
    else:
        parts.append("No reward was logged.")
    state = run.status.get("state")
    if state == "queued":
        parts.append("The report was written while the run waited in the GPU queue: it has not started.")
    elif state in ("starting", "loading_model", "training", "saving"):
        parts.append(f"The report was written while the run was {state.replace('_', ' ')}: it shows the run so far.")
    return " ".join(parts)


def _summary(run: RunContents, metrics: list[dict], plan, plan_problem: str) -> str:
    """The run in plain words: its outcome, its design, its batch plan, and a failed run's error."""
    body = f'<p class="wb-lead">{escape(_outcome_words(run, metrics))}</p>'
    if run.config:
        body += f'<p class="wb-lead">{escape(_settings_words(run.config))}</p>'
    body += f'<p class="wb-lead">{escape(_plan_words(plan, plan_problem))}</p>'
    error = run.status.get("error")
    if run.status.get("state") == "failed" and isinstance(error, Mapping):
        lines = [str(error.get(key)) for key in ("hint", "type", "message") if error.get(key)]
        body += f'<div class="wb-error"><b>The run failed.</b>\n{escape(chr(10).join(lines))}</div>'
    return _section("summary", "Summary", body)


# ---------------------------------------------------------------- settings and batch plan

def _reward_words(config: Mapping) -> str:
    """The reward functions and their weights, the task's own when the config names none."""
    names = config.get("reward_names") or []
    weights = config.get("reward_weights") or []
    task = TASKS.get(config.get("task")) if isinstance(config.get("task"), str) else None
    if not names and task is not None and not config.get("dataset_path"):
        names, weights = task.reward_names, weights or task.reward_weights
    if not names:
        return "the task's own reward functions"
    if len(weights) == len(names):
        return ", ".join(f"{name} (weight {weight:g})" if isinstance(weight, (int, float)) else str(name)
                         for name, weight in zip(names, weights))
    return ", ".join(str(name) for name in names)


def _settings_words(config: Mapping) -> str:
    """The run's design as a paragraph a reader follows without knowing TRL's field names."""
    source = f"the data file {config['dataset_path']}" if config.get("dataset_path") else \
        f"the task {config.get('task') or 'unknown'}"
    beta = finite_number(config.get("beta"))
    kl = "no KL penalty (beta = 0)" if beta == 0 else f"a KL penalty of beta = {config.get('beta')} towards the base model"
    return (
        f"The model {config.get('model') or '(unnamed)'} was trained with a LoRA adapter (rank {config.get('lora_r')}, "
        f"alpha {config.get('lora_alpha')}) on {source}. For each prompt it wrote "
        f"{config.get('num_generations')} completions of at most {config.get('max_completion_length')} tokens "
        f"(temperature {config.get('temperature')}), scored by {_reward_words(config)}. Each completion was "
        f"pushed up or down by its advantage, its reward against the others of its group, with the "
        f"{config.get('loss_type')} loss, learning rate {config.get('learning_rate')} and {kl}."
    )


def _settings_rows(config: Mapping, names: Iterable[str]) -> str:
    return "".join(
        f'<tr><td><code>{escape(name)}</code></td><td class="wb-value">{_text(config.get(name))}</td>'
        f"<td>{escape(FIELD_HELP.get(name, ''))}</td></tr>"
        for name in names
    )


def _settings(config: Mapping) -> str:
    if not config:
        return _section("settings", "Settings", '<p class="wb-lead">This run folder holds no readable config.json.</p>')
    key = [name for name in KEY_SETTINGS if name in config]
    rest = [name for name in config if name not in KEY_SETTINGS]
    head = "<tr><th>setting (TRL's name)</th><th>value</th><th>what it does</th></tr>"
    body = f'<table class="wb-table wb-settings">{head}{_settings_rows(config, key)}</table>'
    if rest:
        body += (f"<details><summary>The other {len(rest)} settings</summary>"
                 f'<table class="wb-table wb-settings">{head}{_settings_rows(config, rest)}</table></details>')
    return _section("settings", "Settings", body)


def _plan_of(config: Mapping):
    """(the calculator's plan of the run's batch settings, None) or (None, why it cannot be counted)."""
    if not config:
        return None, "this run folder holds no readable config.json"
    try:
        return plan_for(RunConfig.from_dict(dict(config))), ""
    except (ValueError, TypeError) as exc:  # WorkbenchError is a ValueError
        return None, str(exc) or type(exc).__name__


def _plan_words(plan, problem: str) -> str:
    if plan is None:
        return f"The batch plan cannot be counted from this config.json: {problem}"
    if not plan.valid:
        return "TRL 1.16's GRPOConfig would refuse these batch settings today (see the batch plan below)."
    return (f"Each generation round sampled {_plural(plan.prompts_per_generation, 'prompt')} x G = "
            f"{plan.inputs['num_generations']} completions, and each optimizer step trained on "
            f"{_plural(plan.completions_per_step, 'completion')} ({_plural(plan.prompts_per_step, 'prompt group')}).")


def _batch_plan(plan, problem: str) -> str:
    title = "Batch plan"
    if plan is None:
        return _section("plan", title, f'<p class="wb-lead">{escape(_plan_words(plan, problem))}</p>')
    if plan.valid:
        verdict = ('<div class="wb-verdict wb-verdict-valid">Valid: TRL 1.16 accepts these settings. The numbers '
                   "are the Calculator tab's.</div>")
    else:
        errors = "".join(f"<li><code>{escape(error)}</code></li>" for error in plan.errors)
        verdict = f'<div class="wb-verdict wb-verdict-invalid">GRPOConfig would refuse these settings:<ul>{errors}</ul></div>'
    rows = "".join(f'<tr><td>{escape(meaning)}<br><small>{escape(how)}</small></td><td class="wb-num">{number}</td></tr>'
                   for meaning, how, number in plan.numbers())
    warnings = "".join(f"<li>{escape(warning)}</li>" for warning in plan.warnings)
    body = (f'{verdict}<table class="wb-table wb-plan"><tr><th>what</th><th>number</th></tr>{rows}</table>'
            + (f"<h3>Notes on these settings</h3><ul>{warnings}</ul>" if warnings else ""))
    return _section("plan", title, body)


# ---------------------------------------------------------------- curves and health

def _figure_html(name: str, fig) -> str:
    """One figure: a div and the script that draws it with the page's plotly.js (data escaped by plotly).

    It is drawn once the whole page is laid out, so it takes the width of its grid cell, not
    that of a grid still holding only the figures before it.
    """
    div_id = f"wb-figure-{name}"
    return (f'<div class="wb-figure" id="{div_id}"></div>'
            f'<script>document.addEventListener("DOMContentLoaded", function () {{ var f = {fig.to_json()}; '
            f'Plotly.newPlot("{div_id}", f.data, f.layout, {_json(PLOT_CONFIG)}); }});</script>')


def _json(value: Any) -> str:
    return json.dumps(value).replace("<", "\\u003c")


def _curves(metrics: list[dict]) -> str:
    built = figures.build_figures(metrics, names=CURVES)
    body = ('<p class="wb-lead">Mean over each step\'s completions. The shaded band is one standard deviation '
            "(for lengths, the shortest to the longest completion).</p>"
            f'<div class="wb-figures">{"".join(_figure_html(name, fig) for name, fig in built.items())}</div>')
    return _section("curves", "Curves", body)


def _health(metrics: list[dict], config: Mapping, skipped: Mapping[str, Skipped]) -> str:
    alarms = check_health(metrics, config)
    unreadable = "".join(f'<div class="wb-alarm wb-alarm-warning"><b>Unreadable lines skipped</b>'
                         f"{escape(lines.note(name))}</div>" for name, lines in sorted(skipped.items()) if lines.count)
    if not metrics:
        body = '<p class="wb-lead">No metrics were logged, so there is nothing to check.</p>'
    elif not alarms:
        body = ('<div class="wb-calm">No alarms. The checks look for prompts whose completions all scored alike '
                "(no learning signal), a KL spike, completions cut at max_completion_length and lengths collapsing; "
                f"those about trends need {RECENT_WINDOW} logged steps or more.</div>")
    else:
        body = "".join(f'<div class="wb-alarm wb-alarm-{escape(alarm.level)}"><b>{escape(alarm.title)}'
                       f'{f" (step {alarm.step})" if alarm.step is not None else ""}</b>{escape(alarm.message)}</div>'
                       for alarm in alarms)
    return _section("health", "Health notes", unreadable + body)


# ---------------------------------------------------------------- completion groups

def rounds_by_step(records: list[Mapping]) -> dict[int, list[Mapping]]:
    """Each step's records from its last unbroken stretch of the file, in the order written.

    The newest generation round of a step lies in that stretch (`resumed.latest_round`
    starts a new round wherever a step's records break off), so reading the step's
    groups from it gives what reading the whole file gives, at a cost that does not
    grow with the number of steps.
    """
    stretches: dict[int, list[Mapping]] = {}
    previous = None
    for record in records:
        step = finite_number(record.get("step"))
        if step is None:
            previous = None
            continue
        if step != previous:
            stretches[int(step)] = []
        stretches[int(step)].append(record)
        previous = step
    return stretches


def best_and_worst(all_groups: Iterable[GroupView]) -> tuple[GroupView | None, GroupView | None]:
    """The whole groups with the highest and the lowest mean total reward (the earliest of a tie)."""
    scored = [g for g in all_groups if g.complete and g.mean is not None]
    if not scored:
        return None, None
    best = max(scored, key=lambda g: (g.mean, -g.step, -g.group))
    worst = min(scored, key=lambda g: (g.mean, g.step, g.group))
    return best, worst


def _picked_steps(steps: list[int]) -> dict[int, list[str]]:
    """The first, middle and last step, each with its roles ({1: ["first", "last"]} for a one-step run)."""
    picks = [("first", steps[0])] + ([("middle", steps[len(steps) // 2])] if len(steps) >= 3 else []) + \
        [("last", steps[-1])]
    roles: dict[int, list[str]] = {}
    for role, step in picks:
        roles.setdefault(step, []).append(role)
    return roles


def _groups_block(title: str, groups: list[GroupView], count: int, note: str = "") -> str:
    shown = "".join(render_group(group, group.group + 1, count) for group in groups)
    more = f'<p class="wb-muted">{escape(note)}</p>' if note else ""
    return (f'<div class="wb-groups wb-groups-block"><h3>{escape(title)}</h3>{more}{shown}</div>')


def _groups(completions: list[dict], config: Mapping) -> str:
    title = "Completion groups and their advantages"
    stretches = rounds_by_step(completions)
    steps = available_steps(completions)
    if not steps:
        return _section("groups", title, '<p class="wb-lead">This run recorded no completions.</p>')
    by_step = {step: groups_for_step(stretches[step], step, config.get("scale_rewards"),
                                     config.get("num_generations")) for step in steps}
    intro = ("GRPO samples each prompt G times and scores every completion. A completion's advantage is its "
             "reward minus its group's mean, divided by the group's standard deviation: above zero the model is "
             "pushed towards it, below zero away from it, and a group whose completions all scored alike teaches "
             "nothing. Each card shows a completion, its scores, its advantage and the arithmetic behind it.")
    blocks = []
    for step, roles in _picked_steps(steps).items():
        groups = by_step[step]
        shown = groups[:MAX_GROUPS_PER_STEP]
        note = (f"The first {len(shown)} of the step's {len(groups)} prompts." if len(groups) > len(shown) else "")
        blocks.append(_groups_block(f"{' and '.join(roles).capitalize()} step: step {step}", shown, len(groups), note))
    all_groups = [group for groups in by_step.values() for group in groups]
    best, worst = best_and_worst(all_groups)
    whole = sum(1 for g in all_groups if g.complete and g.mean is not None)
    if best is not None:
        rule = (f"Best and worst: the groups with the highest and the lowest mean total reward among the "
                f"run's {_plural(whole, 'whole group')} over {_plural(len(steps), 'step')} (the earliest one "
                f"when several tie).")
        blocks.append(f'<p class="wb-lead">{escape(rule)}</p>')
        if best is worst or best.mean == worst.mean:
            blocks.append('<p class="wb-muted">Every group had the same mean reward, so one group stands for both.</p>')
            blocks.append(_groups_block(f"Best and worst group: step {best.step}, mean {format_number(best.mean)}",
                                        [best], len(by_step[best.step])))
        else:
            for label, group in (("Best", best), ("Worst", worst)):
                blocks.append(_groups_block(f"{label} group: step {group.step}, mean {format_number(group.mean)}",
                                            [group], len(by_step[group.step])))
    return _section("groups", title, f'<p class="wb-lead">{escape(intro)}</p>{CARDS_STYLE}{"".join(blocks)}')


# ---------------------------------------------------------------- base vs trained

def _comparisons(comparisons: list) -> str:
    title = "Base model vs trained"
    if not comparisons:
        return _section("probes", title, '<p class="wb-lead">No probe prompts were answered for this run. The '
                                         "Compare tab's <b>Answer side by side</b> keeps the base model's and a "
                                         "checkpoint's answers in the run folder; a report written after that "
                                         "shows them here.</p>")
    blocks = []
    for comparison in comparisons:
        rows = "".join(f"<tr><td><b>{escape(transcript_text(prompt))}</b></td><td>{escape(base)}</td>"
                       f"<td>{escape(trained)}</td></tr>"
                       for prompt, base, trained in zip(comparison.prompts, comparison.base, comparison.trained))
        blocks.append(f"<h3>Base model vs {escape(comparison.label)}</h3>"
                      f'<table class="wb-table wb-probes"><tr><th>prompt</th><th>base model</th>'
                      f"<th>{escape(comparison.label)}</th></tr>{rows}</table>")
    lead = ("Greedy answers (the same every time) of the base model and of the trained adapter to the same "
            f"prompts, at most {comparisons[-1].max_new_tokens} tokens each.")
    if len({c.max_new_tokens for c in comparisons}) > 1:
        lead = "Greedy answers (the same every time) of the base model and of the trained adapter to the same prompts."
    return _section("probes", title, f'<p class="wb-lead">{escape(lead)}</p>{"".join(blocks)}')


# ---------------------------------------------------------------- the page

SECTIONS = (("summary", "Summary"), ("curves", "Curves"), ("health", "Health notes"), ("groups", "Completion groups"),
            ("probes", "Base vs trained"), ("settings", "Settings"), ("plan", "Batch plan"))


def build_report(run: RunContents, plotly_js: str | None = None, written_at: datetime | None = None) -> str:
    """The whole report as one HTML document (see the module docstring for what it holds).

    `plotly_js` is the plotly.js source to inline (plotly's own bundled copy by default).
    """
    if plotly_js is None:
        from plotly.offline import get_plotlyjs

        plotly_js = get_plotlyjs()
    # A line of a JSON-lines file may hold any JSON value; only records of the right shape count
    # (the run folder's readers already skipped the others, and `run.skipped` says how many).
    metrics = merge_metrics([], well_formed(run.metrics, metric_problem))
    completions = well_formed(run.completions, completion_problem)
    config = run.config
    plan, plan_problem = _plan_of(config)
    written = (written_at or datetime.now()).strftime("%Y-%m-%d %H:%M")
    toc = "".join(f'<a href="#{anchor}">{escape(label)}</a>' for anchor, label in SECTIONS)
    where = f" from {run.folder}" if run.folder else ""
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>Run report: {escape(run.name)}</title>{PAGE_STYLE}"
        f'<script type="text/javascript">{plotly_js}</script></head><body>'
        f"{_head(run, metrics)}<main>"
        f'<nav class="wb-toc">{toc}</nav>'
        f"{_summary(run, metrics, plan, plan_problem)}{_curves(metrics)}{_health(metrics, config, run.skipped)}"
        f"{_groups(completions, config)}{_comparisons(run.comparisons)}{_settings(config)}"
        f"{_batch_plan(plan, plan_problem)}"
        f"<footer>Written by GRPO Workbench on {escape(written)}{escape(where)}. One file: plotly.js inside it "
        "draws the figures, so it opens without a network.</footer>"
        "</main></body></html>\n"
    )
