"""`python -m workbench report RUN --out FILE`: one HTML file from a run folder, and one-line refusals."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from workbench.cli import main
from workbench.runstore import runfolder
from workbench.spec.config import RunConfig

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture
def run_dir(tmp_path):
    """A finished two-step run folder: config, status, metrics and one round of completions per step."""
    folder = tmp_path / "runs" / "20261123-101500-demo"
    RunConfig.for_task("demo").with_changes(model="tiny", num_generations=2, max_steps=2).save(
        folder / runfolder.CONFIG_FILE
    )
    runfolder.write_json_atomic(folder / runfolder.STATUS_FILE, {"state": "finished", "step": 2, "total_steps": 2})
    runfolder.append_jsonl(
        folder / runfolder.METRICS_FILE, [{"step": s, "reward": 0.2 * s, "kl": 0.01 * s, "loss": 0.0} for s in (1, 2)]
    )
    runfolder.append_jsonl(
        folder / runfolder.COMPLETIONS_FILE,
        [
            {
                "step": s,
                "group": 0,
                "prompt": "Hi?",
                "completion": f"Hello {i}",
                "rewards": {"brevity": r},
                "reward": r,
                "advantage": a,
                "length": 3,
                "truncated": False,
            }
            for s in (1, 2)
            for i, (r, a) in enumerate([(0.2, -0.7), (0.8, 0.7)])
        ],
    )
    return folder


@pytest.fixture
def unwritable_folder(tmp_path):
    """A folder this process cannot create files in (root ignores permissions, so sysfs stands in)."""
    folder = tmp_path / "locked"
    folder.mkdir()
    folder.chmod(0o555)
    for candidate in (folder, Path("/sys")):
        try:
            (candidate / "probe").touch()
        except OSError:
            yield candidate
            break
        (candidate / "probe").unlink()
    else:
        pytest.skip("no folder here refuses writes to this user")
    folder.chmod(0o755)


@pytest.mark.slow
def test_report_from_the_command_line_writes_one_html_file(run_dir, tmp_path):
    out = tmp_path / "report.html"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "workbench",
            "report",
            run_dir.name,
            "--runs-dir",
            str(run_dir.parent),
            "--out",
            str(out),
        ],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert f"Report of run {run_dir.name} written to {out}" in result.stdout
    page = out.read_text(encoding="utf-8")
    assert page.startswith("<!DOCTYPE html>") and "Plotly.newPlot" in page and "Hello 1" in page


@pytest.mark.slow
def test_a_missing_run_is_one_line_from_the_command_line(tmp_path):
    result = subprocess.run(
        [sys.executable, "-m", "workbench", "report", "nope", "--runs-dir", str(tmp_path)],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        cwd=tmp_path,
        timeout=60,
    )
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert result.stderr.startswith("error: RUN: no run called 'nope'") and len(result.stderr.splitlines()) == 1


def test_the_default_place_is_the_run_folder(run_dir, capsys, monkeypatch):
    monkeypatch.setattr("workbench.insight.report.build_report", lambda contents: json.dumps(contents.config))
    assert main(["report", str(run_dir)]) == 0
    assert json.loads((run_dir / "report.html").read_text())["max_steps"] == 2
    assert "written to" in capsys.readouterr().out


@pytest.mark.parametrize(
    "out, words",
    [
        ("FOLDER", "is a folder; give a file name, e.g. --out"),
        ("missing/report.html", "does not exist; create it first"),
        ("UNWRITABLE/report.html", "cannot write"),
    ],
    ids=["a-folder", "no-such-folder", "unwritable"],
)
def test_bad_out_exits_2_with_one_line(run_dir, tmp_path, request, capsys, out, words):
    if "UNWRITABLE" in out:
        out = out.replace("UNWRITABLE", str(request.getfixturevalue("unwritable_folder")))
    out = out.replace("FOLDER", str(tmp_path))
    code = main(["report", str(run_dir), "--out", out if os.path.isabs(out) else str(tmp_path / out)])
    err = capsys.readouterr().err
    assert code == 2 and err.startswith("error: --out:") and words in err and len(err.strip().splitlines()) == 1


def test_a_folder_that_is_no_run_names_the_runs_there(run_dir, tmp_path, capsys):
    code = main(["report", str(tmp_path), "--runs-dir", str(run_dir.parent)])
    err = capsys.readouterr().err
    assert code == 2 and err.startswith("error: RUN:") and f"recent runs: {run_dir.name}" in err
    assert "give a run id or the path of a run folder" in err
