"""The Train tab's held-out evaluation in a real headless Chromium, on the shared tiny gsm8k run.

The run (tests/shared_builds.py `tiny_eval_run`) evaluated GSM8K's bundled test split at steps 0, 1 and 2;
the page must draw those three points beside the training reward and say what the latest evaluation found.
Takes held_out.png (the README's picture when tools/screenshots.py runs it).
"""

from __future__ import annotations

import shutil

import pytest
from browser_fixtures import UI

pytestmark = [pytest.mark.browser, pytest.mark.slow]

HELD_OUT_STEPS_JS = """() => {
    const div = document.querySelector('#wb-plot-held-out .js-plotly-plot');
    if (!div || !div.data) return [];
    const trace = div.data.find(t => t.name === 'held-out accuracy (right)');
    return trace ? Array.from(trace.x) : [];
}"""


def test_the_train_tab_draws_held_out_accuracy_at_steps_0_1_2_and_what_changed(
    app_factory, page, tiny_eval_run, tmp_path
):
    runs = tmp_path / "runs"
    shutil.copytree(tiny_eval_run, runs / tiny_eval_run.name)
    ui = UI(page, app_factory(runs))
    ui.open("Train")
    page.wait_for_function(f"() => ({HELD_OUT_STEPS_JS})().length === 3")
    assert page.evaluate(HELD_OUT_STEPS_JS) == [0, 1, 2]
    changed = page.locator("#wb-train-changed")
    ui.expect_text(changed, r"Held-out accuracy \d+% at step 0 → \d+% at step 2, pass@2 \d+% \(4 prompts")
    ui.expect_text(changed, r"(No held-out answer changed verdict|wrong → right|right → wrong)")
    # k = 2 samples: the @k figures in words, and drawn with their spread bands
    ui.expect_text(changed, r"mean@2 [\d.]+ ± [\d.]+, maj@2 [\d.]+ ± [\d.]+, best@2 [\d.]+ ± [\d.]+")
    drawn = page.evaluate(
        "() => document.querySelector('#wb-plot-held-out .js-plotly-plot').data.map(t => [t.name, t.fill || ''])"
    )
    assert ["mean@2 (right)", ""] in drawn and sum(fill == "toself" for _, fill in drawn) == 3
    ui.settle()
    page.locator("#wb-plot-held-out").scroll_into_view_if_needed()
    ui.screenshot("held_out.png")
