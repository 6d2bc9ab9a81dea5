"""A run's setup as one plain Python script that trains it with TRL, PEFT and `datasets` alone.

`build_script(inputs)` is pure: it writes the script's text from a
`ScriptInputs` (the RunConfig, where the model lies, the rows of a built-in
task, the source of the user's reward file); `script_inputs(cfg)` gathers those
(it reads the task's data and the reward file). The CLI
(`python -m workbench export-script RUN_OR_CONFIG --out FILE`) and the Setup
tab's download use both.

The script holds:
- the model by path or hub id, loaded by GRPOTrainer in the run's dtype;
- the data: a built-in task's rows as a literal list (the rows the run trains
  on: same task, size and seed), or the run's dataset (hub id, hub-layout
  folder, save_to_disk folder, file) loaded with `datasets`, its split's slice,
  then its columns mapped and text prompts rendered as the run does (the
  workbench's own `render_prompt` and solution transform, copied);
- the reward functions' source: the workbench's built-in rewards copied from
  their module with every helper they use (read with `inspect` / `ast`, so the
  script cannot drift from the code the run calls), then the user's reward
  file as it is;
- LoraConfig and GRPOConfig with every setting the run used
  (`spec.trl_settings.grpo_settings`, the list the training process uses).

It leaves out what belongs to the workbench, not to training: the run folder's
records, the reward time limit and failure checks, the trackers and the
workbench's own vLLM-server generation (refused: TRL has no such mode).
"""

from __future__ import annotations

import ast
import inspect
import sys
from dataclasses import dataclass, field
from pathlib import Path

from workbench.errors import WorkbenchError
from workbench.spec import data_mapping
from workbench.spec.config import RunConfig, data_field, reward_names_for
from workbench.spec.trl_settings import grpo_settings, trl_reward_weights, trl_vllm_settings

# Top-level modules the script may import besides Python's own.
ALLOWED_IMPORTS = ("trl", "peft", "datasets")
# How `datasets` reads each kind of user file.
LOADERS = {".jsonl": "json", ".json": "json", ".csv": "csv", ".parquet": "parquet"}


class ScriptExportError(WorkbenchError):
    """A run that cannot become a plain script; the message names the field, the rule and a fix."""


@dataclass
class ScriptInputs:
    """Everything the script is written from (gathered by `script_inputs`)."""

    config: RunConfig
    model_path: str  # a folder or a hub id, as from_pretrained takes it
    rows: list[dict] | None = None  # a built-in task's rows; None when the run reads dataset_name
    reward_source: str | None = None  # the user's reward file, as written
    builtin_rewards: dict = field(default_factory=dict)  # name -> built-in reward function the run uses
    title: str = ""  # the run id or config file it came from
    apply_chat_template: bool = True  # how the run renders a text prompt (its chat_template, for its model)


def script_inputs(cfg: RunConfig, title: str = "", reward_source: str | None = None) -> ScriptInputs:
    """Gather what the script needs: the model's location, the task's rows, the reward file's source.

    `reward_source`: the reward file's text when the caller has it (a run's own copy); else it is read from
    cfg.reward_file.
    """
    from workbench.sources.model_files import model_location
    from workbench.spec import rewards, tasks

    if cfg.generation == "vllm-server":
        raise ScriptExportError(
            "generation: the workbench's vllm-server generation has no TRL equivalent; "
            "export with generation=transformers (or trl-server / trl-colocate)"
        )
    rows = None
    if not data_field(cfg)[1]:
        task = tasks.get_task(cfg.task)
        rows = task.build_rows(task.default_size, cfg.seed)  # what load_task_dataset(task, seed=seed) trains on
    if cfg.reward_file and reward_source is None:
        try:
            reward_source = Path(cfg.reward_file).read_text(encoding="utf-8")
        except OSError as exc:
            raise ScriptExportError(
                f"reward_file: cannot read {cfg.reward_file} ({exc.strerror}); "
                "export the run (it keeps a copy) or give the file's path"
            ) from None
    user_names = set(_defined_functions(reward_source)) if reward_source else set()
    builtin = {
        name: rewards.REWARDS[name]
        for name in reward_names_for(cfg)
        if name not in user_names and name in rewards.REWARDS
    }
    apply = data_mapping.resolve_chat_template(
        cfg.chat_template, data_mapping.has_chat_template(model_location(cfg.model))
    )[0]
    return ScriptInputs(cfg, model_location(cfg.model), rows, reward_source, builtin, title, apply)


def build_script(inputs: ScriptInputs) -> str:
    """The script's text (pure)."""
    cfg = inputs.config
    reward_code, imports = _builtin_reward_code(inputs.builtin_rewards)
    parts = [
        _header(inputs),
        "\n".join(
            [
                "from __future__ import annotations",
                "",
                *sorted(imports | {"import json", "import sys"} | _trl_reward_imports(cfg)),
                "",
                "from datasets import Dataset, DatasetDict, load_dataset, load_from_disk",
                "from peft import LoraConfig",
                "from trl import GRPOConfig, GRPOTrainer",
            ]
        ),
        f"MODEL = {inputs.model_path!r}",
        _data_code(inputs),
        _mapping_code(inputs),
    ]
    if reward_code:
        parts.append(
            "# ---- built-in reward functions of GRPO Workbench (workbench/spec/rewards/reward_library.py), "
            "as the run calls them\n\n" + reward_code
        )
    if inputs.reward_source:
        parts.append("# ---- the run's reward file, as written\n\n" + inputs.reward_source.strip())
    parts.append(_training_code(cfg, inputs))
    return "\n\n\n".join(part.rstrip() for part in parts) + "\n"


# ---------------------------------------------------------------- the parts


def _header(inputs: ScriptInputs) -> str:
    cfg = inputs.config
    launch = (
        f"accelerate launch --num_processes {cfg.num_processes} THIS_FILE.py"
        if cfg.num_processes > 1
        else "python THIS_FILE.py"
    )
    source = f" of {inputs.title}" if inputs.title else ""
    recipe = f"Recipe: {cfg.recipe} (its settings are in GRPOConfig below).\n" if cfg.recipe else ""
    return (
        f'"""GRPO training{source}, exported from GRPO Workbench: TRL, PEFT and datasets only.\n\n'
        f"{recipe}Run it with `{launch}` (pass --max_steps N to change the step count);\n"
        "the adapter lands in OUTPUT_DIR/adapter. The workbench's run folder records, reward time limits and\n"
        'trackers are left out: this is the training itself.\n"""'
    )


def _data_code(inputs: ScriptInputs) -> str:
    cfg = inputs.config
    if inputs.rows is not None:
        return (
            f"# the {cfg.task} task's rows as the run trains on them (seed {cfg.seed})\n"
            "ROWS = [\n" + "".join(f"    {row!r},\n" for row in inputs.rows) + "]\n"
            "dataset = Dataset.from_list(ROWS)"
        )
    from workbench.sources import hub_datasets

    name = data_field(cfg)[1]
    split = hub_datasets.parse_split(cfg.dataset_train_split)
    path = Path(name)
    if not path.exists():  # a hub id, or a folder laid out as the hub lays one out: datasets reads the slice
        return f"dataset = load_dataset({name!r}, {cfg.dataset_config or None!r}, split={split.text!r})"
    if path.is_dir() and not any((path / marker).is_file() for marker in hub_datasets.SAVED_MARKERS):
        return f"dataset = load_dataset({str(path)!r}, {cfg.dataset_config or None!r}, split={split.text!r})"
    if path.suffix.lower() in LOADERS:
        code = (
            f"DATA_FILE = {str(path)!r}\n"
            f"dataset = load_dataset({LOADERS[path.suffix.lower()]!r}, data_files=DATA_FILE, "
            f"split={'train' + split.text[len(split.name) :]!r})"
        )
        if path.suffix.lower() == ".csv":  # a CSV cell holds chat messages as JSON text; the run decodes them
            code += (
                "\ndataset = dataset.map(lambda row: {'prompt': json.loads(row['prompt'])} "
                "if str(row['prompt']).lstrip().startswith('[') else {})"
            )
        return code
    rows = ""
    if split.text != split.name:
        if any(bound and (bound.endswith("%") or bound.startswith("-")) for bound in (split.start, split.stop)):
            raise ScriptExportError(
                f"dataset_train_split: the script reads a save_to_disk folder's slice by row "
                f"numbers; {split.text!r} is not one: write it as {split.name}[START:STOP]"
            )
        rows = (
            f"\ndataset = dataset.select(range({split.start or 0}, min(len(dataset), {split.stop or 'len(dataset)'})))"
        )
    return (
        f"DATA_FOLDER = {str(path)!r}  # written by datasets' save_to_disk\n"
        "dataset = load_from_disk(DATA_FOLDER)\n"
        "if isinstance(dataset, DatasetDict):\n"
        f"    dataset = dataset[{split.name!r}] if {split.name!r} in dataset else next(iter(dataset.values()))" + rows
    )


def _mapping_code(inputs: ScriptInputs) -> str:
    """The run's column mapping: `prompt` rendered from the prompt column, `solution` from the solution column,
    with the workbench's own functions (copied, so the script renders as the run does)."""
    cfg = inputs.config
    transform = data_mapping.SOLUTION_TRANSFORMS[cfg.solution_transform][0]
    solution = ""
    if cfg.solution_column.strip():
        call = (
            f"{transform.__name__}(row[SOLUTION_COLUMN])"
            if cfg.solution_transform != "none"
            else "row[SOLUTION_COLUMN]"
        )
        solution = f"\n    mapped['solution'] = {call}"
    helpers = [inspect.getsource(data_mapping.render_prompt)]
    if cfg.solution_column.strip() and cfg.solution_transform != "none":
        helpers.append(inspect.getsource(transform))
    return (
        "# ---- the column mapping and prompt rendering of the run (workbench/spec/data_mapping.py)\n\n"
        f"PROMPT_COLUMN = {cfg.prompt_column.strip() or 'prompt'!r}\n"
        f"SOLUTION_COLUMN = {cfg.solution_column.strip()!r}\n"
        f"SYSTEM_PROMPT = {cfg.system_prompt!r}\n"
        f"APPLY_CHAT_TEMPLATE = {inputs.apply_chat_template!r}  # chat_template={cfg.chat_template} for this "
        "model\n\n\n" + "\n\n".join(h.rstrip() for h in helpers) + "\n\n\n"
        "def to_trl(row):\n"
        "    mapped = {'prompt': render_prompt(row[PROMPT_COLUMN], SYSTEM_PROMPT, APPLY_CHAT_TEMPLATE)}"
        f"{solution}\n    return mapped\n\n\n"
        "dataset = dataset.map(to_trl)"
    )


def _training_code(cfg: RunConfig, inputs: ScriptInputs) -> str:
    settings = grpo_settings(cfg)
    settings.update(trl_vllm_settings(cfg, cfg.vllm_server_base_url or None))
    if cfg.device == "cpu":
        settings["use_cpu"] = True
    settings["report_to"] = "none"
    settings["model_init_kwargs"] = {"dtype": "bfloat16" if cfg.bf16 else "float32"}
    targets = cfg.lora_target_modules.strip()
    targets = targets if targets == "all-linear" else [t.strip() for t in targets.split(",") if t.strip()]
    names = reward_names_for(cfg)
    calls = [_reward_call(name, inputs) for name in names]
    if cfg.reward_model.strip():  # TRL loads a str as AutoModelForSequenceClassification(num_labels=1)
        from workbench.sources.model_files import model_location

        calls.append(repr(model_location(cfg.reward_model.strip())))
    lines = [
        f"REWARD_FUNCS = [{', '.join(calls)}]",
        f"# weights {trl_reward_weights(cfg)} go to GRPOConfig.reward_weights, in the same order",
        *(
            ["# reward_errors=record is the workbench's own: here a reward that raises ends the run"]
            if cfg.reward_errors == "record"
            else []
        ),
        "",
        "OUTPUT_DIR = 'grpo-output'",
        "args = GRPOConfig(",
        "    output_dir=OUTPUT_DIR,",
        *[f"    {name}={value!r}," for name, value in settings.items()],
        ")",
        "# `--max_steps N` on the command line changes the step count (e.g. 1 for a quick check)",
        "if '--max_steps' in sys.argv:",
        "    args.max_steps = int(sys.argv[sys.argv.index('--max_steps') + 1])",
        "lora = LoraConfig(",
        f"    r={cfg.lora_r}, lora_alpha={cfg.lora_alpha}, lora_dropout={cfg.lora_dropout},",
        f"    target_modules={targets!r}, task_type='CAUSAL_LM',",
        ")",
        "",
        "if __name__ == '__main__':",
        "    trainer = GRPOTrainer(model=MODEL, reward_funcs=REWARD_FUNCS, args=args, train_dataset=dataset,",
        "                          peft_config=lora)",
        "    trainer.train()",
        "    trainer.save_model(OUTPUT_DIR + '/adapter')",
    ]
    return "\n".join(lines)


def _trl_reward_imports(cfg: RunConfig) -> set[str]:
    """The imports TRL's rewards need in the script (`trl.rewards`, and functools to bind parameters)."""
    from workbench.spec.rewards.trl_reward_library import trl_reward

    found = [trl_reward(name) for name in reward_names_for(cfg)]
    return {"import trl.rewards", "import functools"} if any(found) else set()


def _reward_call(name: str, inputs: ScriptInputs) -> str:
    from workbench.spec.rewards.trl_reward_library import resolved_params, trl_reward

    func = inputs.builtin_rewards.get(name)
    if func is not None:
        return f"{_factory_of(func)}()"
    reward = trl_reward(name)
    if reward is None or name in _defined_functions(inputs.reward_source or ""):  # the reward file's own function
        return name
    cfg = inputs.config
    params = resolved_params(reward, cfg.reward_params.get(name), cfg.max_completion_length)
    arguments = ", ".join(f"{key}={value!r}" for key, value in params.items())
    if reward.factory:
        return f"trl.rewards.{reward.trl_name}({arguments})"
    return (
        f"functools.partial(trl.rewards.{reward.trl_name}, {arguments})"
        if arguments
        else f"trl.rewards.{reward.trl_name}"
    )


# ---------------------------------------------------------------- built-in rewards' source


def _factory_of(func) -> str:
    """The factory that made a built-in reward: `brevity` for the closure `brevity.<locals>.reward`."""
    return func.__code__.co_qualname.split(".")[0]


def _builtin_reward_code(builtin: dict) -> tuple[str, set[str]]:
    """The source of each built-in reward's factory and of everything it uses, and the imports they need."""
    if not builtin:
        return "", set()
    collector = _SourceCollector()
    for name, func in builtin.items():
        factory = _factory_of(func)
        module = sys.modules[func.__module__]
        made = getattr(module, factory)()
        if made.__name__ != name:  # the registry built it with arguments the script would not repeat
            raise ScriptExportError(
                f"reward_names: built-in reward {name!r} is not {factory}() with its defaults; "
                "copy it into a reward file to export it"
            )
        collector.add(module.__name__, factory)
    return "\n\n\n".join(collector.segments), collector.imports


class _SourceCollector:
    """Top-level definitions of workbench modules, each with the definitions it uses, dependencies first."""

    def __init__(self):
        self.segments: list[str] = []
        self.imports: set[str] = set()
        self.done: dict[str, str] = {}  # name -> module it came from
        self._parsed: dict[str, dict] = {}

    def add(self, module_name: str, name: str) -> None:
        kind, node, text = self._parts(module_name)[name]
        if kind == "import":  # the same import from two modules is one line of the script
            self._add_import(node, name)
            return
        if name in self.done:
            if self.done[name] != module_name:
                raise ScriptExportError(
                    f"reward_names: two helpers are called {name!r} ({self.done[name]}, "
                    f"{module_name}); the script cannot hold both"
                )
            return
        self.done[name] = module_name
        for used in _names_used(node):
            if used in self._parts(module_name) and used != name:
                self.add(module_name, used)
        self.segments.append(text)

    def _add_import(self, node: ast.ImportFrom | ast.Import, name: str) -> None:
        alias = next(a for a in node.names if (a.asname or a.name).split(".")[0] == name)
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("workbench"):
            self.add(node.module, alias.name)  # a workbench helper: copy its definition too
            return
        if isinstance(node, ast.ImportFrom):
            self.imports.add(
                f"from {node.module} import {alias.name}" + (f" as {alias.asname}" if alias.asname else "")
            )
        else:
            self.imports.add(f"import {alias.name}" + (f" as {alias.asname}" if alias.asname else ""))

    def _parts(self, module_name: str) -> dict:
        if module_name not in self._parsed:
            source = inspect.getsource(sys.modules[module_name])
            self._parsed[module_name] = _top_level_parts(source)
        return self._parsed[module_name]


def _top_level_parts(source: str) -> dict:
    """name -> (kind, node, source text) for each top-level import, function, class and assignment."""
    parts = {}
    for node in ast.parse(source).body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            if isinstance(node, ast.ImportFrom) and node.module == "__future__":
                continue
            for alias in node.names:
                parts[(alias.asname or alias.name).split(".")[0]] = ("import", node, "")
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            decorators = "".join(f"@{ast.get_source_segment(source, d)}\n" for d in node.decorator_list)
            parts[node.name] = ("def", node, decorators + ast.get_source_segment(source, node))
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                if isinstance(target, ast.Name):
                    parts[target.id] = ("def", node, ast.get_source_segment(source, node))
    return parts


def _names_used(node: ast.AST) -> set[str]:
    """Every plain name a definition reads (its body, defaults, decorators, bases and annotations)."""
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}


def _defined_functions(source: str) -> list[str]:
    """Names of the top-level functions a reward file defines (parsed, never run)."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return []
    return [n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
