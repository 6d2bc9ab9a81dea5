"""Attack: read other students' model folders, and when they launched, out of the server's speed-choice cache from
inside a sandboxed run (issue 43).

`$WORKBENCH_CACHE/speed-choices.json` lies in the folder of the converted models, which every sandbox shows
read-only and the server makes readable to every run's uid (jobs/sandbox.py `shared`). Each entry named the
model its probe measured by its path (`SpeedChoice.model`), so a student's reward code, run in a real bubblewrap
sandbox as a uid of its own, printed bob's upload folder `runs/uploads/bob/bobs-thesis-model-v3` (or his run's
id, for a merged model) beside the time he launched: what the owner rule hides everywhere else (the Runs tab,
the queue's `waits_for`).

Fixed in workbench/tuning/cache.py: an entry names a local model folder by no path (its key, a hash, still tells
it from any other); entries kept before lose their paths at the next write. Held: a run's code cannot write the
cache (tests/test_tuning.py), and a choice handed over for another key is ignored.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest

from workbench.jobs import sandbox
from workbench.spec.config import RunConfig
from workbench.tuning import cache, for_config
from workbench.tuning.choice import Candidate, SpeedChoice

needs_bwrap = pytest.mark.skipif(
    sandbox.bwrap_binary() is None, reason="bubblewrap is not installed (make test installs it)"
)
FOLDER = "bobs-thesis-model-v3"


def choice_for(config: RunConfig, measured_at: float) -> SpeedChoice:
    """What the probe keeps for `config` (trainer/speed_probe.measure names the model so)."""
    return SpeedChoice(
        key=for_config.key_for(config),
        chosen=Candidate("float32", True),
        cpu="a CPU",
        measured_at=measured_at,
        seconds={Candidate().label(): 2.0},
        model=for_config.model_identity(config),
    )


@needs_bwrap
def test_a_sandboxed_run_reads_no_other_students_model_folder_out_of_the_speed_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("WORKBENCH_CACHE", str(tmp_path / "cache"))
    runs = tmp_path / "runs"
    bob_model = runs / "uploads" / "bob" / FOLDER
    bob_model.mkdir(parents=True)
    (bob_model / "config.json").write_text("{}")
    bobs = RunConfig(model=str(bob_model), device="cpu")
    # one entry as an earlier version kept it (the path in it), then bob's probe keeps its choice
    path = cache.cache_path()
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps({"older": {**choice_for(bobs, time.time() - 60).to_dict(), "key": "older"}}))
    assert cache.store(choice_for(bobs, time.time()))
    assert cache.lookup(for_config.key_for(bobs)).chosen == Candidate("float32", True)  # still kept by its key

    # alice's run, in its sandbox, reads what it can of the cache
    own = runs / "20260101-000001-alice"
    own.mkdir()
    (own / "status.json").write_text("{}")
    env = {"PATH": os.environ["PATH"], "WORKBENCH_CACHE": os.environ["WORKBENCH_CACHE"]}
    exposed = sandbox.exposure(own, runs, {}, sandbox.Policy(), env, limits=sandbox.Limits())
    code = f"print(open({str(path)!r}).read())"
    argv, inner = sandbox.wrap([sys.executable, "-c", code], exposed, env, foreground=True)
    done = subprocess.run(argv, capture_output=True, text=True, timeout=60, env=inner)
    assert done.returncode == 0, done.stderr[-2000:]  # the cache is readable there: the models it lies beside are
    assert FOLDER not in done.stdout and "uploads/bob" not in done.stdout, done.stdout
    assert "a local folder" in done.stdout


def test_a_choice_handed_over_for_another_key_or_malformed_is_not_taken():
    config = RunConfig(model="tiny", device="cpu")
    other = choice_for(RunConfig(model="tiny", device="cpu", max_completion_length=12), time.time())
    assert (
        for_config.handed_over(for_config.key_for(config), {for_config.CHOICE_ENV: json.dumps(other.to_dict())}) is None
    )
    forged = {
        **choice_for(config, time.time()).to_dict(),
        "chosen": {"merged_generation": "<script>", "shared_prompt_pass": True, "packed_decode": 1},
    }
    for text in (json.dumps(forged), "[]", '{"key": 1}', "x" * 1000):
        assert for_config.handed_over(for_config.key_for(config), {for_config.CHOICE_ENV: text}) is None
