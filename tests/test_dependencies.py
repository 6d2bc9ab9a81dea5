"""Dependencies are declared where tools look: pyproject.toml, with requirements files that agree with it.

Every third-party package `workbench/` imports (at the top of a module or
inside a function) must be a declared runtime dependency, with an exact pin;
requirements.txt (what the Makefile installs) holds exactly the runtime
dependencies and the `test` extra, and the GPU and model requirement files
the `vllm` and `model` extras.
"""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

import tomllib

REPO = Path(__file__).resolve().parents[1]
# Import names whose distribution is named otherwise.
DISTRIBUTION_OF = {"yaml": "pyyaml", "pynvml": "nvidia-ml-py", "gguf": "gguf"}


def normalised(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def pins(lines) -> dict[str, str]:
    """{distribution: version} of `name==version` lines (comments and blanks skipped)."""
    found = {}
    for line in lines:
        line = line.split("#", 1)[0].strip()
        if line:
            name, _, version = line.partition("==")
            assert version, f"{line!r} is not an exact pin"
            found[normalised(name)] = version
    return found


def project() -> dict:
    return tomllib.loads((REPO / "pyproject.toml").read_text())["project"]


def third_party_imports() -> dict[str, set[str]]:
    modules: dict[str, set[str]] = {}
    for path in (REPO / "workbench").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = (
                [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else [node.module]
                if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module
                else []
            )
            for name in names:
                top = name.split(".")[0]
                if top not in sys.stdlib_module_names and top != "workbench":
                    modules.setdefault(top, set()).add(str(path.relative_to(REPO)))
    return modules


def test_every_imported_package_is_a_pinned_runtime_dependency():
    declared = pins(project()["dependencies"])
    missing = {
        module: sorted(files)
        for module, files in third_party_imports().items()
        if normalised(DISTRIBUTION_OF.get(module, module)) not in declared
    }
    assert missing == {}, f"imported but not declared in pyproject.toml's dependencies: {missing}"


def test_requirements_files_agree_with_pyproject():
    meta = project()
    extras = meta["optional-dependencies"]
    runtime_and_test = pins(meta["dependencies"]) | pins(extras["test"])
    assert pins((REPO / "requirements.txt").read_text().splitlines()) == runtime_and_test
    assert pins((REPO / "requirements-gpu.txt").read_text().splitlines()) == pins(extras["vllm"])
    assert pins((REPO / "requirements-model.txt").read_text().splitlines()) == pins(extras["model"])


# The GPU kit's venv pins older versions of these where vLLM 0.31 requires them (requirements-gpu-venv.txt).
VLLM_BOUND = {"transformers", "huggingface-hub", "numpy"}


def test_the_gpu_venv_pins_the_projects_versions_except_where_vllm_bounds_them():
    own = pins((REPO / "requirements.txt").read_text().splitlines())
    gpu_venv = pins((REPO / "requirements-gpu-venv.txt").read_text().splitlines())
    assert gpu_venv["vllm"] == pins(project()["optional-dependencies"]["vllm"])["vllm"]
    differing = {name for name, version in gpu_venv.items() if name in own and own[name] != version}
    assert differing == VLLM_BOUND
    # what a training process imports is all there (the dashboard's packages are not needed in it)
    for needed in ("torch", "trl", "peft", "accelerate", "datasets", "math-verify", "orjson", "psutil", "pytest"):
        assert needed in gpu_venv, needed
