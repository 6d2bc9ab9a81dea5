"""A setting's value as its field's type: text from the command line or a form, or JSON, read as an int, a float,
a bool, a list, a dict or an optional value, and the type described in words for the message when it cannot be.

`RunConfig.from_dict` and `parse_assignment` (spec/config.py) read every value
through `convert`. Pure: standard library only.
"""

from __future__ import annotations

import json
import typing
from typing import Any


def convert(kind: Any, value: Any) -> Any:
    """`value` as type `kind` (a type hint of RunConfig); TypeError or ValueError when it cannot be."""
    origin, args = typing.get_origin(kind), typing.get_args(kind)
    if origin is typing.Union or origin is getattr(__import__("types"), "UnionType", None):
        inner = [a for a in args if a is not type(None)][0]
        if value is None or (isinstance(value, str) and value.strip().lower() in ("", "none", "null")):
            return None
        return convert(inner, value)
    if kind is dict:
        if isinstance(value, str):
            value = json.loads(value) if value.strip() else {}
        if not isinstance(value, dict):
            raise TypeError(value)
        return value
    if origin is list:
        if isinstance(value, str):
            value = [v.strip() for v in value.split(",") if v.strip()]
        if not isinstance(value, (list, tuple)):
            raise TypeError(value)
        return [convert(args[0], v) for v in value]
    if kind is bool:
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.strip().lower() in ("true", "1", "yes", "on", "false", "0", "no", "off"):
            return value.strip().lower() in ("true", "1", "yes", "on")
        if isinstance(value, int) and value in (0, 1):
            return bool(value)
        raise TypeError(value)
    if kind is int:
        if isinstance(value, bool):
            raise TypeError(value)
        number = float(value) if isinstance(value, str) else value
        if not isinstance(number, (int, float)) or not float(number).is_integer():
            raise ValueError(value)
        return int(number)
    if kind is float:
        if isinstance(value, bool):
            raise TypeError(value)
        return float(value)
    if kind is str:
        if not isinstance(value, (str, int, float)):
            raise TypeError(value)
        return str(value)
    return value


def describe_type(kind: Any) -> str:
    """Type hint `kind` in words: "a whole number", "a list of texts", "a number or empty"."""
    origin, args = typing.get_origin(kind), typing.get_args(kind)
    if origin is list:
        return f"a list of {describe_type(args[0])}s (comma-separated on the command line)"
    if args and type(None) in args:
        return f"{describe_type([a for a in args if a is not type(None)][0])} or empty"
    return {int: "a whole number", float: "a number", bool: "true or false", str: "text", dict: "a JSON object"}.get(
        kind, str(kind)
    )
