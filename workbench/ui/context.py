"""What the tabs of the app share while it is being built.

Tabs are built one after another inside one `gr.Blocks`; a later tab that
needs an earlier tab's components (the Train tab's Launch button reads the
Setup tab's settings) finds them here. Nothing in it outlives the build: run
state always comes from the run folders, so a reload or a second browser tab
sees the same runs.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable


@dataclass
class UIContext:
    runs_dir: Path
    # The gr.Blocks being built, for `ctx.blocks.load(...)`; set by build_app.
    blocks: Any = None
    # Components by name, registered by the tab that made them.
    components: dict[str, Any] = field(default_factory=dict)
    # The Setup tab's inputs, in order, and how to turn their values into a RunConfig.
    config_inputs: list[Any] = field(default_factory=list)
    config_from_values: Callable[..., Any] | None = None
    # A tab's polling timer by tab label: it runs only while that tab is open and the page is visible.
    tab_timers: dict[str, Any] = field(default_factory=dict)
    # What to refresh when a tab is opened (fn, inputs, outputs), since its timer was paused meanwhile.
    tab_opened: dict[str, tuple[Callable[..., Any], list[Any], list[Any]]] = field(default_factory=dict)
    # Scripts (`() => {...}`) the page runs once loaded, and small JSON routes they ask (path -> handler).
    page_scripts: list[str] = field(default_factory=list)
    api_routes: dict[str, Callable[..., Any]] = field(default_factory=dict)

    def register(self, **components: Any) -> None:
        self.components.update(components)
