"""Other processes' share of the CPU (sources/cpu_busy.py), on this machine's own /proc with real busy processes."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from workbench.sources import cpu_busy

SPIN = "import time\nend = time.monotonic() + 30\nwhile time.monotonic() < end: pass\n"
# A spinner started through a parent that exits at once: the spinner is orphaned, outside this process's tree.
DETACHED = (
    "import subprocess, sys\n"
    f"p = subprocess.Popen([sys.executable, '-c', {SPIN!r}], start_new_session=True,\n"
    "                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)\n"
    "print(p.pid, flush=True)\n"
)


def ticks_of(pid: int) -> int:
    return cpu_busy.parse_pid_stat(Path(f"/proc/{pid}/stat").read_text())[2]


@pytest.fixture
def spinner():
    """A CPU-bound child of this process."""
    process = subprocess.Popen([sys.executable, "-c", SPIN])
    time.sleep(0.3)  # past its start-up, spinning
    yield process.pid
    process.kill()
    process.wait()


@pytest.fixture
def detached_spinner():
    """A CPU-bound process outside this process's tree (its parent has exited)."""
    out = subprocess.run([sys.executable, "-c", DETACHED], capture_output=True, text=True, check=True).stdout
    pid = int(out)
    time.sleep(0.3)
    yield pid
    os.kill(pid, 9)


def shares_over(seconds: float, roots, watched: int):
    """Sample, wait, sample; with the watched process's own ticks over the same interval."""
    before, watched_before = cpu_busy.read_sample(roots), ticks_of(watched)
    time.sleep(seconds)
    watched_after = ticks_of(watched)
    after = cpu_busy.read_sample(roots)
    return cpu_busy.busy_between(before, after), watched_after - watched_before, after.total_ticks - before.total_ticks


def test_proc_stat_parses_as_the_kernel_counts():
    total, idle, cores = cpu_busy.parse_proc_stat(Path("/proc/stat").read_text())
    assert cores == os.cpu_count()
    assert 0 < idle < total
    first = Path("/proc/stat").read_text().splitlines()[0].split()
    assert total == sum(int(v) for v in first[1:9])  # guest time is inside user already


def test_a_command_name_with_parentheses_and_spaces_parses():
    name = "a) (b c) d"
    process = subprocess.Popen(
        [sys.executable, "-c", f"open('/proc/self/comm', 'w').write({name!r}); import time; time.sleep(5)"]
    )
    try:
        deadline = time.monotonic() + 5
        while name not in Path(f"/proc/{process.pid}/stat").read_text() and time.monotonic() < deadline:
            time.sleep(0.02)
        pid, parent, ticks = cpu_busy.parse_pid_stat(Path(f"/proc/{process.pid}/stat").read_text())
        assert (pid, parent) == (process.pid, os.getpid())
        assert ticks >= 0
    finally:
        process.kill()
        process.wait()


def test_a_busy_child_counts_as_ours_not_as_others(spinner):
    busy, spun, total = shares_over(1.0, [os.getpid()], spinner)
    assert spun > 0
    ours = round(busy.tree_share * total)
    assert ours >= spun - 2  # the child's ticks are in the tree's (a tick or two of sampling apart)
    assert busy.others_share + busy.tree_share + busy.idle_share == pytest.approx(1.0)


def test_a_busy_process_outside_the_tree_counts_as_others(detached_spinner):
    busy, spun, total = shares_over(1.0, [os.getpid()], detached_spinner)
    assert spun > 0
    assert round(busy.others_share * total) >= spun - 2
    assert round(busy.tree_share * total) < spun  # this test's own process barely ran
    # the same process named as a root of ours moves to the tree's share
    mine, spun_again, total_again = shares_over(1.0, [os.getpid(), detached_spinner], detached_spinner)
    assert round(mine.tree_share * total_again) >= spun_again - 2


def test_others_busy_on_every_core_is_busy(detached_spinner):
    more = [
        int(subprocess.run([sys.executable, "-c", DETACHED], capture_output=True, text=True, check=True).stdout)
        for _ in range(os.cpu_count() - 1)
    ]
    try:
        time.sleep(0.3)
        busy = cpu_busy.measure(1.0)
    finally:
        for pid in more:
            os.kill(pid, 9)
    assert busy.is_busy()
    assert busy.others_cores >= 1.0
    assert "busy" in busy.note() and f"{busy.cores} cores" in busy.note()


def test_the_same_moment_twice_is_no_interval():
    sample = cpu_busy.read_sample()
    assert cpu_busy.busy_between(sample, sample) == cpu_busy.CpuBusy(0.0, 0.0, 1.0, sample.cores, 0.0)


def test_the_watch_answers_again_at_once_and_measures_afresh_when_old(detached_spinner):
    watch = cpu_busy.BusyWatch(shortest=0.3, longest=2.0)
    started = time.monotonic()
    first = watch.now()
    assert time.monotonic() - started >= 0.3  # nothing kept: it measured over `shortest`
    assert watch.now() is first  # asked again at once
    time.sleep(0.5)
    quick = time.monotonic()
    second = watch.now()
    assert time.monotonic() - quick < 0.3  # from the kept sample, no sleep
    assert second.seconds >= 0.4  # the half second since the first answer
