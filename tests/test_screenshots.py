"""The README's and the docs' pictures are taken by a command of their own (tools/screenshots.py), not by every
test run: each picture they show is in its table (or is the demo run's), each entry names a test that takes that
picture, and the browser tests write their screenshots into a temporary folder unless told otherwise."""

from __future__ import annotations

import ast
import importlib.util
import re
from pathlib import Path

import browser_fixtures

ROOT = Path(__file__).resolve().parents[1]


def screenshots_tool():
    spec = importlib.util.spec_from_file_location("screenshots_tool", ROOT / "tools" / "screenshots.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def pictures_shown() -> set[str]:
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
    return {
        name
        for page in pages
        if page.is_file()
        for name in re.findall(r"assets/([\w.-]+\.png)", page.read_text(encoding="utf-8"))
    }


def test_every_picture_the_readme_and_the_docs_show_has_a_command_that_takes_it():
    tool = screenshots_tool()
    assert pictures_shown() - {*tool.PICTURES, tool.DEMO_PICTURE} == set()


def test_each_entry_names_a_test_that_takes_its_picture():
    tool = screenshots_tool()
    for picture, node in tool.PICTURES.items():
        path, name = node.split("::")
        tree = ast.parse((ROOT / path).read_text(encoding="utf-8"))
        found = [f for f in ast.walk(tree) if isinstance(f, ast.FunctionDef) and f.name == name]
        assert found, f"{picture}: {node} is no test"
        assert f'"{picture}"' in ast.get_source_segment((ROOT / path).read_text(encoding="utf-8"), found[0]), (
            f"{node} does not take {picture}"
        )


def test_a_test_run_writes_its_screenshots_outside_assets(tmp_path, monkeypatch):
    monkeypatch.delenv(browser_fixtures.SCREENSHOTS_ENV, raising=False)
    assert browser_fixtures.screenshot_folder(tmp_path) == tmp_path
    assert browser_fixtures.screenshot_folder() != ROOT / "assets"
    monkeypatch.setenv(browser_fixtures.SCREENSHOTS_ENV, str(tmp_path / "chosen"))
    assert browser_fixtures.screenshot_folder(tmp_path) == tmp_path / "chosen"
    assert screenshots_tool().SCREENSHOTS_ENV == browser_fixtures.SCREENSHOTS_ENV
