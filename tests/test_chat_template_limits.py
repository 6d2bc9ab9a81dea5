"""A chat template or model file past its limit: the child render and the bounded read say which limit bit and the
admin's setting that raises it; a template the server wrote itself renders in the server."""

from __future__ import annotations

import pytest

from workbench.sources import chat_templates, model_files
from workbench.spec import data_mapping

MESSAGES = [{"role": "user", "content": "hi"}]
PLAIN = "{% for m in messages %}<{{ m.role }}>{{ m.content }}{% endfor %}{% if add_generation_prompt %}<a>{% endif %}"
SMALL = chat_templates.Limits(time_s=2, memory_bytes=256 << 20, output_chars=1000)


def test_a_plain_template_renders_in_a_child_as_in_the_server():
    assert chat_templates.render_in_child(PLAIN, MESSAGES, {}, SMALL) == "<user>hi<a>"
    assert chat_templates.render(PLAIN, MESSAGES, {}, 1000) == "<user>hi<a>"


@pytest.mark.parametrize(
    ("source", "setting"),
    [
        ("{{ 'x' * 1500000000 }}", chat_templates.MEMORY_ENV),
        ("{% for a in range(100000) %}{% for b in range(100) %}x{% endfor %}{% endfor %}", chat_templates.OUTPUT_ENV),
        ("{% for a in range(100000) %}{% for b in range(100000) %}{% endfor %}{% endfor %}", chat_templates.TIME_ENV),
    ],
    ids=["memory", "output", "time"],
)
def test_a_template_past_a_limit_is_refused_naming_its_setting(source, setting):
    with pytest.raises(chat_templates.TemplateRefused, match=setting):
        chat_templates.render_in_child(source, MESSAGES, {}, SMALL)


def test_the_limits_come_from_the_admins_settings():
    bounds = chat_templates.limits({chat_templates.TIME_ENV: "1.5", chat_templates.OUTPUT_ENV: "x"})
    assert bounds.time_s == 1.5 and bounds.output_chars == chat_templates.DEFAULT_OUTPUT_MB << 20


def test_a_sparse_model_file_is_refused_before_it_is_read(tmp_path, monkeypatch):
    with open(tmp_path / "chat_template.jinja", "wb") as handle:
        handle.truncate(9 << 20)
    with pytest.raises(model_files.ModelError, match=model_files.MAX_FILE_ENV):
        data_mapping.read_chat_template(tmp_path)
    monkeypatch.setenv(model_files.MAX_FILE_ENV, "16")
    assert model_files.read_model_file(tmp_path, "chat_template.jinja") == bytes(9 << 20)
    (tmp_path / "link").symlink_to(tmp_path / "chat_template.jinja")
    assert model_files.read_model_file(tmp_path, "link") is None  # the folder's own files only


def test_only_the_servers_own_models_render_in_the_server(tmp_path):
    (tmp_path / "chat_template.jinja").write_text(PLAIN)
    template = data_mapping.read_chat_template(tmp_path)
    assert template is not None and not template.trusted
    assert data_mapping.model_input_text(MESSAGES, template) == "<user>hi<a>"
