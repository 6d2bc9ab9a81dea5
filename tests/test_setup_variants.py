"""The Setup tab's task and recipe choices and script download, run through the app's own Gradio events."""

from __future__ import annotations

from pathlib import Path

import pytest

from app_events import Page, find_event
from helpers import setup_form_values
from workbench.ui import setup_tab
from workbench.ui.setup_view import RECIPE_FORM_FIELDS, recipe_note_html


@pytest.fixture(scope="module")
def app(tmp_path_factory):
    from workbench.ui.app import build_app

    return build_app(tmp_path_factory.mktemp("setup") / "runs")


def form_after(event, result: dict, values: list) -> dict:
    """The form's values after an event's updates to the recipe's fields (each component is labelled by its field)."""
    form = dict(zip(setup_tab.FORM_KEYS, values[:-1]))
    for block, value in zip(event.outputs, result["data"]):
        if getattr(block, "label", None) in RECIPE_FORM_FIELDS and isinstance(value, dict) and "value" in value:
            form[block.label] = value["value"]
    return form


def test_variant_fields_are_on_the_form():
    for name in ("epsilon_high", "importance_sampling_level", "mask_truncated_completions", "top_entropy_quantile",
                 "recipe"):
        assert name in setup_tab.FORM_KEYS


def test_choosing_gspo_sets_its_fields_and_says_which_changed(app):
    page = Page(app)
    event = find_event(app, "workbench.ui.setup_tab", "on_recipe")
    values = setup_form_values(recipe="gspo")
    result = page.run(event, values)
    form = form_after(event, result, values)
    assert (form["importance_sampling_level"], form["loss_type"], form["epsilon"], form["epsilon_high"]) == \
        ("sequence", "grpo", 3e-4, 4e-4)
    assert form["steps_per_generation"] == 4 * form["gradient_accumulation_steps"]
    note = result["data"][-1]
    assert "GSPO" in note and "importance_sampling_level: &#x27;token&#x27; -&gt; &#x27;sequence&#x27;" in note
    assert "steps_per_generation: empty -&gt; 4" in note
    # the form as the recipe left it is a valid run, recorded with its recipe
    live_plan = find_event(app, "workbench.ui.setup_tab", "live_plan")
    plan = page.run(live_plan, [form[key] for key in setup_tab.FORM_KEYS] + [values[-1]])
    assert plan["data"][-1] is True  # plan_valid: nothing stops a launch
    cfg = setup_tab.config_from_values(*[form[key] for key in setup_tab.FORM_KEYS], values[-1])
    assert cfg.recipe == "gspo" and cfg.steps_per_generation == 4


def test_a_form_the_recipe_cannot_read_says_so(app):
    event = find_event(app, "workbench.ui.setup_tab", "on_recipe")
    result = Page(app).run(event, setup_form_values(recipe="dapo", per_device_train_batch_size=None))
    assert "Recipe not applied" in result["data"][-1] and "per_device_train_batch_size" in result["data"][-1]


def test_recipe_note_escapes_and_names_no_change():
    assert "already had its settings" in recipe_note_html("dr_grpo", [])
    assert "<script>" not in recipe_note_html("", [], error="<script>x</script>")


def test_script_download_holds_the_forms_settings(app):
    event = find_event(app, "workbench.ui.setup_tab", "export_script")
    result = Page(app).run(event, setup_form_values(epsilon_high=0.28, mask_truncated_completions=True,
                                                    steps_per_generation=2))
    download = result["data"][0]
    assert download["visible"] is True
    text = Path(download["value"]["path"]).read_text()
    compile(text, "train.py", "exec")
    assert "    epsilon_high=0.28,\n" in text and "    mask_truncated_completions=True,\n" in text
    assert "    steps_per_generation=2,\n" in text and "def mentions_answer(" in text


def test_a_task_s_presets_apply_once_per_choice_so_what_is_typed_after_stays(app):
    page = Page(app)
    event = find_event(app, "workbench.ui.setup_tab", "on_task")
    labels = [getattr(block, "label", None) for block in event.outputs]
    first = page.run(event, ["arithmetic", None])["data"]
    length = first[labels.index("max_completion_length")]
    assert length["value"] == setup_tab.RunConfig.for_task("arithmetic").max_completion_length
    # Gradio's page sends the same choice again while the presets land: nothing of the form changes
    again = page.run(event, ["arithmetic", None])["data"]
    assert all(value == {"__type__": "update"} for value in again[:-1]), again
    # another task applies its presets
    other = page.run(event, [setup_tab.RunConfig().task, None])["data"]
    assert other[labels.index("max_completion_length")]["value"] == \
        setup_tab.RunConfig.for_task(setup_tab.RunConfig().task).max_completion_length
