"""A person's own reward functions, from a Python file: imported (`load_reward_file`, in the process that runs
them) or read from its source without running any of it (`read_reward_file`, `read_reward_names`, for a dashboard
that must not run a user's code).
"""

from __future__ import annotations

import ast
import functools
import importlib.util
import inspect
import sys
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from workbench.spec.rewards.reward_errors import RewardFileError
from workbench.spec.rewards.reward_library import TRL_ARGUMENTS, RewardFunc


def _reward_path(path: str | Path) -> Path:
    path = Path(path).expanduser()
    if not path.is_file():
        raise RewardFileError(
            f"reward_file: no file at '{path}'; give the path of a .py file defining functions "
            f"f(prompts, completions, **kwargs) -> list[float]"
        )
    if path.suffix != ".py":
        raise RewardFileError(f"reward_file: '{path}' is not a .py file; reward functions must live in a Python file")
    return path


def _syntax_error(path: Path, exc: SyntaxError) -> RewardFileError:
    return RewardFileError(
        f"reward_file '{path}' does not import: syntax error on line {exc.lineno}: {exc.msg}; fix that line"
    )


def _no_function_error(path: Path) -> RewardFileError:
    return RewardFileError(
        f"reward_file '{path}' defines no reward function; define e.g. "
        f"`def my_reward(prompts, completions, **kwargs): return [1.0 for _ in completions]`"
    )


def load_reward_file(path: str | Path) -> dict[str, RewardFunc]:
    """Import a Python file and return its public reward functions by name.

    A public reward function is a function defined in that file, whose name does
    not start with "_", and that accepts `completions` as a keyword (by name or
    through **kwargs) - so helper functions with other signatures are left out.
    Importing runs the file's code: a process that must not run it (the
    dashboard of a shared server) reads the names with `read_reward_names`.
    """
    path = _reward_path(path)
    module_name = f"workbench_user_rewards_{abs(hash(str(path.resolve())))}"
    spec = importlib.util.spec_from_file_location(module_name, path)
    module = importlib.util.module_from_spec(spec)
    try:
        sys.modules[module_name] = module  # so dataclasses/pickle inside the file can find it
        spec.loader.exec_module(module)
    except SyntaxError as exc:
        sys.modules.pop(module_name, None)
        raise _syntax_error(path, exc) from None
    except BaseException as exc:  # any error while the user's code runs, reported without a traceback
        sys.modules.pop(module_name, None)
        if isinstance(exc, KeyboardInterrupt):
            raise
        line = _user_line(exc, path)
        raise RewardFileError(
            f"reward_file '{path}' does not import: {type(exc).__name__}: {exc}{line}; "
            f"fix the file (or install the package it needs)"
        ) from None
    functions = {
        name: func
        for name, func in vars(module).items()
        if inspect.isfunction(func)
        and not name.startswith("_")
        and func.__module__ == module_name
        and _accepts_completions(func)
    }
    if not functions:
        raise _no_function_error(path)
    return functions


# Longest reward file read without running it: code, not data (the parse runs on every Setup keystroke).
MAX_REWARD_SOURCE_BYTES = 1_000_000


@dataclass(frozen=True)
class RewardSource:
    """A reward function as its file's source states it, never run: its name and the columns it asks for.

    `needs_columns` / `optional_columns` are what `reward_columns` reads, so
    the column checks treat it as they treat a loaded function.
    """

    name: str
    needs_columns: tuple[str, ...] = ()
    optional_columns: tuple[str, ...] = ()


def read_reward_file(path: str | Path) -> dict[str, RewardSource]:
    """The reward functions a Python file defines, read from its source without running any of it.

    The same rule as `load_reward_file`, applied to the file's top-level
    `def`s (`ast`, nothing imported or executed): public names whose
    parameters include `completions` or `**kwargs`; the columns each needs
    come from its signature as `reward_columns` reads them. A file that does
    not parse is refused as one that does not import; what only running it
    would show (a missing package, an error at import, `needs_columns` set in
    code) surfaces in the training process, where the file runs.
    """
    path = _reward_path(path)
    info = path.stat()
    if info.st_size > MAX_REWARD_SOURCE_BYTES:
        raise RewardFileError(
            f"reward_file '{path}' is {info.st_size / 1e6:.1f} MB; a reward file is code, at most "
            f"{MAX_REWARD_SOURCE_BYTES / 1e6:.0f} MB: move data it reads into the dataset"
        )
    return {found.name: found for found in _rewards_in_source(str(path), info.st_mtime_ns, info.st_size)}


def read_reward_names(path: str | Path) -> list[str]:
    """The names of the reward functions a file defines, read without running it (see read_reward_file)."""
    return list(read_reward_file(path))


@functools.lru_cache(maxsize=32)
def _rewards_in_source(path: str, mtime_ns: int, size: int) -> tuple[RewardSource, ...]:
    """The reward functions in the file as it is at (`mtime_ns`, `size`): parsed once per version."""
    try:
        tree = ast.parse(Path(path).read_bytes(), filename=path)
    except SyntaxError as exc:
        raise _syntax_error(Path(path), exc) from None
    except (OSError, ValueError, RecursionError, MemoryError) as exc:  # unreadable, NUL bytes, absurdly nested
        raise RewardFileError(
            f"reward_file '{path}' cannot be read as Python ({type(exc).__name__}); save it as a plain UTF-8 .py file"
        ) from None
    found = tuple(
        _reward_source(node)
        for node in tree.body
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and not node.name.startswith("_")
    )
    found = tuple(reward for reward in found if reward is not None)
    if not found:
        raise _no_function_error(Path(path))
    return found


def _reward_source(node: ast.FunctionDef | ast.AsyncFunctionDef) -> RewardSource | None:
    """The reward a top-level `def` defines (None when it takes no `completions`): its columns from its signature."""
    args = node.args
    positional = [*args.posonlyargs, *args.args]
    # defaults belong to the last positional parameters; kw_defaults holds None for a keyword without one
    defaulted = {arg.arg for arg in positional[len(positional) - len(args.defaults) :]} | {
        arg.arg for arg, default in zip(args.kwonlyargs, args.kw_defaults) if default is not None
    }
    names = [arg.arg for arg in (*positional, *args.kwonlyargs)]
    if args.kwarg is None and "completions" not in names:
        return None
    columns = [name for name in names if name not in TRL_ARGUMENTS]
    return RewardSource(
        node.name, tuple(c for c in columns if c not in defaulted), tuple(c for c in columns if c in defaulted)
    )


def _accepts_completions(func: Callable) -> bool:
    params = inspect.signature(func).parameters.values()
    return any(p.name == "completions" or p.kind is p.VAR_KEYWORD for p in params)


def _user_line(exc: BaseException, path: Path) -> str:
    # the deepest frame inside the user's file, so the message points at their line
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if Path(f.filename) == path]
    return f" (line {frames[-1].lineno})" if frames else ""
