"""Starting a run from a page: the path a Launch takes, whichever of its buttons the person pressed.

The first-run strip's "Launch the demo", the Setup tab's Launch and the Train tab's Launch all start a run here:
the config read from the Setup form's values (`ctx.config_from_values`: on a dashboard with accounts every path
only where access/paths.py allows this user, and a memory estimate within the device's memory and the admin's
share), the user's launches per minute counted (access/limits.py), then `launcher.start` with the user as the
run's owner, in their sandbox. The answer is a `Launched`: the run, and where it stands in the GPU queue when its
devices are taken (its place, and what it waits for, naming only runs this user may see).

A launch from outside the Train tab names its run in the shared `launched_run` state; `follow_launches` (app.py
calls it once every tab is built) chains each such event to the Train tab's `train_follow`, so the Train tab shows
the run that was launched (or opened) instead of the one it showed before.
"""

from __future__ import annotations

from dataclasses import dataclass

from workbench.jobs import gpu_queue, launcher
from workbench.ui import run_access


@dataclass(frozen=True)
class Launched:
    """A run a page asks the Train tab to show: one it just launched (`new`), or one the person chose to open.

    `queue_position` and `waits_for` are set while the run waits in the GPU queue.
    """

    run_id: str
    new: bool = True
    queue_position: int | None = None
    waits_for: str = ""

    @property
    def queued(self) -> bool:
        return self.queue_position is not None


def start_run(ctx, request, values) -> Launched:
    """Start a run of the Setup form's `values` (ctx.config_inputs order) for the user of `request`.
    Raises WorkbenchError (a ConfigError naming field, rule and fix, or the launch limit) when it is refused."""
    viewer = ctx.viewer(request)
    config = ctx.config_from_values(*values, scope=ctx.scope_of(viewer), launching=True)
    ctx.actions.take(viewer.name, "launch")
    run_id = launcher.start(
        config, ctx.runs_dir, owner=viewer.name, import_reward_file=not ctx.shared, sandboxed=ctx.sandbox_for(viewer)
    )
    return launched(ctx, viewer, run_id)


def launched(ctx, viewer, run_id: str) -> Launched:
    """The run just launched, with its place in the GPU queue when it waits there (as `viewer` may read it)."""
    place = gpu_queue.queue_place(run_id, ctx.runs_dir)
    if not place:
        return Launched(run_id)
    waits_for = run_access.waits_for_seen_by(viewer, ctx.runs_dir, place["waits_for"])
    return Launched(run_id, queue_position=place["queue_position"], waits_for=waits_for)


def follow_launches(ctx) -> None:
    """Make every launch of a page outside the Train tab (`ctx.launch_events`) show its run there: each event's
    answer names the run in `components["launched_run"]`, and the Train tab's `train_follow` then attaches to it."""
    follow = ctx.components.get("train_follow")
    if follow is None:  # an app built without the Train tab
        return
    fn, inputs, outputs = follow
    for event in ctx.launch_events:
        event.then(fn, inputs=inputs, outputs=outputs, show_progress="hidden")
