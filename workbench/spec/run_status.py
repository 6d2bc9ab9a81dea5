"""A run's status.json as one typed record: `RunStatus`.

Every key a writer puts in status.json (the launcher, the dispatcher, the
sandbox, the trainer's `StatusWriter`) is a field here, with its type and what
it means beside it. `RunStatus.from_dict` takes whatever a status.json holds:

- a key it does not know (written by a newer version, or by hand) is kept in
  `extra` and written back as it was;
- a known key whose value has the wrong type (`"step": "3"`, a `NaN` time), or
  more in it than a page may show (MAX_CHARS: a run's own code can write its
  status.json), reads as None, and its value too is kept in `extra`, so reading
  and writing a file never loses what was in it; `shown` is what a reader shows:
  the typed fields, and `unreadable_fields`, the known keys that were not;
- a lever's decision (`merged_generation`, `shared_prompt_pass`, `packed_decode`) reads as a `LeverDecision`
  (spec/lever_decisions.py), from its object or from the sentence older files hold, and is written as its object;
- a missing key, or null, reads as None (the default of every field), and
  readers take the two alike; `to_dict` writes null where the file or a
  writer put null, and leaves out what no one wrote.

A whole number written as a float (`3.0`) reads as an int. Fields are set
through `update` (which drops what `extra` kept under the name) and taken out
of the file with `drop`.

Pure: no file is read here (runstore/runfolder.py reads and writes status.json
with `read_run_status` / `write_run_status`, atomically), so the readers of
every layer (`insight` included) can take a `RunStatus`.
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from workbench.spec.lever_decisions import LeverDecision

# The most characters a field of each kind may hold and still be read: a string's, or a dict's or list's as JSON.
# Far above what a writer of this version puts there (a traceback tail of 25 lines, a sandbox's bwrap command), far
# below the 4 MiB status.json may hold: a run's code writes the file, and each of its owner's and admins' pages
# carries what is read from it (issue 52).
MAX_CHARS: dict[type, int] = {str: 1000, dict: 64 * 1024, list: 256 * 1024}
# The numbers a field may hold and still be read: a whole number a float holds exactly (a run's code can write a
# 4,000-digit step, which no page can turn into a float), and a time (every float field is one, seconds since the
# epoch) a date can show (datetime refuses -1e18 and 1e308).
MAX_INT = 2**53
TIMES = (0.0, 253402214400.0)  # 1970-01-01 to 9999-12-31
# The key of `RunStatus.shown()` naming the fields status.json holds with the wrong type or too much in them.
UNREADABLE_FIELDS = "unreadable_fields"


def _known(kind: type, help: str) -> Any:
    """A status.json key: None until written, `kind` once it is."""
    return field(default=None, metadata={"kind": kind, "help": help})


@dataclass
class RunStatus:
    """status.json, typed; every field is None until some writer sets it (see the module docstring)."""

    # what the run is doing
    state: str | None = _known(
        str, "queued, starting, tuning, loading_model, training, saving, finished, stopped or failed"
    )
    step: int | None = _known(int, "the last optimizer step done")
    total_steps: int | None = _known(int, "the optimizer steps of the whole run (TRL's max_steps)")
    resumed_from: int | None = _known(int, "the checkpoint's step this process resumed from")
    smoke_test: bool | None = _known(bool, "a one-step run started to check the settings")
    note: str | None = _known(str, "why a run stopped the way it did, when it was not by itself")
    error: dict | None = _known(dict, "a failed run's type, message, hint and traceback_tail")
    summary: dict | None = _known(dict, "TRL's final train metrics")
    adapter_step: int | None = _known(int, "the step the adapter/ folder was saved at (as the run stopped or finished)")
    # when (seconds since the epoch)
    started_at: float | None = _known(float, "the run's first start")
    resumed_at: float | None = _known(float, "the last resume")
    ran_before_resume: float | None = _known(
        float, "seconds the run ran before its last resume, the time it was stopped left out (elapsed adds it)"
    )
    updated_at: float | None = _known(float, "the last write: the writing process's heartbeat")
    finished_at: float | None = _known(float, "when it reached a final state")
    queued_at: float | None = _known(float, "when it joined the GPU queue (its place follows from it)")
    queued_resume: bool | None = _known(bool, "a queued run that resumes from its checkpoint when its turn comes")
    # who and where
    owner: str | None = _known(str, "the signed-in user who launched it")
    host: str | None = _known(str, "the machine of the training process")
    pid: int | None = _known(int, "the training process (its sandbox's, for a sandboxed run), on the host")
    pgid: int | None = _known(int, "its process group, on the host")
    sandbox_pid: int | None = _known(int, "the trainer's pid inside its sandbox's PID namespace")
    command: list | None = _known(list, "the argument list that started it")
    num_processes: int | None = _known(int, "the processes training (WORLD_SIZE)")
    allocator: LeverDecision | None = _known(
        LeverDecision, "the memory allocator the process runs with, why, and where it was measured"
    )
    merged_generation: LeverDecision | None = _known(
        LeverDecision, "what merged_generation resolved to (no, float32 or bfloat16), why, and where it was measured"
    )
    shared_prompt_pass: LeverDecision | None = _known(
        LeverDecision, "what shared_prompt_pass resolved to (yes or no), why, and where it was measured"
    )
    packed_decode: LeverDecision | None = _known(
        LeverDecision,
        "what packed_decode resolved to (yes or no), why (which decode step, or why not), and where it was measured",
    )
    speed_choice: dict | None = _known(
        dict,
        "what the auto speed levers became and from where: the lever values, "
        "source, and the probe's CPU, time and seconds per candidate",
    )
    speed_probe: str | None = _known(str, "while the state is tuning: what the speed probe is timing now")
    library_ties: dict | None = _known(
        dict,
        "private library ties that no longer hold, and library versions other "
        "than the ones they were written for (workbench/library_compat.py)",
    )
    cpu_threads: int | None = _known(int, "OMP_NUM_THREADS of the process")
    sandbox: dict | None = _known(dict, "the run's sandbox policy and what it shows (jobs/sandbox.py)")
    vllm: dict | None = _known(dict, "the run's own vLLM server: url, state, pid, command, ...")
    # what a writer this version does not know put there, and known keys of the wrong type, as written
    extra: dict = field(default_factory=dict)
    # the fields written, null included (a field that is None and not here is left out of the file)
    _written: set = field(default_factory=set, init=False, repr=False, compare=False)

    @classmethod
    def from_dict(cls, data: Any) -> RunStatus:
        """The status a status.json's object holds; anything that is not an object reads as an empty status."""
        if not isinstance(data, Mapping):
            return cls()
        fields, extra = {}, {}
        for key, value in data.items():  # one pass, no setattr: a listing reads thousands of these
            kind = FIELDS.get(key)
            fits, typed = _read(kind, value) if kind else (False, None)
            if fits:
                fields[key] = typed
            else:
                extra[str(key)] = value
        status = cls(**fields, extra=extra)
        status._written = set(fields)
        return status

    @classmethod
    def of(cls, status: RunStatus | Mapping) -> RunStatus:
        """`status` itself, or a status dict (status.json's object, or the launcher's view of one) read as one."""
        return status if isinstance(status, RunStatus) else cls.from_dict(status)

    def to_dict(self) -> dict:
        """The JSON object to write: `extra` as it was, then every field written (null included)."""
        written = dict(self.extra)
        for name in FIELDS:
            value = getattr(self, name)
            if value is not None or name in self._written:
                written[name] = value.to_dict() if isinstance(value, LeverDecision) else value
        return written

    def unreadable(self) -> list[str]:
        """The known keys status.json holds with the wrong type or too much in them (kept in `extra`)."""
        return sorted(name for name in self.extra if name in FIELDS)

    def shown(self) -> dict:
        """What a reader shows: every field written, typed and bounded (a decision as its object), and under
        UNREADABLE_FIELDS the fields that were not; keys no field names, which nothing shows, are left out."""
        shown = {
            name: value.to_dict() if isinstance(value, LeverDecision) else value
            for name in FIELDS
            if (value := getattr(self, name)) is not None or name in self._written
        }
        if unreadable := self.unreadable():
            shown[UNREADABLE_FIELDS] = unreadable
        return shown

    def update(self, **fields: Any) -> None:
        """Set fields by name (a writer's `update_status(state=..., ...)`); other names go to `extra`."""
        for name, value in fields.items():
            kind = FIELDS.get(name)
            fits, typed = _read(kind, value) if kind else (False, None)
            if kind:
                setattr(self, name, typed)
            if fits:
                self.extra.pop(name, None)
                self._written.add(name)
            else:  # unknown, or the wrong type for it: kept as written (a field reads it as None)
                self.extra[name] = value
                self._written.discard(name)

    def drop(self, *names: str) -> None:
        """Take keys out of the status altogether (not even null is written for them)."""
        for name in names:
            self.extra.pop(name, None)
            if name in FIELDS:
                setattr(self, name, None)
                self._written.discard(name)

    def copy(self) -> RunStatus:
        return RunStatus.from_dict(self.to_dict())


# {field name: its JSON type}, in the order of the class.
FIELDS: dict[str, type] = {f.name: f.metadata["kind"] for f in dataclasses.fields(RunStatus) if "kind" in f.metadata}
# What each field means, for the docs and the notebooks.
FIELD_HELP: dict[str, str] = {f.name: f.metadata["help"] for f in dataclasses.fields(RunStatus) if "kind" in f.metadata}


def running_seconds(status: RunStatus | Mapping, now: float, live: bool) -> float | None:
    """The seconds a run has spent running (its "elapsed"): from its first start, leaving out the time it was
    stopped before a resume and the time that resume waited in the queue; None before it ever started.

    `live`: whether it has not ended, so its clock goes on to `now`; an ended run's stops at its last write
    (`updated_at`). A run resumed before `ran_before_resume` was recorded counts from its first start, as before.
    """
    started, updated = status_field(status, "started_at"), status_field(status, "updated_at")
    if not started:
        return None
    end = now if live else (updated or now)
    before, resumed = status_field(status, "ran_before_resume"), status_field(status, "resumed_at")
    if before is None or not resumed:
        return max(0.0, end - started)
    if status_field(status, "state") == "queued":  # a resume waiting for its turn: its clock stands still
        return before
    return before + max(0.0, end - resumed)


def status_field(status: RunStatus | Mapping, name: str) -> Any:
    """One field of a RunStatus or of a status dict, typed as `RunStatus` reads it, without reading the rest.

    A listing asks thousands of rows for their `host` or `state` every few seconds.
    """
    if isinstance(status, RunStatus):
        return getattr(status, name)
    return _read(FIELDS[name], status.get(name))[1] if isinstance(status, Mapping) else None


def _read(kind: type, value: Any) -> tuple[bool, Any]:
    """(True, `value` as `kind`) when it is one, or null; (False, None) when it has the wrong type for `kind`, or
    more in it than MAX_CHARS lets a field hold."""
    if value is None:
        return True, value
    if type(value) is kind and kind is not float:  # the common case, at once
        fits = -MAX_INT <= value <= MAX_INT if kind is int else within_chars(value, MAX_CHARS.get(kind))
        return (True, value) if fits else (False, None)
    if kind is LeverDecision:  # a record, or the sentence status files held before it was one
        return LeverDecision.read(value) if within_chars(value, MAX_CHARS[dict]) else (False, None)
    if isinstance(value, bool):  # a bool is an int to Python, never a number in status.json
        return False, None
    if kind is int and isinstance(value, float) and math.isfinite(value) and value.is_integer():
        return (True, int(value)) if -MAX_INT <= value <= MAX_INT else (False, None)
    if kind is float and isinstance(value, (int, float)) and math.isfinite(value):
        return (True, float(value)) if TIMES[0] <= value <= TIMES[1] else (False, None)
    if isinstance(value, kind) and kind not in (int, float) and within_chars(value, MAX_CHARS.get(kind)):
        return True, value
    return False, None


def within_chars(value: Any, limit: int | None = MAX_CHARS[dict]) -> bool:
    """Whether `value` holds at most `limit` characters (a string's own, anything else's as JSON)."""
    if limit is None:
        return True
    if isinstance(value, str):
        return len(value) <= limit
    try:
        return len(json.dumps(value, default=str)) <= limit
    except (TypeError, ValueError, RecursionError):  # a cycle, or nesting past Python's stack: never shown
        return False
