"""A model's chat template rendered to the text the model receives, with a bound on its time, memory and output.

A chat template is a program (Jinja2): one a run's code wrote into a model folder can multiply a string past the
machine's memory (`{{ 'x' * 1500000000 }}`) or loop for hours, and Jinja2's sandbox bounds neither. So a template
the server did not write itself renders in a child process of its own (`render_in_child`: a fresh interpreter
that imports only this module and Jinja2, under RLIMIT_AS, RLIMIT_DATA and RLIMIT_CPU, killed past its wall time),
which answers the text or why there is none; the server holds at most the output limit of it. The server's own
converted models (the bundled SmolLM2, the tiny model: `model_files.own_model_folder`) carry the bundled
tokenizer's template, which the server wrote: it renders in the server (`render`), quick, as every keystroke of
the Setup form asks for it. Answers are kept per template and messages (`RESULTS_KEPT`), so a form whose data and
template did not change asks no child again.

The limits are the admin's (`limits`): WORKBENCH_TEMPLATE_TIME_S, WORKBENCH_TEMPLATE_MEMORY_MB and
WORKBENCH_TEMPLATE_OUTPUT_MB. Standard library and Jinja2; the compile is transformers 5's (`compiled_template`).
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import subprocess
import sys
import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

from workbench.errors import WorkbenchError

TIME_ENV = "WORKBENCH_TEMPLATE_TIME_S"
MEMORY_ENV = "WORKBENCH_TEMPLATE_MEMORY_MB"
OUTPUT_ENV = "WORKBENCH_TEMPLATE_OUTPUT_MB"
DEFAULT_TIME_S = 5.0
DEFAULT_MEMORY_MB = 512
DEFAULT_OUTPUT_MB = 4
RESULTS_KEPT = 8


class TemplateRefused(WorkbenchError):
    """A chat template that raised, ran past a limit, or made more text than the limit allows."""


@dataclass(frozen=True)
class Limits:
    """What one render may take: wall seconds, the child's address space in bytes, characters of output."""

    time_s: float = DEFAULT_TIME_S
    memory_bytes: int = DEFAULT_MEMORY_MB << 20
    output_chars: int = DEFAULT_OUTPUT_MB << 20


def _number(env: dict, name: str, default: float) -> float:
    try:
        value = float(env.get(name, ""))
    except ValueError:
        return default
    return value if value > 0 and value == value else default


def limits(env: dict | None = None) -> Limits:
    """The admin's limits from the server's environment, or the defaults (a value that is not a positive number)."""
    env = os.environ if env is None else env
    return Limits(
        _number(env, TIME_ENV, DEFAULT_TIME_S),
        int(_number(env, MEMORY_ENV, DEFAULT_MEMORY_MB) * 2**20),
        int(_number(env, OUTPUT_ENV, DEFAULT_OUTPUT_MB) * 2**20),
    )


@functools.lru_cache(maxsize=8)
def compiled_template(source: str):
    """A chat template compiled as transformers 5 compiles one (chat_template_utils._compile_jinja_template):
    a sandboxed environment with trim_blocks and lstrip_blocks, loop controls, the `tojson` filter and the
    `raise_exception` / `strftime_now` globals; its `{% generation %}` tag (which only marks the assistant's
    tokens for training masks) renders its body. Written here so the dashboard shows the text without
    importing transformers; tests/test_data_mapping.py checks it against the tokenizer's own rendering."""
    from datetime import datetime

    import jinja2
    import jinja2.ext
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    class GenerationTag(jinja2.ext.Extension):
        tags = {"generation"}

        def parse(self, parser):
            lineno = next(parser.stream).lineno
            body = parser.parse_statements(("name:endgeneration",), drop_needle=True)
            return jinja2.nodes.CallBlock(self.call_method("_body"), [], [], body).set_lineno(lineno)

        def _body(self, caller):
            return caller()

    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    def tojson(value, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(value, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

    env = ImmutableSandboxedEnvironment(
        trim_blocks=True, lstrip_blocks=True, extensions=[GenerationTag, jinja2.ext.loopcontrols]
    )
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = lambda fmt: datetime.now().strftime(fmt)
    return env.from_string(source)


def _too_long(most: int) -> TemplateRefused:
    return TemplateRefused(
        f"makes more than {most:,} characters for this prompt (the limit on a chat template's text); "
        f"the admin raises it with {OUTPUT_ENV} (MiB, default {DEFAULT_OUTPUT_MB})"
    )


def render(source: str, messages: list, tokens: dict, most: int) -> str:
    """The template's text for `messages` with the generation prompt, in this process, at most `most` characters
    (made a piece at a time, so a loop that writes without end stops at the limit)."""
    pieces, size = [], 0
    for piece in compiled_template(source).generate(messages=messages, add_generation_prompt=True, **tokens):
        size += len(piece)
        if size > most:
            raise _too_long(most)
        pieces.append(piece)
    return "".join(pieces)


_RESULTS: OrderedDict[str, tuple[bool, str]] = OrderedDict()
_RESULTS_LOCK = threading.Lock()


def render_in_child(source: str, messages: list, tokens: dict, bounds: Limits | None = None) -> str:
    """`render` in a child process under `bounds` (the admin's `limits()` by default); TemplateRefused with the
    limit and its setting, or the template's own error, when there is no text."""
    bounds = bounds or limits()
    payload = json.dumps(
        {"source": source, "messages": messages, "tokens": tokens, "most": bounds.output_chars}, default=str
    ).encode()
    key = hashlib.sha256(payload + repr(bounds).encode()).hexdigest()
    with _RESULTS_LOCK:
        kept = _RESULTS.get(key)
    if kept is None:
        kept = _run_child(payload, bounds)
        with _RESULTS_LOCK:
            _RESULTS[key] = kept
            while len(_RESULTS) > RESULTS_KEPT:
                _RESULTS.popitem(last=False)
    good, text = kept
    if not good:
        raise TemplateRefused(text)
    return text


def _run_child(payload: bytes, bounds: Limits) -> tuple[bool, str]:
    """(True, the text) or (False, why not) from one child render."""
    # -I: no environment variable, user site or current folder reaches the child; the package found by its path
    start = (
        f"import sys; sys.path.insert(0, {_package_root()!r}); from {__name__} import _child; "
        f"_child({bounds.memory_bytes}, {max(1, int(bounds.time_s) + 1)})"
    )
    try:
        done = subprocess.run(
            [sys.executable, "-I", "-c", start], input=payload, capture_output=True, timeout=bounds.time_s, env={}
        )
    except subprocess.TimeoutExpired:  # subprocess.run has killed it
        return False, (
            f"ran longer than {bounds.time_s:g} s (the limit on rendering a chat template); "
            f"the admin raises it with {TIME_ENV} (seconds, default {DEFAULT_TIME_S:g})"
        )
    try:
        answer = json.loads(done.stdout)  # at most the output limit of text: the child checks it
        return bool(answer["good"]), str(answer["text"])
    except (ValueError, KeyError, TypeError):
        if done.returncode < 0 or b"MemoryError" in done.stderr[-4096:]:
            return False, _memory_note(bounds)
        return False, f"its render ended without an answer (exit status {done.returncode})"


def _memory_note(bounds: Limits) -> str:
    return (
        f"needs more than {bounds.memory_bytes >> 20} MiB to render (the limit on rendering a chat template); "
        f"the admin raises it with {MEMORY_ENV} (MiB, default {DEFAULT_MEMORY_MB})"
    )


def _package_root() -> str:
    return os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _child(memory_bytes: int, cpu_s: int) -> None:
    """The child's side: its limits set before it reads the request, then one render answered as JSON."""
    import resource

    for limit in (resource.RLIMIT_AS, resource.RLIMIT_DATA):
        resource.setrlimit(limit, (memory_bytes, memory_bytes))
    resource.setrlimit(resource.RLIMIT_CPU, (cpu_s, cpu_s))
    request = json.loads(sys.stdin.buffer.read())
    try:
        text = render(request["source"], request["messages"], request["tokens"], request["most"])
        answer: dict[str, Any] = {"good": True, "text": text}
    except MemoryError:
        answer = {"good": False, "text": _memory_note(Limits(memory_bytes=memory_bytes))}
    except TemplateRefused as exc:
        answer = {"good": False, "text": str(exc)}
    except Exception as exc:  # the template's own error (raise_exception, a wrong filter): said as it is
        answer = {"good": False, "text": f"refuses this prompt: {type(exc).__name__}: {exc}"}
    sys.stdout.buffer.write(json.dumps(answer, ensure_ascii=False).encode("utf-8", "surrogatepass"))
