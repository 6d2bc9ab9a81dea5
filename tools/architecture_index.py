"""ARCHITECTURE.md's module index, made from the code: every module of `workbench/`, by part, with the first
sentence of its docstring.

    python tools/architecture_index.py          # rewrite the index in ARCHITECTURE.md
    python tools/architecture_index.py --check  # exit 1 when the index is not the code's (tests/test_architecture.py)
"""

from __future__ import annotations

import argparse
import ast
import re
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PACKAGE = REPO / "workbench"
ARCHITECTURE = REPO / "ARCHITECTURE.md"
BEGIN = "<!-- module index: written by tools/architecture_index.py from each module's docstring -->"
END = "<!-- end of the module index -->"


def first_sentence(path: Path) -> str:
    """The first sentence of a module's docstring, on one line."""
    docstring = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or ""
    paragraph = " ".join(docstring.split("\n\n")[0].split())
    match = re.match(r"(.+?\.)(\s|$)", paragraph)
    return (match.group(1) if match else paragraph).rstrip(":;.") + "."


def module_index() -> str:
    """The index: one heading per part (the top-level modules first), one line per module."""
    groups: dict[str, list[str]] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        relative = path.relative_to(PACKAGE)
        if "__pycache__" in relative.parts or path.name == "__init__.py" and len(relative.parts) == 1:
            continue
        part = relative.parts[0] if len(relative.parts) > 1 else "(top level)"
        name = str(relative.with_suffix("")) if path.name != "__init__.py" else str(relative.parent) + "/"
        groups.setdefault(part, []).append(f"- `{name}`: {first_sentence(path)}")
    lines = [BEGIN, ""]
    for part in sorted(groups, key=lambda p: (p != "(top level)", p)):
        lines += [f"**{part}**", "", *groups[part], ""]
    return "\n".join([*lines, END])


def with_index(text: str) -> str:
    """ARCHITECTURE.md's text with its index replaced by the code's."""
    start, end = text.index(BEGIN), text.index(END) + len(END)
    return text[:start] + module_index() + text[end:]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="only say whether the index is current")
    args = parser.parse_args(argv)
    text = ARCHITECTURE.read_text(encoding="utf-8")
    wanted = with_index(text)
    if args.check:
        if wanted != text:
            print("ARCHITECTURE.md's module index is not the code's: run python tools/architecture_index.py")
            return 1
        return 0
    ARCHITECTURE.write_text(wanted, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
