"""The run folder: the one contract between a training process and its readers.

A training process writes, and the UI, the CLI and the notebooks read, the
files of `runs/<run_id>/`:

- `config.json`        the RunConfig that made the run
- `status.json`        replaced atomically (temp file + `os.replace`), never half-written; `host` names
                       the machine of the writing process, `updated_at` is its heartbeat; every key is
                       a field of `spec.run_status.RunStatus` (`read_run_status`, `write_run_status`)
- `metrics.jsonl`      one JSON object per logging step, appended and flushed per line
- `completions.jsonl`  one JSON object per completion, appended and flushed per line
- `eval.jsonl`         one JSON object per held-out evaluation (eval_strategy=steps; `spec.heldout`
                       describes it): step 0 before any update, every eval_steps, the end; a resume
                       drops the steps after its checkpoint and never writes a step twice
- `tokens.jsonl`       at logging steps, one JSON object per completion of the step's batch with its values
                       token by token (`spec.token_records`; record_tokens=false writes none)
- `train.log`          the process's own output
- `vllm_server.log`    the output of the run's own vLLM server (generation=vllm-server / trl-server)
- `checkpoint-*/`      LoRA checkpoints; `adapter/` the final adapter
- `stop.request`       written by whoever wants the run to stop; the trainer
                       checks for it at the end of every optimizer step
- `report.html`        the run's report, written on demand (`python -m workbench report`, the Runs tab)
- `.status-reserve`    space a running trainer holds for its final status on a full disk

Process ids in status.json: `pid` and `pgid` are the host's (what `ps` shows
there). A run in a sandbox (workbench/jobs/sandbox.py) has a PID namespace of
its own: outside, `pid`/`pgid` name the process that became its sandbox;
inside, the trainer records its own pid as `sandbox_pid`, and its vLLM
server's `vllm.pid` is marked `in_sandbox`. `pids_here` and
`server_pid_here` give each reader the ids that mean something where it runs.

A run waiting in the GPU queue (workbench/jobs/queue.py) is a run folder like
any other, with the state `queued` and its `queued_at` time in status.json;
its position follows from those times. Two files in the runs folder itself
belong to the queue: `.queue.lock`, which every check-and-claim holds, and
`.queue-dispatcher.lock`, held for its whole life by the one dispatcher process
of the folder (`.queue-dispatcher.log` is its output).

This module holds the files' names and formats and reads and writes them;
`run_locks` takes the queue's locks and writes and reads `stop.request`, and
`checkpoint_integrity` says which `checkpoint-*/` folders are whole enough to resume from.

Readers keep no state in globals: they read the folder again, or read only the
bytes after an offset they hold. A half-written last line is never returned as
data; it is read again once its newline has landed. (`jsonl_cache` keeps, per
process, what it has read of a long file and where each step's lines lie; it is
checked against the file on every read, so it changes how much is read, never
what a reader sees.)

The run's own code (its reward file) can write in the folder too, and may be
hostile, while the server reads and writes it as root: every reader and
writer here opens its file through `safe_files`, never following a link
(a link or FIFO where a file belongs reads as missing; a writer
replaces it with a fresh file), and only regular files count in a checkpoint.

A line a reader cannot take (bytes that are not UTF-8, text that is not
JSON, a record of the wrong shape: `spec.run_records` holds the rule for
metrics and completions) is skipped, the other records are returned, and the
reader logs it once per file (`say_skipped`); the readers that return a
`Skipped` let a page or a report say so too.

Standard library (and orjson, where installed, to parse faster): importable without torch or gradio.
"""

from __future__ import annotations

import json
import logging
import os
import re
import stat
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import replace
from datetime import datetime
from pathlib import Path
from typing import IO, Any

from workbench.errors import WorkbenchError
from workbench.runstore import safe_files
from workbench.runstore.checkpoint_integrity import checkpoint_steps
from workbench.runstore.kept_records import Kept, Limits, keep, left_out_note, limits, pieces
from workbench.spec.heldout import eval_problem
from workbench.spec.run_records import Skipped, completion_problem, metric_problem, object_problem
from workbench.spec.run_status import RunStatus, status_field
from workbench.spec.token_records import token_problem

try:
    import orjson
except ImportError:  # the standard library's json reads the same
    orjson = None

CONFIG_FILE = "config.json"
STATUS_FILE = "status.json"
METRICS_FILE = "metrics.jsonl"
COMPLETIONS_FILE = "completions.jsonl"
EVAL_FILE = "eval.jsonl"
TOKENS_FILE = "tokens.jsonl"
LOG_FILE = "train.log"
VLLM_LOG_FILE = "vllm_server.log"
ADAPTER_DIR = "adapter"
STOP_FILE = "stop.request"
REWARD_SOURCE_FILE = "reward_file.py"
REPORT_FILE = "report.html"
QUEUE_LOCK_FILE = ".queue.lock"
DISPATCHER_LOCK_FILE = ".queue-dispatcher.lock"
UID_LOCK_FILE = ".uids.lock"  # held while a sandbox's uid is chosen (jobs/run_uids.py)
DISPATCHER_LOG_FILE = ".queue-dispatcher.log"

# A run whose devices a live run holds waits `queued` before it starts.
QUEUED = "queued"
# What readers report for a folder they cannot read (permissions, a status.json that is not
# UTF-8 JSON); no trainer writes it. Nothing runs there as far as they can tell, so it counts as final.
UNREADABLE = "unreadable"
# What readers report for a run on another machine (status.json's `host`) whose heartbeat stopped:
# its process cannot be looked up from here, so a silent heartbeat is all there is to go on.
# Readers count it as final (nothing answers there); it turns back into the written state
# if the heartbeat returns.
LOST = "lost"
FINAL_STATES = ("finished", "failed", "stopped", UNREADABLE, LOST)

RUNS_DIR_ENV = "WORKBENCH_RUNS_DIR"
SANDBOX_ENV = "WORKBENCH_SANDBOX"  # "1" inside a run's sandbox: its own PID namespace

# The rule each JSON-lines file's records follow, by file name; other files' lines need only be JSON objects.
RECORD_RULES: dict[str, Callable[[Any], str | None]] = {
    METRICS_FILE: metric_problem,
    COMPLETIONS_FILE: completion_problem,
    EVAL_FILE: eval_problem,
    TOKENS_FILE: token_problem,
}

_log = logging.getLogger(__name__)


def runs_root(root: str | os.PathLike | None = None) -> Path:
    """Folder holding all runs: `root`, else $WORKBENCH_RUNS_DIR, else ./runs."""
    return Path(root or os.environ.get(RUNS_DIR_ENV) or "runs").resolve()


def new_run_id(label: str = "run", now: datetime | None = None) -> str:
    """A sortable, filesystem-safe id such as `20261122-031502-demo`."""
    stamp = (now or datetime.now()).strftime("%Y%m%d-%H%M%S")
    safe = re.sub(r"[^A-Za-z0-9_.-]+", "-", label).strip("-") or "run"
    return f"{stamp}-{safe}"


def write_json_atomic(path: str | os.PathLike, data: Any) -> None:
    """Write JSON so a reader sees the old file or the new one, never a mix."""
    replace_file(path, json.dumps(data, indent=2, default=str).encode("utf-8"))


def replace_file(path: str | os.PathLike, content: bytes, mode: int = safe_files.SHARED_MODE) -> None:
    """Write `content` to a temporary file beside `path`, then rename it over `path` (atomic; a link there is
    replaced, never followed: `safe_files.replace_file`); `mode` 0o600 for a private copy."""
    safe_files.replace_file(path, content, mode=mode)


# A run's code writes its folder: what a reader holds of one file at a time is bounded, whatever its size (a
# sparse file costs the run no disk). A JSON file over MAX_JSON_BYTES cannot be read (`safe_files.load_json`); a
# JSON line longer than READ_CHUNK_BYTES is skipped.
MAX_JSON_BYTES = safe_files.MAX_JSON_BYTES
READ_CHUNK_BYTES = 8 << 20
# The bytes before its offset a reader keeps, to tell the file it read from one changed since (`read_kept`).
TAIL_BYTES = 64


def read_json(path: str | os.PathLike, default: Any = None) -> Any:
    """Read a JSON file; `default` when it is missing or unreadable (permissions, not UTF-8, not JSON, not
    a regular file)."""
    try:
        return safe_files.load_json(path)
    except (OSError, ValueError):  # ValueError covers JSONDecodeError and UnicodeDecodeError
        return default


def read_json_object(path: str | os.PathLike) -> dict:
    """A file holding one JSON object; {} when it does not exist.

    Unlike `read_json` it says why a file cannot be used: OSError (permissions,
    a folder in its place) or ValueError naming the file and what is wrong. A
    link or FIFO in its place reads as missing, never followed (`safe_files`).
    """
    name = Path(path).name
    try:
        data = safe_files.load_json(path)
    except FileNotFoundError:
        return {}
    except UnicodeDecodeError:
        raise ValueError(f"{name} is not UTF-8 text") from None
    except json.JSONDecodeError as exc:
        raise ValueError(f"{name} is not valid JSON ({exc.msg}, line {exc.lineno})") from None
    if not isinstance(data, dict):
        raise ValueError(f"{name} holds a JSON {type(data).__name__}, not an object")
    return data


def _object_or_empty(data: Any) -> dict:
    return data if isinstance(data, dict) else {}


def read_config(run_dir: str | os.PathLike) -> dict:
    """The run's config.json as a plain dict ({} when missing or unreadable)."""
    return _object_or_empty(read_json(Path(run_dir) / CONFIG_FILE, default={}))


def read_status(run_dir: str | os.PathLike) -> dict:
    """The run's status.json as written, a dict ({} when the run has not written one, or it cannot be read).

    `read_run_status` reads it typed.
    """
    return _object_or_empty(read_json(Path(run_dir) / STATUS_FILE, default={}))


def read_run_status(run_dir: str | os.PathLike) -> RunStatus:
    """The run's status.json as a `RunStatus` (empty when the run has not written one, or it cannot be read)."""
    return RunStatus.from_dict(read_json(Path(run_dir) / STATUS_FILE, default={}))


def read_shown_status(run_dir: str | os.PathLike) -> dict:
    """The run's status.json as a page or a notebook shows it: each field typed and bounded, and the fields that
    were not named under `unreadable_fields` (`RunStatus.shown`)."""
    return read_run_status(run_dir).shown()


def write_run_status(run_dir: str | os.PathLike, status: RunStatus) -> None:
    """Replace the run's status.json with `status`, atomically (keys it does not know kept as they were)."""
    write_json_atomic(Path(run_dir) / STATUS_FILE, status.to_dict())


def read_run(run_dir: str | os.PathLike) -> dict:
    """Everything a reader of the whole run wants at once (a report): `config`, `status` (a RunStatus), the
    `metrics`, `completions` and held-out `evals` records as written (a resumed run's repeated steps included),
    `checkpoint_steps` (the complete checkpoints on disk), `skipped`: the lines of each of those three files
    that could not be read ({file name: Skipped}), and `left_out`: for each file of which the newest records only
    are kept (`kept_records.limits`, the admin's), the sentence saying so ({file name: note})."""
    run_dir = Path(run_dir)
    bounds = limits()
    read = {name: read_kept_records(run_dir / name, bounds) for name in (METRICS_FILE, COMPLETIONS_FILE, EVAL_FILE)}
    return {
        "config": read_config(run_dir),
        "status": read_run_status(run_dir),
        "metrics": read[METRICS_FILE][0].records,
        "completions": read[COMPLETIONS_FILE][0].records,
        "evals": read[EVAL_FILE][0].records,
        "checkpoint_steps": checkpoint_steps(run_dir),
        "skipped": {name: skipped for name, (_, skipped) in read.items()},
        "left_out": {
            name: left_out_note(name, kept, bounds, "records") for name, (kept, _) in read.items() if kept.left_out
        },
    }


def inside_sandbox() -> bool:
    """Whether this process runs inside a run's sandbox, where the host's pids mean nothing."""
    return os.environ.get(SANDBOX_ENV) == "1"


def own_pid_fields() -> dict:
    """The status.json field naming this process: `pid` on the host, `sandbox_pid` inside a sandbox."""
    return {"sandbox_pid": os.getpid()} if inside_sandbox() else {"pid": os.getpid()}


def _pid(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def pids_here(status: RunStatus | dict) -> list[int]:
    """The run's process ids that mean something in this process's PID namespace (see the module's docstring)."""
    keys = ("sandbox_pid",) if inside_sandbox() else ("pid", "pgid")
    return [pid for pid in (_pid(status_field(status, key)) for key in keys) if pid]


def server_pid_here(status: RunStatus | dict) -> int | None:
    """The pid of the run's own vLLM server guard, when it means something where this process runs."""
    section = status_field(status, "vllm") or {}
    return _pid(section.get("pid")) if bool(section.get("in_sandbox")) == inside_sandbox() else None


def update_status(run_dir: str | os.PathLike, **fields: Any) -> dict:
    """Merge `fields` (RunStatus's names) into status.json, stamp `updated_at`, replace atomically; the new status."""
    status = read_run_status(run_dir)
    status.update(**{**fields, "updated_at": time.time()})
    write_run_status(run_dir, status)
    return status.to_dict()


def append_jsonl(path: str | os.PathLike, records: Iterable[dict]) -> None:
    """Append records as JSON lines, one write and one flush per line (a link or FIFO planted at `path` is
    replaced by a fresh file: `safe_files.open_for_writing`)."""
    with safe_files.open_for_writing(path) as handle:
        for record in records:
            handle.write((json.dumps(record, default=_json_default) + "\n").encode("utf-8"))
            handle.flush()


def _json_default(value: Any) -> Any:
    # numpy / torch scalars carry .item(); anything else becomes its text
    item = getattr(value, "item", None)
    return item() if callable(item) else str(value)


def loads(line: bytes) -> Any:
    """json.loads, by orjson where it can (several times faster; gradio brings it): the same objects for
    the JSON it reads, and json.loads for what it refuses (NaN, Infinity, integers past 64 bits)."""
    if orjson is not None:
        try:
            return orjson.loads(line)
        except orjson.JSONDecodeError:
            pass
    return json.loads(line)


def parse_lines(
    chunk: bytes, base: int = 0, rule: Callable[[Any], str | None] | None = None
) -> tuple[list[dict], Skipped]:
    """The records on the whole lines of `chunk` (which begins at byte `base` of its file), and those skipped.

    A line is skipped when it is not UTF-8 text, not JSON, not a JSON object,
    or breaks `rule` (the file's, from `rule_of`); a blank line is passed
    over without a word.
    """
    records: list[dict] = []
    count, first = 0, ""
    position = 0
    for line in chunk.split(b"\n"):
        start, position = position, position + len(line) + 1
        if not line.strip():
            continue
        try:
            record = loads(line)
        except UnicodeDecodeError:
            problem = "not UTF-8 text"
        except (ValueError, RecursionError):  # RecursionError: JSON nested deeper than Python parses
            problem = "not JSON"
        else:
            problem = (rule or object_problem)(record)
            if problem is None:
                records.append(record)
                continue
        count += 1
        first = first or f"byte {base + start}: {problem}"
    return records, Skipped(count, first)


_said: set[str] = set()  # files whose skipped lines were logged: each is said once per process


def say_skipped(path: str | os.PathLike, skipped: Skipped) -> None:
    """Log the lines a reader skipped in `path`, the first time this process skips any there."""
    key = os.path.abspath(path)
    if skipped.count and key not in _said:
        _said.add(key)
        _log.warning("%s", skipped.note(key))


def rule_of(path: str | os.PathLike) -> Callable[[Any], str | None] | None:
    """The record rule of the run file `path` names (None for other JSON-lines files)."""
    return RECORD_RULES.get(Path(path).name)


def whole_lines(handle: IO[bytes], offset: int) -> Iterator[tuple[int, bytes, Skipped]]:
    """From byte `offset` of the open file: (where it begins, a run of whole lines, a line skipped for its length),
    at most READ_CHUNK_BYTES at a time; a half-written last line is left for the next reader.

    A line longer than READ_CHUNK_BYTES is passed over a chunk at a time (its rest, once its newline lands,
    reads as a line that is not JSON), so no reader ever holds more than one chunk of a file.
    """
    handle.seek(offset)
    while True:
        chunk = handle.read(READ_CHUNK_BYTES)
        end = chunk.rfind(b"\n") + 1
        if end:
            yield offset, chunk[:end], Skipped()
            offset += end
            handle.seek(offset)
        elif len(chunk) == READ_CHUNK_BYTES:
            yield offset, b"", Skipped(1, f"byte {offset}: a line longer than {READ_CHUNK_BYTES >> 20} MiB")
            offset += len(chunk)
        if len(chunk) < READ_CHUNK_BYTES:
            return


def read_records_from(
    path: str | os.PathLike, offset: int = 0, *, root: str | os.PathLike | None = None
) -> tuple[list[dict], int, Skipped]:
    """Records from byte `offset` up to the last complete line, the next offset, and the lines skipped.

    A half-written last line is left for the next call. A complete line that
    cannot be read (see `parse_lines`), or is too long to hold (`whole_lines`),
    is skipped rather than stopping the reader, and logged once per file.
    `root`: every folder below it on the way is opened without following a link (safe_files).
    """
    records, skipped = [], Skipped()
    try:
        with safe_files.open_file(path, root=root) as handle:
            for base, lines, too_long in whole_lines(handle, offset):
                found, bad = parse_lines(lines, base, rule_of(path))
                records += found
                skipped = skipped + too_long + bad
                offset = base + (len(lines) if lines else READ_CHUNK_BYTES)
    except OSError:  # missing, unreadable (permissions), or no regular file: nothing to show yet
        pass
    say_skipped(path, skipped)
    return records, offset, skipped


def read_kept(
    path: str | os.PathLike, handle: IO[bytes], offset: int, kept: Kept, bounds: Limits, tail: bytes = b""
) -> tuple[Kept, int, Skipped, bytes]:
    """`kept` with the records of the open file from byte `offset` (or from the window of its last
    `bounds.most_bytes`, when more follows `offset`: the bytes before it are left unread) up to its last complete
    line, the oldest let go past `bounds` (`kept_records.keep`); the next offset, the lines skipped, and `tail`
    (the bytes just before `offset`) followed by the lines read, its last TAIL_BYTES."""
    skipped = Skipped()
    size = os.fstat(handle.fileno()).st_size
    if size - offset > bounds.most_bytes:  # start at the first line that begins in the window
        start = size - bounds.most_bytes
        handle.seek(start - 1)
        block = handle.read(READ_CHUNK_BYTES)
        line_end = block.find(b"\n")
        begins = start + line_end if line_end >= 0 else start - 1 + len(block)
        kept = replace(kept, unread_bytes=kept.unread_bytes + begins - offset)
        offset, tail = begins, b""  # the tail is of the lines read from here on (shorter is fine: its length says)
    rule = rule_of(path)
    for base, lines, too_long in whole_lines(handle, offset):
        for start, stop in pieces(lines):  # a piece at a time: at most one piece's records beyond those kept
            found, bad = parse_lines(lines[start:stop], base + start, rule)
            kept = keep(kept, found, stop - start, bounds)
            skipped = skipped + bad
        skipped = skipped + too_long
        offset = base + (len(lines) if lines else READ_CHUNK_BYTES)
        tail = (tail + lines[-TAIL_BYTES:])[-TAIL_BYTES:] if lines else tail
    say_skipped(path, skipped)
    return kept, offset, skipped, tail


def read_kept_records(path: str | os.PathLike, bounds: Limits | None = None) -> tuple[Kept, Skipped]:
    """The newest records of a JSON-lines file that `bounds` (the admin's `kept_records.limits()`) lets one reader
    keep, and the lines skipped (`read_kept`)."""
    try:
        with safe_files.open_file(path) as handle:
            kept, _, skipped, _ = read_kept(path, handle, 0, Kept(), bounds or limits())
            return kept, skipped
    except OSError:  # missing, unreadable (permissions), or no regular file: nothing to show yet
        return Kept(), Skipped()


def read_jsonl_from(path: str | os.PathLike, offset: int = 0) -> tuple[list[dict], int]:
    """Records from byte `offset` up to the last complete line, and the next offset (`read_records_from`)."""
    records, offset, _ = read_records_from(path, offset)
    return records, offset


def file_identity(path: str | os.PathLike) -> tuple[int, int] | None:
    """(device, inode) of a file, None when missing: a reader holding an offset tells a replaced file by it.

    The name's own (a link's, not its target's): readers never follow one.
    """
    info = safe_files.lstat(path)
    return None if info is None else (info.st_dev, info.st_ino)


def keep_steps_up_to(path: str | os.PathLike, step: int) -> int:
    """Rewrite a JSON-lines file without the records of steps after `step`; returns how many were dropped.

    A resume from checkpoint-`step` trains the later steps again; their old
    records (and a line cut short by the kill) would otherwise stay beside
    the new ones. The file is replaced atomically, so a reader sees the old
    file or the new one; readers holding an offset notice the new file by
    `file_identity`.
    """
    try:
        lines = safe_files.read_bytes(path).splitlines(keepends=True)
    except FileNotFoundError:  # missing, or no regular file (read as missing)
        return 0
    kept = [line for line in lines if _step_at_most(line, step)]
    dropped = len(lines) - len(kept)
    if dropped:
        replace_file(path, b"".join(kept))
    return dropped


def _step_at_most(line: bytes, step: int) -> bool:
    if not line.endswith(b"\n"):
        return False  # cut short by the kill that ended the earlier process
    try:
        record = json.loads(line)
    except (ValueError, RecursionError):  # not UTF-8, not JSON, or nested deeper than Python parses
        return False
    value = record.get("step") if isinstance(record, dict) else None
    return not isinstance(value, (int, float)) or value <= step


def read_jsonl(path: str | os.PathLike, *, root: str | os.PathLike | None = None) -> list[dict]:
    """All complete records of a JSON-lines file ([] when it does not exist; `root`: `read_records_from`)."""
    return read_records_from(path, 0, root=root)[0]


def read_jsonl_tail(path: str | os.PathLike, max_bytes: int = 16_384) -> list[dict]:
    """The complete records among the last `max_bytes` of a JSON-lines file, oldest first.

    The first line of the window may be cut by the seek and is dropped unless
    the window starts at the beginning of the file.
    """
    try:
        start, chunk = safe_files.read_tail(path, max_bytes)
    except OSError:
        return []
    if start > 0:
        cut = chunk.find(b"\n") + 1 if b"\n" in chunk else len(chunk)
        chunk, start = chunk[cut:], start + cut
    records, skipped = parse_lines(chunk[: chunk.rfind(b"\n") + 1], start, rule_of(path))
    say_skipped(path, skipped)
    return records


def last_metric(run_dir: str | os.PathLike, name: str, tail_bytes: int = 16_384) -> float | None:
    """The last logged value of metric `name`, read from the end of metrics.jsonl (a long run costs no more)."""
    for record in reversed(read_jsonl_tail(Path(run_dir) / METRICS_FILE, tail_bytes)):
        value = record.get(name)
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
    return None


def read_log_tail(run_dir: str | os.PathLike, max_bytes: int = 4000, name: str = LOG_FILE) -> str:
    """The last `max_bytes` of train.log (or another log of the run, `name`: a plain file name), for showing
    why a run failed; "" when there is none, or a link, FIFO or folder stands there (never followed)."""
    try:
        _, tail = safe_files.read_tail(Path(run_dir) / name, max_bytes, root=run_dir)
    except (OSError, ValueError):  # ValueError: `name` is not a plain file name (safe_files.UnsafeName)
        return ""
    return tail.decode("utf-8", errors="replace")


def is_run_dir(path: str | os.PathLike) -> bool:
    """A folder with a config.json, or one that cannot be looked into (so readers can flag it)."""
    try:  # strings, not Path objects: a runs folder of thousands of runs is listed every 3 s
        return stat.S_ISREG(os.stat(os.path.join(path, CONFIG_FILE)).st_mode)
    except (FileNotFoundError, NotADirectoryError):
        return False
    except OSError:  # a folder that cannot be looked into: listed, so readers can flag it `unreadable`
        return os.path.isdir(path)


class RunIdError(WorkbenchError):
    """A run id from outside (a browser, a URL) that does not name a run folder inside the runs folder."""


def run_dir_in(runs_dir: str | os.PathLike | None, run_id: Any) -> Path:
    """The folder of `run_id`, only if it is a run folder directly inside the runs folder, links resolved.

    For ids that come from a browser or a URL: a plain folder name, never a
    path (`..`, `/`, `\\`), never a link that leads out of the runs folder. Any
    other id raises RunIdError before anything is read or deleted.
    """
    root = runs_root(runs_dir)
    name = run_id if isinstance(run_id, str) else ""
    plain = bool(name) and len(name) <= 255 and name not in (".", "..") and not any(c in name for c in "/\\\0")
    path = root / name if plain else None
    if path is None or not is_run_dir(path) or path.resolve().parent != root.resolve():
        shown = repr(run_id)[:80]
        raise RunIdError(field="run", rule=f"{shown} is not a run folder inside {root}", fix="pick a run from the list")
    return path


def picked_run_dir(runs_dir: str | os.PathLike | None, run_id: Any) -> Path | None:
    """`run_dir_in` for a picker's value: None when nothing is picked or the id names no run folder there (any more)."""
    try:
        return run_dir_in(runs_dir, run_id) if run_id else None
    except RunIdError:
        return None


def list_run_dirs(root: str | os.PathLike | None = None) -> list[Path]:
    """Run folders (those with a config.json, and folders that cannot be looked into), newest first."""
    base = runs_root(root)
    if not base.is_dir():
        return []
    with os.scandir(base) as entries:
        names = [entry.name for entry in entries if is_run_dir(entry.path)]
    return [base / name for name in sorted(names, reverse=True)]
