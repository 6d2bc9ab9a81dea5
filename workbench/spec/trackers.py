"""Trackers people already use, fed by TRL's own integrations: TensorBoard and trackio, both offline.

A run's `report_to` (RunConfig) names them; the run folder stays the record
and each tracker writes inside it:

- `tensorboard`: event files in `<run>/tensorboard/` (transformers'
  TensorBoardCallback, pointed there by TENSORBOARD_LOGGING_DIR);
  open them with `tensorboard --logdir runs/<id>/tensorboard`.
- `trackio`: a local trackio project (`grpo-workbench`, one SQLite file) in
  `<run>/trackio/` (TRACKIO_DIR), the run named after its folder; no Space, no
  server, nothing sent anywhere. Open it with
  `TRACKIO_DIR=runs/<id>/trackio trackio show --project grpo-workbench`.

trackio reads TRACKIO_DIR once, when it is first imported, and TRL imports it
with its trainer whenever it is installed: `environment` must be applied
before TRL loads. Pure standard library.
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

REPORT_TO = ("tensorboard", "trackio")
TENSORBOARD_DIR = "tensorboard"
TRACKIO_DIR = "trackio"
TRACKIO_PROJECT = "grpo-workbench"
# Variables that would send trackio's metrics to a Hugging Face Space or a server: never inherited by a run.
TRACKIO_REMOTE_VARIABLES = ("TRACKIO_SPACE_ID", "TRACKIO_SERVER_URL", "TRACKIO_BUCKET_ID", "TRACKIO_DATASET_ID")


def problems(report_to: list[str]) -> list[tuple[str, str, str]]:
    """(field, rule, fix) for each tracker that is unknown, named twice, or not installed."""
    found = []
    for name in report_to:
        if name not in REPORT_TO:
            found.append(
                (
                    "report_to",
                    f"{name!r} is not a tracker the workbench passes on",
                    f"choose from {', '.join(REPORT_TO)}, or leave it empty (the run folder alone)",
                )
            )
        elif importlib.util.find_spec(name) is None:  # each tracker's package carries its name
            found.append(
                (
                    "report_to",
                    f"{name} is not installed in this Python",
                    f"run `make setup` (requirements.txt pins {name}), or remove {name} from report_to",
                )
            )
    if len(set(report_to)) != len(report_to):
        found.append(("report_to", "names a tracker twice", "name each tracker once"))
    return found


def environment(report_to: list[str], run_dir: str | os.PathLike) -> tuple[dict[str, str], tuple[str, ...]]:
    """(variables to set, variables to remove) in the training process, so each tracker writes into the run folder."""
    run_dir = Path(run_dir)
    settings = {}
    if "tensorboard" in report_to:
        settings["TENSORBOARD_LOGGING_DIR"] = str(run_dir / TENSORBOARD_DIR)
    if "trackio" in report_to:
        settings["TRACKIO_DIR"] = str(run_dir / TRACKIO_DIR)
    return settings, (TRACKIO_REMOTE_VARIABLES if "trackio" in report_to else ())


def open_commands(report_to: list[str], run_dir: str | os.PathLike) -> list[str]:
    """The command that opens each tracker's view of the run."""
    run_dir = Path(run_dir)
    commands = {
        "tensorboard": f"tensorboard --logdir {run_dir / TENSORBOARD_DIR}",
        "trackio": f"TRACKIO_DIR={run_dir / TRACKIO_DIR} trackio show --project {TRACKIO_PROJECT}",
    }
    return [commands[name] for name in report_to if name in commands]
