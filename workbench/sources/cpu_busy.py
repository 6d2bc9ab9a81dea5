"""How busy the machine is with other work: other processes' share of the CPU between two moments.

A time measured here (a speed probe's round, a training step, the estimate built from them) grows when other
processes share the cores. What tells it is the kernel's own count of every core's time (`/proc/stat`) against the
CPU time of the workbench's own processes (`/proc/<pid>/stat` of a process tree): the difference is the time
others took. The arithmetic is a pure function of two samples; the readers only read `/proc`.

    before = cpu_busy.read_sample()          # roots: this process by default, or the pids whose trees are ours
    ...                                      # half a second or more later
    busy = cpu_busy.busy_between(before, cpu_busy.read_sample())
    busy.others_share                        # 0..1 of all the machine's cores, taken by processes outside the trees
    busy.is_busy()                           # others_share >= BUSY_SHARE

`measure(seconds, roots)` takes both samples with a sleep between; `BusyWatch` answers again and again (a page
load) without sleeping each time, from the sample it kept the last time.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from pathlib import Path

PROC = Path("/proc")
# Others taking a quarter of the machine (half a core of two) already shows in a step's time.
BUSY_SHARE = 0.25
# /proc/stat's cpu line: user nice system idle iowait irq softirq steal guest guest_nice. guest and guest_nice
# are counted inside user and nice already, so the machine's total is the first eight; steal is time a
# hypervisor gave another machine, lost to this one as surely as time another process took.
_TOTAL_FIELDS = 8
_IDLE_FIELDS = (3, 4)  # idle, iowait


@dataclass(frozen=True)
class CpuSample:
    """One moment's counters, in clock ticks since boot (summed over the cores)."""

    total_ticks: int  # every core's time
    idle_ticks: int  # idle and iowait
    tree_ticks: int  # the trees' processes: user + system, with the reaped children's in their parents
    cores: int  # the per-core lines of /proc/stat
    at: float = 0.0  # time.monotonic() when read (BusyWatch's age test; the arithmetic uses the ticks)


@dataclass(frozen=True)
class CpuBusy:
    """Where the machine's CPU went between two samples, as shares of all its cores' time (they add up to 1)."""

    others_share: float
    tree_share: float
    idle_share: float
    cores: int
    seconds: float  # the interval, from the ticks (0 when the samples are the same moment)

    @property
    def others_cores(self) -> float:
        """The cores' worth of time others took: 1.0 is one core kept busy all the time."""
        return self.others_share * self.cores

    def is_busy(self, threshold: float = BUSY_SHARE) -> bool:
        return self.others_share >= threshold

    def to_dict(self) -> dict:
        """Plain data (a page's gr.State); `CpuBusy(**data)` makes it again."""
        return asdict(self)

    def note(self) -> str:
        """A sentence for the page: how much others took, and what that does to the times shown."""
        seconds = f"{self.seconds:.1f}" if self.seconds < 10 else f"{self.seconds:.0f}"
        return (
            f"this machine is busy: other processes took {self.others_share:.0%} of its {self.cores} cores "
            f"over the last {seconds} s, and times here grow with it"
        )


def parse_proc_stat(text: str) -> tuple[int, int, int]:
    """(total ticks, idle ticks, cores) from the text of /proc/stat."""
    total = idle = None
    cores = 0
    for line in text.splitlines():
        name, _, rest = line.partition(" ")
        if name == "cpu":
            values = [int(v) for v in rest.split()]
            total = sum(values[:_TOTAL_FIELDS])
            idle = sum(values[i] for i in _IDLE_FIELDS)
        elif name.startswith("cpu") and name[3:].isdigit():
            cores += 1
    if total is None:
        raise ValueError("/proc/stat has no 'cpu' line")
    return total, idle, max(cores, 1)


def parse_pid_stat(text: str) -> tuple[int, int, int]:
    """(pid, parent pid, CPU ticks) from a /proc/<pid>/stat line; the ticks are utime + stime + cutime + cstime,
    so a child that ended and was waited for still counts, in its parent."""
    pid = int(text[: text.index(" ")])
    # the command name sits in parentheses and may hold spaces and parentheses itself: the fields follow the last ")"
    fields = text[text.rindex(")") + 2 :].split()
    # fields[0] is the state (field 3 of proc(5)): ppid is field 4, utime..cstime fields 14..17
    return pid, int(fields[1]), sum(int(v) for v in fields[11:15])


def tree_ticks(processes: Iterable[tuple[int, int, int]], roots: Iterable[int]) -> int:
    """The ticks of the roots and all their descendants, from (pid, parent pid, ticks) rows."""
    children: dict[int, list[int]] = {}
    ticks: dict[int, int] = {}
    for pid, parent, used in processes:
        children.setdefault(parent, []).append(pid)
        ticks[pid] = used
    seen: set[int] = set()
    stack = [r for r in roots if r in ticks]
    while stack:
        pid = stack.pop()
        if pid in seen:
            continue
        seen.add(pid)
        stack.extend(children.get(pid, ()))
    return sum(ticks[pid] for pid in seen)


def busy_between(before: CpuSample, after: CpuSample) -> CpuBusy:
    """Others' share of the machine's time between two samples (pure). Tick counters are sampled, so the trees'
    share can come out a tick above the busy time: each share is kept within 0..1."""
    total = after.total_ticks - before.total_ticks
    cores = after.cores
    if total <= 0:
        return CpuBusy(0.0, 0.0, 1.0, cores, 0.0)
    idle = min(max(after.idle_ticks - before.idle_ticks, 0), total)
    busy = total - idle
    ours = min(max(after.tree_ticks - before.tree_ticks, 0), busy)
    clock = os.sysconf("SC_CLK_TCK")
    return CpuBusy((busy - ours) / total, ours / total, idle / total, cores, total / cores / clock)


def read_processes(proc: Path = PROC) -> list[tuple[int, int, int]]:
    """(pid, parent pid, ticks) of every process /proc shows; a process that ends while read is left out."""
    rows = []
    for entry in os.scandir(proc):
        if not entry.name.isdigit():
            continue
        try:
            text = Path(entry.path, "stat").read_text()
        except OSError:  # gone since the listing, or hidden from this user
            continue
        rows.append(parse_pid_stat(text))
    return rows


def read_sample(roots: Iterable[int] | None = None, proc: Path = PROC) -> CpuSample:
    """The counters now; `roots`: the pids whose process trees are the workbench's own (default: this process)."""
    roots = [os.getpid()] if roots is None else list(roots)
    # the trees first, the machine after: the machine's count then holds every tick the trees' count does
    ours = tree_ticks(read_processes(proc), roots)
    total, idle, cores = parse_proc_stat(Path(proc, "stat").read_text())
    return CpuSample(total, idle, ours, cores, time.monotonic())


def measure(seconds: float = 1.0, roots: Iterable[int] | None = None, proc: Path = PROC) -> CpuBusy:
    """Others' share over the next `seconds` (this call sleeps that long)."""
    roots = None if roots is None else list(roots)
    before = read_sample(roots, proc)
    time.sleep(seconds)
    return busy_between(before, read_sample(roots, proc))


class BusyWatch:
    """Others' share as of now, asked again and again (a page's line worked out on each load).

    Each answer covers the time since the sample kept from the last answer, when that is at most `longest` seconds
    old; an older one (or none) it replaces by sleeping `shortest` seconds to measure afresh (an hour-old sample
    would say how busy the hour was, not the moment); asked again within `shortest`, it gives the last answer.
    `roots()` gives the pids that count as ours at each reading.
    """

    def __init__(self, roots=None, shortest: float = 0.5, longest: float = 30.0, proc: Path = PROC):
        self.roots = roots if roots is not None else lambda: [os.getpid()]
        self.shortest, self.longest, self.proc = shortest, longest, proc
        self.kept: CpuSample | None = None
        self.last: CpuBusy | None = None
        self.lock = threading.Lock()  # one page load asks from several handlers at once

    def now(self) -> CpuBusy:
        with self.lock:
            kept, age = self.kept, time.monotonic() - (self.kept.at if self.kept else 0.0)
            if self.last is not None and age < self.shortest:
                return self.last  # asked again at once (several parts of one page): the answer just given
            if kept is None or age > self.longest:
                kept = read_sample(self.roots(), self.proc)
                time.sleep(self.shortest)
            self.kept = read_sample(self.roots(), self.proc)
            self.last = busy_between(kept, self.kept)
            return self.last
