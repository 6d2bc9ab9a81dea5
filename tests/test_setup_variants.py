"""The Setup tab's task and recipe choices and script download, run through the app's own Gradio events."""

from __future__ import annotations

from pathlib import Path

import pytest
from app_events import Page, find_event
from helpers import setup_form_values

from workbench.ui import setup_tab
from workbench.ui.setup_view import RECIPE_FORM_FIELDS, recipe_note_html


@pytest.fixture(scope="module")
def runs_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("setup") / "runs"


@pytest.fixture(scope="module")
def app(runs_dir):
    from workbench.ui.app import build_app

    return build_app(runs_dir)


def form_after(event, result: dict, values: list) -> dict:
    """The form's values after an event's updates to the recipe's fields (each component is labelled by its field)."""
    form = dict(zip(setup_tab.FORM_KEYS, values[:-1]))
    for block, value in zip(event.outputs, result["data"]):
        if getattr(block, "label", None) in RECIPE_FORM_FIELDS and isinstance(value, dict) and "value" in value:
            form[block.label] = value["value"]
    return form


def test_variant_fields_are_on_the_form():
    for name in (
        "epsilon_high",
        "importance_sampling_level",
        "mask_truncated_completions",
        "top_entropy_quantile",
        "recipe",
    ):
        assert name in setup_tab.FORM_KEYS


def test_choosing_gspo_sets_its_fields_and_says_which_changed(app):
    page = Page(app)
    event = find_event(app, "workbench.ui.setup_tab", "on_recipe")
    values = setup_form_values(recipe="gspo")
    result = page.run(event, values)
    form = form_after(event, result, values)
    assert (form["importance_sampling_level"], form["loss_type"], form["epsilon"], form["epsilon_high"]) == (
        "sequence",
        "grpo",
        3e-4,
        4e-4,
    )
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
    result = Page(app).run(
        event, setup_form_values(epsilon_high=0.28, mask_truncated_completions=True, steps_per_generation=2)
    )
    download = result["data"][0]
    assert download["visible"] is True
    text = Path(download["value"]["path"]).read_text()
    compile(text, "train.py", "exec")
    assert "    epsilon_high=0.28,\n" in text and "    mask_truncated_completions=True,\n" in text
    assert "    steps_per_generation=2,\n" in text and "def mentions_answer(" in text


def outputs_by_label(event, result: dict) -> dict:
    return {getattr(block, "label", None): value for block, value in zip(event.outputs, result["data"])}


def test_a_task_choice_answers_with_its_presets_and_the_verdict_of_the_form_with_them(app):
    page = Page(app)
    event = find_event(app, "workbench.ui.setup_tab", "on_task")
    preset = setup_tab.RunConfig.for_task("arithmetic")
    # the form still holds the demo's presets (batch 8, G=4) when the choice of arithmetic arrives
    result = page.run(event, setup_form_values(task="arithmetic"))
    shown = outputs_by_label(event, result)
    assert shown["max_completion_length"]["value"] == preset.max_completion_length
    assert shown["num_generations"]["value"] == preset.num_generations
    badge = result["data"][[block for block in event.outputs].index(setup_tab_badge(app))]
    assert "Valid" in badge and f"G={preset.num_generations} completions" in badge  # the verdict of arithmetic's values
    assert shown["plan_valid"] is True
    assert "exact_answer" in str(shown["correctness_reward"])  # the choices follow the task's rewards
    # another task applies its presets
    other = outputs_by_label(event, page.run(event, setup_form_values(task=setup_tab.RunConfig().task)))
    assert (
        other["max_completion_length"]["value"]
        == setup_tab.RunConfig.for_task(setup_tab.RunConfig().task).max_completion_length
    )


def setup_tab_badge(app):
    live_plan = find_event(app, "workbench.ui.setup_tab", "live_plan")
    return live_plan.outputs[0]


def test_a_choice_starts_no_other_event_but_the_train_tab_s_launch_button(app):
    """Gradio sends one request per event, chained ones included: what a task or recipe choice sets must not start
    events of its own (a value set by a handler fires `change`, never `input`)."""
    for name in ("on_task", "on_recipe"):
        event = find_event(app, "workbench.ui.setup_tab", name)
        written = {block._id for block in event.outputs}
        started = [
            fn.fn.__qualname__
            for fn in app.fns.values()
            if fn.fn is not None and any(target in written and trigger == "change" for target, trigger in fn.targets)
        ]
        assert set(started) <= {"TrainTab.on_plan_valid"}, (name, started)  # only when the verdict flips


def test_launch_refuses_a_form_that_stops_a_launch_and_starts_nothing(app, runs_dir):
    event = find_event(app, "workbench.ui.setup_tab", "launch")
    note, tabs, launched = Page(app).run(event, setup_form_values(per_device_train_batch_size=None))["data"]
    assert "Not launched" in note and "per_device_train_batch_size" in note
    assert launched is None  # the Train tab is handed no run to follow
    assert "selected" not in str(tabs)  # the page stays on the Setup tab, where the refusal shows
    assert not any(runs_dir.glob("2*"))  # no run folder was made
