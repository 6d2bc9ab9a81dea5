"""From a dataset's own columns to what TRL reads: the prompt, the reference answer, and the text the model sees.

TRL reads the prompt from a column called `prompt` and hands every other
column to the reward functions. A hub dataset names its columns its own way
(GSM8K: `question`, `answer`), so a run says which column is the prompt
(`prompt_column`) and which holds the reference answer (`solution_column`);
the answer reaches rewards under TRL's name `solution` (after an optional
`solution_transform`, e.g. GSM8K's text after `####`) and under its own name.

A plain-text prompt is rendered one way, said out loud by `chat_template`:
`apply` makes it a user message (after the system prompt, when there is one)
that TRL renders with the model's chat template; `none` passes the text as is
(TRL's "standard" format: the model continues the raw text, the system prompt
put before it); `auto` applies the template when the model's tokenizer has
one. A prompt that already is a list of chat messages is used as is (TRL
always renders those with the chat template). `model_input_text` gives the
exact text the model receives for one prompt, rendered by transformers' own
chat template renderer from the tokenizer's files (no model, no torch).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from workbench.sources import chat_templates, model_files
from workbench.sources.dataset_reading import prompt_problem

CHAT_TEMPLATE_CHOICES = ("auto", "apply", "none")


def after_hashes(value: Any) -> str:
    """GSM8K's final answer: the text after the last `####`, stripped, thousands commas removed ("1,234" -> "1234")."""
    text = "" if value is None else str(value)
    return text.rpartition("####")[2].strip().replace(",", "")


SOLUTION_TRANSFORMS: dict[str, tuple[Callable[[Any], Any], str]] = {
    "none": (lambda value: value, "the column's value as it is"),
    "after_hashes": (after_hashes, "the text after the last `####` (GSM8K), stripped, commas removed"),
}


@dataclass(frozen=True)
class ColumnMapping:
    """Which columns are the prompt and the reference answer, and how a text prompt is rendered."""

    prompt_column: str = "prompt"
    solution_column: str = ""
    solution_transform: str = "none"
    system_prompt: str = ""
    apply_chat_template: bool = True


def render_prompt(value: Any, system_prompt: str, apply_chat_template: bool) -> Any:
    """One prompt as TRL gets it: chat messages (a text becomes a user message after the system prompt) or text."""
    if not isinstance(value, str):
        return value  # chat messages: used as they are
    if not apply_chat_template:
        return f"{system_prompt}\n\n{value}" if system_prompt else value
    system = [{"role": "system", "content": system_prompt}] if system_prompt else []
    return [*system, {"role": "user", "content": value}]


def map_row(row: dict, mapping: ColumnMapping) -> dict:
    """A dataset row as TRL reads it: `prompt` rendered from the prompt column, `solution` from the answer column;
    every original column kept (rewards read them under their own names)."""
    mapped = dict(row)
    mapped["prompt"] = render_prompt(row[mapping.prompt_column], mapping.system_prompt, mapping.apply_chat_template)
    if mapping.solution_column:
        transform = SOLUTION_TRANSFORMS[mapping.solution_transform][0]
        mapped["solution"] = transform(row[mapping.solution_column])
    return mapped


def mapping_problems(
    columns: list[str],
    rows: list[dict],
    mapping: ColumnMapping,
    source: str,
    chat_template: str = "auto",
    data_field: str = "dataset_name",
) -> list[tuple[str, str, str]]:
    """(field, rule, fix) for each column mapping the data (`columns`, its first `rows`) cannot follow.

    A prompt problem under the default prompt_column is the data's (`data_field`): the user named no column.
    """
    problems = []
    listed = ", ".join(f"`{c}`" for c in columns) or "none"
    prompt_field = "prompt_column" if mapping.prompt_column != "prompt" else data_field
    first = rows[0] if rows else None
    wrong = _prompt_row_problem(rows, mapping.prompt_column)
    if mapping.prompt_column not in columns:
        problems.append(
            (
                prompt_field,
                f"{source} has no `{mapping.prompt_column}` column (columns: {listed})",
                "set prompt_column to the column holding the questions",
            )
        )
    elif wrong:
        problems.append(
            (
                prompt_field,
                f"{source}: {wrong}",
                "set prompt_column to a column of text or chat messages, the same form in every row",
            )
        )
    elif mapping.prompt_column != "prompt" and "prompt" in columns:
        problems.append(
            (
                "prompt_column",
                f"{source} has a `prompt` column besides prompt_column "
                f"`{mapping.prompt_column}`, and TRL reads `prompt`",
                "set prompt_column=prompt, or remove or rename that column",
            )
        )
    elif first is not None and chat_template == "none" and not isinstance(first.get(mapping.prompt_column), str):
        problems.append(
            (
                "chat_template",
                "is none, and the prompts are chat messages, which TRL always renders with the model's chat template",
                "set chat_template=auto",
            )
        )
    if mapping.solution_column and mapping.solution_column not in columns:
        problems.append(
            (
                "solution_column",
                f"{source} has no `{mapping.solution_column}` column (columns: {listed})",
                "set solution_column to the column holding the reference answers, or leave it empty",
            )
        )
    return problems


def _prompt_row_problem(rows: list[dict], column: str) -> str | None:
    """What is wrong with the prompts of `rows` (a row without one, not text or messages, or text and messages
    mixed), naming the row; None when every prompt is usable."""
    kinds = set()
    for number, row in enumerate(rows, start=1):
        problem = prompt_problem(row.get(column))
        if problem:
            return f"row {number}: " + problem.replace("`prompt`", f"`{column}`")
        kinds.add(isinstance(row[column], str))
        if len(kinds) > 1:
            return f"row {number}: some prompts are text and some are chat messages; use one form for every row"
    return None


# ---------------------------------------------------------------- the chat template


@dataclass(frozen=True)
class ChatTemplate:
    """A tokenizer's chat template and the special tokens it may print, as read from its files; `trusted` when the
    server wrote them itself (`model_files.own_model_folder`), so it renders in the server, not in a child."""

    template: str
    special_tokens: dict
    trusted: bool = False


def _token_text(value: Any) -> Any:
    return value.get("content") if isinstance(value, dict) else value


def read_chat_template(folder: str | Path) -> ChatTemplate | None:
    """The chat template of the tokenizer saved in `folder` (chat_template.jinja or tokenizer_config.json), or None.

    Each file is read only when it holds at most the admin's limit (`model_files.read_model_file`: ModelError past
    it, naming WORKBENCH_MAX_MODEL_FILE_MB); a link or FIFO in a file's place reads as missing."""
    try:
        config = json.loads(model_files.read_model_file(folder, "tokenizer_config.json") or b"")
    except (ValueError, RecursionError) as exc:
        if isinstance(exc, model_files.ModelError):
            raise
        config = {}
    config = config if isinstance(config, dict) else {}
    jinja = model_files.read_model_file(folder, "chat_template.jinja")
    template = jinja.decode("utf-8", errors="replace") if jinja is not None else config.get("chat_template")
    if isinstance(template, list):  # named templates: the default one
        template = next(
            (t.get("template") for t in template if isinstance(t, dict) and t.get("name") == "default"), None
        )
    if not isinstance(template, str) or not template.strip():
        return None
    tokens = {
        key: _token_text(value)
        for key, value in config.items()
        if key.endswith("_token") and isinstance(_token_text(value), str)
    }
    return ChatTemplate(template, tokens, model_files.own_model_folder(folder))


def has_chat_template(folder: str | Path) -> bool | None:
    """Whether the model in `folder` has a chat template; None when its tokenizer is not on disk yet (a template
    past the size limit counts as one: the preview says why it cannot show it)."""
    folder = Path(folder)
    if not (folder / "tokenizer_config.json").is_file():
        return None
    try:
        return read_chat_template(folder) is not None
    except model_files.ModelError:
        return True


def resolve_chat_template(choice: str, has_template: bool | None) -> tuple[bool, str | None]:
    """(apply the template?, the problem when the choice cannot be followed) for a model with/without a template.

    `has_template` None (the model's tokenizer is not on disk yet) is taken as having one; the training process
    checks again with the tokenizer itself.
    """
    if choice not in CHAT_TEMPLATE_CHOICES:
        return True, f"{choice!r} is not one of {', '.join(CHAT_TEMPLATE_CHOICES)}"
    if choice == "none":
        return False, None
    if choice == "apply" and has_template is False:
        return False, "is apply, and the model's tokenizer has no chat template"
    return has_template is not False, None


def model_input_text(prompt: Any, template: ChatTemplate | None) -> str:
    """The exact text the model receives for one rendered prompt (what TRL gives `generate`).

    Chat messages go through the model's chat template with the generation prompt added, as TRL does
    (`apply_chat_template(..., add_generation_prompt=True, tokenize=False)`), rendered in the Jinja2
    environment transformers renders templates in (`chat_templates.compiled_template`): in the server for a
    template it wrote itself, else in a child process under the admin's time, memory and output limits
    (`chat_templates.render_in_child`; TemplateRefused says which bit); text goes as it is.
    """
    if isinstance(prompt, str):
        return prompt
    if template is None:
        raise ValueError("the prompt is chat messages and the model's tokenizer has no chat template")
    if template.trusted:
        return chat_templates.render(
            template.template, list(prompt), template.special_tokens, chat_templates.limits().output_chars
        )
    return chat_templates.render_in_child(template.template, list(prompt), template.special_tokens)
