"""Attack: a run writes one huge file (sparse: no disk used, under its file-size limit), and every page that
looks at the run reads all of it into the server's memory.

The readers of a run's folder read whole files, or whole "lines", with no cap: `read_records_from`
(metrics.jsonl for the Train tab) reads from its offset to the end, `jsonl_cache.index_steps`
(completions.jsonl) grows its buffer until the line ends, `runfolder.read_json_object` (status.json, read
for every run by every Runs-tab listing, whoever's run it is) reads the file whole. A sparse file of the
default WORKBENCH_RUN_FILE_GB (20 GiB) costs the run no disk (its disk limit counts blocks) and the server
20 GiB of memory per look: the dashboard is killed for every user. Here a 256 MiB sparse file must not cost
a look more than a small, fixed amount of memory.
"""

from __future__ import annotations

import tracemalloc

import pytest
from helpers import tiny_config

from workbench.jobs import run_list, run_state
from workbench.runstore import runfolder

SIZE = 256 * 2**20  # sparse: holes, no disk
LIMIT = 32 * 2**20  # what one look at a run may hold in memory


def run_with_huge(tmp_path, name: str):
    runs = tmp_path / "runs"
    run_dir = runs / "20260101-000001-alice"
    run_dir.mkdir(parents=True)
    tiny_config().save(run_dir / runfolder.CONFIG_FILE)
    runfolder.update_status(run_dir, state="finished", step=1)
    with open(run_dir / name, "wb") as handle:  # what the run's code can write: one line that never ends
        handle.write(b'{"step": 1, "x": "')
        handle.truncate(SIZE)
    return runs, run_dir


def peak_bytes(look) -> int:
    tracemalloc.start()
    try:
        look()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


@pytest.mark.slow
@pytest.mark.parametrize("name", [runfolder.METRICS_FILE, runfolder.COMPLETIONS_FILE])
def test_the_train_tab_reads_a_bounded_amount_of_a_huge_run_file(tmp_path, name):
    from workbench.insight import follow
    from workbench.ui import train_tab

    runs, run_dir = run_with_huge(tmp_path, name)

    def look():
        watch = train_tab.start_watching(runs, run_dir.name)
        train_tab.poll_run(watch, runs)
        follow.completion_steps(run_dir)

    peak = peak_bytes(look)
    assert peak < LIMIT, f"one look at the run held {peak / 2**20:.0f} MiB for a {SIZE / 2**20:.0f} MiB sparse {name}"


@pytest.mark.slow
def test_listing_the_runs_reads_a_bounded_amount_of_a_huge_status_json(tmp_path):
    runs, run_dir = run_with_huge(tmp_path, runfolder.STATUS_FILE)
    peak = peak_bytes(lambda: (run_list.list_runs(runs), run_state.status_of_dir(run_dir)))
    assert peak < LIMIT, f"listing the runs held {peak / 2**20:.0f} MiB for a {SIZE / 2**20:.0f} MiB sparse status.json"
