"""What the tabs of the app share while it is being built.

Tabs are built one after another inside one `gr.Blocks`; a later tab that
needs an earlier tab's components (the Train tab's Launch button reads the
Setup tab's settings) finds them here. Nothing in it outlives the build: run
state always comes from the run folders, so a reload or a second browser tab
sees the same runs. The accounts are here too: each event asks `viewer(request)`
who it comes from, and shows and does only what that person may
(workbench/access/owners.py).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from workbench.access import limits, owners, uploads
from workbench.access.paths import UserScope
from workbench.jobs import sandbox, sandbox_policy
from workbench.sources import cpu_busy
from workbench.ui import paths_view


@dataclass
class UIContext:
    runs_dir: Path
    # The accounts (name -> access.users.User); empty for an open dashboard (loopback, no sign-in).
    users: dict[str, Any] = field(default_factory=dict)
    # On a shared dashboard: the admin's folders every user may name paths in (access/paths.py),
    # and the vLLM hosts besides loopback they may name (access/hosts.py).
    shared_dirs: tuple[Path, ...] = ()
    vllm_hosts: frozenset[str] = frozenset()
    # Each user's launches, smoke tests, resumes and stops in the last minute (access/limits.py).
    actions: limits.ActionLimit = field(default_factory=lambda: limits.ActionLimit(limits.max_actions()))
    # The gr.Blocks being built, for `ctx.blocks.load(...)`; set by build_app.
    blocks: Any = None
    # Components by name, registered by the tab that made them.
    components: dict[str, Any] = field(default_factory=dict)
    # The Setup tab's inputs, in order, and how to turn their values into a RunConfig.
    config_inputs: list[Any] = field(default_factory=list)
    config_from_values: Callable[..., Any] | None = None
    # The launches of pages outside the Train tab (the first-run strip, the Setup tab): events whose answer names
    # a run in components["launched_run"] for the Train tab to show (ui/launching.py `follow_launches`).
    launch_events: list[Any] = field(default_factory=list)
    # A tab's polling timer by tab label: it runs only while that tab is open and the page is visible.
    tab_timers: dict[str, Any] = field(default_factory=dict)
    # What to refresh when a tab is opened (fn, inputs, outputs), since its timer was paused meanwhile.
    tab_opened: dict[str, tuple[Callable[..., Any], list[Any], list[Any]]] = field(default_factory=dict)
    # Scripts (`() => {...}`) the page runs once loaded, and small JSON routes they ask (path -> handler).
    page_scripts: list[str] = field(default_factory=list)
    api_routes: dict[str, Callable[..., Any]] = field(default_factory=dict)
    # The sandbox every run and helper process starts in (a dashboard with accounts); None: no sandbox.
    sandbox: sandbox_policy.Policy | None = None
    # Other processes' share of the CPU, for the times the page shows: this server and the runs it started are ours.
    cpu: cpu_busy.BusyWatch = field(default_factory=cpu_busy.BusyWatch)

    def register(self, **components: Any) -> None:
        self.components.update(components)

    @property
    def shared(self) -> bool:
        """The dashboard has accounts: runs are per user, files come from each user's uploads."""
        return bool(self.users)

    def viewer(self, request: Any) -> owners.Viewer:
        """Who an event comes from (`request`: gradio's Request, or None), by its signed-in name."""
        return self.viewer_named(getattr(request, "username", None))

    def viewer_named(self, name: str | None) -> owners.Viewer:
        return owners.viewer_for(name, self.users)

    def uploads_of(self, viewer: owners.Viewer) -> Path | None:
        """The viewer's uploads folder on a shared dashboard; None on an open one (paths work as typed)."""
        return uploads.uploads_dir(self.runs_dir, viewer.name) if self.shared else None

    def uploads_for(self, request: Any) -> Path | None:
        """The uploads folder of the user an event comes from (None on an open dashboard)."""
        return self.uploads_of(self.viewer(request))

    def sandbox_for(self, viewer: owners.Viewer) -> sandbox_policy.Policy | None:
        """The sandbox a run `viewer` launches starts in: the server's, with the viewer's uploads readable."""
        if self.sandbox is None:
            return None
        folder = self.uploads_of(viewer)
        return replace(self.sandbox, readable=(str(folder),) if folder else ())

    def confine_helper(self, run_dir: Path, config: dict) -> sandbox.Confine | None:
        """The sandbox a helper process of the run in `run_dir` (sampling, export) starts in; None without one."""
        if self.sandbox is None:
            return None
        return sandbox.confinement(run_dir, self.runs_dir, config, self.sandbox)

    def scope_of(self, viewer: owners.Viewer) -> UserScope | None:
        """What the viewer may name as a path or vLLM host on a shared dashboard; None on an open one."""
        return paths_view.scope_for(self.runs_dir, viewer, self.shared_dirs, self.vllm_hosts) if self.shared else None

    def scope_for(self, request: Any) -> UserScope | None:
        """`scope_of` the user an event comes from."""
        return self.scope_of(self.viewer(request))
