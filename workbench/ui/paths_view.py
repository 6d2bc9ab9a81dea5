"""A run's paths and server address on a shared dashboard, through the access rules. No gradio here.

On a dashboard with accounts every path field of a RunConfig
(`spec.config.PATH_FIELDS`: model, dataset_path, reward_file, reward_model) goes through
the one rule of workbench/access/paths.py, and `vllm_server_base_url`
through workbench/access/hosts.py, before anything reads a file or makes a
request (a dataset with every file it names: its README's `data_files`, its
links, save_to_disk's files): the Setup tab's live plan and memory estimate,
its data preview, the reward code view, the command preview, a smoke test, an export and a launch
all take the config from `confine_config`; a resume, sampling and an export
check the run's saved config again (`check_saved_config`). `scope_for`
builds what one viewer may name.
"""

from __future__ import annotations

from pathlib import Path

from workbench.access import hosts, paths, uploads
from workbench.access.owners import Viewer
from workbench.errors import WorkbenchError
from workbench.sources import dataset_files, hub_datasets
from workbench.sources.dataset_reading import DatasetError
from workbench.sources.model_files import MODEL_CHOICES
from workbench.spec import config_checks
from workbench.spec.config import PATH_FIELDS, ConfigError, ConfigProblem, RunConfig
from workbench.ui.run_access import controls_run, live_run_holding

DATA_FIELDS = ("dataset_name", "dataset_path")  # the fields whose value may name more files than itself
DATA_FILES_FIX = (
    "keep a dataset's files in its own folder: README.md's data_files and data_dir relative to it, "
    "with no `..`, absolute path, URL or link that leads elsewhere; or upload the data file under "
    "'Your files' in the Setup tab and use the path it shows"
)


def scope_for(
    runs_dir: Path, viewer: Viewer, shared: tuple[Path, ...] = (), vllm_hosts: frozenset[str] = frozenset()
) -> paths.UserScope:
    """What `viewer` may name: their uploads, the runs they may control, the admin's shared folders."""
    return paths.UserScope(
        uploads.uploads_dir(runs_dir, viewer.name),
        Path(runs_dir),
        controls_run(viewer),
        tuple(shared),
        frozenset(vllm_hosts),
    )


def confine_path(field: str, value: str, scope: paths.UserScope) -> str:
    """One path field's value under the rule (an absolute path, a bundled name or a hub id); PathError if refused.

    A dataset's value is checked with every file it names (confine_data_files): the rule decides the typed path,
    and a dataset folder may name files elsewhere.
    """
    confined = paths.confine(field, value, scope, MODEL_CHOICES if field == "model" else ())
    running = live_run_holding(confined, scope.runs_dir) if confined else None
    if running:
        raise paths.PathError(
            field=field,
            rule=f"{confined[:80]!r} lies in run {running}, which is still running: "
            "its code can change the files there while they are read",
            fix="use it once that run has ended (Stop it in the Train tab, or wait)",
        )
    if field in DATA_FIELDS and confined:
        confine_data_files(field, confined, scope)
    elif confined:  # a model folder, a reward file (a bundled name or a hub id names no file: nothing to check)
        problem = dataset_files.folder_outside(confined, lambda path: paths.allowed(path, scope))
        if problem:
            raise paths.PathError(
                field=field,
                rule=f"{confined[:80]!r} reads a file outside your uploads and your runs: {problem}",
                fix="name a folder whose files all lie there, with no links out of it",
            )
    return confined


def confine_data_files(field: str, value: str, scope: paths.UserScope) -> None:
    """Refuse (PathError) a dataset the rule allowed whose README `data_files`, links or save_to_disk files lead
    elsewhere (another user's upload, the users file), before a row of it is read (sources/dataset_files.py)."""
    try:
        source = hub_datasets.locate(value, field)
    except DatasetError:  # nothing usable there: the readers say why, reading nothing
        return
    problem = dataset_files.outside(source, lambda path: paths.allowed(path, scope))
    if problem:
        shared = " and the shared folders" if scope.shared else ""
        where = (
            "the hub dataset's own download"
            if source.kind == hub_datasets.HUB
            else f"your uploads folder {scope.uploads}, your runs{shared}"
        )
        raise paths.PathError(
            field=field, rule=f"{value[:80]!r} reads a file outside {where}: {problem}", fix=DATA_FILES_FIX
        )


def confine_config(cfg: RunConfig, scope: paths.UserScope) -> tuple[RunConfig, list[ConfigProblem]]:
    """`cfg` with its paths as the rule allows them, and the problems found (field, rule, fix).

    A refused path is cleared, so the checks after this one never read what
    it names (a cleared model reads as the bundled one, which the problem
    listed still stops from launching).
    """
    changes, problems = {}, []
    for name in PATH_FIELDS:
        try:
            changes[name] = confine_path(name, getattr(cfg, name), scope)
        except paths.PathError as exc:
            problems.append(ConfigProblem(name, exc.rule, exc.fix))
            changes[name] = ""
    try:
        hosts.check_server_url(cfg.vllm_server_base_url, scope.vllm_hosts)
    except WorkbenchError as exc:
        problems.append(ConfigProblem(exc.field, exc.rule, exc.fix))
    problems += config_checks.shared_problems(cfg)  # reward_timeout_s 0: no limit, refused here
    return cfg.with_changes(**changes), problems


def check_saved_config(config: dict, scope: paths.UserScope | None) -> None:
    """Refuse (ConfigError) a run's saved config.json whose paths or server the rules do not allow `scope`.

    A run writes its own folder, config.json included, so what a resume, the
    Compare tab's sampling or an export would load is checked again as at
    launch, before anything reads it. None (an open dashboard): nothing to check.
    """
    if scope is None:
        return
    _, problems = confine_config(RunConfig.from_dict(config), scope)
    if problems:
        raise ConfigError(problems)


def refused(problems: list[ConfigProblem], field: str) -> bool:
    """Whether `confine_config` refused `field` (its value was cleared)."""
    return any(problem.field == field for problem in problems)
