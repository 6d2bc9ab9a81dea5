"""The dataset columns a run's rewards read: the first rows of the chosen data, and which reward needs which column.

TRL hands every dataset column besides `prompt` to every reward function, one
value per completion. A reward that needs a column the data lacks (say
`exact_answer` without an `answer`) would fail at its first call, minutes
into a run; `missing_columns` finds it before launch, for `check_config` and
the Setup tab's preview of the first rows. Which columns a reward needs comes
from `workbench.spec.rewards.reward_columns` (declared, or read off a user
function's signature). Nothing here loads a model.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field

from workbench.errors import WorkbenchError
from workbench.sources import dataset_reading, hub_datasets
from workbench.sources.chat_templates import TemplateRefused
from workbench.spec import data_mapping, rewards, tasks

PREVIEW_ROWS = 5


@dataclass(frozen=True)
class RewardColumns:
    """The columns one reward needs (it fails without them) and those it reads when present."""

    reward: str
    needs: tuple[str, ...]
    optional: tuple[str, ...]


def reward_needs(reward_names: list[str], extra: dict[str, Callable] | None = None) -> list[RewardColumns]:
    """Each named reward's columns; a name that is not a reward is left out (check_config names it)."""
    found = []
    for name in reward_names:
        try:
            func = rewards.get_reward(name, extra)
        except rewards.RewardError:
            continue
        found.append(RewardColumns(name, *rewards.reward_columns(func)))
    return found


def missing_columns(columns: list[str], needs: list[RewardColumns]) -> list[tuple[str, str]]:
    """(reward, column) for each column a reward needs that `columns` lacks."""
    return [(need.reward, column) for need in needs for column in need.needs if column not in columns]


@dataclass(frozen=True)
class SourceRows:
    """The first rows of the chosen data as stored, and where they came from.

    `rows` None: a hub dataset that is not cached and that the hub will give (its rows are known once downloaded).
    """

    rows: list[dict] | None
    source: hub_datasets.Source | None = None  # None: a built-in task's rows


def source_rows(
    task: str,
    dataset_name: str = "",
    config: str = "",
    split: str = "train",
    seed: int = 0,
    count: int = PREVIEW_ROWS,
    field: str = "dataset_name",
) -> SourceRows:
    """The first rows a run would read: the named data (its config and split's slice), else the task's own rows.

    DatasetError (naming the field) when the data cannot be read, or is an uncached hub id the hub cannot give.
    """
    if not dataset_name:
        built = tasks.get_task(task)
        return SourceRows(built.build_rows(min(count, built.default_size or count), seed))
    chosen = hub_datasets.parse_split(split)
    source = hub_datasets.locate(dataset_name, field)
    if not source.cached:
        problem = hub_datasets.hub_problem(source.hub_id)
        if problem:
            raise dataset_reading.DatasetError(problem)
        return SourceRows(None, source)
    return SourceRows(hub_datasets.first_rows(source, config, chosen, count), source)


def first_rows(task: str, dataset_name: str = "", seed: int = 0, count: int = PREVIEW_ROWS) -> list[dict]:
    """The first rows a run would read of the named data's train split, else of the task's (with the run's seed)."""
    return source_rows(task, dataset_name, seed=seed, count=count).rows or []


def missing_problems(columns: list[str], needs: list[RewardColumns], source: str) -> list[tuple[str, str, str]]:
    """(field, rule, fix) for each column a chosen reward needs that the data (`source`) lacks."""
    return [
        (
            "reward_names",
            f"{reward} needs the column `{column}`, and {source} has only "
            f"{', '.join(f'`{c}`' for c in columns) or 'none'}",
            f"add the column `{column}` (one value per prompt) to the dataset, or choose a reward other than {reward}",
        )
        for reward, column in missing_columns(columns, needs)
    ]


@dataclass
class DataPreview:
    """The first rows of the chosen data, its columns and configs, the columns each chosen reward reads, and the
    first row as the model receives it (mapped, rendered)."""

    source: str
    rows: list[dict] = field(default_factory=list)
    columns: list[str] = field(default_factory=list)
    rewards: list[RewardColumns] = field(default_factory=list)
    error: str = ""  # why the rows cannot be shown (check_config says the same before launch)
    configs: list[str] = field(default_factory=list)  # a hub-layout dataset's configs
    mapped: dict | None = None  # the first row as TRL reads it (`prompt`, `solution`), when the mapping fits
    model_text: str = ""  # the exact text the model receives for the first row
    model_note: str = ""  # why that text cannot be shown, or what decided it

    @property
    def missing(self) -> list[tuple[str, str]]:
        return missing_columns(self.columns, self.rewards) if not self.error else []


@dataclass(frozen=True)
class DataChoice:
    """What decides the rows a run reads and how its first prompt reaches the model (the Setup form's data part)."""

    task: str
    dataset_name: str = ""
    config: str = ""
    split: str = "train"
    mapping: data_mapping.ColumnMapping = data_mapping.ColumnMapping()
    chat_template: str = "auto"
    model_folder: str = ""  # where the model's tokenizer lies (sources.model_files.model_location)
    seed: int = 0


def preview(
    choice: DataChoice,
    reward_names: list[str],
    reward_file: str = "",
    count: int = PREVIEW_ROWS,
    import_reward_file: bool = True,
) -> DataPreview:
    """The Setup tab's preview: never raises; data that cannot be read shows why.

    `import_reward_file` False: the reward file's columns are read from its
    source, never run (a shared dashboard's process; see check_config).
    """
    source = choice.dataset_name or f"the {choice.task} task"
    extra = {}
    if reward_file:
        try:
            extra = (
                rewards.load_reward_file(reward_file) if import_reward_file else rewards.read_reward_file(reward_file)
            )
        except rewards.RewardError:
            pass  # check_config names the file's problem; its rewards are left out here
    needs = reward_needs(reward_names, extra)
    try:
        found = source_rows(choice.task, choice.dataset_name, choice.config, choice.split, choice.seed, count)
        configs = hub_datasets.config_names(found.source) if found.source else []
    except (ValueError, OSError) as exc:  # DatasetError, TaskError, a file that is not text, permissions
        return DataPreview(source, rewards=needs, error=str(exc))
    if found.rows is None:
        return DataPreview(
            source,
            rewards=needs,
            error=f"{choice.dataset_name} is not in the hub cache yet: a run "
            "downloads it when it starts (its progress in the run's train.log), and its rows show "
            f"here once it is cached; to see them now, {hub_datasets.download_hint(choice.dataset_name)}",
        )
    rows = found.rows
    shown = DataPreview(source, rows=rows, columns=list(rows[0]) if rows else [], rewards=needs, configs=configs)
    return _with_model_text(shown, choice)


def _with_model_text(shown: DataPreview, choice: DataChoice) -> DataPreview:
    """`shown` with its first row mapped and rendered as the model receives it, or a note saying why not."""
    has_template = data_mapping.has_chat_template(choice.model_folder) if choice.model_folder else None
    apply, rule = data_mapping.resolve_chat_template(choice.chat_template, has_template)
    first = shown.rows[0] if shown.rows else None
    if (
        rule
        or first is None
        or data_mapping.mapping_problems(shown.columns, shown.rows, choice.mapping, "the data", choice.chat_template)
    ):
        shown.model_note = "The column mapping or chat_template does not fit this data (see Before launch)."
        return shown
    shown.mapped = data_mapping.map_row(first, dataclasses.replace(choice.mapping, apply_chat_template=apply))
    prompt = shown.mapped["prompt"]
    if isinstance(prompt, str):
        shown.model_text, shown.model_note = prompt, "chat_template none: the text goes to the model as it is."
        return shown
    try:
        template = data_mapping.read_chat_template(choice.model_folder) if choice.model_folder else None
    except WorkbenchError as exc:  # a file past the size limit: its message names the limit and the setting
        shown.model_note = f"The model's chat template is not read: {exc}"
        return shown
    if template is None:
        shown.model_note = (
            "The model's tokenizer is not on disk yet (a hub model before its download, the bundled "
            "model before its first run): the text shows once it is."
        )
        return shown
    try:
        shown.model_text = data_mapping.model_input_text(prompt, template)
    except TemplateRefused as exc:  # past a limit, or its own error, as its child said
        shown.model_note = f"The model's chat template {exc}"
        return shown
    except Exception as exc:  # a template that raises on these messages (e.g. it refuses a system message)
        shown.model_note = f"The model's chat template refuses this prompt: {type(exc).__name__}: {exc}"
        return shown
    shown.model_note = "The model's chat template, with the generation prompt TRL adds" + (
        ", after the system prompt." if choice.mapping.system_prompt else "."
    )
    return shown
