"""The documentation site: its generated pages cover what they describe, the README stays short, the site builds.

The reference pages are made from the code at build time (workbench/cli/docs_pages.py through docs/hooks/generate.py):
these tests fail when a RunConfig setting, a command or a metric the Train tab plots is missing from them, and one
test builds the whole site with `mkdocs build --strict`, so a broken link or anchor fails the suite.
"""

from __future__ import annotations

import argparse
import ast
import dataclasses
import importlib
import importlib.util
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import tomllib

from workbench.cli import COMMAND_MODULES, docs_pages
from workbench.spec.config import RunConfig

REPO = Path(__file__).resolve().parents[1]
FIGURES = REPO / "workbench" / "insight" / "figures.py"
TRAIN_TAB = REPO / "workbench" / "ui" / "train_layout.py"


def metrics_page() -> str:
    return docs_pages.metrics_page(FIGURES.read_text(encoding="utf-8"), TRAIN_TAB.read_text(encoding="utf-8"))


def test_every_setting_has_its_own_entry_with_type_default_and_help():
    page = docs_pages.settings_page()
    defaults = RunConfig().to_dict()
    for field in dataclasses.fields(RunConfig):
        start = page.index(f"### `{field.name}` {{#{field.name}}}")
        entry = page[start : page.find("\n### ", start + 1)]
        assert f"type `{field.type}`" in entry, field.name
        assert docs_pages._value(defaults[field.name]) in entry, field.name
        assert docs_pages._text(field.metadata["help"]) in entry, field.name
        for choice in field.metadata.get("choices", ()):
            assert f'`"{choice}"`' in entry, (field.name, choice)
        assert f"[`{field.name}`](#{field.name})" in page  # in the table at the top


def test_the_settings_page_lists_each_task_and_recipe():
    from workbench.spec import recipes, tasks

    page = docs_pages.settings_page()
    for name in (*tasks.TASKS, *recipes.RECIPES):
        assert f"| `{name}` |" in page, name


def command_names() -> list[str]:
    """Every command and subcommand, found independently of docs_pages: the modules' parsers on a plain parser."""
    parser = argparse.ArgumentParser()
    found = []

    def walk(prefix: str, parser: argparse.ArgumentParser) -> None:
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, sub in action.choices.items():
                    found.append(prefix + name)
                    walk(f"{prefix}{name} ", sub)

    subparsers = parser.add_subparsers()
    for module in COMMAND_MODULES:
        importlib.import_module(module).add_parser(subparsers)
    walk("", parser)
    return found


def test_every_command_and_subcommand_is_in_the_cli_reference_with_its_help():
    page = docs_pages.cli_page()
    names = command_names()
    assert {"train", "runs", "calc", "watch", "users", "users add"} <= set(names)
    for name in names:
        heading = f"`{name}` {{#{name.replace(' ', '-')}}}"
        assert heading in page, f"the CLI reference lacks `{name}`"
        section = page[page.index(heading) :]
        section = section[: re.search(r"\n##+ `", section).start()] if re.search(r"\n##+ `", section) else section
        assert f"usage: python -m workbench {name} [-h]" in " ".join(section.split()), name


def test_the_cli_reference_shows_the_dashboards_options():
    spec = importlib.util.spec_from_file_location("workbench_app_for_docs", REPO / "app.py")
    app = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(app)
    page = docs_pages.cli_page(app.build_parser())
    assert "{#dashboard}" in page and "usage: python app.py" in page
    for option in ("--host", "--users", "--ssl-certfile", "--no-sandbox", "--models-dir"):
        assert option in page


def test_every_metric_the_train_tab_plots_is_in_the_glossary():
    tab = ast.parse(TRAIN_TAB.read_text(encoding="utf-8"))
    shown = [
        name
        for node in tab.body
        if isinstance(node, ast.Assign) and node.targets[0].id in ("MAIN_FIGURES", "MORE_FIGURES")
        for name in ast.literal_eval(node.value)
    ]
    plotted = docs_pages.plotted_metrics(FIGURES.read_text(encoding="utf-8"), TRAIN_TAB.read_text(encoding="utf-8"))
    assert list(plotted) == shown
    from workbench.insight import figures  # plotly and pandas, no gradio

    assert set(shown) == set(figures.FIGURE_BUILDERS)
    metrics = {metric for _, _, drawn in plotted.values() for metric in drawn}
    # the scan finds what the figures are known to draw
    assert {
        "reward",
        "reward_std",
        "frac_reward_zero_std",
        "rewards/<func>/mean",
        "kl",
        "loss",
        "completions/mean_length",
        "completions/clipped_ratio",
        "clip_ratio/low_mean",
        "entropy",
        "grad_norm",
        "learning_rate",
        "step_time",
    } <= metrics
    undescribed = sorted(metrics - set(docs_pages.METRIC_NOTES))
    assert not undescribed, (
        f"plotted but not in docs_pages.METRIC_NOTES (what computes it, how to read it): {undescribed}"
    )
    page = metrics_page()
    for metric in (*metrics, *docs_pages.HELD_OUT_NOTES):
        assert f"### `{metric}` {{#{docs_pages.metric_anchor(metric)}}}" in page, metric
    for figure in shown:
        assert f"{{#figure-{figure}}}" in page, figure


def test_the_metric_scan_finds_each_way_a_figure_reads_a_metric():
    source = """
def made_up_figure(records, smoothing=0.0):
    frame = _frame_of(records)
    title = "A made-up figure"
    if not has_metric(frame, "first_metric"):
        return None
    _mean_with_std_band(drawing, frame, "mean_metric", "std_metric", "a label", PALETTE[0], smoothing)
    add_line(drawing, *_series(frame, "series_metric"), "label (right)", PALETTE[1], smoothing)
    columns = [("group/low_mean", "low"), ("group/high_mean", "high")]
    for func in names:
        add_line(drawing, *_series(frame, f"rewards/{func}/failed"), func, PALETTE[2], smoothing)
    return metric_figure(records, "last_metric", "A title", "y")
"""
    function = ast.parse(source).body[0]
    assert docs_pages.figure_metrics(function) == [
        "first_metric",
        "mean_metric",
        "std_metric",
        "series_metric",
        "group/low_mean",
        "group/high_mean",
        "rewards/<func>/failed",
        "last_metric",
    ]


def test_the_results_page_shows_every_recorded_result():
    results = {
        path.stem: [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
        for path in (REPO / "benchmarks" / "results").glob("*.jsonl")
    }
    assert {"bench_speed", "bench_precision_learning"} <= set(results)
    page = docs_pages.results_page(results)
    for name, records in results.items():
        assert f"{{#{name}}}" in page
        for record in records:
            assert f"#### {record['date']}" in page and f"`{record['command']}`" in page, (name, record["date"])
    assert "unwatched" in page and "bfloat16" in page  # rows of a results file's tables


def test_the_docs_requirements_are_pinned_and_installed_by_setup():
    pins = [line.split("#")[0].strip() for line in (REPO / "requirements-docs.txt").read_text().splitlines()]
    pins = [pin for pin in pins if pin]
    assert all(re.fullmatch(r"[A-Za-z0-9_.-]+==[0-9][\w.]*", pin) for pin in pins), pins
    assert {pin.split("==")[0] for pin in pins} >= {"mkdocs", "mkdocs-material"}
    extras = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    assert sorted(extras["docs"]) == sorted(pins)
    makefile = (REPO / "Makefile").read_text()
    stamp_rule = makefile[makefile.index("$(STAMP):") : makefile.index("setup: $(STAMP)")]
    assert "requirements-docs.txt" in stamp_rule.splitlines()[0] and "-r requirements-docs.txt" in stamp_rule


def test_the_readme_is_short_says_make_test_and_links_into_the_docs():
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    assert len(readme.splitlines()) <= 250 and len(readme.encode()) < 30_000
    assert "make test" in readme and "make run" in readme
    links = re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", readme)
    local = [link for link in links if "://" not in link]
    assert any(link.startswith("docs/") for link in local)
    missing = [link for link in local if not (REPO / link).exists()]
    assert not missing, f"README links to files that do not exist: {missing}"


@pytest.mark.slow
def test_the_site_builds_with_strict_links_and_anchors(tmp_path):
    mkdocs = Path(sys.executable).parent / "mkdocs"
    if not mkdocs.exists():
        pytest.fail(f"{mkdocs} is missing: `make setup` installs requirements-docs.txt into the venv")
    site = tmp_path / "site"
    done = subprocess.run(
        [str(mkdocs), "build", "--strict", "--site-dir", str(site)],
        cwd=REPO,
        text=True,
        capture_output=True,
        timeout=300,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "WARNING" not in done.stderr, done.stderr
    assert "learning_rate" in (site / "settings" / "index.html").read_text()
    assert "check-signal" in (site / "cli" / "index.html").read_text()
    assert "frac_reward_zero_std" in (site / "metrics" / "index.html").read_text()
    assert "bench_speed" in (site / "performance" / "index.html").read_text()
    assert (site / "assets" / "train.png").stat().st_size == (REPO / "assets" / "train.png").stat().st_size
    assert not (site / "hooks").exists()
