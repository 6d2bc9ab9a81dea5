"""Column mapping and prompt rendering: GSM8K's columns to TRL's `prompt` / `solution`, the chat template choice,
the exact text the model receives (checked against the tokenizer's own apply_chat_template), and the config's
refusals of a mapping the data cannot follow."""

import json
from pathlib import Path

import pytest
from helpers import gsm8k_like_rows, tiny_config, write_hub_dataset

from workbench.spec import data_mapping
from workbench.spec.config import ConfigError
from workbench.spec.config_checks import check_config, validate_config
from workbench.spec.data_mapping import ColumnMapping, after_hashes, map_row, render_prompt

GSM = ColumnMapping(
    prompt_column="question",
    solution_column="answer",
    solution_transform="after_hashes",
    system_prompt="Reason step by step.",
    apply_chat_template=True,
)


@pytest.mark.parametrize(
    "answer, solution",
    [
        ("3 + 4 = 7\n#### 7", "7"),
        ("so 1,000 + 234\n#### 1,234 ", "1234"),
        ("#### 5\nthen #### 6", "6"),
        ("no marker 9", "no marker 9"),
    ],
    ids=["plain", "commas", "last-marker", "no-marker"],
)
def test_after_hashes_takes_gsm8k_final_answer(answer, solution):
    assert after_hashes(answer) == solution


def test_a_gsm8k_row_maps_to_trls_prompt_and_solution_keeping_its_columns():
    row = gsm8k_like_rows(1)[0]
    mapped = map_row(row, GSM)
    assert mapped["prompt"] == [
        {"role": "system", "content": "Reason step by step."},
        {"role": "user", "content": row["question"]},
    ]
    assert mapped["solution"] == "1002"  # "#### 1,002" after the marker, comma removed
    assert (mapped["question"], mapped["answer"]) == (row["question"], row["answer"]), "kept under their own names"


@pytest.mark.parametrize(
    "apply, system, expected",
    [
        (True, "", [{"role": "user", "content": "Hi?"}]),
        (False, "", "Hi?"),
        (False, "Be brief.", "Be brief.\n\nHi?"),
    ],
    ids=["template", "raw", "raw-with-system"],
)
def test_text_prompts_render_as_the_choice_says(apply, system, expected):
    assert render_prompt("Hi?", system, apply) == expected


def test_chat_messages_are_used_as_they_are():
    messages = [{"role": "user", "content": "Hi?"}]
    assert render_prompt(messages, "ignored", True) is messages
    assert render_prompt(messages, "ignored", False) is messages


@pytest.mark.parametrize(
    "choice, has, expected",
    [
        ("auto", True, (True, None)),
        ("auto", False, (False, None)),
        ("auto", None, (True, None)),
        ("apply", True, (True, None)),
        ("apply", False, (False, "is apply, and the model's tokenizer has no chat template")),
        ("none", True, (False, None)),
    ],
    ids=["auto-chat", "auto-base", "auto-unknown", "apply", "apply-base", "none"],
)
def test_the_chat_template_choice_resolves_per_model(choice, has, expected):
    assert data_mapping.resolve_chat_template(choice, has) == expected


@pytest.mark.slow  # loads the tiny model's tokenizer (transformers imports torch)
def test_the_text_the_model_receives_is_the_tokenizers_own(tiny_model):
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tiny_model)
    template = data_mapping.read_chat_template(tiny_model)
    prompt = map_row(gsm8k_like_rows(1)[0], GSM)["prompt"]
    text = data_mapping.model_input_text(prompt, template)
    assert text == tokenizer.apply_chat_template(prompt, add_generation_prompt=True, tokenize=False)
    assert "Reason step by step." in text and text.rstrip().endswith("assistant")
    assert data_mapping.model_input_text("raw text", template) == "raw text"


TEMPLATE_WITH_EXTRAS = (
    "{{ bos_token }}{% for m in messages %}{% if m.role == 'tool' %}{{ raise_exception('no tools') }}{% endif %}"
    "{% if loop.index > 5 %}{% break %}{% endif %}<|{{ m.role }}|>{{ m.content | tojson }}"
    "{% if m.role == 'assistant' %}{% generation %}{{ m.content }}{% endgeneration %}{% endif %}\n{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>{% endif %}"
)


@pytest.mark.slow  # imports transformers
@pytest.mark.parametrize("source", ["bundled", "extras"])
def test_the_renderer_is_transformers_own_on_its_environments_features(source, tiny_model):
    """The dashboard renders templates without transformers: what it shows equals transformers' rendering, for
    the tiny model's template and for one using tojson, loop controls, raise_exception and {% generation %}."""
    from transformers.utils.chat_template_utils import render_jinja_template

    template = data_mapping.read_chat_template(tiny_model)
    if source == "extras":
        template = data_mapping.ChatTemplate(TEMPLATE_WITH_EXTRAS, {"bos_token": "<s>"})
    messages = [
        {"role": "system", "content": 'Think "twice".'},
        {"role": "user", "content": "2 + 2? é"},
        {"role": "assistant", "content": "4"},
        {"role": "user", "content": "And 3 + 3?"},
    ]
    theirs = render_jinja_template(
        conversations=[messages], chat_template=template.template, add_generation_prompt=True, **template.special_tokens
    )[0][0]
    assert data_mapping.model_input_text(messages, template) == theirs


@pytest.fixture
def gsm_folder(tmp_path):
    return str(
        write_hub_dataset(
            tmp_path / "gsm8k", {"main": {"train": gsm8k_like_rows(8), "test": gsm8k_like_rows(2, start=50)}}
        )
    )


def test_a_gsm8k_folder_mapped_passes_the_checks(gsm_folder):
    cfg = tiny_config(
        dataset_name=gsm_folder,
        dataset_config="main",
        dataset_train_split="train[:4]",
        prompt_column="question",
        solution_column="answer",
        solution_transform="after_hashes",
        reward_names=["brevity"],
    )
    assert validate_config(cfg) == []


@pytest.mark.parametrize(
    "changes, field, words",
    [
        ({}, "dataset_name", ["has no `prompt` column", "`question`, `answer`", "set prompt_column"]),
        ({"prompt_column": "query"}, "prompt_column", ["no `query` column", "`question`, `answer`"]),
        ({"prompt_column": "question", "solution_column": "final"}, "solution_column", ["no `final` column"]),
        (
            {"prompt_column": "question", "dataset_config": "socratic"},
            "dataset_config",
            ["'socratic' is not a config", "configs: main"],
        ),
        (
            {"prompt_column": "question", "dataset_train_split": "validation"},
            "dataset_train_split",
            ["'validation' is not a split", "splits: train, test"],
        ),
        (
            {"prompt_column": "question", "solution_transform": "last_number"},
            "solution_transform",
            ["'last_number' is not one of none, after_hashes"],
        ),
        ({"prompt_column": "question", "chat_template": "always"}, "chat_template", ["not one of auto, apply, none"]),
        (
            {"prompt_column": "question", "reward_names": ["exact_answer"], "solution_column": ""},
            "reward_names",
            ["exact_answer needs the column `answer`"],
        ),
    ],
    ids=[
        "no-prompt",
        "unknown-prompt",
        "unknown-solution",
        "unknown-config",
        "unknown-split",
        "unknown-transform",
        "unknown-template",
        "reward-column",
    ],
)
def test_a_mapping_the_data_cannot_follow_is_refused_naming_the_field(gsm_folder, changes, field, words):
    values = {"dataset_name": gsm_folder, "reward_names": ["brevity"], **changes}
    if field == "reward_names":  # a reward that needs a column the data lacks (`answer` renamed away)
        values["dataset_name"] = str(
            write_hub_dataset(Path(gsm_folder).parent / "q", {"main": {"train": [{"question": "1+1?"}]}})
        )
    with pytest.raises(ConfigError) as info:
        check_config(tiny_config(**values))
    assert field in [p.field for p in info.value.problems]
    for word in words:
        assert word in str(info.value)


def test_the_older_dataset_path_and_dataset_name_cannot_disagree(gsm_folder, tmp_path):
    other = tmp_path / "p.jsonl"
    other.write_text('{"prompt": "hi"}\n')
    problems = validate_config(tiny_config(dataset_name=gsm_folder, dataset_path=str(other)))
    assert [(p.field, p.rule) for p in problems] == [("dataset_path", "is set beside dataset_name, its newer name")]
    assert validate_config(tiny_config(dataset_path=str(other), reward_names=["brevity"])) == []


@pytest.mark.parametrize(
    "rows, words",
    [
        ([{"prompt": "a"}, {"prompt": ""}], "row 2: the `prompt` is empty"),
        ([{"prompt": "a"}, {"other": "b"}], "row 2: the `prompt` is NoneType"),
        (
            [{"prompt": "a"}, {"prompt": [{"role": "user", "content": "b"}]}],
            "row 2: some prompts are text and some are",
        ),
    ],
    ids=["empty", "missing", "mixed"],
)
def test_every_checked_row_needs_a_usable_prompt_of_one_form(tmp_path, rows, words):
    path = tmp_path / "data.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    problems = validate_config(tiny_config(dataset_name=str(path), reward_names=["brevity"]))
    assert [p.field for p in problems] == ["dataset_name"] and words in problems[0].rule
