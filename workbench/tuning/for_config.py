"""A run's config as the speed choice sees it: whether it needs one, the key it is kept under, and the hand-over of a
kept choice from the launcher to the training process (`CHOICE_ENV`: a sandboxed run cannot read the server's cache).
"""

from __future__ import annotations

import json

from workbench.spec.config import RunConfig
from workbench.tuning import cache, machine
from workbench.tuning.choice import LEVER_FIELDS, SpeedChoice, key_of

CHOICE_ENV = "WORKBENCH_SPEED_CHOICE"
# "off": a run with no kept choice takes TRL's path instead of measuring (the test suite's runs; an admin's choice)
PROBE_ENV = "WORKBENCH_SPEED_PROBE"


def model_identity(cfg: RunConfig) -> str:
    """The model as the key names it: its folder or hub id (found without loading or converting it)."""
    from workbench.sources.model_files import model_location

    try:
        return model_location(cfg.model)
    except (OSError, ValueError):  # a name no folder can have (too long, a NUL): the config's own check refuses it
        return cfg.model


def device_of(cfg: RunConfig) -> str:
    """The device the run trains on, "cpu" or "cuda": "auto" is the one it resolves to here."""
    from workbench.sources.gpus import runs_on_cpu

    return "cpu" if runs_on_cpu(cfg.device) else "cuda"


def key_for(cfg: RunConfig) -> str:
    # the device as it resolves: the dashboard writes "cpu" where the command line leaves "auto" on a CPU machine,
    # and the two are the same run, which one measurement serves
    return key_of(machine.fingerprint(), model_identity(cfg), {**cfg.to_dict(), "device": device_of(cfg)})


def needs_no_choice(cfg: RunConfig) -> str | None:
    """Why a run needs no speed choice (no lever left on auto, or nothing a lever can change), or None."""
    if all(getattr(cfg, name) != "auto" for name in LEVER_FIELDS):
        return "every speed lever is set in the config"
    if cfg.generation != "transformers":
        return f"generation={cfg.generation}: the vLLM server samples the rounds"
    if cfg.distributed_backend != "ddp":
        return f"distributed_backend={cfg.distributed_backend}: the weights are sharded"
    if cfg.num_processes > 1:
        return f"{cfg.num_processes} processes: the probe times one process"
    return None


def kept_choice(cfg: RunConfig) -> SpeedChoice | None:
    """This machine's kept choice for the run, or None (none measured, or the run needs none)."""
    return None if needs_no_choice(cfg) else cache.lookup(key_for(cfg))


def launcher_env(cfg: RunConfig) -> dict[str, str]:
    """What the launcher adds to a run's environment: the kept choice for its key, when there is one."""
    choice = kept_choice(cfg)
    return {CHOICE_ENV: json.dumps(choice.to_dict())} if choice else {}


def handed_over(key: str, env) -> SpeedChoice | None:
    """The choice the launcher handed over for `key`, or None (none, malformed, or for another key)."""
    try:
        choice = SpeedChoice.from_dict(json.loads(env.get(CHOICE_ENV) or "null"))
    except (AttributeError, KeyError, TypeError, ValueError):
        return None
    return choice if choice.key == key else None
