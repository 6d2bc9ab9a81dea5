"""The package's layout as rules: which part may import which, no import cycles, pure views.

Read from the source with `ast` (imports inside functions count too), so a
new module that breaks the layering fails here before it confuses anyone.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "workbench"

# Each part and the parts it may import (besides itself and `workbench.errors`).
ALLOWED = {
    "calc": set(),
    "access": set(),
    "spec": {"calc"},
    "insight": {"spec"},
    "teach": {"spec"},
    "jobs": {"spec", "calc"},
    "trainer": {"spec", "calc", "jobs"},
    "cli": {"calc", "spec", "jobs", "trainer", "insight", "access"},
    "ui": {"calc", "spec", "jobs", "insight", "access"},
}


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
                is_module = (PACKAGE.parent / Path(*candidate.split("."))).with_suffix(".py").is_file() or \
                    (PACKAGE.parent / Path(*candidate.split(".")) / "__init__.py").is_file()
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
                cycle = stack[stack.index(nxt):] + [nxt]
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


def test_every_tab_has_a_pure_view_named_after_it():
    ui = PACKAGE / "ui"
    tabs = sorted(p.name.removesuffix("_tab.py") for p in ui.glob("*_tab.py"))
    assert tabs == ["calculator", "compare", "runs", "setup", "train"]
    for view in [ui / f"{tab}_view.py" for tab in tabs] + [ui / "completions_view.py"]:
        tree = ast.parse(view.read_text())
        imported = {a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
        imported |= {n.module.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
        assert "gradio" not in imported, f"{view.name} must stay pure (no gradio)"


def test_calc_exports_the_calculator():
    import workbench.calc as calc
    from workbench.calc.explain import explain
    from workbench.calc.frameworks import compare_frameworks

    assert calc.explain is explain and calc.compare_frameworks is compare_frameworks
    assert calc.plan(per_device_train_batch_size=1, num_generations=8).suggestions
