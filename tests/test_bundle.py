"""The cluster bundle: accelerate's own loader reads its YAML, bash parses its scripts, the commands are exact."""

import json
import subprocess

import pytest
from accelerate.commands.config.config_args import load_config_from_file

from workbench.jobs import bundle
from workbench.spec.config import ConfigError, RunConfig

TRAIN = (
    'accelerate launch --config_file "${BUNDLE}"/accelerate_config.yaml --num_machines %d --num_processes %d '
    '%s-m workbench train --config "${BUNDLE}"/config.json --run-dir "${RUN_DIR}"'
)
RANKS = '--machine_rank "${MACHINE_RANK}" --main_process_ip "${MAIN_PROCESS_IP}" '
VLLM_URL = ' --set vllm_server_base_url="${VLLM_SERVER_URL}"'


def cluster_cfg(machines: int, per_machine: int = 1, vllm: bool = False, **changes) -> RunConfig:
    # small valid batch (2 completions per process, groups of 2) so any process count passes the calculator
    base = dict(
        model="tiny",
        per_device_train_batch_size=2,
        num_generations=2,
        max_steps=2,
        num_machines=machines,
        num_processes=machines * per_machine,
    )
    if vllm:
        base.update(device="cuda", generation="vllm-server", vllm_node=True)
    else:
        base.update(device="cpu")
    return RunConfig(**{**base, **changes})


SHAPES = [(1, False), (2, False), (4, False), (1, True), (2, True), (4, True)]
SHAPE_IDS = ["1-node", "2-nodes", "4-nodes", "1-node+vllm", "2-nodes+vllm", "4-nodes+vllm"]


@pytest.fixture(params=SHAPES, ids=SHAPE_IDS)
def written(request, tmp_path):
    machines, vllm = request.param
    config = cluster_cfg(machines, vllm=vllm)
    return config, bundle.write_bundle(config, tmp_path / "bundle", run_id="20260101-000000-demo")


@pytest.mark.parametrize("machines, vllm", SHAPES, ids=SHAPE_IDS)
def test_the_exact_training_command(machines, vllm):
    ranks = RANKS if machines > 1 else ""
    port = "--main_process_port 29500 " if machines > 1 else ""
    expected = TRAIN % (machines, machines, ranks + port) + (VLLM_URL if vllm else "")
    assert bundle.render(bundle.train_command(cluster_cfg(machines, vllm=vllm))) == expected


def test_several_processes_per_machine_count_in_num_processes():
    line = bundle.render(bundle.train_command(cluster_cfg(2, per_machine=4)))
    assert "--num_machines 2 --num_processes 8 " in line


@pytest.mark.parametrize("machines, vllm", SHAPES, ids=SHAPE_IDS)
def test_the_exact_slurm_steps(machines, vllm):
    text = bundle.slurm_script(cluster_cfg(machines, vllm=vllm), "RUN")
    nodes = machines + vllm
    assert f"#SBATCH --nodes={nodes}\n#SBATCH --ntasks-per-node=1\n" in text
    assert 'mapfile -t NODES < <(scontrol show hostnames "$SLURM_JOB_NODELIST")' in text
    assert 'export MAIN_PROCESS_IP="${NODES[0]}"' in text
    exclude = ' --exclude="${VLLM_NODE}"' if vllm else ""
    assert (
        f"srun --nodes={machines} --ntasks={machines} --ntasks-per-node=1{exclude} "
        f"""bash -c 'exec "$0" "$SLURM_PROCID"' "${{BUNDLE}}"/launch_train.sh"""
    ) in text.splitlines()
    if vllm:
        lines = text.splitlines()
        server = 'srun --nodes=1 --ntasks=1 --nodelist="${VLLM_NODE}" "${BUNDLE}"/launch_vllm.sh &'
        # the server node is the job's last, started before the training step
        assert f'VLLM_NODE="${{NODES[{nodes - 1}]}}"' in lines
        assert 'export VLLM_SERVER_URL="http://$VLLM_NODE:8000"' in lines
        assert lines.index(server) < lines.index(next(line for line in lines if "launch_train.sh" in line))
    else:
        assert "vllm" not in text.lower()


def test_the_vllm_machine_serves_the_adapter_on_every_address():
    line = bundle.render(bundle.vllm_command(cluster_cfg(2, vllm=True)))
    assert line.startswith('"${VLLM_PYTHON}" -m vllm.entrypoints.openai.api_server --model ')
    assert "--host 0.0.0.0 --port 8000 " in line and "--enable-lora" in line
    script = bundle.vllm_script(cluster_cfg(2, vllm=True))
    assert "export VLLM_ALLOW_RUNTIME_LORA_UPDATING=True" in script


def test_every_script_parses_with_bash(written):
    _, result = written
    scripts = [name for name in result.files if name.endswith((".sh", ".sbatch"))]
    assert bundle.TRAIN_SCRIPT in scripts and bundle.SLURM_SCRIPT in scripts
    for name in scripts:
        check = subprocess.run(["bash", "-n", str(result.folder / name)], capture_output=True, text=True)
        assert check.returncode == 0, (name, check.stderr)


def test_accelerates_own_loader_reads_the_config(written):
    config, result = written
    loaded = load_config_from_file(str(result.folder / bundle.ACCELERATE_FILE))
    assert (loaded.num_machines, loaded.num_processes, loaded.main_process_port) == (
        config.num_machines,
        config.num_processes,
        29500,
    )
    assert loaded.distributed_type == ("MULTI_GPU" if config.num_processes > 1 else "NO")


@pytest.mark.parametrize(
    "backend, kind, stage",
    [("deepspeed-zero2", "DEEPSPEED", 2), ("deepspeed-zero3", "DEEPSPEED", 3), ("fsdp", "FSDP", None)],
    ids=["zero2", "zero3", "fsdp"],
)
def test_gpu_backends_are_trls_accelerate_files(tmp_path, backend, kind, stage):
    config = cluster_cfg(
        2, per_machine=4, device="cuda", distributed_backend=backend, bf16=True, main_process_ip="10.0.0.1"
    )
    result = bundle.write_bundle(config, tmp_path / backend)
    loaded = load_config_from_file(str(result.folder / bundle.ACCELERATE_FILE))
    assert loaded.distributed_type == kind and loaded.mixed_precision == "bf16"
    assert (loaded.num_machines, loaded.num_processes, loaded.main_process_ip) == (2, 8, "10.0.0.1")
    if stage:
        assert loaded.deepspeed_config["zero_stage"] == stage and loaded.deepspeed_config["zero3_init_flag"] is False
    else:
        assert loaded.fsdp_config["fsdp_version"] == 2


def test_the_bundle_holds_what_the_scripts_need(written):
    config, result = written
    names = set(result.files)
    assert {
        "config.json",
        "accelerate_config.yaml",
        "launch_train.sh",
        "slurm.sbatch",
        "README.md",
        "requirements.txt",
    } <= names
    assert (bundle.VLLM_SCRIPT in names) == config.vllm_node
    assert RunConfig.load(result.folder / "config.json") == config
    requirements = (result.folder / "requirements.txt").read_text()
    assert "trl==1.16.0" in requirements and "accelerate==1.15.0" in requirements and "+cpu" not in requirements
    readme = (result.folder / "README.md").read_text()
    assert "20260101-000000-demo" in readme and "WORKBENCH_RUNS_DIR" in readme and "sbatch slurm.sbatch" in readme


def test_reward_file_and_dataset_are_copied_and_named_relative(tmp_path):
    rewards = tmp_path / "mine.py"
    rewards.write_text("def short(completions, **kw):\n    return [0.0 for _ in completions]\n")
    data = tmp_path / "prompts.jsonl"
    data.write_text("".join(json.dumps({"prompt": f"say {i}"}) + "\n" for i in range(8)))
    config = cluster_cfg(2, reward_file=str(rewards), reward_names=["short"], dataset_path=str(data))
    result = bundle.write_bundle(config, tmp_path / "b")
    saved = RunConfig.load(result.folder / "config.json")
    assert (saved.reward_file, saved.dataset_path) == ("reward_file.py", "data/prompts.jsonl")
    assert (result.folder / "data" / "prompts.jsonl").read_text() == data.read_text()
    assert 'cd "$BUNDLE"' in (result.folder / "launch_train.sh").read_text()


def test_a_config_that_cannot_run_writes_no_bundle(tmp_path):
    with pytest.raises(ConfigError, match="do not split evenly"):
        bundle.write_bundle(cluster_cfg(2).with_changes(num_processes=3), tmp_path / "b")
    assert not (tmp_path / "b").exists()


def test_start_commands_name_each_machine_and_its_rank(tmp_path):
    config = cluster_cfg(2, vllm=True, main_process_ip="10.0.0.1")
    commands = bundle.start_commands(config, tmp_path)
    assert commands[0].endswith("launch_vllm.sh")
    assert commands[1].endswith(
        f"MAIN_PROCESS_IP=10.0.0.1 VLLM_SERVER_URL=http://<vLLM machine>:8000 {tmp_path}/launch_train.sh 0"
    )
    assert commands[2].endswith("launch_train.sh 1") and "sbatch slurm.sbatch" in commands[3]


def test_words_are_shell_quoted():
    assert (
        bundle.render(["echo", "a b", "it's", bundle.Var("X"), ("k=", bundle.Var("V"))])
        == """echo 'a b' 'it'"'"'s' "${X}" k="${V}\""""
    )


def test_a_local_deepspeed_run_starts_with_trls_accelerate_file(tmp_path):
    from workbench.jobs import commands

    config = RunConfig(model="tiny", device="cuda", num_processes=4, distributed_backend="deepspeed-zero2")
    command = commands.build_command(config, tmp_path)
    assert command[command.index("--config_file") + 1] == str(tmp_path / bundle.ACCELERATE_FILE)
    assert command[command.index("-m") :][:3] == ["-m", "workbench", "train"]
    written = bundle.write_accelerate_config(config, tmp_path)
    loaded = load_config_from_file(str(written))
    assert (loaded.distributed_type, loaded.num_processes, loaded.num_machines) == ("DEEPSPEED", 4, 1)
