"""Assemble the Gradio app: the theme, a header, and one tab per module.

Each tab module exposes `build(ctx: UIContext) -> None` and is built inside
its own `gr.Tab`, in the order of TABS. Heavy libraries stay out of this
process's start: no torch, transformers or trl is imported here (a test
checks `sys.modules` after `build_app()`).

Gradio 6 takes the theme and the CSS when the app is served, not in
`gr.Blocks(...)`: `server.serve(app, host, port, **launch_options(app))`
(or `app.launch(**launch_options(app))`) applies both.
"""

from __future__ import annotations

import functools
import importlib
import inspect
from pathlib import Path

import gradio as gr

from workbench.access import hosts, paths
from workbench.errors import WorkbenchError
from workbench.jobs.sandbox_policy import Policy
from workbench.runstore.runfolder import runs_root
from workbench.ui import browser_files, first_run, gradio_compat, launching, sign_in
from workbench.ui.context import UIContext

ASSETS = Path(__file__).resolve().parents[2] / "assets"
THEME_CSS = ASSETS / "theme.css"

# (tab label, module) in the order the tabs appear.
TABS = (
    ("Calculator", "workbench.ui.calculator_tab"),
    ("Setup", "workbench.ui.setup_tab"),
    ("Train", "workbench.ui.train_tab"),
    ("Compare", "workbench.ui.compare_tab"),
    ("Runs", "workbench.ui.runs_tab"),
    ("Explore", "workbench.ui.explorer_tab"),
)

NO_SANDBOX_WARNING = (
    "<p class='wb-warn-line'><b>Runs on this shared dashboard are not sandboxed</b> (started with --no-sandbox): "
    "a reward file runs with the server's rights and can read every user's runs and uploads. Ask whoever runs it "
    "to install bubblewrap and restart it without --no-sandbox.</p>"
)

SUBTITLE = (
    "LoRA GRPO fine-tuning on TRL's GRPOTrainer: check the batch plan, set up a run, "
    "watch reward, KL and loss live, and read each group of completions."
)


def _tab_modules():
    """Yield (label, module) for each tab whose module exists (tabs land one by one)."""
    for label, module_name in TABS:
        try:
            yield label, importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            if exc.name != module_name:
                raise


def make_theme() -> gr.themes.Base:
    """A light theme with system fonts: nothing is fetched from the internet."""
    system_sans = [
        "Inter",
        "ui-sans-serif",
        "system-ui",
        "-apple-system",
        "Segoe UI",
        "Helvetica",
        "Arial",
        "sans-serif",
    ]
    system_mono = ["ui-monospace", "SFMono-Regular", "Menlo", "Consolas", "monospace"]
    return gr.themes.Soft(
        primary_hue=gr.themes.colors.indigo,
        secondary_hue=gr.themes.colors.slate,
        neutral_hue=gr.themes.colors.slate,
        radius_size=gr.themes.sizes.radius_md,
        text_size=gr.themes.sizes.text_md,
        font=system_sans,
        font_mono=system_mono,
    ).set(
        body_background_fill="#f6f7fb",
        block_background_fill="#ffffff",
        block_border_width="1px",
        block_shadow="none",
        button_primary_background_fill="*primary_600",
        button_primary_background_fill_hover="*primary_700",
        button_primary_text_color="#ffffff",
        # Field labels as plain bold text rather than coloured chips: calmer with many fields.
        block_title_background_fill="transparent",
        block_title_text_color="*neutral_700",
        block_title_text_weight="600",
        block_title_padding="0",
        block_label_background_fill="transparent",
    )


PAGE_HIDDEN_ID = "wb-page-hidden"
PAGE_SHOWN_ID = "wb-page-shown"
# Runs once the page has loaded: tells the server when the browser tab is hidden or shown again.
PAGE_VISIBILITY_JS = f"""
() => {{
  document.addEventListener("visibilitychange", () => {{
    const id = document.hidden ? "{PAGE_HIDDEN_ID}" : "{PAGE_SHOWN_ID}";
    const button = document.getElementById(id);
    (button && button.tagName === "BUTTON" ? button : button?.querySelector("button"))?.click();
  }});
}}
"""


def page_js(scripts: list[str]) -> str:
    """One page script (gradio takes one) that runs each of `scripts` in turn."""
    calls = "\n".join(f"  ({script.strip()})();" for script in scripts)
    return f"() => {{\n{calls}\n}}"


def launch_options(app: gr.Blocks | None = None) -> dict:
    """Keyword arguments for serving: the style, and the page's scripts (gradio 6 takes them there)."""
    scripts = [PAGE_VISIBILITY_JS, *getattr(app, "page_scripts", [])]
    return {"theme": make_theme(), "css": THEME_CSS.read_text(encoding="utf-8"), "js": page_js(scripts)}


def build_app(
    runs_dir: str | Path | None = None,
    users: dict | None = None,
    sandbox: Policy | None = None,
    shared_dirs: tuple[Path, ...] | None = None,
) -> gr.Blocks:
    """Build the app; nothing starts until it is served (`server.serve`).

    `users`: the accounts (access.users.load_users) when it is served with
    sign-in; then each user sees and controls their own runs (an admin all)
    and names paths only where access/paths.py allows: their uploads, their
    runs, and `shared_dirs` (the admin's models and data folders; default
    WORKBENCH_MODELS_DIR and WORKBENCH_DATA_DIR).
    `sandbox`: the bubblewrap sandbox every run and helper process starts in
    (workbench/jobs/sandbox.py); app.py gives one whenever there are accounts,
    unless started with --no-sandbox, which the page then says.
    """
    ctx = UIContext(
        runs_dir=runs_root(runs_dir),
        users=dict(users or {}),
        sandbox=sandbox,
        shared_dirs=paths.shared_folders() if shared_dirs is None else tuple(shared_dirs),
        vllm_hosts=hosts.listed_hosts(),
    )
    with gr.Blocks(title="GRPO Workbench", analytics_enabled=False) as app:
        ctx.blocks = app
        with gr.Row(elem_id="wb-header"):
            gr.Markdown(f"# GRPO Workbench\n{SUBTITLE}", elem_id="wb-title")
            if ctx.shared:
                sign_in.sign_out_button(ctx.page_scripts)
        if ctx.shared and sandbox is None:
            gr.HTML(NO_SANDBOX_WARNING, elem_id="wb-no-sandbox")
        strip = first_run.build(ctx)  # whatever tab is open: the demo, one click away
        tabs = {}
        with gr.Tabs(elem_id="wb-tabs") as tab_set:
            ctx.register(tabs=tab_set)  # a Launch shows the Train tab (gr.Tabs(selected="train"))
            for label, module in _tab_modules():
                with gr.Tab(label, id=label.lower(), elem_id=f"wb-tab-{label.lower()}") as tab:
                    module.build(ctx)
                tabs[label] = tab
        first_run.wire(ctx, strip)
        launching.follow_launches(ctx)  # every launch outside the Train tab shows its run there
        _poll_only_where_seen(ctx, tabs)
    gradio_compat.wrap_handlers(app, refusals_as_messages)
    gradio_compat.cheap_skips(app)
    browser_files.guard(app, required=ctx.shared)  # a file the browser names: only one it uploaded
    # What serving needs besides the Blocks: the tabs' page scripts and JSON routes (server.serve).
    app.page_scripts = list(ctx.page_scripts)
    app.api_routes = dict(ctx.api_routes)
    return app


def refusals_as_messages(fn):
    """`fn`, with a refusal it lets through (a WorkbenchError: field, rule, fix) shown as Gradio's message.

    Handlers show the refusals they expect in their own panels; this catches
    the rest (a value no widget can send but a crafted request can, such as a
    NaN slider), which Gradio would otherwise answer with a bare "Error".
    """
    if inspect.isgeneratorfunction(fn):

        @functools.wraps(fn)
        def streaming(*args, **kwargs):
            try:
                yield from fn(*args, **kwargs)
            except WorkbenchError as exc:
                raise gr.Error(str(exc), print_exception=False) from exc

        return streaming

    @functools.wraps(fn)
    def answering(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except WorkbenchError as exc:
            raise gr.Error(str(exc), print_exception=False) from exc

    return answering


def _poll_only_where_seen(ctx: UIContext, tabs: dict) -> None:
    """A tab's timer runs only while that tab is open and the page is visible.

    Watching a run costs the training process CPU (on a 2-core machine the
    server and the browser share its cores), so nothing polls for a tab no one
    sees: selecting a tab starts its timer and stops the others; hiding the
    browser tab (another tab in front, a minimised window) stops them all, and
    showing it again starts the open tab's timer. The browser reports
    visibility through PAGE_VISIBILITY_JS, which clicks one of two hidden buttons.
    """
    timers = ctx.tab_timers
    if not timers:
        return
    labels, timer_list = list(timers), list(timers.values())
    open_tab = gr.State(next(iter(tabs), None))  # the first tab is open when the page loads

    def timers_for(open_label: str | None, visible: bool = True) -> list:
        return [gr.Timer(active=visible and label == open_label) for label in labels]

    for label, tab in tabs.items():
        tab.select(
            lambda label=label: [label, *timers_for(label)],
            outputs=[open_tab, *timer_list],
            show_progress="hidden",
            queue=False,
        )
        if label in ctx.tab_opened:
            fn, inputs, outputs = ctx.tab_opened[label]
            tab.select(fn, inputs=inputs, outputs=outputs, show_progress="hidden")
    hidden = gr.Button("page hidden", visible="hidden", elem_id=PAGE_HIDDEN_ID)
    shown = gr.Button("page shown", visible="hidden", elem_id=PAGE_SHOWN_ID)
    hidden.click(lambda: timers_for(None, visible=False), outputs=timer_list, show_progress="hidden", queue=False)
    shown.click(
        lambda label: timers_for(label), inputs=[open_tab], outputs=timer_list, show_progress="hidden", queue=False
    )
