"""Attack: a run swaps a folder of its own for a link while the server (root) hands its folder over, and the
server gives host files to the run's uid.

`sandbox.hand_over` walks the run folder with os.walk and chowns each `os.path.join(root, name)` with
`follow_symlinks=False`, which protects the last component only: a folder on the way that the run's code
replaced by a link since the walk listed it is followed. hand_over runs at every sandbox start of the run,
its helpers' included (the Compare tab's sampling, Export merged model), while the run's own processes,
the same uid, may still be running (a live run; or one that wrote `finished` and is resumed). The run's
code keeps `d/` (a copy of the names in the folder it targets) and a link to that folder changing places;
a walk that lists `d/` and then chowns through the link hands the target's files (here a folder standing
for /etc/ssh, with a root-only key) to the run's uid, which may then read them from its next sandbox.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from workbench.jobs import sandbox

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="hand_over chowns: only a root server hands folders over")
UID = 2_000_123


@pytest.fixture
def places(tmp_path):
    victim = tmp_path / "host-etc-ssh"  # outside the run folder: a host folder with a root-only key
    (victim / "sub").mkdir(parents=True)
    for path in (victim / "host.key", victim / "sub" / "host.key"):
        path.write_text("-----BEGIN OPENSSH PRIVATE KEY-----")
        path.chmod(0o600)
    own = tmp_path / "runs" / "r"
    own.mkdir(parents=True)
    mirror = own / "d"  # the run's copy of the names it saw there (it sees the host's / read-only)
    (mirror / "sub").mkdir(parents=True)
    (mirror / "host.key").write_text("x")
    return own, victim


def owners(victim) -> set[int]:
    return {path.stat().st_uid for path in (victim, *victim.rglob("*"))}


def test_a_folder_swapped_for_a_link_during_the_walk_hands_over_nothing_outside(places, monkeypatch):
    """The race won on purpose: right after the walk lists `d/`, the run's code swaps it for the link."""
    own, victim = places
    walk = os.walk

    def walk_while_the_run_swaps(top, *args, **kwargs):
        for root, dirs, files in walk(top, *args, **kwargs):
            yield root, dirs, files
            if root == str(own / "d"):
                os.rename(own / "d", own / ".d")
                os.symlink(victim, own / "d")

    monkeypatch.setattr(os, "walk", walk_while_the_run_swaps)
    try:
        sandbox.hand_over(str(own), UID)
    except OSError:
        pass
    assert owners(victim) == {0}, "hand_over gave files outside the run folder to the run's uid"


FLIP = """
import os, sys, time
own, victim = sys.argv[1], sys.argv[2]
d, kept = os.path.join(own, "d"), os.path.join(own, ".d")
while True:
    try:
        os.rename(d, kept)
        os.symlink(victim, d)
        time.sleep(0.0005)
        os.unlink(d)
        os.rename(kept, d)
        time.sleep(0.0005)
    except OSError:
        pass
"""


@pytest.mark.slow  # up to 45 s of racing (a few seconds as a rule)
def test_a_run_flipping_a_folder_and_a_link_wins_no_host_file(places):
    """The race as a run runs it: a process of its own flips `d` between the folder and the link while the
    server hands the folder over, once per sandbox start of the run or of its helpers."""
    own, victim = places
    flipper = subprocess.Popen([sys.executable, "-c", FLIP, str(own), str(victim)])
    try:
        deadline = time.monotonic() + 45
        while time.monotonic() < deadline and owners(victim) == {0}:
            try:
                sandbox.hand_over(str(own), UID)
            except OSError:
                pass
            time.sleep(0.002)
    finally:
        flipper.kill()
        flipper.wait()
    assert owners(victim) == {0}, "a flipping run won the race: hand_over chowned host files to the run's uid"
