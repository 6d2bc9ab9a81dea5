"""Prompts and completions as text, whether plain strings or chat messages.

TRL hands reward functions and logs either plain text or conversations (lists
of `{"role", "content"}` messages, where content may be a list of typed parts).
Every part of the workbench reads them through these functions, so a prompt
looks the same in the run folder, the reward functions and the dashboard.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def content_text(content: Any) -> str:
    """A message's content as text; of multimodal parts, only the text ones are kept."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, (list, tuple)):
        return "".join(p.get("text", "") for p in content if isinstance(p, Mapping))
    return str(content)


def completion_text(completion: Any) -> str:
    """The text of one completion: for a conversation, the content of its assistant messages."""
    if completion is None:
        return ""
    if isinstance(completion, str):
        return completion
    if isinstance(completion, Mapping):
        return content_text(completion.get("content"))
    if isinstance(completion, (list, tuple)):
        messages = [m for m in completion if isinstance(m, Mapping)]
        assistant = [m for m in messages if m.get("role", "assistant") == "assistant"] or messages
        return "".join(content_text(m.get("content")) for m in assistant)
    return str(completion)


def prompt_text(prompt: Any) -> str:
    """A prompt as text: for a conversation, the last message's content (the question asked)."""
    if isinstance(prompt, (list, tuple)) and prompt and isinstance(prompt[-1], Mapping):
        return content_text(prompt[-1].get("content"))
    return "" if prompt is None else str(prompt)


def transcript_text(value: Any) -> str:
    """A prompt or completion for reading in full: chat messages become `role: content` lines.

    A single assistant message (TRL's conversational completion) reads as its text alone.
    """
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, Mapping):
        role = value.get("role")
        text = content_text(value.get("content"))
        return f"{role}: {text}" if role else text
    if isinstance(value, (list, tuple)):
        if len(value) == 1 and isinstance(value[0], Mapping) and value[0].get("role") == "assistant":
            return content_text(value[0].get("content"))
        return "\n".join(transcript_text(item) for item in value)
    return str(value)
