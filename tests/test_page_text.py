"""Text that is whole: every built-in task, reward and recipe description, and a user's string, shows in the page
as it is written (a `<answer>` stays text, `*` and `_` no emphasis), through the Markdown or HTML that carries it."""

from __future__ import annotations

import re
from html.parser import HTMLParser

import markdown
import pytest

from workbench.spec.config import FIELD_HELP
from workbench.spec.recipes import RECIPES
from workbench.spec.rewards import describe_rewards, describe_trl_rewards
from workbench.spec.tasks import TASKS
from workbench.ui import runs_view, setup_view
from workbench.ui.calculator_view import explain_html
from workbench.ui.page_text import markdown_text


class _Text(HTMLParser):
    def __init__(self):
        super().__init__()
        self.parts, self.tags = [], []

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)

    def handle_data(self, data):
        self.parts.append(data)


def _shown(html: str) -> tuple[str, list[str]]:
    """What a browser shows of `html` (its text, whitespace folded) and the tags it holds."""
    parser = _Text()
    parser.feed(html)
    return " ".join("".join(parser.parts).split()), parser.tags


def _whole(text: str) -> str:
    """`text` as the page should show it: code spans' backticks gone, whitespace folded."""
    return " ".join(re.sub(r"`([^`]*)`", r"\1", text).split())


def _rendered(markdown_source: str) -> tuple[str, list[str]]:
    return _shown(markdown.markdown(markdown_source))


@pytest.mark.parametrize("name", sorted(TASKS))
def test_each_tasks_description_shows_whole(name):
    text, tags = _rendered(setup_view.task_description(name))
    task = TASKS[name]
    assert _whole(task.description) in text, (name, text)
    assert set(tags) <= {"p", "strong", "code"}, tags


def test_the_arithmetic_tasks_answer_tag_stays_text():
    text, tags = _rendered(setup_view.task_description("arithmetic"))
    assert "the number inside <answer> tags is right" in text
    assert "answer" not in tags


def test_every_reward_description_shows_whole():
    text, tags = _rendered(setup_view.rewards_help_markdown())
    for name, description in {**describe_rewards(), **describe_trl_rewards()}.items():
        assert f"{name}: {_whole(description)}" in text, name
    assert set(tags) <= {"p", "ul", "li", "code", "strong", "em"}, tags


@pytest.mark.parametrize("name", sorted(RECIPES))
def test_each_recipes_note_shows_whole(name):
    recipe = RECIPES[name]
    text, _ = _shown(setup_view.recipe_note_html(name, ["beta: 0.04 -> 0.0"]))
    assert f"{recipe.title} ({recipe.source}): {_whole(recipe.summary)}" in text


def test_field_help_shown_in_markdown_is_whole():
    text, _ = _rendered(f"`dataset_name`: {markdown_text(FIELD_HELP['dataset_name'])}")
    assert _whole(f"dataset_name: {FIELD_HELP['dataset_name']}") in text


@pytest.mark.parametrize(
    "written", ["reward <b>bold</b> & a*b*c", "my_run_2 [link](x)", "back\\slash", "one ` backtick", "`code` <i>"]
)
def test_a_users_string_in_markdown_shows_as_written(written):
    text, tags = _rendered(markdown_text(written))
    assert text == _whole(written) if written.count("`") % 2 == 0 else written
    assert tags == ["p"] + (["code"] if written.count("`") == 2 else [])


def test_a_runs_folder_with_markup_in_its_name_shows_whole(tmp_path):
    folder = tmp_path / "runs_<x>_*a*"
    text, _ = _rendered(runs_view.runs_folder_note(folder))
    assert f"Runs folder: {folder}." in text


def test_the_explained_errors_wording():
    html, _ = explain_html(
        "ValueError: The global train batch size (1 x 3) must be evenly divisible by the number of generations "
        "per prompt (2)."
    )
    text, _ = _shown(html)
    assert " a older " not in text and "a older" not in text
    assert not re.search(r"\b1 prompts\b", text)
