"""A run as one HTML file to hand on: settings, batch plan, curves, health, groups, base vs trained.

`build_report(run)` takes what a run folder holds, already read (`RunContents`),
and returns one HTML document that needs nothing else: plotly.js is inlined
once and draws every figure, the styles sit in the page, and no address
outside the file is named (no CDN, no web font), so it opens in any browser
without a network. Its sections, in order:

- the run at a glance: state, model, task, steps, duration, and a failed run's error;
- the settings in plain words, with each field's help (`spec.config.FIELD_HELP`);
- the batch plan as the Calculator tab counts it (`spec.config_checks.plan_for`, `Plan.numbers()`);
- reward, reward spread, KL, loss and completion-length curves (`figures`);
- held-out evaluation (`evaluation`): accuracy and pass@k on the training reward's step axis
  (`overlay_figures.held_out_figure`), the best evaluated checkpoint kept, and the prompts whose answer went
  wrong -> right or right -> wrong since step 0 with both answers (`eval_results.changed_answers`);
- the health notes (`health.check_health`, with the held-out evaluations), and a note for each run file with
  lines that could not be read (skipped by the reader, `spec.run_records`);
- completion groups with their advantages (`groups`, drawn as the dashboard's
  cards by `group_cards`): the first, middle and last step with completions,
  then the best and the worst group of the run, the whole groups with the
  highest and the lowest mean total reward over every step (the earliest one
  when several tie);
- the base model's and the trained adapter's answers on the probe prompts,
  when the Compare tab sampled them (`modeltools.probes.stored_comparisons` reads them).

The page's markup is the Jinja2 template `templates/report.html.j2`; this
module works out what goes in it. Autoescaping is on, so every text that comes
from the run (its name, settings, prompts, completions, reward names, errors)
is escaped: the file shows it and never runs it. The few values that are
already HTML or script are passed as `Markup` on purpose and named so in the
template (`plotly_js`, `*_html`, `*_json`); the figures' data is JSON inside a
script, where plotly writes `<` as `\\u003c`.

Pure: no run file is read here (only the template, once), and no gradio or torch is imported. `python -m
workbench report` and the Runs tab's Report button read the run folder and
write the file.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from html import escape
from typing import Any

import jinja2
from markupsafe import Markup

from workbench.insight import eval_results, figures, overlay_figures
from workbench.insight.group_cards import STYLE as CARDS_STYLE
from workbench.insight.group_cards import render_group
from workbench.insight.groups import SCALINGS, GroupView, available_steps, format_number, format_signed, groups_for_step
from workbench.insight.health import RECENT_WINDOW, check_health
from workbench.insight.resumed import merge_metrics
from workbench.insight.token_cards import STYLE as TOKEN_STYLE
from workbench.insight.token_cards import Scale, summary_html, token_view_html
from workbench.insight.tokens import step_summary
from workbench.spec.chat import transcript_text
from workbench.spec.config import FIELD_HELP, RunConfig
from workbench.spec.config_checks import plan_for
from workbench.spec.heldout import eval_problem
from workbench.spec.numbers import finite_number, format_duration
from workbench.spec.run_records import Skipped, completion_problem, metric_problem, well_formed
from workbench.spec.run_status import RunStatus, running_seconds
from workbench.spec.tasks import TASKS
from workbench.spec.token_records import token_problem

# The curves of the report, as named in figures.FIGURE_BUILDERS, in reading order.
CURVES = ("reward", "reward_std", "kl", "loss", "completion_length")
# The settings the report lists first (the rest sit in a folded table), in reading order.
KEY_SETTINGS = (
    "model",
    "task",
    "dataset_path",
    "reward_names",
    "reward_weights",
    "learning_rate",
    "beta",
    "loss_type",
    "scale_rewards",
    "num_generations",
    "per_device_train_batch_size",
    "gradient_accumulation_steps",
    "num_processes",
    "max_completion_length",
    "temperature",
    "num_iterations",
    "max_steps",
    "lora_r",
    "lora_alpha",
    "generation",
    "seed",
)
# A step with more prompts than this shows its first ones only: a report is read, not searched.
MAX_GROUPS_PER_STEP = 3
# Plotly's own settings for every figure: no link to plotly's site, resize with the page.
PLOT_CONFIG = {"displaylogo": False, "responsive": True}
# The page, in workbench/insight/templates/ (shipped as package data).
TEMPLATE = "report.html.j2"


@dataclass
class RunContents:
    """What a report is made of: a run folder's files, already read (`runfolder.read_run`)."""

    name: str  # the run's id: its folder's name
    config: dict  # config.json
    status: RunStatus  # status.json (a dict of it is read as one)
    metrics: list[dict]  # metrics.jsonl, as written
    completions: list[dict]  # completions.jsonl, as written
    comparisons: list = field(default_factory=list)  # probes.Comparison: label, max_new_tokens, prompts, base, trained
    evals: list = field(default_factory=list)  # eval.jsonl, as written (empty: the run evaluated no held-out prompts)
    checkpoint_steps: list = field(default_factory=list)  # the steps of the checkpoints on disk
    folder: str = ""  # where the run folder lies, named in the footer
    skipped: dict = field(default_factory=dict)  # lines of each file the reader could not read: {name: Skipped}
    last_tokens: list = field(default_factory=list)  # tokens.jsonl's records of the last recorded step
    left_out: dict = field(default_factory=dict)  # {file name: note} where only the newest records were read

    def __post_init__(self):
        self.status = RunStatus.of(self.status)


# ---------------------------------------------------------------- small helpers


def _text(value: Any) -> str:
    """A setting or a fact as text: lists joined, empty values said."""
    if value is None or value == "" or value == []:
        return "(none)"
    if isinstance(value, (list, tuple)):
        return ", ".join(str(item) for item in value)
    return str(value)


def _when(timestamp: float | None) -> str:
    try:
        return datetime.fromtimestamp(timestamp).strftime("%Y-%m-%d %H:%M") if timestamp else "—"
    except (OverflowError, OSError, ValueError):  # a status.json from no clock this machine knows
        return "—"


def _plural(count: float, noun: str) -> str:
    return f"{count:g} {noun}{'' if count == 1 else 's'}"


def _json(value: Any) -> Markup:
    """JSON to sit inside a script: `<` written `\\u003c`, so no value closes the script."""
    return Markup(json.dumps(value).replace("<", "\\u003c"))


# ---------------------------------------------------------------- the run at a glance


def _steps_text(status: RunStatus, metrics: list[dict]) -> str:
    step, total = status.step, status.total_steps
    if step is None and metrics:
        step = finite_number(metrics[-1].get("step"))
    if step is None:
        return "no step yet"
    return f"{int(step)} of {int(total)}" if total else str(int(step))


def _facts(run: RunContents, metrics: list[dict]) -> list[tuple[str, str]]:
    """The header's facts: state, model, task, steps, start and duration."""
    config, status = run.config, run.status
    started, ended = status.started_at, status.updated_at
    task = config.get("task") or ""
    data = config.get("dataset_name") or config.get("dataset_path")
    if data:
        task = f"{data} (data)"
    return [
        ("state", status.state or "unknown"),
        ("model", str(config.get("model") or "unknown")),
        ("task", str(task or "unknown")),
        ("steps", _steps_text(status, metrics)),
        ("started", _when(started)),
        ("duration", format_duration(running_seconds(status, ended, live=False)) if started and ended else "—"),
    ]


def _outcome_words(run: RunContents, metrics: list[dict]) -> str:
    """What the run did to the reward, and whether it is still going."""
    parts = []
    rewards = [
        (r.get("step"), finite_number(r.get("reward"))) for r in metrics if finite_number(r.get("reward")) is not None
    ]
    if len(rewards) >= 2:
        (first_step, first), (last_step, last) = rewards[0], rewards[-1]
        parts.append(
            f"The mean reward went from {format_number(first)} at step {first_step} to "
            f"{format_number(last)} at step {last_step} ({format_signed(last - first)})."
        )
    elif rewards:
        parts.append(f"One step logged a reward: {format_number(rewards[0][1])} at step {rewards[0][0]}.")
    else:
        parts.append("No reward was logged.")
    state = run.status.state
    if state == "queued":
        parts.append("The report was written while the run waited in the GPU queue: it has not started.")
    elif state in ("starting", "loading_model", "training", "saving"):
        parts.append(f"The report was written while the run was {state.replace('_', ' ')}: it shows the run so far.")
    return " ".join(parts)


def _summary(run: RunContents, metrics: list[dict], plan, plan_problem: str) -> dict:
    """The run in plain words: its outcome, its design, its batch plan, and a failed run's error (or None)."""
    error = run.status.error
    failed = run.status.state == "failed" and error is not None
    return {
        "outcome": _outcome_words(run, metrics),
        "design": _settings_words(run.config) if run.config else "",
        "plan": _plan_words(plan, plan_problem),
        "error": "\n".join(str(error.get(key)) for key in ("hint", "type", "message") if error.get(key))
        if failed
        else None,
    }


# ---------------------------------------------------------------- settings and batch plan


def _reward_words(config: Mapping) -> str:
    """The reward functions and their weights, the task's own when the config names none."""
    names = config.get("reward_names") or []
    weights = config.get("reward_weights") or []
    task = TASKS.get(config.get("task")) if isinstance(config.get("task"), str) else None
    if not names and task is not None and not (config.get("dataset_name") or config.get("dataset_path")):
        names, weights = task.reward_names, weights or task.reward_weights
    if not names:
        return "the task's own reward functions"
    if len(weights) == len(names):
        return ", ".join(
            f"{name} (weight {weight:g})" if isinstance(weight, (int, float)) else str(name)
            for name, weight in zip(names, weights)
        )
    return ", ".join(str(name) for name in names)


def _settings_words(config: Mapping) -> str:
    """The run's design as a paragraph a reader follows without knowing TRL's field names."""
    data = config.get("dataset_name") or config.get("dataset_path")
    source = f"the data {data}" if data else f"the task {config.get('task') or 'unknown'}"
    beta = finite_number(config.get("beta"))
    kl = (
        "no KL penalty (beta = 0)"
        if beta == 0
        else f"a KL penalty of beta = {config.get('beta')} towards the base model"
    )
    return (
        f"The model {config.get('model') or '(unnamed)'} was trained with a LoRA adapter (rank {config.get('lora_r')}, "
        f"alpha {config.get('lora_alpha')}) on {source}. For each prompt it wrote "
        f"{config.get('num_generations')} completions of at most {config.get('max_completion_length')} tokens "
        f"(temperature {config.get('temperature')}), scored by {_reward_words(config)}. Each completion was "
        f"pushed up or down by its advantage, its reward against the others of its group, with the "
        f"{config.get('loss_type')} loss, learning rate {config.get('learning_rate')} and {kl}."
    )


def _settings(config: Mapping) -> dict | None:
    """The key settings' rows and the other settings' rows: (name, value, help); None without a config."""
    if not config:
        return None

    def rows(names: Iterable[str]) -> list[tuple[str, str, str]]:
        return [(name, _text(config.get(name)), FIELD_HELP.get(name, "")) for name in names]

    return {
        "key": rows(name for name in KEY_SETTINGS if name in config),
        "rest": rows(name for name in config if name not in KEY_SETTINGS),
    }


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
    return (
        f"Each generation round sampled {_plural(plan.prompts_per_generation, 'prompt')} x G = "
        f"{plan.inputs['num_generations']} completions, and each optimizer step trained on "
        f"{_plural(plan.completions_per_step, 'completion')} ({_plural(plan.prompts_per_step, 'prompt group')})."
    )


# ---------------------------------------------------------------- curves and health


def _figures(metrics: list[dict]) -> list[dict]:
    """Each curve's div id and its figure as JSON (plotly writes `<` in its JSON as `\\u003c`)."""
    built = figures.build_figures(metrics, names=CURVES)
    return [{"div_id": f"wb-figure-{name}", "json": Markup(fig.to_json())} for name, fig in built.items()]


def _health(
    metrics: list[dict], config: Mapping, skipped: Mapping[str, Skipped], evals: list[dict], left_out: Mapping
) -> dict:
    """The health section: alarms, and notes of lines skipped and of records left out (`kept_records`' limits)."""
    return {
        "unreadable": [lines.note(name) for name, lines in sorted(skipped.items()) if lines.count]
        + [note for _, note in sorted(left_out.items())],
        "has_metrics": bool(metrics),
        "alarms": check_health(metrics, config, evals) if metrics else [],
        "recent_window": RECENT_WINDOW,
    }


def _held_out(evals: list[dict], metrics: list[dict], checkpoint_steps: list[int]) -> dict | None:
    """The held-out section: the curve, what it says in words, the best checkpoint, the changed answers."""
    if not evals:
        return None
    first, last = evals[0], evals[-1]
    words = [f"{last.get('n')} held-out prompts, answered greedily at {_plural(len(evals), 'evaluation')}."]
    if first is not last:
        words.append(
            f"Accuracy went from {_share(first.get('accuracy'))} at step {first['step']} to "
            f"{_share(last.get('accuracy'))} at step {last['step']}."
        )
    else:
        words.append(f"Accuracy {_share(last.get('accuracy'))} at step {last['step']}.")
    if eval_results.at_k_text(last):
        words.append(
            f"From {last.get('k')} samples per prompt at step {last['step']}: {eval_results.at_k_text(last)} "
            "(± a bootstrap standard deviation over sample subsets)."
        )
    if last.get("maj_at_k_note"):
        words.append(f"{last['maj_at_k_note']}.")
    best = eval_results.best_checkpoint(evals, checkpoint_steps)
    if best is not None:
        metric = best.get("best_checkpoint_metric") or "accuracy"
        value = best.get(metric)
        chosen = _share(value) if metric != "best_at_k" or value is None else f"{value:.3f}"  # a reward, no share
        words.append(
            f"The best evaluated checkpoint by {metric} is checkpoint-{best['step']} ({chosen}), "
            f"kept whatever save_total_limit prunes: export it or compare it."
        )
    return {
        "groups": eval_results.group_texts(last),
        "words": " ".join(words),
        "div_id": "wb-figure-held-out",
        "json": Markup(overlay_figures.held_out_figure(evals, metrics).to_json()),
        "changed": eval_results.changed_answers(evals),
        "first_step": first["step"],
        "last_step": last["step"],
    }


def _share(value: Any) -> str:
    return "—" if finite_number(value) is None else f"{value:.0%}"


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
    picks = (
        [("first", steps[0])]
        + ([("middle", steps[len(steps) // 2])] if len(steps) >= 3 else [])
        + [("last", steps[-1])]
    )
    roles: dict[int, list[str]] = {}
    for role, step in picks:
        roles.setdefault(step, []).append(role)
    return roles


def _groups_block(title: str, groups: list[GroupView], count: int, note: str = "") -> dict:
    """One titled block of group cards (`cards_html` is group_cards' own HTML, which escapes the run's text)."""
    cards_html = Markup("".join(render_group(group, group.group + 1, count) for group in groups))
    return {"title": title, "note": note, "cards_html": cards_html}


def _groups(completions: list[dict], config: Mapping) -> dict | None:
    """The first, middle and last step's blocks, then the best and the worst group; None without completions."""
    stretches = rounds_by_step(completions)
    steps = available_steps(completions)
    if not steps:
        return None
    # a config.json that names no scaling TRL knows, or no whole G, leaves both to be read from the records
    scaling = config.get("scale_rewards") if config.get("scale_rewards") in SCALINGS else None
    count = config.get("num_generations")
    count = count if isinstance(count, int) and not isinstance(count, bool) and count > 0 else None
    by_step = {step: groups_for_step(stretches[step], step, scaling, count) for step in steps}
    blocks = []
    for step, roles in _picked_steps(steps).items():
        groups = by_step[step]
        shown = groups[:MAX_GROUPS_PER_STEP]
        note = f"The first {len(shown)} of the step's {len(groups)} prompts." if len(groups) > len(shown) else ""
        blocks.append(_groups_block(f"{' and '.join(roles).capitalize()} step: step {step}", shown, len(groups), note))
    all_groups = [group for groups in by_step.values() for group in groups]
    best, worst = best_and_worst(all_groups)
    if best is None:
        return {"steps": blocks, "best_and_worst": None}
    whole = sum(1 for g in all_groups if g.complete and g.mean is not None)
    rule = (
        f"Best and worst: the groups with the highest and the lowest mean total reward among the "
        f"run's {_plural(whole, 'whole group')} over {_plural(len(steps), 'step')} (the earliest one "
        f"when several tie)."
    )
    tie = best is worst or best.mean == worst.mean
    if tie:
        extremes = [
            _groups_block(
                f"Best and worst group: step {best.step}, mean {format_number(best.mean)}",
                [best],
                len(by_step[best.step]),
            )
        ]
    else:
        extremes = [
            _groups_block(
                f"{label} group: step {group.step}, mean {format_number(group.mean)}", [group], len(by_step[group.step])
            )
            for label, group in (("Best", best), ("Worst", worst))
        ]
    return {"steps": blocks, "best_and_worst": {"rule": rule, "tie": tie, "blocks": extremes}}


def _tokens(records: list[Mapping]) -> dict | None:
    """The last recorded step's highest- and lowest-advantage completions token by token; None without tokens."""
    records = well_formed(records, token_problem)
    if not records:
        return None
    picked = [max(records, key=lambda r: r["advantage"]), min(records, key=lambda r: r["advantage"])]
    scale = Scale.of(records)
    channel = "kl" if picked[0].get("kl") else "logprob"
    views = [
        {
            "title": f"{label}: completion #{r['index'] + 1} of step {r['round']}, advantage {format_signed(r['advantage'])}",
            "html": Markup(token_view_html(r, scale, channel, page="report", opened=True)),
        }
        for label, r in zip(("Highest advantage", "Lowest advantage"), picked[: 1 if picked[0] is picked[1] else 2])
    ]
    return {
        "step": records[0]["step"],
        "style_html": Markup(TOKEN_STYLE),
        "summary_html": Markup(summary_html(step_summary(records), records[0]["step"])),
        "views": views,
    }


# ---------------------------------------------------------------- base vs trained


def _comparisons(comparisons: list) -> list[dict]:
    """Each checkpoint's answers beside the base model's: its label and (prompt, base, trained) rows."""
    return [
        {
            "label": comparison.label,
            "rows": [
                (transcript_text(prompt), base, trained)
                for prompt, base, trained in zip(comparison.prompts, comparison.base, comparison.trained)
            ],
        }
        for comparison in comparisons
    ]


def _probe_tokens(comparisons: list) -> int | None:
    """The answers' token limit, when every comparison used the same one."""
    limits = {c.max_new_tokens for c in comparisons}
    return comparisons[-1].max_new_tokens if len(limits) == 1 else None


# ---------------------------------------------------------------- the page

SECTIONS = (
    ("summary", "Summary"),
    ("curves", "Curves"),
    ("held-out", "Held-out evaluation"),
    ("health", "Health notes"),
    ("groups", "Completion groups"),
    ("probes", "Base vs trained"),
    ("settings", "Settings"),
    ("plan", "Batch plan"),
)


def _escaped(value: Any) -> Any:
    """Every value the template prints, escaped as `html.escape` does (`&quot;`, `&#x27;`).

    Autoescaping would escape it too, with other entities for the quotes; this keeps
    the page's text byte for byte what it was before the template. `Markup` is left as it is.
    """
    return value if isinstance(value, Markup) else Markup(escape(str(value)))


@functools.lru_cache(maxsize=1)
def _template() -> jinja2.Template:
    environment = jinja2.Environment(
        loader=jinja2.PackageLoader("workbench.insight", "templates"),
        autoescape=True,
        finalize=_escaped,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
        undefined=jinja2.StrictUndefined,
    )
    return environment.get_template(TEMPLATE)


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
    evals = merge_metrics([], well_formed(run.evals, eval_problem))  # a resumed step counts once, the newest
    config = run.config
    plan, plan_problem = _plan_of(config)
    return _template().render(
        name=run.name,
        plotly_js=Markup(plotly_js),  # plotly's own bundle, inlined as it is
        facts=_facts(run, metrics),
        sections=SECTIONS,
        summary=_summary(run, metrics, plan, plan_problem),
        figures=_figures(metrics),
        plot_config_json=_json(PLOT_CONFIG),
        held_out=_held_out(evals, metrics, run.checkpoint_steps),
        health=_health(metrics, config, run.skipped, evals, run.left_out),
        cards_style_html=Markup(CARDS_STYLE),  # group_cards' own style sheet
        groups=_groups(completions, config),
        tokens=_tokens(run.last_tokens),
        comparisons=_comparisons(run.comparisons),
        probe_tokens=_probe_tokens(run.comparisons) if run.comparisons else None,
        settings=_settings(config),
        plan=plan,
        written=(written_at or datetime.now()).strftime("%Y-%m-%d %H:%M"),
        folder=run.folder,
    )
