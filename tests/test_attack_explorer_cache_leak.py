"""Attack: read other students' completions out of the explorer's cache from inside a sandboxed run (issue 46).

The explorer keeps each run's completions as Arrow parts under `$WORKBENCH_CACHE/completions/`, beside the
converted models that every sandbox shows read-only and that the server makes readable to every run's uid
(jobs/sandbox.py `share_read_only`). So a student's reward code, run in a real bubblewrap sandbox as a uid of
its own, could list the cache and read bob's prompts and completions, which the owner rule hides everywhere else.
The cache folder is private (0700) when written, but the sharing walk opened it to every uid at the next launch.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from helpers import tiny_config

from workbench.insight import completion_cache
from workbench.insight.completion_search import CompletionQuery, search_completions
from workbench.jobs import sandbox
from workbench.runstore import runfolder

needs_bwrap = pytest.mark.skipif(
    sandbox.bwrap_binary() is None, reason="bubblewrap is not installed (make test installs it)"
)
SECRET = "bobs-unpublished-thesis-answer"
# what alice's code does inside its sandbox: every file under the explorer's cache, searched for bob's text
PROBE = """
import os, sys
root, found, seen = sys.argv[1], [], 0
for folder, _, files in os.walk(root):
    for name in files:
        seen += 1
        try:
            data = open(os.path.join(folder, name), 'rb').read()
        except OSError:
            continue
        if sys.argv[2].encode() in data:
            found.append(name)
print('seen', seen, 'found', found)
"""


def bobs_run(runs):
    run_dir = runs / "20260101-000002-bob"
    run_dir.mkdir(parents=True)
    tiny_config().save(run_dir / runfolder.CONFIG_FILE)
    record = {
        "step": 1,
        "group": 0,
        "prompt": "p",
        "completion": SECRET,
        "rewards": {"r": 1.0},
        "reward": 1.0,
        "advantage": 0.0,
        "length": 3,
        "truncated": False,
    }
    (run_dir / runfolder.COMPLETIONS_FILE).write_text(json.dumps(record) + "\n")
    return run_dir


@needs_bwrap
def test_a_sandboxed_run_reads_no_other_students_completions_out_of_the_explorer_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("WORKBENCH_CACHE", str(tmp_path / "cache"))
    (tmp_path / "cache").mkdir()
    runs = tmp_path / "runs"
    bob = bobs_run(runs)
    assert search_completions(bob, CompletionQuery(search="thesis")).total == 1  # the server has cached bob's run
    root = completion_cache.cache_root()

    own = runs / "20260101-000001-alice"
    own.mkdir()
    (own / "status.json").write_text("{}")
    env = {"PATH": os.environ["PATH"], "WORKBENCH_CACHE": os.environ["WORKBENCH_CACHE"]}
    exposed = sandbox.exposure(own, runs, {}, sandbox.Policy(), env, limits=sandbox.Limits())
    argv, inner = sandbox.wrap([sys.executable, "-c", PROBE, str(root), SECRET], exposed, env, foreground=True)
    done = subprocess.run(argv, capture_output=True, text=True, timeout=60, env=inner)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "found []" in done.stdout, f"alice's sandbox read bob's completions from the cache: {done.stdout}"
    # and on the host the cache stays private to the server (its folders let no other uid in): the launch's
    # sharing walk did not open it to every uid
    for folder, _, _ in os.walk(root):
        mode = os.stat(folder).st_mode & 0o077
        assert not mode, f"{folder} lets others in ({oct(mode)})"
