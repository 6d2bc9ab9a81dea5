"""The Train tab's token view in a real headless Chromium, on the shared 2-step tiny run (beta 0.04).

A group card's completion opens into its tokens; the KL channel colours them, a token's values show on hover,
the step's summary names its largest-KL tokens, and the clipped channel says why nothing is clipped on-policy.
Takes token_view.png (the README's picture when tools/screenshots.py runs it).
"""

from __future__ import annotations

import shutil

import pytest
from browser_fixtures import UI

from workbench.insight import tokens

pytestmark = [pytest.mark.browser, pytest.mark.slow]


def test_a_card_opens_into_its_tokens_coloured_by_the_chosen_channel(app_factory, page, tiny_trained_run, tmp_path):
    runs = tmp_path / "runs"
    shutil.copytree(tiny_trained_run, runs / tiny_trained_run.name)
    ui = UI(page, app_factory(runs))
    ui.open("Train")
    cards = page.locator("#wb-train-completions")
    ui.expect_text(cards, r"Tokens of step 2")
    ui.expect_text(cards, r"largest KL: '.+' \d")
    view = cards.locator("details.wb-tokview").first
    view.locator("summary").click()
    view.get_by_text("KL", exact=True).click()
    ui.expect_text(view, r"the per-token KL term to the reference, 0 \(pale\) to [\d.e-]+ \(dark\)")
    record = tokens.tokens_of_round(tiny_trained_run, 2)[0]
    first = view.locator(".wb-tok").first
    assert first.text_content() == record["tokens"][0]  # the card's own tokens, in order
    assert f"KL {record['kl'][0]:.4g}" in first.get_attribute("title")
    darkest = max(range(len(record["kl"])), key=lambda i: record["kl"][i])
    colour = view.locator(".wb-tok").nth(darkest).evaluate("e => getComputedStyle(e).backgroundColor")
    assert colour.startswith("rgba(220, 38, 38")  # the largest KL of the card is coloured, not left blank
    view.get_by_text("clipped", exact=True).click()
    ui.expect_text(view, r"Nothing is clipped here\. On-policy")
    view.get_by_text("KL", exact=True).click()
    ui.settle()
    cards.scroll_into_view_if_needed()
    view.scroll_into_view_if_needed()
    ui.screenshot("token_view.png")
