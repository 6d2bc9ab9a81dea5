"""The host-wide files of /proc a sandbox sees in place of the host's: its own memory, no load.

`/proc/meminfo` and `/proc/loadavg` are the kernel's for the whole machine whatever PID namespace reads them:
inside a sandbox they told a run the host's free memory and load, so what the other users' runs were doing
(issue 52). bwrap binds a file of the sandbox's own over each: a meminfo whose total and free memory are the
memory the sandbox may use (its limit, or the machine's when it has none; a reader that sizes itself by the
free memory, as `transformers` and psutil do, still gets a well-formed file), and a load of zero. The files are
written once per content, read-only, into the workbench's cache (the server's, outside every run folder).

Left the host's: `/proc/stat` (its `btime` is how psutil, inside too, tells a process's start time, and the
start times the launcher records must agree with it), `/proc/uptime`, `/proc/cpuinfo` (what the machine is,
not what others do).
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from pathlib import Path

# Where the files lie, under the workbench's cache (sources/model_files.py cache_dir).
FOLDER = "sandbox-proc"
LOADAVG_TEXT = "0.00 0.00 0.00 1/1 1\n"


def meminfo_text(memory_bytes: int) -> str:
    """A /proc/meminfo of a machine of `memory_bytes`, all of it free (the fields psutil's virtual_memory reads)."""
    kib = max(memory_bytes, 0) // 1024
    free = {"MemTotal": kib, "MemFree": kib, "MemAvailable": kib}
    others = ("Buffers", "Cached", "SwapCached", "Active", "Inactive", "Shmem", "Slab", "SReclaimable")
    rows = [*free.items(), *((name, 0) for name in others), ("SwapTotal", 0), ("SwapFree", 0)]
    return "".join(f"{name + ':':<16}{value:>8} kB\n" for name, value in rows)


def proc_texts(memory_limit: int, machine_memory: int) -> dict[str, str]:
    """{/proc path: what the sandbox reads there}, for a sandbox limited to `memory_limit` bytes (0: none)."""
    own = min(memory_limit, machine_memory) if memory_limit > 0 else machine_memory
    return {"/proc/meminfo": meminfo_text(own), "/proc/loadavg": LOADAVG_TEXT}


def proc_files(memory_limit: int) -> tuple[tuple[str, str], ...]:
    """((host file, /proc path), ...) to bind over the host's files, each written once per content."""
    import psutil

    from workbench.sources.model_files import cache_dir

    folder = cache_dir() / FOLDER
    folder.mkdir(parents=True, exist_ok=True, mode=0o755)
    placed = []
    for inside, text in proc_texts(memory_limit, psutil.virtual_memory().total).items():
        data = text.encode()
        path = folder / f"{Path(inside).name}-{hashlib.sha256(data).hexdigest()[:16]}"
        if not path.is_file() or path.is_symlink():
            _write_read_only(path, data)
        placed.append((str(path), inside))
    return tuple(placed)


def _write_read_only(path: Path, data: bytes) -> None:
    """`data` as `path`, 0o444, through a temporary file and a rename (two sandboxes starting at once agree)."""
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=".proc-")
    try:
        with os.fdopen(handle, "wb") as out:
            out.write(data)
        os.chmod(temporary, 0o444)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
