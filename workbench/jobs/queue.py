"""The GPU queue's rules: which devices a run holds, what a launch waits for, which queued run starts next.

A launch whose devices a live run holds neither fails nor collides: its run
folder is made with the state `queued` in status.json and a `queued_at` time,
and it starts by itself once its devices are free. Everything about the queue
lives in the run folders (runfolder.py: the state `queued`, the lock file
`.queue.lock`), so it outlives the app. The launcher reads, claims and starts
under that lock; the dispatcher process (jobs/dispatcher.py) keeps looking
while anything is queued.

This module is pure: functions of run configs and statuses, no files, no
processes, so every rule is tested directly.

Devices: a run holds the GPUs it trains on and those of its own vLLM server,
or `CPU` when it trains on the CPU: two runs on the same cores slow each other
down as surely as two runs on one GPU collide.

Order: first in, first out by `queued_at`, with backfill that cannot starve
anyone. A queued run starts when none of its devices is held by a live run or
wanted by a run queued before it. So a later run may start first when it needs
only devices nobody ahead of it waits for (a small job on GPU 1 while an
earlier one waits for GPU 0), but never one that needs a device an earlier run
is waiting for: the earlier run gets its devices as soon as they free up, and
nothing queued after it can keep it waiting.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from workbench.errors import WorkbenchError
from workbench.runstore.runfolder import QUEUED
from workbench.spec.generation import SERVER_GENERATIONS

CPU = "CPU"
# A run whose status is final but whose process (or vLLM server) has not exited yet still holds its devices.
ENDING = "ending"

MAX_RUNS_ENV = "WORKBENCH_MAX_RUNS_PER_USER"
DEFAULT_MAX_RUNS_PER_USER = 2


class UserLimitError(WorkbenchError):
    """A launch refused because its user already has as many runs running or queued as the server allows."""


@dataclass(frozen=True)
class Entry:
    """A run as the queue sees it: the devices it holds or waits for, its owner, and its state.

    `state` is the run's state (`queued`, `training`, ...), or `ending` for a
    run whose status is final while its processes still exit.
    """

    run_id: str
    devices: frozenset[str]
    owner: str | None = None
    state: str = QUEUED
    queued_at: float = 0.0  # seconds since the epoch; only a queued run's counts

    @property
    def queued(self) -> bool:
        return self.state == QUEUED


@dataclass(frozen=True)
class Place:
    """A queued run's place: 1-based position, and what each device it waits for is taken by."""

    entry: Entry
    position: int
    waits_for: dict[str, Entry] = field(default_factory=dict)

    @property
    def may_start(self) -> bool:
        return not self.waits_for


# ---------------------------------------------------------------- devices


def gpu(index: int) -> str:
    return f"GPU {index}"


def gpu_index(device: str) -> int | None:
    """The number of a `GPU n` device; None for the CPU."""
    kind, _, number = device.partition(" ")
    return int(number) if kind == "GPU" and number.isdigit() else None


def _gpus(ids) -> set[str]:
    return {gpu(i) for i in ids or () if isinstance(i, int) and not isinstance(i, bool)}


def devices_of(config: Mapping, gpus: Sequence[int]) -> frozenset[str]:
    """The devices a run of `config` (a config.json dict) holds on a machine with these GPU indexes.

    `device` auto trains on the GPUs when the machine has any, else on the
    CPU; empty `gpu_ids` means every GPU (GPU 0 when none is known). A vLLM
    server the run starts itself adds its `vllm_gpu_ids`; without them it
    shares the run's own devices.
    """
    device = config.get("device") or "auto"
    if device == "cpu" or (device == "auto" and not gpus):
        held = {CPU}
    else:
        held = _gpus(config.get("gpu_ids")) or _gpus(gpus) or {gpu(0)}
    own_server = (
        config.get("generation") in SERVER_GENERATIONS and not str(config.get("vllm_server_base_url") or "").strip()
    )
    if own_server:
        held |= _gpus(config.get("vllm_gpu_ids"))
    return frozenset(held)


def device_order(device: str) -> tuple:
    """Sort key: the CPU first, then GPUs by number (GPU 2 before GPU 10)."""
    return (device != CPU, gpu_index(device) or 0, device)


def describe_devices(devices) -> str:
    """`the CPU`, `GPU 0`, `GPU 0 and GPU 1`, `the CPU, GPU 0 and GPU 1`."""
    names = ["the CPU" if d == CPU else d for d in sorted(devices, key=device_order)]
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"


# ---------------------------------------------------------------- order


def in_order(queued: Sequence[Entry]) -> list[Entry]:
    """Queued runs first in, first out (by `queued_at`, then run id)."""
    return sorted(queued, key=lambda entry: (entry.queued_at, entry.run_id))


def plan(queued: Sequence[Entry], holding: Sequence[Entry]) -> list[Place]:
    """Every queued run's place, in order, with what it waits for; those with nothing to wait for may start.

    Walking the queue in order, each run takes its devices as it goes, whether
    it starts or waits: a run that waits keeps them from everything behind it
    (the rule in the module docstring). A device's first taker is named.
    """
    taken: dict[str, Entry] = {}
    for entry in holding:
        for device in entry.devices:
            taken.setdefault(device, entry)
    places = []
    for position, entry in enumerate(in_order(queued), start=1):
        waits = {device: taken[device] for device in sorted(entry.devices, key=device_order) if device in taken}
        places.append(Place(entry, position, waits))
        for device in entry.devices:
            taken.setdefault(device, entry)
    return places


def place_of_new(entry: Entry, queued: Sequence[Entry], holding: Sequence[Entry]) -> Place:
    """Where a new launch would stand: behind every run queued now (it may start at once when it waits for nothing)."""
    last = max((e.queued_at for e in queued), default=None)
    at = entry.queued_at if last is None or entry.queued_at > last else last + 0.001  # a clock set back
    newest = Entry(entry.run_id, entry.devices, entry.owner, QUEUED, at)
    return next(p for p in plan([*queued, newest], holding) if p.entry is newest)


def describe_wait(waits_for: Mapping[str, Entry]) -> str:
    """What a queued run waits for, device by device: `GPU 0 (run A), GPU 1 (run B, queued ahead)`."""
    by_run: dict[str, list[str]] = {}
    runs: dict[str, Entry] = {}
    for device, entry in waits_for.items():
        by_run.setdefault(entry.run_id, []).append(device)
        runs[entry.run_id] = entry
    parts = []
    for run_id, devices in by_run.items():
        how = {QUEUED: ", queued ahead", ENDING: ", ending"}.get(runs[run_id].state, "")
        parts.append(f"{describe_devices(devices)} (run {run_id}{how})")
    return ", ".join(parts) if parts else "nothing: it starts at the next look"


# ---------------------------------------------------------------- the per-user limit


def max_runs_per_user(env: Mapping[str, str]) -> int:
    """The server's limit on one user's running plus queued runs: $WORKBENCH_MAX_RUNS_PER_USER, 0 for none."""
    text = (env.get(MAX_RUNS_ENV) or "").strip()
    if not text:
        return DEFAULT_MAX_RUNS_PER_USER
    if not text.isdigit():
        raise WorkbenchError(
            field=MAX_RUNS_ENV,
            rule=f"{text[:40]!r} is not a whole number of runs",
            fix=f"set it to 1 or more, 0 for no limit, or unset it for the default {DEFAULT_MAX_RUNS_PER_USER}",
        )
    return int(text)


def check_user_limit(owner: str | None, live: Sequence[Entry], limit: int) -> None:
    """Refuse a launch by `owner` who already has `limit` runs running or queued (UserLimitError).

    No owner (a single-user server on loopback, the command line) and a limit
    of 0 mean no limit. A run whose processes are only ending does not count.
    """
    if owner is None or limit <= 0:
        return
    mine = [entry.run_id for entry in live if entry.owner == owner and entry.state != ENDING]
    if len(mine) >= limit:
        raise UserLimitError(
            field=MAX_RUNS_ENV,
            rule=f"{owner} already has {len(mine)} run{'s' if len(mine) != 1 else ''} running or queued "
            f"({', '.join(sorted(mine))}); each user may have {limit}",
            fix="wait for one to end, or stop one (Stop in the Train tab, `python -m workbench stop RUN`), "
            "then launch again",
        )
