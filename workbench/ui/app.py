"""Assemble the Gradio app: the theme, a header, and one tab per module.

Each tab module exposes `build(ctx: UIContext) -> None` and is built inside
its own `gr.Tab`, in the order of TABS. Heavy libraries stay out of this
process's start: no torch, transformers or trl is imported here.
"""

from __future__ import annotations

import importlib
from pathlib import Path

import gradio as gr

from workbench.runfolder import runs_root
from workbench.ui.context import UIContext

ASSETS = Path(__file__).resolve().parents[2] / "assets"

# (tab label, module) in the order the tabs appear.
TABS = (
    ("Calculator", "workbench.ui.calculator_tab"),
    ("Setup", "workbench.ui.setup_tab"),
    ("Train", "workbench.ui.train_tab"),
    ("Compare", "workbench.ui.compare_tab"),
    ("Runs", "workbench.ui.runs_tab"),
)


def _tab_modules():
    for label, module_name in TABS:
        try:
            yield label, importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            if exc.name != module_name:
                raise


def build_app(runs_dir: str | Path | None = None) -> gr.Blocks:
    ctx = UIContext(runs_dir=runs_root(runs_dir))
    with gr.Blocks(title="GRPO Workbench") as app:
        gr.Markdown("# GRPO Workbench", elem_id="wb-title")
        with gr.Tabs():
            for label, module in _tab_modules():
                with gr.Tab(label, id=label.lower()):
                    module.build(ctx)
    return app
