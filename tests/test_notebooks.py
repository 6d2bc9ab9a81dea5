"""The teaching notebooks: stored without outputs, and each runs top to bottom in a fresh kernel.

Each notebook is executed with nbclient in a kernel of this interpreter (the
project's .venv), from the notebooks folder, as `make notebooks` opens them,
with WORKBENCH_NOTEBOOK_QUICK=1 so training runs are cut short, and with a
temporary runs folder so no run is left in the checkout.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOK_DIR = ROOT / "notebooks"
NOTEBOOKS = sorted(NOTEBOOK_DIR.glob("*.ipynb"))
EXPECTED = (
    "01_batch_math",
    "02_loss_normalisation",
    "03_first_run",
    "04_reading_a_run",
    "05_vllm_generation",
    "06_gsm8k_recipe",
    "07_reward_hacking",
)
# A stored notebook may carry small outputs at most; executed ones embed
# plotly.js (megabytes) and must be stripped before committing.
MAX_STORED_OUTPUT_BYTES = 10_000
# The limit for one notebook on a 2-core CPU.
MAX_SECONDS = 300
PLOTLY_MIME = "application/vnd.plotly.v1+json"


@pytest.fixture(scope="module", autouse=True)
def nbformat_imported():
    """nbformat's import takes about 2 s (jsonschema's validators): once for the module, as a shared fixture."""
    import nbformat  # noqa: F401


def load(path: Path):
    import nbformat

    return nbformat.read(path, as_version=4)


def test_every_notebook_is_there():
    assert [path.stem for path in NOTEBOOKS] == list(EXPECTED)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[path.stem for path in NOTEBOOKS])
def test_stored_without_outputs(path):
    notebook = load(path)
    code_cells = [cell for cell in notebook.cells if cell.cell_type == "code"]
    stored = sum(len(json.dumps(cell.get("outputs", []))) for cell in code_cells)
    assert stored <= MAX_STORED_OUTPUT_BYTES, f"{path.name} carries {stored} bytes of outputs; clear them"
    assert all(cell.get("execution_count") is None for cell in code_cells), f"{path.name}: clear execution counts"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[path.stem for path in NOTEBOOKS])
def test_prose_between_code(path):
    """Teaching notebooks: a markdown cell opens it and no two code cells run without words between
    more than twice in a row."""
    kinds = [cell.cell_type for cell in load(path).cells]
    assert kinds[0] == "markdown"
    assert "code,code,code" not in ",".join(kinds)


@pytest.fixture(scope="module")
def kernel_spec_dir(tmp_path_factory):
    """A kernel spec pointing at this interpreter, so the notebooks run in the project's venv
    whatever other `python3` kernels the machine has."""
    folder = tmp_path_factory.mktemp("kernels") / "workbench-venv"
    folder.mkdir()
    spec = {
        "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "GRPO Workbench (.venv)",
        "language": "python",
    }
    (folder / "kernel.json").write_text(json.dumps(spec))
    return folder.parent


def execute(path: Path, kernels: Path, runs_dir: Path):
    from jupyter_client.kernelspec import KernelSpecManager
    from jupyter_client.manager import KernelManager
    from nbclient import NotebookClient

    notebook = load(path)
    manager = KernelManager(
        kernel_name="workbench-venv", kernel_spec_manager=KernelSpecManager(kernel_dirs=[str(kernels)])
    )
    env = {
        **os.environ,
        "WORKBENCH_NOTEBOOK_QUICK": "1",
        "WORKBENCH_RUNS_DIR": str(runs_dir),
        "PYTHONPATH": os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p),
    }
    client = NotebookClient(
        notebook, km=manager, timeout=MAX_SECONDS, resources={"metadata": {"path": str(NOTEBOOK_DIR)}}
    )
    try:
        client.execute(env=env)
    finally:  # a client given its kernel manager leaves the kernel running (a model in memory) until pytest exits
        manager.shutdown_kernel(now=True)
    return notebook


def plotly_outputs(notebook) -> int:
    return sum(
        PLOTLY_MIME in output.get("data", {})
        for cell in notebook.cells
        if cell.cell_type == "code"
        for output in cell.get("outputs", [])
    )


# the vLLM notebook starts a CPU vLLM server, which takes every core
RUNS = [
    pytest.param(path, marks=pytest.mark.one_at_a_time("vllm")) if "vllm" in path.stem else path for path in NOTEBOOKS
]


@pytest.mark.slow
@pytest.mark.parametrize("path", RUNS, ids=[path.stem for path in NOTEBOOKS])
def test_runs_top_to_bottom(path, kernel_spec_dir, tmp_path):
    import psutil

    runs_dir = tmp_path / "runs"
    started = time.monotonic()
    notebook = execute(path, kernel_spec_dir, runs_dir)
    seconds = time.monotonic() - started
    assert seconds < MAX_SECONDS, f"{path.name} took {seconds:.0f} s"
    assert plotly_outputs(notebook) >= 1, f"{path.name} rendered no plotly figure"
    errors = [
        output for cell in notebook.cells for output in cell.get("outputs", []) if output.get("output_type") == "error"
    ]
    assert not errors
    # Whatever the notebook trained in the background is finished and its process ends
    # (it writes its final state just before exiting, so give it a few seconds).
    for status_file in runs_dir.glob("*/status.json"):
        status = json.loads(status_file.read_text())
        assert status["state"] == "finished", status
        processes = []
        for pid in {status.get("pid"), status.get("pgid")} - {None}:
            try:
                processes.append(psutil.Process(pid))
            except psutil.NoSuchProcess:
                pass
        _, alive = psutil.wait_procs(processes, timeout=30)
        alive = [p for p in alive if p.status() != psutil.STATUS_ZOMBIE]
        assert not alive, f"{path.name} left training processes behind: {alive}"
