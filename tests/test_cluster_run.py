"""A real run over two machines, played on this one from the exported bundle's own scripts.

Two `launch_train.sh` processes, machine ranks 0 and 1, meet at 127.0.0.1
(`accelerate launch --num_machines 2`, torchrun, gloo on the CPU) and train the
tiny model. Machine 1 is given a run folder path of its own, as a machine that
shares no filesystem would have: it must stay absent. About 30 s on 2 cores.
"""

import json
import os
import signal
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from workbench.jobs import bundle, processes, run_state
from workbench.runstore import runfolder
from workbench.spec.config import RunConfig
from workbench.spec.config_checks import plan_for

pytestmark = pytest.mark.slow

PROMPTS = 4  # 2 processes x batch 2 = 4 completions = 2 prompts x G 2 per step: 2 steps; one process would take 4


@pytest.fixture
def two_machine_config(tmp_path, tiny_model) -> RunConfig:
    data = tmp_path / "prompts.jsonl"
    data.write_text("".join(json.dumps({"prompt": f"Say {i} briefly."}) + "\n" for i in range(PROMPTS)))
    return RunConfig(
        model="tiny",
        device="cpu",
        task="demo",
        dataset_path=str(data),
        reward_names=["brevity"],
        reward_weights=[1.0],  # needs no reference answer
        num_machines=2,
        num_processes=2,
        per_device_train_batch_size=2,
        num_generations=2,
        max_steps=-1,
        num_train_epochs=1,
        max_completion_length=8,
        save_steps=1,
        main_process_ip="127.0.0.1",
        main_process_port=processes.free_port(),
    )


def start_machine(script: Path, rank: int, env: dict, log: Path) -> subprocess.Popen:
    with open(log, "wb") as out:
        return subprocess.Popen(
            ["bash", str(script), str(rank)], env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )


def test_two_machines_from_the_bundle_train_to_finished(tmp_path, two_machine_config):
    config = two_machine_config
    written = bundle.write_bundle(config, tmp_path / "bundle", run_id="two-machines")
    env = {
        **os.environ,
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
        "OMP_NUM_THREADS": "1",
        "WORKBENCH_RUNS_DIR": str(tmp_path / "runs"),
    }
    env.pop("WORKBENCH_RUN_DIR", None)
    script = written.folder / bundle.TRAIN_SCRIPT
    machine1_dir = tmp_path / "machine1" / "two-machines"
    machines = [
        start_machine(script, 1, {**env, "WORKBENCH_RUN_DIR": str(machine1_dir)}, tmp_path / "m1.log"),
        start_machine(script, 0, env, tmp_path / "m0.log"),
    ]
    try:
        codes = [m.wait(timeout=300) for m in machines]
    finally:
        for m in machines:
            if m.poll() is None:
                os.killpg(m.pid, signal.SIGKILL)
    logs = {name: (tmp_path / name).read_text(errors="replace")[-3000:] for name in ("m0.log", "m1.log")}
    assert codes == [0, 0], logs

    run_dir = tmp_path / "runs" / "two-machines"
    status = run_state.status_of_dir(run_dir)
    assert status["state"] == "finished", logs
    expected = plan_for(config, dataset_size=PROMPTS).total_steps
    assert (
        expected == 2
        and plan_for(config.with_changes(num_processes=1, num_machines=1), dataset_size=PROMPTS).total_steps == 4
    )
    assert status["total_steps"] == expected and status["step"] == expected and status["num_processes"] == 2
    # one writer: one metrics row per step, one generation batch (2 processes x 2) of completions per step
    assert [row["step"] for row in runfolder.read_jsonl(run_dir / runfolder.METRICS_FILE)] == [1, 2]
    completions = Counter(row["step"] for row in runfolder.read_jsonl(run_dir / runfolder.COMPLETIONS_FILE))
    assert completions == {1: 4, 2: 4}
    assert (run_dir / runfolder.ADAPTER_DIR / "adapter_config.json").is_file()
    assert "Run finished at step 2" in (run_dir / runfolder.LOG_FILE).read_text()
    # machine 1 wrote nothing: not its run folder, not its random state in a checkpoint
    assert not machine1_dir.exists() and not (tmp_path / "machine1").exists()
    assert sorted(p.name for p in (run_dir / "checkpoint-2").glob("rng_state*")) == ["rng_state_0.pth"]
