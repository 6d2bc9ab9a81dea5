"""The package's layout as rules: which part may import which (sources/, the reading of models, datasets and GPUs,
below spec/, which imports none of the libraries that read them), no import cycles, pure views that do no I/O,
short functions and small modules, unique module names, no measured figure in the code, Gradio's internals touched
in one package only (ui/gradio_compat/), and private parts of TRL, transformers, PEFT, accelerate and torch in one
module (workbench/library_compat.py).

Read from the source with `ast` (imports inside functions count too), so a
new module that breaks the layering fails here before it confuses anyone.
Nothing here imports gradio: its submodules are listed from its folder.
"""

from __future__ import annotations

import ast
import importlib.util
import re
import subprocess
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "workbench"

# Each part and the parts it may import (besides itself and the shared top-level modules, SHARED).
# sources/ (reading models, datasets and GPUs) sits below spec/: every part that may import spec may import it.
ALLOWED = {
    "calc": set(),
    "access": set(),
    "sources": set(),
    "spec": {"calc", "sources"},
    "runstore": {"spec", "sources"},
    "tuning": {"spec", "sources", "runstore"},
    "insight": {"spec", "sources", "runstore"},
    "teach": {"spec", "sources"},
    "jobs": {"spec", "sources", "calc", "runstore", "tuning"},
    "modeltools": {"spec", "sources", "runstore", "jobs"},
    "trainer": {"spec", "sources", "calc", "runstore", "jobs", "tuning"},
    "cli": {"calc", "spec", "sources", "runstore", "jobs", "modeltools", "trainer", "insight", "access", "tuning"},
    "ui": {"calc", "spec", "sources", "runstore", "jobs", "modeltools", "insight", "access", "tuning"},
}


# Modules outside the parts, which any part may import; they import no other workbench module.
SHARED = {"workbench.errors", "workbench.startup", "workbench.library_compat"}


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def workbench_imports(path: Path) -> set[str]:
    """Every `workbench.*` module `path` imports, at the top or inside a function."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names if alias.name.startswith("workbench"))
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("workbench"):
            for alias in node.names:
                candidate = f"{node.module}.{alias.name}"
                is_module = (PACKAGE.parent / Path(*candidate.split("."))).with_suffix(".py").is_file() or (
                    PACKAGE.parent / Path(*candidate.split(".")) / "__init__.py"
                ).is_file()
                found.add(candidate if is_module else node.module)
    return found


MODULES = {module_name(path): path for path in sorted(PACKAGE.rglob("*.py"))}
GRAPH = {name: workbench_imports(path) & set(MODULES) for name, path in MODULES.items()}


def part_of(name: str) -> str | None:
    parts = name.split(".")
    return parts[1] if len(parts) > 2 or (len(parts) == 2 and parts[1] in ALLOWED) else None


@pytest.mark.parametrize("name", sorted(n for n in MODULES if part_of(n)))
def test_each_part_imports_only_the_parts_below_it(name):
    part = part_of(name)
    for imported in GRAPH[name]:
        other = part_of(imported)
        if other is None or other == part:
            continue
        assert other in ALLOWED[part], f"{name} imports {imported}: {part}/ may import only {sorted(ALLOWED[part])}"


# The libraries that read models, datasets and GPUs: only sources/ (and the parts above spec) import them; spec/
# describes and checks a run without them.
READING_LIBRARIES = {"torch", "transformers", "datasets", "huggingface_hub", "pynvml", "gguf", "pyarrow", "safetensors"}


def imported_top_levels(source: str) -> set[str]:
    """The top-level package of every module the code `source` imports, at the top or inside a function (relative
    imports left out: they are the workbench's own)."""
    found = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            found.add(node.module.split(".")[0])
    return found


@pytest.mark.parametrize("name", sorted(n for n in MODULES if part_of(n) == "spec"))
def test_spec_reads_nothing_through_the_heavy_libraries(name):
    used = imported_top_levels(MODULES[name].read_text(encoding="utf-8")) & READING_LIBRARIES
    assert not used, (
        f"{name} imports {sorted(used)}: spec/ describes a run; reading models, datasets or GPUs belongs in sources/"
    )


def test_the_spec_rule_sees_imports_inside_functions():
    code = (
        "def f():\n    from datasets import Dataset\n    import pyarrow.parquet as pq\nimport json\nfrom . import x\n"
    )
    assert imported_top_levels(code) & READING_LIBRARIES == {"datasets", "pyarrow"}


def test_outside_the_parts_only_the_shared_modules_and_the_entry_point():
    top_level = {name for name in MODULES if name.count(".") == 1 and part_of(name) is None}
    assert top_level == SHARED | {"workbench.__main__"}
    for name in SHARED:
        assert GRAPH[name] == set(), f"{name} imports {GRAPH[name]}: a shared module imports no other workbench module"


def test_no_import_cycles():
    # The package __init__ files only re-export their own modules, so an edge into a
    # package stands for its members; follow modules, not packages.
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(name: str) -> None:
        state[name] = 1
        stack.append(name)
        for nxt in sorted(GRAPH.get(name, ())):
            if nxt == name or MODULES[nxt].name == "__init__.py" and name.startswith(nxt + "."):
                continue
            if state.get(nxt) == 1:
                cycle = stack[stack.index(nxt) :] + [nxt]
                raise AssertionError("import cycle: " + " -> ".join(cycle))
            if nxt not in state:
                visit(nxt)
        stack.pop()
        state[name] = 2

    for name in sorted(GRAPH):
        if name not in state:
            visit(name)


def test_every_module_says_what_it_is_for():
    missing = [name for name, path in MODULES.items() if not ast.get_docstring(ast.parse(path.read_text()))]
    assert not missing, f"modules without a docstring: {missing}"


# Modules sharing a basename (none: a traceback or an editor tab names one module).
SHARED_BASENAMES: dict[str, int] = {}


def test_module_basenames_are_unique_so_a_traceback_says_which_module():
    counts: dict[str, int] = {}
    for path in PACKAGE.rglob("*.py"):
        if path.name != "__init__.py":
            counts[path.name] = counts.get(path.name, 0) + 1
    shared = {name: count for name, count in counts.items() if count > 1}
    assert shared == SHARED_BASENAMES, f"modules sharing a basename: {shared}"


def test_every_tab_has_a_pure_view_named_after_it():
    ui = PACKAGE / "ui"
    tabs = sorted(p.name.removesuffix("_tab.py") for p in ui.glob("*_tab.py"))
    assert tabs == ["calculator", "compare", "explorer", "runs", "setup", "train"]
    for view in [ui / f"{tab}_view.py" for tab in tabs] + [ui / "completions_view.py"]:
        tree = ast.parse(view.read_text())
        imported = {a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
        imported |= {n.module.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
        assert "gradio" not in imported, f"{view.name} must stay pure (no gradio)"


# ---- views do no I/O; functions stay short ----------------------------------------------------------

VIEWS = sorted(path for path in (PACKAGE / "ui").glob("*_view.py"))
# Modules whose use is file or process I/O: a view imports none of them.
IO_MODULES = {"os", "shutil", "tempfile", "glob", "io", "subprocess", "socket", "fcntl", "mmap", "sqlite3"}
# pathlib.Path's methods that touch the file system (`Path.replace` is left out: the AST cannot tell it from
# `str.replace`); a view calls none of them, on any object.
PATH_IO_METHODS = {
    "read_text",
    "read_bytes",
    "write_text",
    "write_bytes",
    "open",
    "touch",
    "mkdir",
    "rmdir",
    "unlink",
    "rename",
    "iterdir",
    "glob",
    "rglob",
    "walk",
    "stat",
    "lstat",
    "exists",
    "is_file",
    "is_dir",
    "is_symlink",
    "resolve",
    "samefile",
    "readlink",
    "symlink_to",
    "hardlink_to",
    "chmod",
}
# The readers of a run folder: a view may name their constants and types (a name that starts with a capital
# letter: FINAL_STATES, RunIdError, Seen), never call their functions.
READER_MODULES = {
    "workbench.runstore.runfolder",
    "workbench.runstore.jsonl_cache",
    "workbench.runstore.file_cache",
    "workbench.insight.follow",
    "workbench.runstore.safe_files",
    "workbench.runstore.launch_records",
}
MAX_FUNCTION_LINES = 80


def view_io(tree: ast.AST) -> list[str]:
    """Each place in a view module's `tree` that does or reaches file I/O, as "line N: what" (the rule of
    ARCHITECTURE.md: no `open(`, no Path file method, no I/O module, the run folder's readers only by their
    capitalised names)."""
    readers: set[str] = set()  # local names bound to a reader module
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] in IO_MODULES:
                    found.append(f"line {node.lineno}: imports {alias.name}")
                if alias.name in READER_MODULES:
                    readers.add(alias.asname or alias.name)
        elif isinstance(node, ast.ImportFrom) and node.module:
            if node.module.split(".")[0] in IO_MODULES:
                found.append(f"line {node.lineno}: imports from {node.module}")
            for alias in node.names:
                if f"{node.module}.{alias.name}" in READER_MODULES:
                    readers.add(alias.asname or alias.name)
                elif node.module in READER_MODULES and not alias.name[:1].isupper():
                    found.append(f"line {node.lineno}: imports {node.module}.{alias.name}")
        elif isinstance(node, ast.Call):
            if isinstance(node.func, ast.Name) and node.func.id == "open":
                found.append(f"line {node.lineno}: calls open(")
            elif isinstance(node.func, ast.Attribute) and node.func.attr in PATH_IO_METHODS:
                found.append(f"line {node.lineno}: calls .{node.func.attr}(")
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id in readers
            and not node.attr[:1].isupper()
        ):
            found.append(f"line {node.lineno}: uses {node.value.id}.{node.attr}")
    return sorted(found, key=lambda place: int(place.split(":")[0].removeprefix("line ")))


@pytest.mark.parametrize("view", VIEWS, ids=[path.stem for path in VIEWS])
def test_views_do_no_io(view):
    found = view_io(ast.parse(view.read_text(encoding="utf-8")))
    assert not found, (
        f"{view.name} must stay pure: the tab reads and writes, the view renders what it is given: {found}"
    )


def test_the_io_rule_finds_each_kind_of_io():
    code = """
import os
from pathlib import Path
from workbench.runstore import runfolder, jsonl_cache
from workbench.runstore.runfolder import FINAL_STATES, read_status
from workbench.insight import follow
from workbench.insight.follow import Seen
with open(path) as handle: pass
Path(x).read_text()
folder.stat().st_size
runfolder.read_config(run_dir)
runfolder.FINAL_STATES, runfolder.RunIdError, follow.Changes, Seen, text.replace("a", "b")
jsonl_cache.records(path)
follow.look(seen, run_dir)
"""
    assert view_io(ast.parse(code)) == [
        "line 2: imports os",
        "line 5: imports workbench.runstore.runfolder.read_status",
        "line 8: calls open(",
        "line 9: calls .read_text(",
        "line 10: calls .stat(",
        "line 11: uses runfolder.read_config",
        "line 13: uses jsonl_cache.records",
        "line 14: uses follow.look",
    ]


def long_functions(tree: ast.AST, limit: int = MAX_FUNCTION_LINES) -> list[str]:
    """Each function (or method, nested ones too) of `tree` longer than `limit` lines, counted from its `def`
    line to its last line, as "name (line N): L lines"."""
    return [
        f"{node.name} (line {node.lineno}): {node.end_lineno - node.lineno + 1} lines"
        for node in ast.walk(tree)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.end_lineno - node.lineno + 1 > limit
    ]


def test_no_function_is_longer_than_80_lines():
    found = {
        str(path.relative_to(PACKAGE)): long_functions(ast.parse(path.read_text(encoding="utf-8")))
        for path in sorted(PACKAGE.rglob("*.py"))
    }
    found = {name: functions for name, functions in found.items() if functions}
    assert not found, (
        f"functions in workbench/ longer than {MAX_FUNCTION_LINES} lines (split them into named steps; a tab's "
        f"layout into parts, its handlers into methods of the tab's class): {found}"
    )


def test_the_length_rule_counts_from_def_to_the_last_line():
    body = "\n".join(f"    x{i} = {i}" for i in range(79))
    assert long_functions(ast.parse(f"def fits():\n{body}\n")) == []
    assert long_functions(ast.parse(f"@decorated\ndef too_long():\n{body}\n    x = 1\n")) == [
        "too_long (line 2): 81 lines"
    ]


def test_calc_exports_the_calculator():
    import workbench.calc as calc
    from workbench.calc.explain import explain
    from workbench.calc.frameworks import compare_frameworks

    assert calc.explain is explain and calc.compare_frameworks is compare_frameworks
    assert calc.plan(per_device_train_batch_size=1, num_generations=8).suggestions


# ---- Gradio's internals: only ui/gradio_compat/ touches them ---------------------------------------------

COMPAT = PACKAGE / "ui" / "gradio_compat"
# The package's files, each named with "gradio" and "compat" (its __init__ aside, which names it by its folder).
COMPAT_FILES = sorted(COMPAT.glob("*.py"))
# gradio's submodules that are public API (`gr.themes.Soft`); every other submodule is its internals.
PUBLIC_GRADIO_MODULES = {"themes"}


def gradio_submodules() -> set[str]:
    """The names of gradio's modules and packages (gradio.blocks, gradio.routes, ...), found without importing it."""
    folder = Path(importlib.util.find_spec("gradio").submodule_search_locations[0])
    return {path.stem for path in folder.glob("*.py")} | {
        path.name for path in folder.iterdir() if (path / "__init__.py").is_file()
    }


def compat_internal_attributes() -> set[str]:
    """gradio_compat.INTERNAL_ATTRIBUTES, read from its source (importing it would not import gradio, but stay sure)."""
    for path in COMPAT_FILES:
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            if isinstance(node, ast.Assign) and any(
                getattr(t, "id", None) == "INTERNAL_ATTRIBUTES" for t in node.targets
            ):
                return set(ast.literal_eval(node.value))
    raise AssertionError("gradio_compat/ has no INTERNAL_ATTRIBUTES")


def on_own_object(node: ast.Attribute) -> bool:
    """`self.x`, `cls.x`, `super().x`: an attribute of the module's own class, not of someone else's object."""
    base = node.value
    return (isinstance(base, ast.Name) and base.id in ("self", "cls")) or (
        isinstance(base, ast.Call) and isinstance(base.func, ast.Name) and base.func.id == "super"
    )


def gradio_internals(tree: ast.AST, handles_gradio: bool, submodules: set[str], internal: set[str]) -> list[str]:
    """Each place in the module `tree` that reaches past Gradio's public API, as "line N: what".

    The rule (ARCHITECTURE.md): gradio is imported as `import gradio [as gr]`,
    `from gradio import <a public name>` or from gradio.themes, never one of its
    other submodules, whether imported or reached as `gr.<submodule>`. In a module
    that handles Gradio's objects (`handles_gradio`: every module of ui/, and any
    that imports gradio), no attribute starting with one underscore and none of
    gradio_compat.INTERNAL_ATTRIBUTES is touched except on `self`, `cls` or `super()`.
    """
    private = submodules - PUBLIC_GRADIO_MODULES
    aliases = {
        alias.asname or "gradio"
        for node in ast.walk(tree)
        if isinstance(node, ast.Import)
        for alias in node.names
        if alias.name == "gradio"
    }
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [
                f"line {node.lineno}: imports {alias.name}"
                for alias in node.names
                if alias.name.startswith("gradio.") and alias.name.split(".")[1] in private
            ]
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "gradio":
            parts = node.module.split(".")
            if len(parts) > 1 and parts[1] in private:
                found.append(f"line {node.lineno}: imports from {node.module}")
            elif len(parts) == 1:
                found += [
                    f"line {node.lineno}: imports gradio.{alias.name}" for alias in node.names if alias.name in private
                ]
        elif isinstance(node, ast.Attribute):
            if isinstance(node.value, ast.Name) and node.value.id in aliases and node.attr in private:
                found.append(f"line {node.lineno}: reaches {node.value.id}.{node.attr}")
            elif (
                handles_gradio
                and not on_own_object(node)
                and ((node.attr.startswith("_") and not node.attr.startswith("__")) or node.attr in internal)
            ):
                found.append(f"line {node.lineno}: touches .{node.attr}")
    return sorted(found, key=lambda tie: int(tie.split(":")[0].removeprefix("line ")))


def test_only_gradio_compat_touches_gradio_internals():
    submodules, internal = gradio_submodules(), compat_internal_attributes()
    assert COMPAT_FILES and all(
        path.name == "__init__.py" or {"gradio", "compat"} <= set(path.stem.split("_")) for path in COMPAT_FILES
    ), [path.name for path in COMPAT_FILES]
    found = {}
    for name, path in MODULES.items():
        if path in COMPAT_FILES:
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        handles_gradio = name.startswith("workbench.ui.") or any(
            (isinstance(node, ast.Import) and any(a.name.split(".")[0] == "gradio" for a in node.names))
            or (isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "gradio")
            for node in ast.walk(tree)
        )
        problems = gradio_internals(tree, handles_gradio, submodules, internal)
        if problems:
            found[name] = problems
    assert not found, (
        f"only workbench/ui/gradio_compat/ may touch Gradio's internals (move the tie there, with its check): {found}"
    )


def test_the_gradio_rule_finds_each_kind_of_tie():
    submodules, internal = gradio_submodules(), compat_internal_attributes()
    assert {"blocks", "routes", "queueing", "profiling", "components", "themes"} <= submodules
    ties = """
import gradio as gr
import gradio.routes
from gradio import profiling, Blocks
from gradio.blocks import postprocess_update_dict
from gradio.components.plot import PlotData
from gradio.themes import Soft
queue = blocks._queue
gr.blocks.convert_component_dict_to_list
app.tokens = tokens
gr.themes.Soft(); gr.Button("fine"); self._mine; super()._theirs; self.tokens; x.__name__
"""
    found = gradio_internals(ast.parse(ties), True, submodules, internal)
    assert found == [
        "line 3: imports gradio.routes",
        "line 4: imports gradio.profiling",
        "line 5: imports from gradio.blocks",
        "line 6: imports from gradio.components.plot",
        "line 8: touches ._queue",
        "line 9: reaches gr.blocks",
        "line 10: touches .tokens",
    ], found
    # Outside the modules that handle Gradio's objects, a private attribute is another library's business
    # (trainer/ reaches into TRL's, and says so); gradio's submodules stay off limits everywhere.
    assert gradio_internals(ast.parse("trainer._metrics\nfrom gradio import routes"), False, submodules, internal) == [
        "line 2: imports gradio.routes"
    ]
    # gradio_compat holds the real ties, so the rule has something to find there.
    assert (
        sum(
            len(gradio_internals(ast.parse(path.read_text(encoding="utf-8")), True, submodules, internal))
            for path in COMPAT_FILES
        )
        >= 10
    )


# ---- tests import helpers and fixtures, never another test file ----------------------------------------------


def test_no_test_file_imports_another():
    tests = Path(__file__).resolve().parent
    found = []
    for path in sorted(tests.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = (
                [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else [node.module]
                if isinstance(node, ast.ImportFrom) and node.module
                else []
            )
            found += [
                f"{path.name} imports {name}"
                for name in names
                if name.split(".")[0].startswith("test_") or name.startswith("tests.test_")
            ]
    assert not found, f"share it through tests/helpers.py or a fixture in conftest.py instead: {found}"


# ---- private parts of TRL, transformers, PEFT, accelerate and torch: only in workbench/library_compat.py ---------

LIBRARY_COMPAT = PACKAGE / "library_compat.py"
# the rebinding of a cache layer's tensors (transformers' DynamicLayer.keys/.values), a tie of the registry
REBOUND_CACHE_ATTRIBUTES = {"keys", "values"}


def is_private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def root_name(node: ast.AST) -> str | None:
    """`torch` for `torch.nn.Module`, `GRPOTrainer` for `GRPOTrainer`: the name an expression starts from."""
    while isinstance(node, ast.Attribute):
        node = node.value
    return node.id if isinstance(node, ast.Name) else None


def imported_names(tree: ast.AST, roots: set[str]) -> set[str]:
    """The names the module binds by importing from a package whose top level is in `roots`."""
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(
                (alias.asname or alias.name).split(".")[0] for alias in node.names if alias.name.split(".")[0] in roots
            )
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] in roots:
            names.update(alias.asname or alias.name for alias in node.names)
    return names


def library_classes(tree: ast.AST, libraries: set[str]) -> list[ast.ClassDef]:
    """The module's classes with a base imported from one of `libraries` (GRPOTrainer, torch.nn.Module, ...)."""
    bound = imported_names(tree, libraries)
    return [
        node
        for node in ast.walk(tree)
        if isinstance(node, ast.ClassDef) and any(root_name(base) in bound for base in node.bases)
    ]


def own_private_names(trees: list[ast.AST], libraries: set[str]) -> set[str]:
    """The private names the workbench gives its own things: functions, classes, variables, arguments, import
    aliases, names declared in a class body, and attributes set on `self` outside subclasses of a library's class
    (a subclass declares its own in its class body: what it sets on `self` may be its library's)."""
    own = set()
    for tree in trees:
        subclasses = library_classes(tree, libraries)
        inside = {id(node) for cls in subclasses for node in ast.walk(cls)}
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and id(node) not in inside:
                own.add(node.name)
            elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                own.add(node.id)
            elif isinstance(node, ast.arg):
                own.add(node.arg)
            elif isinstance(node, ast.alias) and node.asname:
                own.add(node.asname)
            elif (
                isinstance(node, ast.Attribute)
                and isinstance(node.ctx, ast.Store)
                and id(node) not in inside
                and isinstance(node.value, ast.Name)
                and node.value.id == "self"
            ):
                own.add(node.attr)
    return {name for name in own if is_private(name)}


def library_private_reaches(tree: ast.AST, registry: set[str], own: set[str], libraries: set[str]) -> list[str]:
    """Each place in the module `tree` that reaches a private part of `libraries`, as "line N: what".

    The rule (ARCHITECTURE.md): a name of workbench/library_compat.py's registry is never spelled outside it (as an
    attribute, a name, a method defined, a keyword or a string); nothing is imported from a private module or under
    a private name of these libraries; no attribute starting with one underscore is touched, on any object, unless
    the workbench itself gives that name to something of its own (a module's standard-library imports aside:
    `os._exit`); a subclass of a library's class defines no private method (an override of a private hook goes
    through library_compat.GRPOHooks); and no cache layer's keys or values are rebound on another object.
    """
    stdlib = imported_names(tree, set(sys.stdlib_module_names))
    inside = {id(node): cls.name for cls in library_classes(tree, libraries) for node in ast.walk(cls)}
    found = []
    for node in ast.walk(tree):
        line = f"line {getattr(node, 'lineno', 0)}: "
        if isinstance(node, ast.Attribute) and node.attr in registry:
            found.append(f"{line}reaches .{node.attr}")
        elif isinstance(node, ast.Name) and node.id in registry:
            found.append(f"{line}names {node.id}")
        elif isinstance(node, ast.keyword) and node.arg in registry:
            found.append(f"{line}passes {node.arg}=")
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in registry:
            found.append(f"{line}spells {node.value!r}")
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and (
            node.name in registry or (id(node) in inside and is_private(node.name))
        ):
            found.append(f"{line}defines {node.name} in {inside.get(id(node), 'the module')}")
        elif isinstance(node, ast.Import):
            found += [
                f"{line}imports {alias.name}"
                for alias in node.names
                if alias.name.split(".")[0] in libraries and any(is_private(part) for part in alias.name.split("."))
            ]
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] in libraries:
            found += [
                f"{line}imports {alias.name} from {node.module}"
                for alias in node.names
                if is_private(alias.name) or any(is_private(part) for part in node.module.split("."))
            ]
        elif (
            isinstance(node, ast.Attribute)
            and is_private(node.attr)
            and node.attr not in own
            and root_name(node) not in stdlib
        ):
            found.append(f"{line}touches {ast.unparse(node.value)}.{node.attr}")
        elif (
            isinstance(node, ast.Attribute)
            and isinstance(node.ctx, ast.Store)
            and node.attr in REBOUND_CACHE_ATTRIBUTES
            and not on_own_object(node)
        ):
            found.append(f"{line}rebinds {ast.unparse(node.value)}.{node.attr}")
    return sorted(set(found), key=lambda tie: (int(tie.split(":")[0].removeprefix("line ")), tie))


def library_rule_inputs():
    """(every module's tree but the two registries', the registry's private names, the workbench's own private names,
    the five libraries). The two modules left out are the fixed allowlist: library_compat.py is the registry of
    these ties, and ui/gradio_compat/'s underscore attributes are Gradio's, kept there by the Gradio rule above."""
    from workbench import library_compat

    trees = {
        path: ast.parse(path.read_text(encoding="utf-8"))
        for path in sorted(PACKAGE.rglob("*.py"))
        if path != LIBRARY_COMPAT and path not in COMPAT_FILES
    }
    libraries = set(library_compat.LIBRARIES)
    return trees, set(library_compat.PRIVATE_NAMES), own_private_names(list(trees.values()), libraries), libraries


def test_only_library_compat_reaches_private_parts_of_the_libraries():
    """Every tie to a private part of TRL, transformers, PEFT, accelerate or torch is in workbench/library_compat.py's
    registry (why, what it touches, how to tell it is gone, what happens without it, checked at start-up), and every
    other module reaches it through that module's accessors and GRPOHooks."""
    trees, registry, own, libraries = library_rule_inputs()
    found = {
        str(path.relative_to(PACKAGE)): problems
        for path, tree in trees.items()
        if (problems := library_private_reaches(tree, registry, own, libraries))
    }
    assert not found, (
        "only workbench/library_compat.py may reach a private part of TRL, transformers, PEFT, "
        f"accelerate or torch (add the tie to its registry, with its check and an accessor): {found}"
    )


def test_the_library_rule_finds_each_kind_of_tie():
    _, registry, own, libraries = library_rule_inputs()
    ties = """
import os
import torch
from trl import GRPOTrainer
from trl.trainer import _private_module
from transformers.cache_utils import _helper
metrics = trainer._metrics
getattr(config, "_attn_implementation", None)
state = torch._C._get_tracing_state()
class Mine(GRPOTrainer):
    def _prepare_inputs(self, inputs):
        return super()._prepare_inputs(inputs)
layer.keys = keys
os._exit(0); self._unwritten_completions; library_compat.round_logs(trainer); self.keys = 1; x.__name__
"""
    assert library_private_reaches(ast.parse(ties), registry, own, libraries) == [
        "line 5: imports _private_module from trl.trainer",
        "line 6: imports _helper from transformers.cache_utils",
        "line 7: reaches ._metrics",
        "line 8: spells '_attn_implementation'",
        "line 9: touches torch._C",
        "line 9: touches torch._C._get_tracing_state",
        "line 11: defines _prepare_inputs in Mine",
        "line 12: touches super()._prepare_inputs",
        "line 13: rebinds layer.keys",
    ]
    # library_compat holds the real ties, so the rule has something to find there.
    compat = ast.parse(LIBRARY_COMPAT.read_text(encoding="utf-8"))
    assert len(library_private_reaches(compat, registry, own, libraries)) >= 20


def test_every_module_using_the_registry_is_a_site_of_a_tie_and_every_site_exists():
    from workbench import library_compat

    sites = {site for tie in library_compat.TIES for site in tie.sites}
    assert all((PACKAGE / site).is_file() for site in sites), sorted(s for s in sites if not (PACKAGE / s).is_file())
    users = {
        str(MODULES[name].relative_to(PACKAGE))
        for name, imported in GRAPH.items()
        if "workbench.library_compat" in imported
    }
    # the `ties` command and a run's verdict read the registry; every other module that imports it relies on a tie
    # it lists
    assert users - sites == {"cli/ties.py", "trainer/ties_verdict.py"}, users - sites


# ---- modules stay small; no measured figure in the code -------------------------------------------------------

MAX_MODULE_LINES = 650


def test_no_module_is_longer_than_650_lines():
    found = {
        str(path.relative_to(PACKAGE)): lines
        for path in sorted(PACKAGE.rglob("*.py"))
        if (lines := len(path.read_text(encoding="utf-8").splitlines())) > MAX_MODULE_LINES
    }
    assert not found, f"modules longer than {MAX_MODULE_LINES} lines (split them by job): {found}"


# A measured figure in a comment, docstring or help text is wrong after the first upgrade and on another machine:
# figures belong to benchmarks/results/, which docs/performance.md renders. These are the shapes a measurement
# takes in prose; a setting (a timeout, a cap, an interval the code uses) is none of them.
_NUMBER = r"\d+(?:\.\d+)?(?:-\d+(?:\.\d+)?)?"
_UNIT = r"(?:ms|s|seconds|minutes|min|MB|MiB|GB|GiB|KB|KiB|%|x)"
MEASURED_FIGURE = re.compile(
    "|".join(
        f"(?:{shape})"
        for shape in (
            # a comparison: "2.95 s instead of 3.64 s", "82 ms against 113-147 ms"
            rf"{_NUMBER} ?{_UNIT}[^\n]{{0,40}}?\b(?:against|instead of|vs\.?|versus|rather than|down from|up from)\b"
            rf"[^\n]{{0,20}}?{_NUMBER} ?{_UNIT}(?![A-Za-z])",
            # "measured ... 45.9 ms"
            rf"\bmeasured\b[^\n]{{0,60}}?{_NUMBER} ?{_UNIT}(?![A-Za-z])",
            # an estimate of a duration: "about 50 s", "~0.5 ms", "roughly 3 minutes"
            rf"(?:\babout|~|\baround|\broughly) ?{_NUMBER} ?(?:ms|s|seconds|minutes|min)\b",
            # a rate: "0.07 s a step", "3 ms per token"
            rf"{_NUMBER} ?(?:ms|s|seconds) (?:a|per|each) (?:step|check|token|call|page|request|run|row|prompt|completion)\b",
            # a fraction of a millisecond or a range of durations: "45.9 ms", "27-29 ms", "7-9 s"
            r"\d+\.\d+ ?ms\b",
            r"\b\d+(?:\.\d+)?-\d+(?:\.\d+)? ?(?:ms|s)\b",
            # a speed-up: "4x faster", "3 times slower"
            rf"{_NUMBER} ?(?:x|times) (?:faster|slower|quicker)\b",
        )
    ),
    re.IGNORECASE,
)


def measured_figures(text: str) -> list[str]:
    """Each line of `text` holding a measured figure, as "line N: the figure"."""
    return [
        f"line {number}: {match.group(0)}"
        for number, line in enumerate(text.splitlines(), 1)
        if (match := MEASURED_FIGURE.search(line))
    ]


def test_no_measured_figure_in_the_code():
    found = {
        str(path.relative_to(PACKAGE)): figures
        for path in sorted(PACKAGE.rglob("*.py"))
        if (figures := measured_figures(path.read_text(encoding="utf-8")))
    }
    assert not found, (
        "measured figures in workbench/ (say the reason in words and name the benchmark that "
        f"prints the figure): {found}"
    )


def test_the_figure_rule_finds_each_shape_and_spares_settings():
    prose = """pass (0.07 s a step for the 135M model
2.95 s instead of 3.64 s for the demo
head 82 ms against TRL's 113-147 ms
Measured (benchmarks/bench_decode_variants.py): 45.9 ms
(it loads the model first, about 50 s for SmolLM2
# resolving the hints: ~0.5 ms, once
re-imports torch and vLLM (7-9 s on 2 cores)
about 4x faster here
timeout_s: float = 10.0  # the guard gives its server 10 s to end
the bar's text is capped at 200 characters; redraws every 30 s on a CPU
step 3/10  reward 0.412  kl 0.0021  step_time 4.1 s
"""
    assert [place.split(":")[0] for place in measured_figures(prose)] == [f"line {n}" for n in range(1, 9)]


def test_architecture_md_indexes_every_module_with_its_job():
    # the index is made from the code (tools/architecture_index.py), so ARCHITECTURE.md names every module
    done = subprocess.run(
        [sys.executable, str(PACKAGE.parent / "tools" / "architecture_index.py"), "--check"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_architecture_md_draws_every_part():
    text = (PACKAGE.parent / "ARCHITECTURE.md").read_text(encoding="utf-8")
    picture = text[text.index("The parts, each above the parts it may import") :].split("```")[1]
    drawn = set(re.findall(r"\b([a-z]+)/", picture))
    assert drawn == set(ALLOWED), f"parts drawn {sorted(drawn)}, parts in the code {sorted(ALLOWED)}"
