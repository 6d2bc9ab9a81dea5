"""Hostile input in every field of the Setup tab: refused with a message or used as plain text, never a traceback.

Each field of the form (the values the browser sends, in the tab's own
order) gets each hostile value in turn; the tab's live update must answer
with its panels, and no answer may carry the markup it was given.
"""

from __future__ import annotations

import pytest
from helpers import HOSTILE, default_values

from workbench.ui import setup_tab

pytestmark = pytest.mark.slow  # 57 fields x 9 values, 10 MB strings among them: about 40 s


def answer(form: dict, scope=None) -> list:
    return setup_tab.update_plan(*[form[key] for key in setup_tab.FORM_KEYS], {"gpus": [], "busy": []}, scope=scope)


def test_the_untouched_form_is_ready_to_launch():
    assert answer(default_values())[-1] is True


@pytest.mark.parametrize("key", setup_tab.FORM_KEYS)
def test_every_field_survives_every_hostile_value(key):
    for label, value in HOSTILE.items():
        form = {**default_values(), key: value}
        try:
            outputs = answer(form)
        except Exception as exc:  # the test's point: name the field and value that broke through
            pytest.fail(f"{key} = {label}: {type(exc).__name__}: {str(exc)[:300]}")
        for output in outputs:
            text = str(output)
            # escaped (&lt;script&gt;) is fine: shown as text; a live tag is not
            assert "<script" not in text and "<img" not in text, f"{key} = {label} reached the page as markup"
        if label in ("markup", "unicode", "10 MB", "list") and key in ("per_device_train_batch_size", "learning_rate"):
            assert outputs[-1] is False, f"{key} = {label} must not be ready to launch"


@pytest.mark.parametrize(
    "key",
    [
        "task",
        "dataset_name",
        "reward_file",
        "seed",
        "use_exact_answer",
        "prompt_column",
        "solution_column",
        "solution_transform",
        "chat_template",
        "dataset_train_split",
    ],
)
def test_the_data_preview_survives_every_hostile_value(key):
    for label, value in HOSTILE.items():
        form = {**default_values(), key: value}
        try:
            html = setup_tab.preview_data(*[form[k] for k in setup_tab.FORM_KEYS], {"gpus": [], "busy": []})[0]
        except Exception as exc:
            pytest.fail(f"{key} = {label}: {type(exc).__name__}: {str(exc)[:300]}")
        assert "<script" not in html and "<img" not in html, f"{key} = {label} reached the page as markup"
        assert len(html) < 20_000, f"{key} = {label}: the preview grew to {len(html)} characters"


@pytest.mark.parametrize("key", ["model", "dataset_name", "reward_file"])
def test_a_shared_dashboards_path_fields_survive_every_hostile_value(key, tmp_path):
    """With accounts the path fields must name what the path rule allows: refused, never a traceback."""
    from workbench.access.owners import Viewer
    from workbench.ui.paths_view import scope_for

    scope = scope_for(tmp_path, Viewer("bob"))
    for label, value in HOSTILE.items():
        try:
            outputs = answer({**default_values(), key: value}, scope=scope)
        except Exception as exc:
            pytest.fail(f"{key} = {label}: {type(exc).__name__}: {str(exc)[:300]}")
        assert all("<script" not in str(o) and "<img" not in str(o) for o in outputs), f"{key} = {label}"
        if value is not None:
            assert outputs[-1] is False and "in your uploads folder" in str(outputs[-3]), label
        form = {**default_values(), key: value}
        html = setup_tab.preview_data(*[form[k] for k in setup_tab.FORM_KEYS], {"gpus": [], "busy": []}, scope=scope)
        assert "<script" not in html and "<img" not in html, f"{key} = {label}: the preview"
