"""A fractional step count is refused by the field's name, never rounded: `max_steps` 2.5 was taken as 2 while
the field still showed 2.5 (gradio's precision=0 rounds before any handler sees the value)."""

from __future__ import annotations

import pytest
from helpers import setup_form_values

from workbench.spec.config import ConfigError, RunConfig, field_type
from workbench.ui import export_view, setup_layout, setup_tab, setup_view
from workbench.ui.calculator_view import make_plan_view
from workbench.ui.widgets import whole_number

WHOLE_FIELDS = [name for name in setup_view.SETTING_FIELDS if field_type(name) in (int, int | None)]


def test_the_setup_forms_whole_number_fields_hand_a_fraction_on_as_typed():
    assert "max_steps" in WHOLE_FIELDS
    defaults = RunConfig().to_dict()
    for name in WHOLE_FIELDS:
        component = setup_layout._setting(name, defaults[name])
        if hasattr(component, "precision"):  # a gr.Number (a field with choices is a dropdown)
            assert component.preprocess(2.5) == 2.5, name
            assert component.preprocess(3) == 3, name


@pytest.mark.parametrize("name", WHOLE_FIELDS)
def test_a_fraction_in_a_whole_number_field_is_refused_by_name(name):
    form = dict(zip(setup_tab.FORM_KEYS, setup_form_values(**{name: 2.5})))
    with pytest.raises(ConfigError) as caught:
        setup_view.config_from_form(form, gpus_present=False)
    problem = caught.value.problems[0]
    assert problem.field == name
    assert problem.rule.startswith("must be a whole number") and problem.rule.endswith("got 2.5"), problem.rule
    assert "whole number" in problem.fix


def test_max_steps_2_5_is_refused_with_the_rule_and_a_fix():
    form = dict(zip(setup_tab.FORM_KEYS, setup_form_values(max_steps=2.5)))
    with pytest.raises(ConfigError, match=r"max_steps: must be a whole number, got 2.5; give a whole number"):
        setup_view.config_from_form(form, gpus_present=False)


def test_the_calculators_fields_refuse_a_fraction_by_name():
    assert whole_number("per_device_train_batch_size", 2, minimum=None).preprocess(2.5) == 2.5
    view = make_plan_view({"per_device_train_batch_size": 2.5, "num_generations": 2})
    assert view.input_error is not None and view.input_error.field == "per_device_train_batch_size"
    assert "whole number" in str(view.input_error)


def test_the_cluster_exports_machine_count_is_never_cut():
    assert whole_number("num_machines", 1).preprocess(2.5) == 2.5
    with pytest.raises(ConfigError, match="num_machines: must be a whole number, got 2.5"):
        export_view.cluster_config(RunConfig(), 2.5, "10.0.0.1", 29500, "nccl", False)
    assert export_view.cluster_config(RunConfig(), 2, "10.0.0.1", 29500, "nccl", False).num_machines == 2
