"""The run report the Runs tab offers: written into the run folder, and a copy in a private folder to download.

The report itself is built by workbench/insight/report.py from the run
folder's files (the same page `python -m workbench report` writes).
ui/cleanup.py removes day-old copies.
"""

from __future__ import annotations

import atexit
import functools
import shutil
import tempfile
from pathlib import Path

from workbench.insight import report, tokens
from workbench.modeltools import probes
from workbench.runstore import runfolder

REPORTS_PREFIX = "workbench-reports-"


@functools.cache
def reports_root(download_root: str | Path | None = None) -> Path:
    """This process's private folder of report copies: made once, 0700, under an unguessable name.

    A fixed name in the shared temporary folder would let another account
    of the machine read the reports, or plant a link where the next one is
    written. It goes when the process ends (the browser has its download by then).
    """
    root = Path(tempfile.mkdtemp(prefix=REPORTS_PREFIX, dir=download_root))
    atexit.register(shutil.rmtree, root, True)
    return root


def write_report(run_dir: str | Path, download_root: str | Path | None = None) -> tuple[Path, Path]:
    """Write the run's report into its folder (report.html) and a copy to download; returns both paths.

    Gradio hands the browser only files under the working folder or the system's
    temporary folder, and a runs folder may lie anywhere, so the copy goes to
    `<reports_root>/<run id>/<run id>-report.html`, in a private folder under
    `download_root` (the temporary folder by default; the next report of the
    run replaces it, and ui/cleanup.py removes day-old copies).
    """
    run_dir = Path(run_dir)
    contents = report.RunContents(
        name=run_dir.name,
        folder=str(run_dir),
        comparisons=probes.stored_comparisons(run_dir),
        last_tokens=tokens.last_step_tokens(run_dir),
        **runfolder.read_run(run_dir),
    )
    page = report.build_report(contents).encode("utf-8")
    written = run_dir / runfolder.REPORT_FILE
    runfolder.replace_file(written, page)
    copy = reports_root(download_root) / run_dir.name / f"{run_dir.name}-report.html"
    runfolder.replace_file(copy, page, mode=0o600)  # the download's copy: its folder's owner's alone
    return written, copy
