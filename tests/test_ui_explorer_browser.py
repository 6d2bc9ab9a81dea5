"""The Explore tab in a real headless Chromium, on the shared 2-step tiny run (tests/shared_builds.py).

A click on a point of the Train tab's reward curve opens that step's groups in the Explore tab (the page's
`plotly_click` bridge); there the table is searched, filtered and sorted, a row opens its group (answers above and
below the group mean apart, each with its token view) and its prompt's history. Takes explorer.png (the README's
picture when tools/screenshots.py runs it).
"""

from __future__ import annotations

import shutil

import pytest
from browser_fixtures import UI

from workbench.insight.completion_search import CompletionQuery, search_completions

pytestmark = [pytest.mark.browser, pytest.mark.slow]

# Where a step's point of the reward curve lies on the screen, from Plotly's own axes.
POINT_JS = """(step) => {
    const plot = document.querySelector('#wb-plot-reward .js-plotly-plot');
    if (!plot || !plot._fullLayout || !plot.data) return null;
    const trace = plot.data.find(t => Array.from(t.x || []).includes(step));
    if (!trace) return null;
    const y = trace.y[Array.from(trace.x).indexOf(step)];
    const xa = plot._fullLayout.xaxis, ya = plot._fullLayout.yaxis, box = plot.getBoundingClientRect();
    return [box.left + xa._offset + xa.l2p(step), box.top + ya._offset + ya.l2p(y)];
}"""


def table_cells(page, column: int) -> list[str]:
    """The text of one column in the table's shown rows (Gradio draws only the rows in view)."""
    return page.locator(f'#wb-explore-table .virtual-row [data-col="{column}"]').all_inner_texts()


def test_the_explorer_filters_sorts_searches_and_opens_a_group_and_a_prompts_history(
    app_factory, page, tiny_trained_run, tmp_path
):
    runs = tmp_path / "runs"
    shutil.copytree(tiny_trained_run, runs / tiny_trained_run.name)
    rows = search_completions(runs / tiny_trained_run.name, CompletionQuery(limit=1000), tmp_path / "cache").rows
    ui = UI(page, app_factory(runs))
    # opened directly: its run picker lists the runs; a pick shows the run's first page
    ui.open("Explore")
    ui.choose("Run", tiny_trained_run.name, scope=page.locator("#wb-tab-explore"))
    ui.expect_text(page.locator("#wb-explore-note"), rf"Rows 1–\d+ of {len(rows)} that match")
    ui.open_tab("Train")
    # a click on the reward curve's point of step 1 opens step 1's groups
    page.wait_for_function(f"() => ({POINT_JS})(1) !== null", timeout=60_000)
    page.locator("#wb-plot-reward").scroll_into_view_if_needed()
    x, y = page.evaluate(POINT_JS, 1)
    page.mouse.move(x - 30, y)
    page.mouse.move(x, y)
    page.mouse.click(x, y)
    page.get_by_role("tab", name="Explore", selected=True).wait_for()
    assert page.locator("#wb-explore-steps textarea, #wb-explore-steps input").first.input_value() == "1"
    group = page.locator("#wb-explore-group")
    ui.expect_text(group, r"Step 1 · group 0 · row #1")
    assert set(table_cells(page, 0)) == {"1"}
    # filter: the rows of step 2 with a reward above the lowest; sorted by reward, highest first
    low = min(row["reward"] for row in rows if row["step"] == 2)
    wanted = sorted((row["reward"] for row in rows if row["step"] == 2 and row["reward"] > low), reverse=True)
    page.locator("#wb-explore-steps textarea, #wb-explore-steps input").first.fill("2:2")
    page.locator("#wb-explore-where textarea, #wb-explore-where input").first.fill(f"reward>{low}")
    ui.choose("Sort by", "reward", scope=page.locator("#wb-tab-explore"))
    page.locator("#wb-explore-desc input").check()
    page.locator("#wb-explore-go").click()
    ui.expect_text(page.locator("#wb-explore-note"), rf"of {len(wanted)} that match")
    shown = [float(cell) for cell in table_cells(page, 5)]
    assert shown and shown == sorted(shown, reverse=True) and shown[0] == float(f"{wanted[0]:.2f}")
    # a bad filter says which field and how to fix it
    page.locator("#wb-explore-where textarea, #wb-explore-where input").first.fill("reward<<1")
    page.locator("#wb-explore-go").click()
    ui.expect_text(page.locator("#wb-explore-note"), r"Not searched\..*where")
    # search: a word of one completion finds it
    word = max((w for row in rows for w in row["completion"].split() if w.isalpha()), key=len)
    matching = sum(1 for row in rows if word.lower() in (row["prompt"] + row["completion"]).lower())
    page.locator("#wb-explore-where textarea, #wb-explore-where input").first.fill("")
    page.locator("#wb-explore-steps textarea, #wb-explore-steps input").first.fill("")
    page.locator("#wb-explore-search textarea, #wb-explore-search input").first.fill(word)
    page.locator("#wb-explore-go").click()
    ui.expect_text(page.locator("#wb-explore-note"), rf"of {matching} that match")
    # a row opens its group, the answers above and below the mean apart, and then its prompt's history
    page.locator('#wb-explore-table .virtual-row [data-col="4"]').first.click()
    ui.expect_text(group, r"Above the group mean")
    ui.expect_text(group, r"At or below the mean")
    assert group.locator("details.wb-tokview").count() >= 1  # the token view of each answer
    page.locator("#wb-explore-history-go").click()
    history = page.locator("#wb-explore-history")
    ui.expect_text(history, r"Prompt history · \d+ steps?")
    ui.expect_text(history, r"Step \d")
    # the picture: step 2's rows by reward, a group opened
    page.locator("#wb-explore-search textarea, #wb-explore-search input").first.fill("")
    page.locator("#wb-explore-steps textarea, #wb-explore-steps input").first.fill("2")
    page.locator("#wb-explore-go").click()
    ui.expect_text(page.locator("#wb-explore-note"), r"Rows 1–\d+ of \d+ that match")
    page.locator('#wb-explore-table .virtual-row [data-col="4"]').nth(1).click()
    ui.expect_text(group, r"Step 2 · group \d+ · row #\d")
    ui.settle()
    page.locator("#wb-explore-note").evaluate("e => e.scrollIntoView({block: 'start'})")
    ui.screenshot("explorer.png")
