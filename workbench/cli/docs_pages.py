"""The documentation's reference pages, made from the code each time the site is built, so none can drift.

`docs/hooks/generate.py` (an MkDocs hook) calls these and adds what they return to the site as pages; no
generated page is kept in git. Each function takes what it reads and returns Markdown, writing nothing:

- `settings_page()`: every `RunConfig` field (name, type, default, choices, help, one anchor each), the settings
  each built-in task presets and what each recipe sets;
- `cli_page(dashboard)`: the `--help` of `python -m workbench` and of every command under it, and the
  dashboard's options (app.py's parser, handed in);
- `metrics_page(figures_source, train_layout_source)`: every metric the Train tab's figures draw (read with `ast`
  from insight/figures.py and the tab's figure list), what computes it and how to read it (`METRIC_NOTES`);
- `results_page(results)`: the benchmarks' results files (benchmarks/results/*.jsonl), result by result, and
  `scripts_table(docstrings, results)`: each benchmark script with the first line of its docstring.

tests/test_docs.py fails when a setting, a command or a plotted metric is missing from these pages.
"""

from __future__ import annotations

import argparse
import ast
import dataclasses
import functools
import json
import re
from collections.abc import Mapping

from workbench.cli import _Parser, build_parser

HELP_WIDTH = 100  # columns of the --help texts on the CLI page, whatever the terminal that builds the site


def _text(value: str) -> str:
    """`value` as Markdown text: `*` and `<` escaped outside its code spans (help texts hold `**kwargs`, `<id>`)."""
    parts = re.split(r"(`[^`]*`)", value)
    return "".join(part if part.startswith("`") else part.replace("*", r"\*").replace("<", "&lt;") for part in parts)


def _value(value) -> str:
    """A default or choice as a command line's `--set` takes it."""
    if value is None:
        return "`None` (empty)"
    if isinstance(value, str):
        return f'`"{value}"`'
    return f"`{json.dumps(value)}`" if isinstance(value, (bool, list, dict)) else f"`{value!r}`"


# ------------------------------------------------------------------ settings


def settings_page() -> str:
    from workbench.spec import recipes, tasks
    from workbench.spec.config import RunConfig

    fields = dataclasses.fields(RunConfig)
    defaults = RunConfig().to_dict()
    lines = [
        "# Settings reference",
        "",
        "Every field of `RunConfig` (`workbench/spec/config.py`), the one description of a run that the "
        "Setup tab, the command line (`--set FIELD=VALUE`, typed as the field is: `gpu_ids=0,1`, `bf16=true`, "
        "`steps_per_generation=none`; or a `config.json`) and the notebooks share. GRPO "
        "fields carry TRL 1.16's `GRPOConfig` names; the defaults are the workbench's. A built-in task starts "
        "from these defaults and changes a few ([task presets](#task-presets)); a recipe sets the fields of "
        "a published variant ([recipes](#recipes)). This page is made from the dataclass each time the "
        "site is built.",
        "",
        "| setting | type | default | in short |",
        "| --- | --- | --- | --- |",
    ]
    lines += [
        f"| [`{f.name}`](#{f.name}) | `{f.type.replace(' | ', ' or ')}` | {_value(defaults[f.name])} | "
        f"{_cell(_first_sentence(f.metadata['help']))} |"
        for f in fields
    ]
    lines += ["", "## Every setting", ""]
    for f in fields:
        facts = [f"type `{f.type}`", f"default {_value(defaults[f.name])}"]
        if f.metadata.get("choices"):
            facts.append("choices " + ", ".join(_value(c) for c in f.metadata["choices"]))
        lines += [f"### `{f.name}` {{#{f.name}}}", "", " · ".join(facts), "", _text(f.metadata["help"]), ""]
    lines += [
        "## Task presets",
        "",
        "What `RunConfig.for_task(name)` (the CLI's `--task`, the Setup tab's task "
        "choice) changes from the defaults above; `gpu_settings` size a task for one GPU.",
        "",
        "| task | title | rewards (weight) | settings | on a GPU |",
        "| --- | --- | --- | --- | --- |",
    ]
    for task in tasks.TASKS.values():
        rewards = ", ".join(f"`{n}` ({w:g})" for n, w in zip(task.reward_names, task.reward_weights))
        lines.append(
            f"| `{task.name}` | {_text(task.title)} | {rewards} | {_pairs(task.settings)} | "
            f"{_pairs(task.gpu_settings)} |"
        )
    lines += [
        "",
        "## Recipes",
        "",
        "What `--recipe NAME` (the Setup tab's recipe choice) sets "
        "(`workbench/spec/recipes.py`). A recipe marked off-policy also sets `steps_per_generation` to "
        f"{recipes.OFF_POLICY_MINI_BATCHES} x `gradient_accumulation_steps` when the run is on-policy, so "
        "its clipping has a ratio to act on.",
        "",
        "| recipe | paper | what it does | settings | off-policy |",
        "| --- | --- | --- | --- | --- |",
    ]
    lines += [
        f"| `{r.name}` | {r.title} ({r.source}) | {_text(r.summary)} | {_pairs(r.settings)} | "
        f"{'yes' if r.needs_off_policy else 'no'} |"
        for r in recipes.RECIPES.values()
    ]
    return "\n".join(lines) + "\n"


def _first_sentence(text: str) -> str:
    """Up to the first full stop or semicolon that ends a clause outside brackets (not one of "e.g.")."""
    depth = 0
    for match in re.finditer(r"[([{]|[)\]}]|(?<!e\.g)(?<!i\.e)[.;](?=\s|$)", text):
        mark = match.group()
        depth += 1 if mark in "([{" else -1 if mark in ")]}" else 0
        if mark in ".;" and depth <= 0:
            return text[: match.start()]
    return text


def _pairs(settings: Mapping) -> str:
    return (
        ", ".join(
            f"`{name}={value if isinstance(value, str) else json.dumps(value)}`" for name, value in settings.items()
        )
        or "-"
    )


# ------------------------------------------------------------------ command line


class _Recording(_Parser):
    """A parser that keeps its subcommands where the reference can read them, and wraps help at HELP_WIDTH."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.formatter_class = functools.partial(self.formatter_class, width=HELP_WIDTH)
        self.commands: dict[str, argparse.ArgumentParser] = {}

    def add_subparsers(self, **kwargs):
        action = super().add_subparsers(**kwargs)
        self.commands = action.choices
        add_parser = action.add_parser

        def add_parser_keeping_its_help(name, **options):
            parser = add_parser(name, **options)
            parser.summary = options.get("help") or ""  # the one line `--help` lists it with
            return parser

        action.add_parser = add_parser_keeping_its_help
        return action


def commands() -> dict[str, argparse.ArgumentParser]:
    """Every command and subcommand ("users add") of `python -m workbench`, in `--help`'s order, with its parser."""
    found = {}

    def walk(prefix: str, parser: _Recording) -> None:
        for name, sub in parser.commands.items():
            found[f"{prefix}{name}"] = sub
            walk(f"{prefix}{name} ", sub)

    walk("", build_parser(_Recording))
    return found


def cli_page(dashboard: argparse.ArgumentParser | None = None) -> str:
    root = build_parser(_Recording)
    lines = [
        "# Command line reference",
        "",
        "`python -m workbench COMMAND --help` prints each of these; this page is made from the same parsers "
        "each time the site is built. Bad input exits 2 with one line naming the field, the rule and a fix; "
        'a "no" (an invalid plan, a failed run) exits 1.',
        "",
        "```text",
        root.format_help().rstrip(),
        "```",
        "",
    ]
    if dashboard is not None:
        dashboard.formatter_class = functools.partial(dashboard.formatter_class, width=HELP_WIDTH)
        lines += [
            "## The dashboard: `python app.py` {#dashboard}",
            "",
            "`make run` starts it with no options.",
            "",
            "```text",
            dashboard.format_help().rstrip(),
            "```",
            "",
        ]
    for name, parser in commands().items():
        level = "##" if " " not in name else "###"
        lines += [
            f"{level} `{name}` {{#{name.replace(' ', '-')}}}",
            "",
            _text(getattr(parser, "summary", "")),
            "",
            "```text",
            parser.format_help().rstrip(),
            "```",
            "",
        ]
    return "\n".join(lines)


# ------------------------------------------------------------------ metrics

# What the Train tab plots: (what computes it, how to read it). Keys are the metric names a figure reads
# (`<func>`: each reward function's name); tests/test_docs.py fails when a figure draws one missing here.
METRIC_NOTES = {
    "reward": (
        "TRL's `GRPOTrainer`: for each completion of the step, the weighted sum of the reward functions "
        "(`reward_weights`; a function's None counts as 0 beside the others' numbers, and a completion no function "
        "scored is left out), then the mean over every completion of the step, all processes together.",
        "The number GRPO pushes up: it should rise. Each step's mean depends on which prompts the step drew, so read "
        "the smoothed line, not single points. A rising reward alone does not prove better answers: compare the "
        "correctness reward's own line and the held-out accuracy; a shaping reward (format, length) can rise alone.",
    ),
    "reward_std": (
        "TRL: the standard deviation of that total reward over all the step's completions (the whole batch, not "
        "within groups). The Reward figure draws it as the band around the total; the Reward spread figure as a line.",
        "How different the completions' rewards are. Near 0 the rewards barely tell completions apart and the "
        "advantages carry little signal; GRPO learns from the spread inside each group, which "
        "`frac_reward_zero_std` counts.",
    ),
    "rewards/<func>/mean": (
        "TRL: the mean of one reward function's raw (unweighted) scores over the completions it scored (a None is "
        "left out), one line per function, named as in `reward_names`.",
        "Which reward moves. A format or length reward rising to full marks while the correctness reward stays flat "
        "means the model learned the easy reward (the health panel says so). A function with weight 0 is recorded "
        "without counting: the reward-hacking lesson shows its correctness this way.",
    ),
    "rewards/<func>/std": (
        "TRL: the standard deviation of that function's raw scores over the step's completions; drawn as the band "
        "around its line.",
        "A function whose band has shrunk to nothing gives every completion the same score: it no longer tells them "
        "apart.",
    ),
    "frac_reward_zero_std": (
        "TRL: the share of completions whose group's rewards all had the same value (std 0). With "
        "`scale_rewards=group` or `none` that is the share of groups with no spread; with `batch` it is 1 only when "
        "the whole batch scored the same.",
        "A group whose G completions all score the same has advantage 0 for every completion: the step learns "
        'nothing from it. Above 0.75 over the last steps the health panel raises "no learning signal". More '
        "completions per prompt (`num_generations`), a higher `temperature`, a reward that gives partial credit, or "
        "a model that gets some answers right make a spread likelier ([the signal check](own-data.md#signal-check) "
        "measures it before launch).",
    ),
    "kl": (
        "TRL, only when `beta` > 0: the mean over completion tokens of the k3 estimate of the KL divergence from the "
        "reference model (the base model: the adapter switched off), "
        "`exp(ref - logp) - (ref - logp) - 1` per token, in nats per token. With `beta = 0` TRL skips the reference "
        "pass and logs no `kl`.",
        "How far the policy has moved from the base model. It starts at 0 and grows as the model learns (a LoRA run "
        "learning a new form of answer reaches tenths). A sudden jump that stays (5x the median of the steps before, "
        "above 0.5, still there a step later) is the KL-spike alarm: lower `learning_rate`, or raise `beta`. The "
        "reward-hacking lesson's collapse reaches 1 to 18.",
    ),
    "loss": (
        "transformers' Trainer, from the loss TRL's `_compute_loss` returns: the policy term (minus each token's "
        "advantage times its clipped probability ratio, averaged as `loss_type` says) plus `beta` times the KL term, "
        "averaged over the optimizer step's micro-batches.",
        "Not a progress bar: the advantages of a group sum to zero, so on-policy (one iteration) with `beta = 0` the "
        "`grpo` loss is about 0 by construction and the health panel explains it instead of alarming. It moves with "
        "the KL term and the batch's lengths; watch the reward and KL instead.",
    ),
    "completions/mean_length": (
        "TRL: the mean length in tokens of the step's completions, all processes together.",
        "Length trends tell what the rewards teach: a brevity reward shortens answers (the demo: 25 to 12 tokens), a "
        "collapse to one or two tokens is the length alarm (reward hacking), growth up to the limit means cut "
        "answers.",
    ),
    "completions/min_length": (
        "TRL: the shortest completion of the step, in tokens; the lower edge of the band.",
        "A minimum at 1 or 2 tokens: some completions end at once.",
    ),
    "completions/max_length": (
        "TRL: the longest completion of the step, in tokens; the upper edge of the band.",
        "A maximum stuck at `max_completion_length`: some completions are cut (see the clipped ratio).",
    ),
    "completions/clipped_ratio": (
        "TRL: the share of the step's completions that ended without an end-of-sequence token, that is, were cut at "
        "`max_completion_length` (right-hand axis).",
        "Above 0.9 over the last steps the rewards judge unfinished answers almost every time (an alarm): raise "
        "`max_completion_length`, reward shorter answers, or leave cut completions out of the loss "
        "(`mask_truncated_completions`).",
    ),
    "clip_ratio/region_mean": (
        "TRL (loss types `grpo`, `bnpo`, `dr_grpo`, `dapo`, `luspo`): the share of completion tokens whose "
        "probability ratio (policy now / policy that sampled) was clipped, on either side.",
        "On-policy (`num_iterations` 1 and `steps_per_generation` = `gradient_accumulation_steps`, the defaults) the "
        "ratio is exactly 1 and this is 0: the figure says so. Off-policy (a recipe such as DAPO or GSPO, or "
        "`num_iterations` > 1) a few percent is usual; a large share means each update moves the policy far: lower "
        "`learning_rate`.",
    ),
    "clip_ratio/low_mean": (
        "TRL: the share of tokens with a negative advantage whose ratio fell below `1 - epsilon` (clipped low).",
        "The token view's clipped channel shows which tokens these are.",
    ),
    "clip_ratio/high_mean": (
        "TRL: the share of tokens with a positive advantage whose ratio rose above `1 + epsilon_high` (clipped high).",
        "DAPO's clip-higher (`epsilon_high` 0.28) lets more of these through than `epsilon` would.",
    ),
    "entropy": (
        "TRL: the mean entropy of the policy's next-token distribution over the completion tokens, in nats per "
        "token, from the same forward pass as the loss.",
        "How unsure the model is while it writes. It usually falls as the model learns a form of answer. Falling "
        "fast towards 0 means the G completions of a group become alike, the spread goes and "
        "`frac_reward_zero_std` rises; a higher `temperature` keeps more variety.",
    ),
    "grad_norm": (
        "transformers' Trainer: the norm of the gradient of the trained LoRA weights at the optimizer step, before "
        "clipping to `max_grad_norm` (TRL's default 1.0).",
        "Should stay in a steady range. Spikes often come with KL spikes; a norm far above 1 on every step is being "
        "clipped each time: a smaller `learning_rate` changes the update less bluntly.",
    ),
    "learning_rate": (
        "transformers' Trainer: the learning rate of the step, from `learning_rate`, `lr_scheduler_type` and "
        "`warmup_steps`.",
        "A check of the schedule: `linear` falls to 0 at `max_steps`, so the last steps change the model little.",
    ),
    "step_time": (
        "TRL: the wall-clock seconds of one optimizer step's training passes: generating the round, scoring it, and "
        "every micro-step's forward and backward (the optimizer's update and held-out evaluation are apart; an "
        "evaluation's time is `eval_seconds` in eval.jsonl).",
        "The speed of the run; the progress bar's time left comes from it. The first step is slower (start-up, "
        "caches). [Performance](performance.md) says what makes it faster.",
    ),
    "engine/logprob_mismatch_mean": (
        "The workbench, for runs that generate with vLLM and record tokens (`record_tokens`): from the step's "
        "tokens.jsonl records, the mean over the tokens in the loss of |trainer's − engine's log-probability| of the "
        "sampled token (the trainer's as TRL scored the round, `old_per_token_logps`; the engine's as vLLM returned "
        "it). TRL logs the same gap over the whole round as `sampling/sampling_logp_difference/mean`.",
        "Small (hundredths of a nat) and steady: the engine samples from the policy the trainer trains. Rising: the "
        "two copies drift apart (an adapter not loaded, other precision or kernels), and TRL's weights below move "
        "away from 1. The token view's engine channel shows which tokens differ.",
    ),
    "engine/logprob_mismatch_max": (
        "As the mean above: the largest gap of one token in the step's records.",
        "Single tokens can differ more than the mean says (rare tokens, ties at sampling); a weight moves with the "
        "sum of its completion's gaps.",
    ),
    "engine/is_weight_mean": (
        "The workbench, from the step's token records: the mean of the importance-sampling weights TRL 1.16 "
        "multiplied the loss by (`vllm_importance_sampling_mode`; its default `sequence_mask` gives one weight per "
        "completion, exp of the sum of its tokens' differences, set to 0 outside [clip_min, clip_max]); the band is "
        "`engine/is_weight_min` to `engine/is_weight_max`. Right-hand axis.",
        "Near 1: the correction changes little. Far from 1 or a wide band: the engine sampled completions the "
        "trainer finds much likelier or less likely, and TRL scales their share of the update.",
    ),
    "engine/is_weight_min": (
        "The smallest weight of the step's records (0 when a mask mode dropped a completion).",
        "0 marks a completion that added nothing to this step's update.",
    ),
    "engine/is_weight_max": (
        "The largest weight of the step's records.",
        "Above `vllm_importance_sampling_clip_max` (3 by default) never appears: the mask modes zero such a weight, "
        "the truncate modes cap it.",
    ),
    "engine/masked_completions": (
        "The workbench, under a mask mode: how many of the step's recorded completions had their weight (or, in "
        "`token_mask`, a token's weight) set to 0 for falling outside [clip_min, clip_max]; crosses at 0.",
        "None, as a rule. Several at a step: the engine and the trainer disagree enough that TRL drops those "
        "completions from the update.",
    ),
}

# The held-out figure reads eval.jsonl (the Runs tab overlays it under these names), not metrics.jsonl.
HELD_OUT_NOTES = {
    "held_out/accuracy": (
        "The workbench's evaluator (`workbench/trainer/evaluator.py`), with `eval_strategy=steps`: the share of the "
        "`eval_size` held-out prompts whose greedy answer gets full marks from the run's `correctness_reward`, at "
        "step 0 (before any update), every `eval_steps` steps and at the end; right-hand axis.",
        "Training reward and held-out accuracy rising together: the run learns the task. Training reward rising "
        "while held-out accuracy stays flat or falls: it learns its training prompts or a shaping reward; a fall of "
        "10 points or more below its best while the reward rose is an alarm. The table under the figure lists the "
        "prompts whose answer went wrong to right or right to wrong since step 0.",
    ),
    "held_out/pass_at_k": (
        "The evaluator, with `eval_pass_k=k`: k answers sampled per held-out prompt at the run's temperature, and "
        "the unbiased estimate `1 - C(n-c, k) / C(n, k)` averaged over the prompts.",
        "pass@k above accuracy: the right answer is often among the samples though not the greedy one, so GRPO has "
        "something to reinforce. pass@k near 0: the model almost never answers right, and nothing will be learned.",
    ),
    "held_out/mean_at_k": (
        "The evaluator, with `eval_pass_k=k` >= 2: the mean correctness of the k samples, averaged over the prompts; "
        "its band is ± a bootstrap standard deviation over sample subsets (`workbench/spec/eval_at_k.py`).",
        "mean@k rising: sampled answers, not only the greedy one, are right more often, which is what GRPO "
        "reinforces. A band as wide as the change between two points: the change is sampling noise.",
    ),
    "held_out/maj_at_k": (
        "The evaluator, with `eval_pass_k=k` >= 2: whether the answer most of the k samples give (compared as the "
        "correctness reward reads answers) is right, averaged over the prompts, with its bootstrap band; "
        "unavailable, and said so, for a reward file's correctness reward without an `answer_key`.",
        "maj@k above accuracy: voting over samples answers better than the greedy answer. maj@k near mean@k: the "
        "samples mostly agree.",
    ),
    "held_out/best_at_k": (
        "The evaluator, with `eval_pass_k=k` >= 2: the best total reward (every reward function, weighted) among "
        "the k samples, averaged over the prompts, with its bootstrap band; on the training reward's axis.",
        "best@k well above the training reward: good answers are within reach of sampling. On a 0/1 correctness "
        "reward alone it equals pass@k.",
    ),
}

# Helper calls of insight/figures.py and which of their positional arguments name a metric.
METRIC_ARGUMENTS = {
    "has_metric": (1,),
    "_series": (1,),
    "_aligned": (1, 2),
    "_mean_with_std_band": (2, 3),
    "metric_figure": (1,),
}
METRIC_NAME = re.compile(r"[a-z_]+(/([a-z_]+|<[a-z_]+>))*")


def _spelled(node: ast.AST) -> str | None:
    """A string constant or f-string as written, `{x}` shown as `<x>`."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        return "".join(
            part.value if isinstance(part, ast.Constant) else f"<{ast.unparse(part.value)}>" for part in node.values
        )
    return None


def _literal(tree: ast.Module, name: str):
    """The value of the module-level constant `name` (a dict of names gives {key: the name's text})."""
    for node in tree.body:
        target = node.targets[0] if isinstance(node, ast.Assign) else getattr(node, "target", None)
        if isinstance(target, ast.Name) and target.id == name:
            if isinstance(node.value, ast.Dict):
                return {ast.literal_eval(k): ast.unparse(v) for k, v in zip(node.value.keys, node.value.values)}
            return ast.literal_eval(node.value)
    raise LookupError(f"no constant {name}")


def figure_metrics(function: ast.FunctionDef) -> list[str]:
    """The metrics a figure function reads: names handed to the helpers that read a metric, and every string
    shaped like a metric with a `/` in it (`completions/mean_length`, `rewards/<func>/mean`), in source order."""
    inside_fstrings = {
        id(part) for node in ast.walk(function) if isinstance(node, ast.JoinedStr) for part in node.values
    }
    found = []
    nodes = sorted((n for n in ast.walk(function) if hasattr(n, "lineno")), key=lambda n: (n.lineno, n.col_offset))
    for node in nodes:
        if isinstance(node, ast.Call):
            called = node.func.id if isinstance(node.func, ast.Name) else getattr(node.func, "attr", "")
            found += [_spelled(node.args[i]) for i in METRIC_ARGUMENTS.get(called, ()) if i < len(node.args)]
        elif id(node) not in inside_fstrings and (text := _spelled(node)) and "/" in text:
            found.append(text)
    return list(dict.fromkeys(m for m in found if m and METRIC_NAME.fullmatch(m)))


def plotted_metrics(figures_source: str, train_layout_source: str) -> dict[str, tuple[str, bool, list[str]]]:
    """{figure: (its title, shown without opening More metrics, the metrics it draws)} for each figure of the
    Train tab (train_layout.py's MAIN_FIGURES and MORE_FIGURES, drawn by insight/figures.py's FIGURE_BUILDERS)."""
    figures, tab = ast.parse(figures_source), ast.parse(train_layout_source)
    functions = {node.name: node for node in figures.body if isinstance(node, ast.FunctionDef)}
    builders = _literal(figures, "FIGURE_BUILDERS")
    main = _literal(tab, "MAIN_FIGURES")
    shown = {}
    for name in (*main, *_literal(tab, "MORE_FIGURES")):
        function = functions[builders[name]]
        titles = [
            _spelled(n.value)
            for n in ast.walk(function)
            if isinstance(n, ast.Assign) and getattr(n.targets[0], "id", "") == "title"
        ]
        titles += [
            _spelled(n.args[2])
            for n in ast.walk(function)
            if isinstance(n, ast.Call) and getattr(n.func, "id", "") == "metric_figure" and len(n.args) > 2
        ]
        shown[name] = (next((t for t in titles if t), name), name in main, figure_metrics(function))
    return shown


def metrics_page(figures_source: str, train_layout_source: str) -> str:
    lines = [
        "# Metrics glossary",
        "",
        "Every metric the Train tab draws, figure by figure, as `metrics.jsonl` names it: what computes it "
        "(TRL's `GRPOTrainer`, transformers' `Trainer` or the workbench) and how to read it. The first figures "
        "are always shown; the others under **More metrics**. This page is made from the figure code "
        "(`workbench/insight/figures.py`) each time the site is built. [Getting started](getting-started.md#"
        "reading-a-run) reads a whole run.",
        "",
    ]
    described: set[str] = set()
    for figure, (title, main, metrics) in plotted_metrics(figures_source, train_layout_source).items():
        where = "shown by default" if main else "under More metrics"
        lines += [f"## {_text(title)} {{#figure-{figure}}}", "", f"Figure `{figure}`, {where}.", ""]
        lines += _metric_entries(metrics, METRIC_NOTES, described)
    lines += [
        "## Held-out accuracy beside the training reward {#figure-held_out}",
        "",
        "Drawn under **Held-out evaluation** for runs with `eval_strategy=steps`, from `eval.jsonl`; the Runs "
        "tab overlays the same figures under these names.",
        "",
    ]
    lines += _metric_entries(list(HELD_OUT_NOTES), HELD_OUT_NOTES, described)
    return "\n".join(lines)


def metric_anchor(metric: str) -> str:
    """The anchor of a metric's entry: `rewards/<func>/mean` -> `rewards-func-mean`."""
    return re.sub(r"[^a-z0-9_]+", "-", metric.lower()).strip("-")


def _metric_entries(metrics: list[str], notes: Mapping, described: set[str]) -> list[str]:
    lines = []
    for metric in metrics:
        if metric in described:
            lines += [f"`{metric}`: [described above](#{metric_anchor(metric)}).", ""]
            continue
        described.add(metric)
        computed, reading = notes.get(metric, ("(not described yet)", ""))
        lines += [
            f"### `{metric}` {{#{metric_anchor(metric)}}}",
            "",
            f"**Computed:** {computed}",
            "",
            f"**Reading it:** {reading}",
            "",
        ]
    return lines


# ------------------------------------------------------------------ benchmark results


def results_page(results: Mapping[str, list[dict]]) -> str:
    """Markdown of every benchmark's results (name -> records as benchmarks/results_file.py writes them), newest
    first; a summary table, then each result with its command, machine, note and figures."""
    lines = ["| benchmark | results | newest | on |", "| --- | --- | --- | --- |"]
    for name, records in sorted(results.items()):
        newest = max(records, key=lambda r: r.get("date", ""))
        lines.append(
            f"| [`{name}`](#{name}) | {len(records)} | {newest.get('date', '?')} | {_cell(_machine(newest))} |"
        )
    for name, records in sorted(results.items()):
        lines += ["", f"### `{name}` {{#{name}}}", ""]
        for record in sorted(records, key=lambda r: r.get("date", ""), reverse=True):
            lines += _result(record)
    return "\n".join(lines) + "\n"


def scripts_table(docstrings: Mapping[str, str], results: Mapping[str, list]) -> str:
    """A table of benchmarks/*.py (name -> docstring): what each measures, linked to its results when it has some."""
    lines = ["| script | what it measures |", "| --- | --- |"]
    for name, doc in sorted(docstrings.items()):
        first = " ".join(doc.split("\n\n")[0].split())
        linked = f"[results](performance.md#{name})" if name in results else ""
        lines.append(f"| `benchmarks/{name}.py` | {_cell(first)} {linked} |")
    return "\n".join(lines) + "\n"


def _machine(record: Mapping) -> str:
    cores = f", {record['cores']} cores" if record.get("cores") else ""
    return f"{record.get('cpu') or 'machine not recorded'}{cores}"


def _result(record: Mapping) -> list[str]:
    versions = ", ".join(f"{lib} {record[lib]}" for lib in ("torch", "transformers", "trl", "peft") if record.get(lib))
    load = record.get("load_average")
    lines = [
        f"#### {record.get('date', 'undated')} · {_text(_machine(record))}",
        "",
        f"- command: `{record.get('command', '?')}`",
    ]
    lines += [f"- versions: {versions}"] if versions else []
    lines += [f"- load average at the start: {', '.join(map(str, load))}"] if load else []
    lines += [f"- note: {_text(record['note'])}"] if record.get("note") else []
    return lines + [""] + _figures(record.get("figures", {}))


def _scalarish(value) -> bool:
    plain = (str, int, float, bool, type(None))
    return (
        isinstance(value, plain)
        or (isinstance(value, list) and all(isinstance(v, plain) for v in value))
        or (isinstance(value, dict) and all(isinstance(v, plain) for v in value.values()))
    )


def _shown(value) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    if isinstance(value, list):
        return ", ".join(_shown(v) if not isinstance(v, list) else f"({', '.join(map(_shown, v))})" for v in value)
    if isinstance(value, dict):
        return ", ".join(f"{k} {_shown(v)}" for k, v in value.items())
    return "-" if value is None else str(value)


def _cell(value) -> str:
    return _text(_shown(value)).replace("|", r"\|").replace("\n", " ")


def _table(rows: list[dict], key_name: str = "") -> list[str]:
    columns = list(dict.fromkeys(k for row in rows for k in row if k != key_name))
    head = [key_name] if key_name else []
    lines = ["| " + " | ".join(head + columns) + " |", "|" + " --- |" * (len(head) + len(columns))]
    for row in rows:
        cells = ([_cell(row[key_name])] if key_name else []) + [_cell(row.get(c)) for c in columns]
        lines.append("| " + " | ".join(cells) + " |")
    return lines + [""]


def _figures(figures: Mapping) -> list[str]:
    """A result's figures: plain values as a list, lists of records and records of records as tables."""
    lines, tables = [], []
    for key, value in figures.items():
        if (
            isinstance(value, list)
            and value
            and all(isinstance(v, str) for v in value)
            and any(len(v) > 40 for v in value)
        ):
            lines += [f"- {key}:"] + [f"    - {_text(v)}" for v in value]
        elif _scalarish(value):
            lines.append(f"- {key}: {_text(_shown(value))}")
        elif isinstance(value, list) and all(isinstance(v, dict) for v in value):
            tables += [f"{key}:", ""] + _table(value)
        elif isinstance(value, dict) and all(isinstance(v, dict) for v in value.values()):
            tables += [f"{key}:", ""] + _table([{key: k, **v} for k, v in value.items()], key)
        elif isinstance(value, dict) and all(isinstance(v, list) for v in value.values()):
            for inner, rows in value.items():
                tables += [f"{key}, {inner}:", ""] + _table([r if isinstance(r, dict) else {"value": r} for r in rows])
        else:
            lines.append(f"- {key}: `{json.dumps(value)}`")
    return lines + [""] + tables
