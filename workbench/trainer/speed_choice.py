"""The speed choice a run starts with: handed over by the launcher, kept in the server's cache, or measured now.

The launcher puts the kept choice for the run's key in the training process's environment (workbench/tuning/for_config.py),
so a sandboxed run, which cannot read the server's files, takes it too. A run with no choice for its key runs the probe
itself before it loads its model (state `tuning`, about a minute), and keeps the result in the server's cache unless
it runs in a sandbox (workbench/tuning/cache.py says why). Whatever decided `auto` is written to status.json as the
`speed_choice` record.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import replace

from workbench.spec.config import RunConfig
from workbench.spec.lever_decisions import SET_IN_CONFIG, LeverDecision
from workbench.trainer import speed_probe
from workbench.tuning import cache
from workbench.tuning.choice import SpeedChoice, resolved_settings
from workbench.tuning.for_config import PROBE_ENV, handed_over, key_for, needs_no_choice


def choose(
    cfg: RunConfig, progress: Callable[[str], None], build_trainer, env: dict | None = None
) -> tuple[SpeedChoice | None, dict]:
    """The run's speed choice and the `speed_choice` record for status.json (what `auto` became, from where); a probe
    builds its trainers with `build_trainer` (trainer/speed_wiring.probe_trainer)."""
    env = os.environ if env is None else env
    skip = needs_no_choice(cfg)
    choice, source = None, skip or ""
    if not skip:
        key = key_for(cfg)
        choice = handed_over(key, env) or cache.lookup(key)
        source = "measured earlier on this machine"
        if choice is None and env.get(PROBE_ENV) == "off":
            source = f"not measured: {PROBE_ENV}=off, so auto takes TRL's own path"
        elif choice is None:
            choice = speed_probe.measure(cfg, progress, build_trainer)
            source = (
                "measured at this run's start, and kept for the next run"
                if cache.store(choice)
                else "measured at this run's start (a sandboxed run keeps nothing)"
            )
    record = {**resolved_settings(cfg.to_dict(), choice), "source": source}
    if choice is not None:
        record.update(
            chosen=choice.chosen.label(),
            cpu=choice.cpu,
            measured_at=choice.measured_at,
            seconds=choice.seconds,
            exact_failures=choice.exact_failures,
            not_taken=choice.not_taken,
        )
    return choice, record


def explained(attached: dict[str, LeverDecision], cfg: RunConfig, record: dict) -> dict[str, LeverDecision]:
    """The levers' status fields (trainer/levers.attach), a lever left on auto saying what decided it rather than
    "set in the config", and the CPU its speed was measured on when the probe measured it."""
    return {
        name: replace(decision, why=f"auto: {record['source']}", measured_on=record.get("cpu"))
        if getattr(cfg, name) == "auto" and decision.why == SET_IN_CONFIG
        else decision
        for name, decision in attached.items()
    }
