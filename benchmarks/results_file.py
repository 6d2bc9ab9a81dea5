"""Where a benchmark keeps what it measured: one JSON line per result in benchmarks/results/<benchmark>.jsonl, with
the figures, the command that gave them, the machine's CPU and cores, the library versions and the date. The speed
choices in the product are measured on the user's machine (workbench/tuning/); these files are the record that the
documentation quotes."""

from __future__ import annotations

import json
import shlex
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from workbench.tuning.machine import fingerprint  # noqa: E402

RESULTS_DIR = Path(__file__).resolve().parent / "results"


def record(benchmark: str, figures: dict, argv: list[str] | None = None, note: str = "") -> Path:
    """Append one result of `benchmark` (its figures: JSON-able) to its results file; returns the file."""
    import os

    argv = sys.argv if argv is None else argv
    line = {
        "benchmark": benchmark,
        "date": time.strftime("%Y-%m-%d %H:%M", time.gmtime()),
        "command": "python "
        + shlex.join(
            [
                str(Path(argv[0]).relative_to(ROOT))
                if Path(argv[0]).is_absolute() and ROOT in Path(argv[0]).parents
                else argv[0],
                *argv[1:],
            ]
        ),
        "load_average": [round(x, 2) for x in os.getloadavg()],
        **fingerprint(),
        "note": note,
        "figures": figures,
    }
    RESULTS_DIR.mkdir(exist_ok=True)
    path = RESULTS_DIR / f"{benchmark}.jsonl"
    with path.open("a", encoding="utf-8") as handle:
        handle.write(json.dumps(line) + "\n")
    return path


def read(benchmark: str) -> list[dict]:
    """Every recorded result of `benchmark`, oldest first."""
    path = RESULTS_DIR / f"{benchmark}.jsonl"
    if not path.is_file():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
