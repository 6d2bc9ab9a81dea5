"""The merged-model export's paths, raced by a run that keeps swapping a folder of its own for a link.

On a shared dashboard the server (root, outside the sandbox) checks and prepares the export's output folder in
the run's folder, which the run's code writes. A process standing for that code flips `sub/` between the real
folder and a link to another user's uploads (rename, symlink, unlink, rename back), as issue 52's reward thread
did, while the server plans, starts, reads, cancels and writes exports below `sub/`. Whatever the timing,
nothing is listed, made, written, read or removed in the other user's folder, and none of its names is shown.
The race is driven in-process against the functions the Runs tab's panel calls (ui/merge_panel.py): the break
is the server's own, outside any sandbox; the merge itself runs in-process here (as the CLI runs it).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from workbench.modeltools import export_model
from workbench.modeltools.export_model import ExportError
from workbench.runstore import runfolder
from workbench.spec.config import RunConfig
from workbench.ui import merge_panel

RACE_SECONDS = 1.5
BOB_FILES = ("bob_reward.py", "bob_secret_data.jsonl")

FLIP = """
import os, sys, time
d, victim = sys.argv[1], sys.argv[2]
kept = d + ".kept"
def pause():
    time.sleep(0.0003)
steps = (lambda: os.rename(d, kept), lambda: os.symlink(victim, d), pause, lambda: os.unlink(d),
         lambda: os.rename(kept, d), pause)
while True:
    for step in steps:
        try:
            step()
        except OSError:
            pass
"""


@pytest.fixture
def places(tmp_path):
    """(the runs folder, alice's run in it with a real `sub/`, bob's uploads holding his files)."""
    runs = tmp_path / "runs"
    run = runs / "20261123-100000-alice"
    RunConfig(model="tiny").save(run / runfolder.CONFIG_FILE)
    (run / "sub" / "deeper").mkdir(parents=True)
    (run / "sub" / "own.txt").write_text("the run's own file")
    bob = tmp_path / "bob-uploads"
    (bob / "deeper").mkdir(parents=True)
    for name in BOB_FILES:
        (bob / name).write_text("bob's")
    (bob / ".merged.partial").mkdir()  # what a cancel following the link would remove
    (bob / ".merged.partial" / "keep").write_text("bob's")
    (bob / "deeper" / ".merged.export.jsonl").write_text(json.dumps({"done": True, "error": "bob_secret_data"}) + "\n")
    (bob / "adapter_config.json").write_text("{}")
    (bob / "adapter_model.safetensors").write_text("bob's")
    return runs, run, bob


def snapshot(folder: Path) -> list:
    return sorted((str(p.relative_to(folder)), p.is_dir()) for p in folder.rglob("*"))


@pytest.fixture
def flipping(places):
    """Start the run's flipper on `<run>/<name>` (a folder the run owns) towards bob's uploads."""
    _, run, bob = places
    started = []

    def start(name: str = "sub") -> None:
        started.append(subprocess.Popen([sys.executable, "-c", FLIP, str(run / name), str(bob)]))
        time.sleep(0.2)  # flipping by now

    yield start
    for process in started:
        process.kill()
        process.wait()


def race(operation) -> list[str]:
    """`operation()` again and again for RACE_SECONDS; what it returned or refused with, each time."""
    seen, deadline = [], time.monotonic() + RACE_SECONDS
    while time.monotonic() < deadline:
        try:
            seen.append(str(operation()))
        except (ExportError, OSError) as exc:
            seen.append(str(exc))
        if any(name in seen[-1] for name in ("bob_", "adapter_model")):
            break  # lost: no need to go on
    return seen


def no_bob(seen: list[str]) -> None:
    leaked = [text for text in seen if "bob_" in text]
    assert not leaked, f"another user's file names were shown: {leaked[:2]}"


def plan(run: Path, runs: Path, out: str) -> export_model.ExportPlan:
    """What the panel's Export button does before it starts the process (a shared dashboard's)."""
    out_folder = merge_panel.resolve_out(out, run, runs)
    return export_model.plan_export(run, None, out_folder, within=run, config={"model": "tiny"})


@pytest.fixture
def with_adapter(places, make_checkpoint):
    _, run, _ = places
    make_checkpoint(run, 0).rename(run / runfolder.ADAPTER_DIR)
    return run


def test_the_output_check_never_lists_or_tells_through_a_swapped_link(places, with_adapter, flipping):
    runs, run, bob = places
    before = snapshot(bob)
    flipping()
    no_bob(race(lambda: plan(run, runs, "sub")))  # `sub` holds own.txt: refused, naming only the run's files
    no_bob(race(lambda: plan(run, runs, "sub/deeper/merged")))
    assert snapshot(bob) == before


def test_starting_an_export_makes_and_writes_nothing_through_a_swapped_link(places, with_adapter, flipping):
    """Planned while `sub/` was the run's folder (the panel checks first), started while the run flips it: the
    start makes the folders on the way, clears the progress file and opens the log, none through the link."""
    runs, run, bob = places
    before = snapshot(bob)
    plans = iter([plan(run, runs, f"sub/new-{i}/merged") for i in range(3000)])
    flipping()

    def start() -> str:
        process = export_model.start_export(next(plans), confine=lambda command, env: (["true"], env))
        process.wait()
        return ""

    no_bob(race(start))
    assert snapshot(bob) == before, "root made a folder or wrote a file in another user's uploads"


def test_reading_and_cancelling_an_export_go_nowhere_through_a_swapped_link(places, with_adapter, flipping):
    runs, run, bob = places
    before = snapshot(bob)
    flipping()
    plans = [
        export_model.ExportPlan(run, "tiny", run / "adapter", None, run / "sub" / name, False, within=run)
        for name in ("merged", "deeper/merged")
    ]
    done = subprocess.Popen(["true"])
    done.wait()
    for plan_ in plans:
        no_bob(race(lambda p=plan_: export_model.read_export(p.progress_path, done, root=p.root)))
        race(lambda p=plan_: export_model.cancel_export(done, p))
    assert snapshot(bob) == before, "a cancel removed a folder of another user's uploads"


def test_the_adapter_choice_never_tells_through_a_swapped_link(places, flipping):
    """The run's `adapter/` holds no adapter; swapped for a link to a folder that does, it is still none."""
    _, run, _ = places
    (run / runfolder.ADAPTER_DIR).mkdir()
    flipping(runfolder.ADAPTER_DIR)
    seen = race(lambda: [merge_panel.adapter_choices(run), export_model.has_adapter(run / runfolder.ADAPTER_DIR)])
    assert set(seen) == {"[[], False]"}, "an adapter behind a link was taken for the run's"


@pytest.mark.slow  # loads the tiny model and merges it, a few times (seconds)
def test_the_merge_writes_only_into_the_folder_it_holds(places, tiny_model, tiny_adapter, flipping):
    """Each merge (the export process's work) writes, makes and renames only inside the folder it opened once,
    however `sub/` flips while it writes; one that opened `sub/` while a link stood there is refused."""
    runs, run, bob = places
    RunConfig(model=tiny_model).save(run / runfolder.CONFIG_FILE)
    shutil.copytree(tiny_adapter, run / runfolder.ADAPTER_DIR)
    before = snapshot(bob)
    plans = [export_model.plan_export(run, None, run / "sub" / f"merged-{i}", within=run) for i in range(300)]
    flipping()
    # each merge opens `sub/` twice, and on a loaded machine the flipper may hold the link in place for long
    # stretches: tried until three got through or a minute passed, not a fixed number of times
    written, deadline = 0, time.monotonic() + 60
    for plan_ in plans:
        if time.monotonic() > deadline:
            break
        try:
            written += export_model.write_export(plan_)["bytes"] > 0
        except OSError:  # `sub/` a link when the export opened it: refused, nothing written
            pass
        assert snapshot(bob) == before, "the merge wrote into another user's uploads"
        if written >= 3:
            break
    assert written, "no merge got through while the run flipped its folder"
