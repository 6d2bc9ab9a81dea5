"""Starting a run from a page: the path a Launch takes, whichever of its buttons the person pressed.

The first-run strip's "Launch the demo" and the Setup tab's Launch both start a run here (the Train tab's Launch
does the same steps in its own handler): the config read from the
Setup form's values (`ctx.config_from_values`: on a dashboard with accounts every path only where access/paths.py
allows this user, and a memory estimate within the device's memory and the admin's share), the user's launches per
minute counted (access/limits.py), then `launcher.start` with the user as the run's owner, in their sandbox.
"""

from __future__ import annotations

from workbench.jobs import launcher


def start_run(ctx, request, values) -> str:
    """Start a run of the Setup form's `values` (ctx.config_inputs order) for the user of `request`; its run id.
    Raises WorkbenchError (a ConfigError naming field, rule and fix, or the launch limit) when it is refused."""
    viewer = ctx.viewer(request)
    config = ctx.config_from_values(*values, scope=ctx.scope_of(viewer), launching=True)
    ctx.actions.take(viewer.name, "launch")
    return launcher.start(
        config, ctx.runs_dir, owner=viewer.name, import_reward_file=not ctx.shared, sandboxed=ctx.sandbox_for(viewer)
    )
