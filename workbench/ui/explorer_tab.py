"""The Explore tab: every completion of a run in one paged table, searched, filtered, sorted and exported.

Pick a run; type text to find in prompts and completions, a step range, and a filter in the engine's `where`
syntax (`reward<0.2 and length>40`, `rewards.NAME>=1`), or use the yes/no pickers (truncated, correct, a reward
error); sort by any field. The table shows a page; a row opens its group (the answers above and below the group
mean apart, each with its token view when tokens.jsonl has them), and "Prompt history" follows that prompt's
groups across the run's steps. Export writes every matching row to CSV or Parquet, offered as a download.
The queries are `insight.completion_search`'s; the HTML is `explorer_view`'s.

The Train tab links here for the run it shows, and a click on one of its curves' points opens that step's groups
(`explorer_view.POINT_CLICK_JS`, a page script over Plotly's own click event). The tab has no timer: it reads the
run only when asked, so a page watching a live run pays nothing for it. On a dashboard with accounts the run
picker holds the runs the user may see, and every event checks the run id again (run_access.picked_run_dir_for).
"""

from __future__ import annotations

import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

import gradio as gr

from workbench.access.owners import Viewer
from workbench.errors import WorkbenchError
from workbench.insight import completion_search, follow, tokens
from workbench.insight.completion_search import CompletionQuery
from workbench.insight.groups import groups_for_step
from workbench.runstore import launch_records
from workbench.spec.chat import transcript_text
from workbench.spec.reward_choice import reward_weight_map
from workbench.ui import explorer_view, run_access, run_reports
from workbench.ui.completions_view import step_token_views
from workbench.ui.context import UIContext
from workbench.ui.page_text import markdown_text

# The newest steps a prompt's history shows: each is a row of G cards.
HISTORY_STEPS = 12
NO_RUN = "Pick a run first (the Train tab's link opens this tab on the run it shows)."
GONE = "That group is no longer in the run's completions (a resume cut them back): search again."
BADGE_CSS = ".wb-card .wb-badge { border: 0; padding: 0 7px; line-height: 1.6; }"


@dataclass
class ExplorerComponents:
    """The Explore tab's components, as `layout` makes them."""

    page_state: gr.State  # {"rows": the page's rows, "offset": its first row's place, "total": rows that match}
    picked_state: gr.State  # the row a click opened (a dict of the engine's fields) or None
    run_picker: gr.Dropdown
    search: gr.Textbox
    steps: gr.Textbox
    where: gr.Textbox
    truncated: gr.Dropdown
    correct: gr.Dropdown
    reward_error: gr.Dropdown
    sort: gr.Dropdown
    desc: gr.Checkbox
    go: gr.Button
    note: gr.Markdown
    table: gr.Dataframe
    back: gr.Button
    forward: gr.Button
    export_format: gr.Dropdown
    export_button: gr.Button
    export_file: gr.File
    history_button: gr.Button
    group: gr.HTML
    history: gr.HTML

    @property
    def query_inputs(self) -> list:
        return [
            self.run_picker,
            self.search,
            self.steps,
            self.where,
            self.truncated,
            self.correct,
            self.reward_error,
            self.sort,
            self.desc,
        ]

    @property
    def page_outputs(self) -> list:
        return [self.page_state, self.note, self.table, self.sort, self.where]


def _flag(label: str, elem_id: str) -> gr.Dropdown:
    return gr.Dropdown(list(explorer_view.FLAG_CHOICES), value="any", label=label, elem_id=elem_id, min_width=140)


def layout() -> ExplorerComponents:
    gr.Markdown(
        "### Every completion of a run\nSearch the prompts and completions, filter and sort them, and click a "
        "row to open its group; follow its prompt across steps to see how training changed the answers.",
        elem_classes=["wb-section"],
    )
    with gr.Row(equal_height=True):
        run_picker = gr.Dropdown(label="Run", choices=[], value=None, scale=2, elem_id="wb-explore-run")
        search = gr.Textbox(
            label="Text", placeholder="words in a prompt or completion", scale=3, elem_id="wb-explore-search"
        )
        steps = gr.Textbox(label="Steps", placeholder="e.g. 10:50", scale=1, min_width=120, elem_id="wb-explore-steps")
        go = gr.Button("Search", variant="primary", scale=0, min_width=120, elem_id="wb-explore-go")
    with gr.Row():
        where = gr.Textbox(
            label="Filter",
            placeholder="reward<0.2 and length>40",
            scale=4,
            elem_id="wb-explore-where",
            info=explorer_view.where_help([]),
        )
        sort = gr.Dropdown(
            label="Sort by", choices=explorer_view.sort_choices([]), value="step", scale=1, elem_id="wb-explore-sort"
        )
        desc = gr.Checkbox(label="Highest first", value=False, scale=0, min_width=140, elem_id="wb-explore-desc")
    with gr.Row(equal_height=True):
        truncated = _flag("Truncated", "wb-explore-truncated")
        correct = _flag("Correct", "wb-explore-correct")
        reward_error = _flag("Reward error", "wb-explore-error")
        export_format = gr.Dropdown(["csv", "parquet"], value="csv", label="Export as", min_width=140)
        export_button = gr.Button("Export the rows", scale=0, min_width=210, elem_id="wb-explore-export")
    export_file = gr.File(label="Export", visible=False, elem_id="wb-explore-file")
    with gr.Row(equal_height=True):
        note = gr.Markdown(NO_RUN, elem_id="wb-explore-note")
        back = gr.Button("◀ Previous", size="sm", scale=0, min_width=120, elem_id="wb-explore-back")
        forward = gr.Button("Next ▶", size="sm", scale=0, min_width=100, elem_id="wb-explore-forward")
        history_button = gr.Button("Prompt history", size="sm", scale=0, min_width=140, elem_id="wb-explore-history-go")
    table = gr.Dataframe(
        headers=list(explorer_view.COLUMNS),
        value=[],
        interactive=False,
        wrap=True,
        max_height=330,
        elem_id="wb-explore-table",
        column_widths=["5%", "5%", "4%", "23%", "32%", "6%", "8%", "6%", "11%"],
    )
    # Without gradio's prose styles, whose table borders would box every score of a card.
    # The app theme's plan badge shares the class name `wb-badge`; keep the card badges small pills.
    cards = dict(apply_default_css=False, js_on_load=None, css_template=BADGE_CSS)
    group = gr.HTML(explorer_view.group_html(None), elem_id="wb-explore-group", **cards)
    history = gr.HTML(explorer_view.history_html([], ""), elem_id="wb-explore-history", **cards)
    return ExplorerComponents(
        gr.State(None),
        gr.State(None),
        run_picker,
        search,
        steps,
        where,
        truncated,
        correct,
        reward_error,
        sort,
        desc,
        go,
        note,
        table,
        back,
        forward,
        export_format,
        export_button,
        export_file,
        history_button,
        group,
        history,
    )


def filtered(query: CompletionQuery) -> bool:
    """Whether the query narrows the run's rows (else none matching means the run has none)."""
    return bool(query.where or query.search or query.steps != (None, None))


class ExplorerTab:
    """The Explore tab's event handlers, over the context and the components they fill."""

    def __init__(self, ctx: UIContext, ui: ExplorerComponents):
        self.ctx = ctx
        self.ui = ui
        self.runs_dir = ctx.runs_dir
        # each user's latest export folder: a new export deletes the one before (an export is as large as the
        # run's completions, and the download folder is only emptied a day later)
        self.exports: dict[str | None, Path] = {}

    def run_dir(self, viewer: Viewer, run_id) -> Path | None:
        """The run's folder when the id (from the browser) names one `viewer` may see; else None."""
        return run_access.picked_run_dir_for(self.runs_dir, run_id, viewer)

    def run_ids(self, viewer: Viewer) -> list[str]:
        return [path.name for path in run_access.visible_run_dirs(self.runs_dir, viewer)]

    @staticmethod
    def query_of(search, steps, where, truncated, correct, error, sort, desc, offset: int = 0) -> CompletionQuery:
        """The engine's query from the widgets' values (WorkbenchError naming the field when one does not read)."""
        flags = {"truncated": truncated, "correct": correct, "reward_error": error}
        return CompletionQuery(
            steps=explorer_view.parse_steps(steps),
            where=explorer_view.combined_where(str(where or ""), flags),
            search=str(search or ""),
            sort=str(sort or "step"),
            desc=bool(desc),
            offset=int(offset),
            limit=explorer_view.PAGE_ROWS,
        )

    def page(self, viewer: Viewer, run_id, *values, offset: int = 0) -> dict:
        """The table's page from `offset` for the widgets' `values` (ExplorerComponents.query_inputs after the run)."""
        ui = self.ui
        folder = self.run_dir(viewer, run_id)
        if folder is None:
            return {ui.page_state: None, ui.note: NO_RUN, ui.table: []}
        try:
            query = self.query_of(*values, offset=offset)
            found = completion_search.search_completions(folder, query)
        except WorkbenchError as exc:  # a filter that does not read: the field, the rule and the fix
            return {ui.page_state: None, ui.note: f"**Not searched.** {markdown_text(str(exc))}", ui.table: []}
        state = {"rows": found.rows, "offset": offset, "total": found.total, "names": found.reward_names}
        return {
            ui.page_state: state,
            ui.note: explorer_view.page_note(found.total, offset, len(found.rows), filtered(query))
            + (
                f" The run's oldest {found.left_out:,} completions are not searched (too many rows)."
                if found.left_out
                else ""
            ),
            ui.table: explorer_view.table_rows(found.rows),
            ui.sort: gr.Dropdown(choices=explorer_view.sort_choices(found.reward_names)),
            ui.where: gr.Textbox(info=explorer_view.where_help(found.reward_names)),
        }

    def group_of(self, folder: Path, step: int, group: int, with_tokens: bool = True) -> tuple:
        """(the GroupView of `group` at `step` or None, its token views, the step's token summary, the weights);
        `with_tokens=False` reads no tokens.jsonl (a prompt's history shows no token views)."""
        config = launch_records.recorded_config(folder)
        records = follow.completions_of_step(folder, step)
        groups = groups_for_step(records, step, config.get("scale_rewards"), config.get("num_generations"))
        chosen = next((view for view in groups if view.group == group), None)
        if chosen is None or not with_tokens:
            return chosen, {}, "", {}
        round_tokens = tokens.tokens_of_round(folder, step, tokens.round_passes(config))
        prompts = {index: transcript_text(record.get("prompt")) for index, record in enumerate(records)}
        earlier = tokens.earlier_of_round(folder, round_tokens, prompts) if round_tokens else {}
        size = groups[0].expected_size
        views, header = step_token_views(round_tokens, size, step, page="explore", earlier=earlier)
        return chosen, views, header, reward_weight_map(config)

    def open_row(self, viewer: Viewer, run_id, row: dict | None) -> dict:
        """The group card of the row picked (its answers above and below the mean apart)."""
        ui = self.ui
        folder = self.run_dir(viewer, run_id)
        if folder is None or not row:
            return {ui.picked_state: None, ui.group: explorer_view.group_html(None)}
        group, views, header, weights = self.group_of(folder, int(row["step"]), int(row["group"]))
        if group is None:
            return {ui.picked_state: None, ui.group: explorer_view.empty_html(GONE)}
        html = explorer_view.group_html(group, row.get("index"), views, header, weights)
        return {ui.picked_state: row, ui.group: html}

    def history_of(self, viewer: Viewer, run_id, row: dict | None) -> str:
        """Every group of the picked row's prompt across the run's steps (the newest HISTORY_STEPS)."""
        folder = self.run_dir(viewer, run_id)
        if folder is None or not row:
            return explorer_view.history_html([], "")
        prompt = row["prompt"]
        # newest first, so a prompt seen more often than one query's rows keeps its newest steps
        query = CompletionQuery(search=prompt, sort="step", desc=True, limit=completion_search.MAX_LIMIT)
        places = explorer_view.history_places(completion_search.search_completions(folder, query).rows, prompt)
        config = launch_records.recorded_config(folder)
        shown = []
        for step, group in places[-HISTORY_STEPS:]:
            view, *_ = self.group_of(folder, step, group, with_tokens=False)
            if view is not None:
                shown.append(view)
        return explorer_view.history_html(shown, prompt, reward_weight_map(config), cut=len(places) > HISTORY_STEPS)

    # ------------------------------------------------------------ events

    def on_opened(self, request: gr.Request) -> gr.Dropdown:
        """The run picker's choices when the tab is opened: the runs the user may see. The value is left alone: the
        Train tab's link may be setting it in the same moment."""
        return gr.Dropdown(choices=self.run_ids(self.ctx.viewer(request)))

    def on_picker_focus(self, request: gr.Request, current: str | None) -> gr.Dropdown:
        return gr.Dropdown(choices=self.run_ids(self.ctx.viewer(request)), value=current)

    def on_search(self, request: gr.Request, run_id, *values) -> dict:
        return self.page(self.ctx.viewer(request), run_id, *values)

    def on_move(self, move: int):
        def handler(request: gr.Request, state, run_id, *values) -> dict:
            if not state:
                return self.page(self.ctx.viewer(request), run_id, *values)
            offset = explorer_view.page_offset(state["offset"], state["total"], move)
            return self.page(self.ctx.viewer(request), run_id, *values, offset=offset)

        return handler

    def on_row(self, request: gr.Request, state, run_id, event: gr.SelectData) -> dict:
        rows = (state or {}).get("rows") or []
        place = getattr(event, "index", None)  # [row, column] of the cell clicked
        place = place[0] if isinstance(place, (list, tuple)) and place else place
        row = rows[place] if isinstance(place, int) and 0 <= place < len(rows) else None
        return self.open_row(self.ctx.viewer(request), run_id, row)

    def on_history(self, request: gr.Request, run_id, row) -> str:
        return self.history_of(self.ctx.viewer(request), run_id, row)

    def on_export(self, request: gr.Request, run_id, fmt, *values):
        ui = self.ui
        folder = self.run_dir(self.ctx.viewer(request), run_id)
        if folder is None:
            return {ui.export_file: gr.File(value=None, visible=False), ui.note: NO_RUN}
        # a private folder per export, under the one the report downloads use (ui/cleanup.py clears old ones)
        viewer = self.ctx.viewer(request)
        earlier = self.exports.pop(viewer.name, None)
        if earlier is not None:
            shutil.rmtree(earlier, ignore_errors=True)
        self.exports[viewer.name] = Path(tempfile.mkdtemp(dir=run_reports.reports_root()))
        path = self.exports[viewer.name] / f"{folder.name}-completions.{fmt}"
        try:
            count = completion_search.export_completions(folder, self.query_of(*values), path, str(fmt))
        except WorkbenchError as exc:
            return {
                ui.export_file: gr.File(value=None, visible=False),
                ui.note: f"**Not exported.** {markdown_text(str(exc))}",
            }
        return {
            ui.export_file: gr.File(value=str(path), visible=True),
            ui.note: f"Exported {count:,} rows to {markdown_text(path.name)}.",
        }

    def on_train_link(self, request: gr.Request, run_id, step: int | None = None) -> dict:
        """The Explore tab opened on the Train tab's run (at `step`, the clicked curve point, when given)."""
        viewer, ui = self.ctx.viewer(request), self.ui
        ids = self.run_ids(viewer)
        run_id = run_id if run_id in ids else (ids[0] if ids else None)
        steps = explorer_view.steps_text(step, step)
        values = (steps, "", "any", "any", "any", "step", False)
        shown = self.page(viewer, run_id, "", *values)
        state = shown.get(ui.page_state) or {}
        first = (state.get("rows") or [None])[0] if step is not None else None
        names = state.get("names") or []
        return {
            self.ctx.components["tabs"]: gr.Tabs(selected="explore"),
            ui.run_picker: gr.Dropdown(choices=ids, value=run_id),
            ui.search: "",
            ui.steps: steps,
            ui.truncated: "any",
            ui.correct: "any",
            ui.reward_error: "any",
            ui.desc: False,
            **shown,
            ui.where: gr.Textbox(value="", info=explorer_view.where_help(names)),
            ui.sort: gr.Dropdown(choices=explorer_view.sort_choices(names), value="step"),
            **(self.open_row(viewer, run_id, first) if first else {}),
        }

    def on_point(self, request: gr.Request, run_id, text) -> dict:
        step = explorer_view.clicked_step(text)
        return self.on_train_link(request, run_id, step) if step is not None else {}


def build(ctx: UIContext) -> None:
    """Lay the tab out and wire its events to an `ExplorerTab`; wire the Train tab's link and curve clicks."""
    ui = layout()
    tab = ExplorerTab(ctx, ui)
    quiet = dict(show_progress="hidden")
    page_io = dict(inputs=ui.query_inputs, outputs=ui.page_outputs)
    # filled when the tab is opened, not when the page loads: a page that never opens it pays nothing
    ctx.tab_opened["Explore"] = (tab.on_opened, [], [ui.run_picker])
    ui.run_picker.focus(tab.on_picker_focus, inputs=[ui.run_picker], outputs=[ui.run_picker], **quiet)
    for trigger in (ui.go.click, ui.run_picker.input, ui.search.submit, ui.steps.submit, ui.where.submit):
        trigger(tab.on_search, **page_io, show_progress="minimal")
    for widget in (ui.truncated, ui.correct, ui.reward_error, ui.sort, ui.desc):
        widget.input(tab.on_search, **page_io, **quiet)
    paging = dict(inputs=[ui.page_state, *ui.query_inputs], outputs=ui.page_outputs, **quiet)
    ui.back.click(tab.on_move(-1), **paging)
    ui.forward.click(tab.on_move(1), **paging)
    ui.table.select(
        tab.on_row, inputs=[ui.page_state, ui.run_picker], outputs=[ui.picked_state, ui.group], show_progress="minimal"
    )
    ui.history_button.click(
        tab.on_history, inputs=[ui.run_picker, ui.picked_state], outputs=[ui.history], show_progress="minimal"
    )
    ui.export_button.click(
        tab.on_export,
        inputs=[ui.run_picker, ui.export_format, *ui.query_inputs[1:]],
        outputs=[ui.export_file, ui.note],
        show_progress="minimal",
    )
    train_picker = ctx.components.get("train_run_picker")
    if train_picker is None:
        return
    linked = [
        ctx.components["tabs"],
        ui.search,
        ui.steps,
        ui.truncated,
        ui.correct,
        ui.reward_error,
        ui.desc,
        ui.picked_state,
        ui.group,
        *ui.page_outputs,
        ui.run_picker,
    ]
    ctx.components["train_explore"].click(tab.on_train_link, inputs=[train_picker], outputs=linked, **quiet)
    ctx.components["train_point_button"].click(
        tab.on_point, inputs=[train_picker, ctx.components["train_point_box"]], outputs=linked, **quiet
    )
    ctx.page_scripts.append(explorer_view.POINT_CLICK_JS)
