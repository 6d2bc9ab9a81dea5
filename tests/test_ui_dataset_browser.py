"""The Setup tab maps the columns of a real split in a headless Chromium: a GSM8K-like folder laid out as the hub
lays it out, its config and columns picked from the dropdowns the data fills, the first rows, the first row's
`solution` and the exact text the model receives.

Takes setup_dataset.png (the README's picture when tools/screenshots.py runs it).
"""

from __future__ import annotations

import re

import pytest
from helpers import gsm8k_like_rows, write_hub_dataset

pytestmark = [pytest.mark.browser, pytest.mark.slow]


def with_answers(rows: list[dict]) -> list[dict]:
    """The rows with an `answers` column: the number after `####`, as the demo's rewards take it."""
    return [{**row, "answers": [row["answer"].split("####")[-1].strip().replace(",", "")]} for row in rows]


def test_columns_of_a_real_split_are_mapped_and_previewed(ui, tmp_path, tiny_model):
    folder = write_hub_dataset(
        tmp_path / "gsm8k",
        {
            # `answers`: the demo task's rewards read each question's accepted answers from it
            "main": {"train": with_answers(gsm8k_like_rows(20)), "test": with_answers(gsm8k_like_rows(3, start=500))},
            "socratic": {"train": gsm8k_like_rows(2, start=900)},
        },
    )
    ui.open("Setup")
    setup = ui.panel("Setup")
    ui.expect_text(setup.locator(".wb-badge").first, r"Valid|Invalid", timeout=90_000)
    ui.choose("model", "tiny", setup)
    name = setup.get_by_role("textbox", name=re.compile(r"^dataset_name"))
    name.fill(str(folder))
    name.press("Tab")
    ui.reveal("dataset_config", setup)  # the data's group: its mapping and preview
    preview = setup.locator("#wb-data-preview")
    # the default prompt column does not fit: the preview says so, and the dropdowns now offer the data's own
    ui.expect_text(setup, r"has no `prompt` column \(columns: `question`, `answer`, `answers`\)")
    ui.choose("dataset_config", "main", setup)
    ui.choose("prompt_column", "question", setup)
    ui.choose("solution_column", "answer", setup)
    ui.choose("solution_transform", "after_hashes", setup)
    system = setup.get_by_role("textbox", name=re.compile(r"^system_prompt"))
    system.fill("Reason step by step, then give the final number.")
    system.press("Tab")
    first = gsm8k_like_rows(1)[0]
    ui.expect_text(preview, r"First 5 rows of .*gsm8k")
    ui.expect_text(preview.locator("#wb-first-solution"), r"^1002$")  # "#### 1,002": after the marker, no comma
    text = preview.locator("#wb-model-text")
    ui.expect_text(text, r"<\|im_start\|>system\s+Reason step by step, then give the final number\.")
    ui.expect_text(text, first["question"].replace("?", r"\?") + r"<\|im_end\|>\s+<\|im_start\|>assistant")
    ui.expect_text(setup, "Ready to launch")
    # the mapping, the rows and the model's text in one picture: a taller window, the data's section at its top
    ui.page.set_viewport_size({"width": 1280, "height": 1500})
    setup.get_by_text("The data: first rows, column mapping").evaluate("e => e.scrollIntoView({block: 'start'})")
    ui.settle()
    ui.screenshot("setup_dataset.png")
