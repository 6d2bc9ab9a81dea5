"""MkDocs hook: the pages made from the code each time the site is built, and the screenshots from assets/.

- settings.md, cli.md and metrics.md: workbench/cli/docs_pages.py's reference pages (RunConfig, the argparse
  parsers, the Train tab's figures);
- architecture.md: ARCHITECTURE.md as it is in the checkout;
- performance.md's `<!-- benchmark results -->`: the results files of benchmarks/results/*.jsonl, and
  contributing.md's `<!-- benchmark scripts -->`: the scripts of benchmarks/ with their docstrings' first lines;
- assets/*.png: the screenshots, served from the repository's assets/ (tests and `make screenshots` rewrite
  them there), never copied into docs/.

Nothing is written into docs/, so no generated page is kept in git to go stale.
"""

from __future__ import annotations

import ast
import importlib.util
import json
from pathlib import Path

from mkdocs.structure.files import File

from workbench.cli import docs_pages

ROOT = Path(__file__).resolve().parents[2]
RESULTS_MARKER = "<!-- benchmark results -->"
SCRIPTS_MARKER = "<!-- benchmark scripts -->"


def dashboard_parser():
    """app.py's parser (app.py is a script beside the package, loaded from its file)."""
    spec = importlib.util.spec_from_file_location("workbench_app_script", ROOT / "app.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.build_parser()


def read_results() -> dict[str, list[dict]]:
    return {
        path.stem: [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
        for path in sorted((ROOT / "benchmarks" / "results").glob("*.jsonl"))
    }


def read_docstrings() -> dict[str, str]:
    return {
        path.stem: ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or ""
        for path in sorted((ROOT / "benchmarks").glob("*.py"))
    }


def generated_pages() -> dict[str, str]:
    source = {
        name: (ROOT / path).read_text(encoding="utf-8")
        for name, path in (("figures", "workbench/insight/figures.py"), ("tab", "workbench/ui/train_layout.py"))
    }
    return {
        "settings.md": docs_pages.settings_page(),
        "cli.md": docs_pages.cli_page(dashboard_parser()),
        "metrics.md": docs_pages.metrics_page(source["figures"], source["tab"]),
        "architecture.md": (ROOT / "ARCHITECTURE.md").read_text(encoding="utf-8"),
    }


def on_files(files, config):
    for name, text in generated_pages().items():
        files.append(File.generated(config, name, content=text))
    for picture in sorted((ROOT / "assets").glob("*.png")):
        files.append(File.generated(config, f"assets/{picture.name}", abs_src_path=str(picture)))
    return files


def on_page_markdown(markdown, page, config, files):
    if RESULTS_MARKER in markdown:
        markdown = markdown.replace(RESULTS_MARKER, docs_pages.results_page(read_results()))
    if SCRIPTS_MARKER in markdown:
        markdown = markdown.replace(SCRIPTS_MARKER, docs_pages.scripts_table(read_docstrings(), read_results()))
    return markdown
