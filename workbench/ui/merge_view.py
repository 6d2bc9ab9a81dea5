"""The Runs tab's merged-model export, pure: the choice of adapter, where it writes, its progress as HTML.

The dashboard writes merged models only inside the runs folder (by default
`<run>/merged`, or `<run>/merged-checkpoint-N`): a shared dashboard must not
create folders elsewhere on the server; the CLI (`python -m workbench
export-model`) writes anywhere. The export itself runs in its own process
(workbench/modeltools/export_model.py); `progress_html` renders what it reports.
No gradio and no file read: ui/merge_panel.py lists a run's adapters and resolves the folder typed.
"""

from __future__ import annotations

from html import escape
from pathlib import Path

from workbench.modeltools import export_model

FINAL = "final"  # the choice meaning the final adapter/

NOTE_CSS = """
.wb-merge-note { font-size: 0.9rem; border-radius: 8px; padding: 8px 12px; }
.wb-merge-note-info { background: #eff6ff; color: #1e3a8a; border: 1px solid #bfdbfe; }
.wb-merge-note-ok { background: #f0fdf4; color: #14532d; border: 1px solid #86efac; }
.wb-merge-note-error { background: #fef2f2; color: #7f1d1d; border: 1px solid #fca5a5; }
.wb-merge-bar { height: 6px; background: #e5e7eb; border-radius: 3px; margin-top: 6px; overflow: hidden; }
.wb-merge-bar > div { height: 100%; background: #3b82f6; }
.wb-merge-note code { word-break: break-all; }
"""


def checkpoint_of(choice: str | None) -> int | None:
    """The checkpoint step a choice names; None for the final adapter (or nothing chosen)."""
    return int(choice) if isinstance(choice, str) and choice.isdecimal() and len(choice) < 10 else None


def checkpoint_label(step: int, best: dict | None = None) -> str:
    """A checkpoint as the Adapter dropdown names it; the best evaluated one (`best`, its eval.jsonl record) says so."""
    label = f"checkpoint-{step} (step {step})"
    if best and best.get("step") == step and (best.get("best_checkpoint_metric") or "accuracy") != "accuracy":
        label += f" · best held-out {best['best_checkpoint_metric']}"  # the figure the run chose its best by
    elif best and best.get("step") == step:
        accuracy = best.get("accuracy")
        label += " · best held-out accuracy" + ("" if accuracy is None else f" ({accuracy:.0%})")
    return label


def default_out_text(run_dir: Path | None, choice: str | None) -> str:
    return str(export_model.default_out(run_dir, checkpoint_of(choice))) if run_dir is not None else ""


def progress_html(progress: dict | None, seconds: float = 0.0) -> str:
    """The export's state: the stage it is in with a bar, then where it wrote and how big, or why it failed."""
    if not progress:
        return ""
    if progress.get("error"):
        return note(f"Export failed: {progress['error']}", "error")
    if progress.get("done"):
        out = escape(str(progress.get("out")))
        size = (progress.get("bytes") or 0) / 2**20
        return (
            '<div class="wb-merge-note wb-merge-note-ok">'
            f"<b>Merged model written</b> to <code>{out}</code> ({size:,.0f} MB, {progress.get('seconds')} s). "
            f'Load it with <code>AutoModelForCausalLM.from_pretrained("{out}")</code> or serve it with '
            f"<code>python -m vllm.entrypoints.openai.api_server --model {out}</code>.</div>"
        )
    stage = progress.get("stage")
    index = export_model.STAGES.index(stage) + 1 if stage in export_model.STAGES else 0
    text = export_model.STAGE_TEXT.get(stage, "starting the export process")
    width = round(100 * index / (len(export_model.STAGES) + 1))
    return (
        f'<div class="wb-merge-note wb-merge-note-info">Exporting: step {index} of {len(export_model.STAGES)}, '
        f"{escape(text)} ({seconds:.0f} s)<div class='wb-merge-bar'><div style='width: {width}%'></div></div></div>"
    )


def note(message: str, kind: str = "info") -> str:
    return f'<div class="wb-merge-note wb-merge-note-{kind}">{escape(message)}</div>' if message else ""
