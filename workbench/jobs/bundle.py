"""The cluster bundle: a folder that runs one RunConfig on other machines through `accelerate launch`.

`python -m workbench export CONFIG_OR_RUN --out DIR` and the Setup tab's
Export button write it. The workbench hands the run to accelerate (and
through it to torchrun, DeepSpeed or FSDP); it starts no process itself here.

    DIR/config.json              the RunConfig (reward file and dataset copied beside it)
    DIR/accelerate_config.yaml   TRL's own accelerate config for the backend, sized to the run
    DIR/launch_train.sh RANK     one training machine: `accelerate launch --machine_rank RANK ...`
    DIR/launch_vllm.sh           the vLLM machine (only with vllm_node)
    DIR/slurm.sbatch             the whole job on Slurm: one task per node
    DIR/requirements.txt         the versions this bundle was written with
    DIR/README.md                how to start it and where the run folder lands

Scripts are built from argument lists: each word is shell-quoted, and the
values only known on the machine (its rank, the main address, the bundle's
folder) are shell variables, written `"${NAME}"`. `render` turns such a list
into one line of bash; the tests read the exact lines.

Only the global main process (machine 0, rank 0) writes the run folder; the
run folder is `$WORKBENCH_RUNS_DIR/<run id>` (else `runs/` in the bundle), so
on a shared filesystem the dashboard shows it like a local run.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import shlex
import shutil
from dataclasses import dataclass
from pathlib import Path

from workbench.runstore import runfolder
from workbench.spec import cluster
from workbench.spec.config import RunConfig
from workbench.spec.config_checks import check_config

ACCELERATE_FILE = "accelerate_config.yaml"
TRAIN_SCRIPT = "launch_train.sh"
VLLM_SCRIPT = "launch_vllm.sh"
SLURM_SCRIPT = "slurm.sbatch"
README_FILE = "README.md"
REQUIREMENTS_FILE = "requirements.txt"
DATA_DIR = "data"
VLLM_PORT = 8000  # the vLLM machine's port when vllm_port is 0 (any free one means nothing to other machines)

# TRL ships an accelerate config per backend; the bundle starts from TRL's own file.
TRL_ACCELERATE_CONFIGS = {
    "ddp": "multi_gpu.yaml",
    "deepspeed-zero2": "zero2.yaml",
    "deepspeed-zero3": "zero3.yaml",
    "fsdp": "fsdp2.yaml",
}
SINGLE_PROCESS_CONFIG = "single_gpu.yaml"
# What a machine needs installed, named by the versions the bundle was written with.
PACKAGES = ("torch", "trl", "transformers", "peft", "accelerate", "datasets")


@dataclass(frozen=True)
class Var:
    """A shell variable in a command: its value is known only where the script runs."""

    name: str


Word = str | Var | tuple  # a tuple is one word made of several pieces, e.g. ("key=", Var("VALUE"))


def _piece(piece: str | Var) -> str:
    return f'"${{{piece.name}}}"' if isinstance(piece, Var) else shlex.quote(piece)


def render(words: list[Word]) -> str:
    """One line of bash from an argument list: literals shell-quoted, variables double-quoted."""
    return " ".join("".join(_piece(p) for p in w) if isinstance(w, tuple) else _piece(w) for w in words)


def _in_bundle(name: str) -> tuple:
    return (Var("BUNDLE"), f"/{name}")


# ---------------------------------------------------------------- accelerate config


def _trl_config_dir() -> Path:
    spec = importlib.util.find_spec("trl")  # found on disk, not imported
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError("trl is not installed in this Python; install the versions of requirements.txt")
    return Path(list(spec.submodule_search_locations)[0]) / "accelerate_configs"


def accelerate_config(cfg: RunConfig) -> dict:
    """The accelerate config of `cfg`'s training machines: TRL's file for the backend, sized to the run.

    Machine 0's values; the launch scripts give each machine its rank (and the
    main address when only known there) on the command line, which accelerate
    prefers to the file.
    """
    import yaml

    single = cfg.num_processes == 1 and cfg.num_machines == 1 and cfg.distributed_backend == "ddp"
    name = SINGLE_PROCESS_CONFIG if single else TRL_ACCELERATE_CONFIGS[cfg.distributed_backend]
    config = yaml.safe_load((_trl_config_dir() / name).read_text(encoding="utf-8"))
    config.update(
        num_machines=cfg.num_machines,
        num_processes=cfg.num_processes,
        machine_rank=0,
        mixed_precision="bf16" if cfg.bf16 else "no",
        main_process_port=cfg.main_process_port,
    )
    if cfg.main_process_ip.strip():
        config["main_process_ip"] = cfg.main_process_ip.strip()
    if cfg.gpu_ids:
        config["gpu_ids"] = ",".join(str(i) for i in cfg.gpu_ids)
    if cfg.distributed_backend == "deepspeed-zero3":
        # the trainer loads the model before TRL builds its config, so ZeRO's init-time partitioning never applies
        config["deepspeed_config"]["zero3_init_flag"] = False
    return config


def write_accelerate_config(cfg: RunConfig, folder: Path) -> Path:
    """`accelerate_config(cfg)` as YAML in `folder` (a bundle, or a local run's folder for DeepSpeed / FSDP)."""
    import yaml

    path = Path(folder) / ACCELERATE_FILE
    path.write_text(yaml.safe_dump(accelerate_config(cfg), sort_keys=False), encoding="utf-8")
    return path


# ---------------------------------------------------------------- commands


def train_command(cfg: RunConfig) -> list[Word]:
    """The command one training machine runs; its rank, the main address and the run folder are variables."""
    command: list[Word] = [
        "accelerate",
        "launch",
        "--config_file",
        _in_bundle(ACCELERATE_FILE),
        "--num_machines",
        str(cfg.num_machines),
        "--num_processes",
        str(cfg.num_processes),
    ]
    if cfg.num_machines > 1:
        command += ["--machine_rank", Var("MACHINE_RANK"), "--main_process_ip", Var("MAIN_PROCESS_IP")]
    if cfg.num_machines > 1 or cfg.num_processes > 1:
        command += ["--main_process_port", str(cfg.main_process_port)]
    command += ["-m", "workbench", "train", "--config", _in_bundle(runfolder.CONFIG_FILE), "--run-dir", Var("RUN_DIR")]
    if cfg.vllm_node:
        command += ["--set", ("vllm_server_base_url=", Var("VLLM_SERVER_URL"))]
    return command


def vllm_port(cfg: RunConfig) -> int:
    return cfg.vllm_port or VLLM_PORT


def vllm_command(cfg: RunConfig) -> list[Word]:
    """The vLLM machine's server: the run's own server command, listening on every address of that machine."""
    from workbench.jobs.vllm_server import server_command

    command = server_command(cfg.with_changes(vllm_host="0.0.0.0"), vllm_port(cfg), python="python", on_cpu=False)
    return [Var("VLLM_PYTHON"), *command[1:]]


def vllm_environment(cfg: RunConfig) -> dict[str, str]:
    """What the vLLM machine's server needs in its environment (runtime LoRA loading or TRL's endpoints)."""
    from workbench.jobs.vllm_server import server_env

    return server_env(cfg, base={}, on_cpu=False)


def training_environment(cfg: RunConfig) -> dict[str, str]:
    env = {"PYTHONUNBUFFERED": "1"}
    if cfg.device == "cpu":
        env["CUDA_VISIBLE_DEVICES"] = ""  # nothing lands on a GPU by accident
    elif cfg.gpu_ids:
        env["CUDA_VISIBLE_DEVICES"] = ",".join(str(i) for i in cfg.gpu_ids)
    return env


# ---------------------------------------------------------------- scripts


def _exports(env: dict[str, str]) -> list[str]:
    return [f"export {name}={shlex.quote(value)}" for name, value in env.items()]


def _default(name: str, value: str) -> str:
    return f'if [ -z "${{{name}:-}}" ]; then {name}={shlex.quote(value)}; fi'


def _required(name: str, why: str) -> str:
    return f': "${{{name}:?{why}}}"'


SCRIPT_HEAD = ["#!/usr/bin/env bash", "set -euo pipefail"]
FIND_BUNDLE = 'BUNDLE="${BUNDLE:-$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)}"'


def train_script(cfg: RunConfig, run_id: str) -> str:
    per_machine = cluster.processes_per_machine(cfg)
    lines = [
        SCRIPT_HEAD[0],
        f"# One training machine of {cfg.num_machines}: starts its {per_machine} training process(es).",
        f"# Usage: ./{TRAIN_SCRIPT} RANK   (RANK 0 to {cfg.num_machines - 1}; 0 is the main machine, "
        "which writes the run folder)",
        SCRIPT_HEAD[1],
        FIND_BUNDLE,
        'MACHINE_RANK="${1:-${MACHINE_RANK:-0}}"',
    ]
    if cfg.num_machines > 1:
        if cfg.main_process_ip.strip():
            lines.append(_default("MAIN_PROCESS_IP", cfg.main_process_ip.strip()))
        lines.append(_required("MAIN_PROCESS_IP", "set MAIN_PROCESS_IP to the address of machine 0"))
    if cfg.vllm_node:
        lines.append(
            _required(
                "VLLM_SERVER_URL", f"set VLLM_SERVER_URL to the vLLM machine, e.g. http://node03:{vllm_port(cfg)}"
            )
        )
    lines += [
        f'RUN_DIR="${{WORKBENCH_RUN_DIR:-${{WORKBENCH_RUNS_DIR:-$BUNDLE/runs}}/{run_id}}}"',
        *_exports(training_environment(cfg)),
        "# relative paths in config.json (a copied reward file or dataset) are the bundle's",
        'cd "$BUNDLE"',
        'if [ "$MACHINE_RANK" = 0 ]; then',
        "  # the main machine writes the run folder; its output goes to train.log there, as for a local run",
        '  mkdir -p "$RUN_DIR"',
        f'  exec > >(tee -a "$RUN_DIR/{runfolder.LOG_FILE}") 2>&1',
        "fi",
        "exec " + render(train_command(cfg)),
    ]
    return "\n".join(lines) + "\n"


def vllm_script(cfg: RunConfig) -> str:
    lines = [
        SCRIPT_HEAD[0],
        f"# The vLLM machine: serves {cfg.model} to the training machines on port {vllm_port(cfg)}.",
        "# Start it first; VLLM_PYTHON is the Python of a venv with vLLM (default: python).",
        SCRIPT_HEAD[1],
        'VLLM_PYTHON="${VLLM_PYTHON:-python}"',
        *_exports(vllm_environment(cfg)),
        "exec " + render(vllm_command(cfg)),
    ]
    return "\n".join(lines) + "\n"


def slurm_script(cfg: RunConfig, run_id: str) -> str:
    """One Slurm job: the vLLM node first (when there is one), then one launch_train.sh task per training node."""
    nodes, trainers = cluster.machines_in_job(cfg), cfg.num_machines
    per_machine = cluster.processes_per_machine(cfg)
    lines = [SCRIPT_HEAD[0], f"#SBATCH --job-name={run_id}", f"#SBATCH --nodes={nodes}", "#SBATCH --ntasks-per-node=1"]
    if cfg.device != "cpu":
        lines.append(f"#SBATCH --gpus-per-node={per_machine}")
    lines += [
        "#SBATCH --output=slurm-%j.out",
        f"# Submit from the bundle's folder: sbatch {SLURM_SCRIPT}",
        SCRIPT_HEAD[1],
        'BUNDLE="${BUNDLE:-$SLURM_SUBMIT_DIR}"',
        'mapfile -t NODES < <(scontrol show hostnames "$SLURM_JOB_NODELIST")',
        "# machine 0 of training is the job's first node; the others meet it there",
        'export MAIN_PROCESS_IP="${NODES[0]}"',
    ]
    train_step: list[Word] = ["srun", f"--nodes={trainers}", f"--ntasks={trainers}", "--ntasks-per-node=1"]
    if cfg.vllm_node:
        lines += [
            "# the vLLM server gets the last node of its own, started first; training waits for it",
            f'VLLM_NODE="${{NODES[{nodes - 1}]}}"',
            f'export VLLM_SERVER_URL="http://$VLLM_NODE:{vllm_port(cfg)}"',
            render(["srun", "--nodes=1", "--ntasks=1", ("--nodelist=", Var("VLLM_NODE")), _in_bundle(VLLM_SCRIPT)])
            + " &",
            "VLLM_STEP=$!",
            "trap 'kill \"$VLLM_STEP\" 2>/dev/null || true' EXIT",
        ]
        train_step.append(("--exclude=", Var("VLLM_NODE")))
    # each task is one machine; its rank is the task's rank (one task per node, nodes in order)
    train_step += ["bash", "-c", 'exec "$0" "$SLURM_PROCID"', _in_bundle(TRAIN_SCRIPT)]
    lines.append(render(train_step))
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------- the bundle


@dataclass
class Bundle:
    """A written bundle: its folder, the run id its run folder gets, and the commands to start it."""

    folder: Path
    run_id: str
    files: list[str]
    commands: list[str]


def start_commands(cfg: RunConfig, folder: Path) -> list[str]:
    """What a person types to start the bundle, machine by machine, then the Slurm way."""
    where = shlex.quote(str(folder))
    ip = cfg.main_process_ip.strip() or "<address of machine 0>"
    commands = []
    if cfg.vllm_node:
        commands.append(f"# on the vLLM machine, first:\nVLLM_PYTHON=<python with vLLM> {where}/{VLLM_SCRIPT}")
    for rank in range(cfg.num_machines):
        env = "" if cfg.num_machines == 1 else f"MAIN_PROCESS_IP={ip} "
        if cfg.vllm_node:
            env += f"VLLM_SERVER_URL=http://<vLLM machine>:{vllm_port(cfg)} "
        commands.append(f"# on training machine {rank}:\n{env}{where}/{TRAIN_SCRIPT} {rank}")
    commands.append(f"# or the whole job on Slurm:\ncd {where} && sbatch {SLURM_SCRIPT}")
    return commands


def _portable(cfg: RunConfig, folder: Path) -> RunConfig:
    """`cfg` with its reward file and dataset copied into the bundle and named relative to it."""
    changes = {}
    if cfg.reward_file and Path(cfg.reward_file).is_file():
        shutil.copyfile(cfg.reward_file, folder / runfolder.REWARD_SOURCE_FILE)
        changes["reward_file"] = runfolder.REWARD_SOURCE_FILE
    for name in ("dataset_name", "dataset_path"):  # a local dataset travels with the bundle; a hub id stays one
        value = getattr(cfg, name)
        if not value or not Path(value).exists():
            continue
        source = Path(value)
        target = folder / DATA_DIR / source.name
        if source.is_dir():
            shutil.copytree(source, target, dirs_exist_ok=True)
        else:
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(source, target)
        changes[name] = f"{DATA_DIR}/{source.name}"
    return cfg.with_changes(**changes) if changes else cfg


def readme_text(cfg: RunConfig, run_id: str, commands: list[str]) -> str:
    """The bundle's README: what it runs, how to start it, where the run folder lands, what must be shared."""
    shape = (
        f"{cfg.num_processes} training process(es) on {cfg.num_machines} machine(s) "
        f"({cluster.processes_per_machine(cfg)} each), backend {cfg.distributed_backend}, device {cfg.device}"
        + (", and one more machine for the vLLM server" if cfg.vllm_node else "")
    )
    files = [
        f"- `{runfolder.CONFIG_FILE}`: the run's settings (RunConfig)",
        f"- `{ACCELERATE_FILE}`: accelerate's config (TRL's file for {cfg.distributed_backend})",
        f"- `{TRAIN_SCRIPT} RANK`: one training machine",
        *([f"- `{VLLM_SCRIPT}`: the vLLM machine"] if cfg.vllm_node else []),
        f"- `{SLURM_SCRIPT}`: the whole job on Slurm",
        f"- `{REQUIREMENTS_FILE}`: the versions it was written with",
    ]
    return "\n".join(
        [
            f"# Cluster bundle for run `{run_id}`",
            "",
            f"Model `{cfg.model}`, task `{cfg.task}`: {shape}.",
            "",
            "## Files",
            "",
            *files,
            "",
            "## Before starting",
            "",
            f"On every machine: Python 3.11 with `pip install -r {REQUIREMENTS_FILE}` and this workbench "
            "(`pip install -e .` in its checkout), so that `accelerate` and `python -m workbench` run. The model must "
            "load on every machine: a hub id, or a folder at the same path everywhere. Machine 0 must accept "
            f"connections on port {cfg.main_process_port} from the others.",
            "",
            "## Start",
            "",
            "```",
            *commands,
            "```",
            "",
            "Each training machine starts `accelerate launch --num_machines ... --machine_rank RANK --main_process_ip "
            f"... -m workbench train` (see `{TRAIN_SCRIPT}`); accelerate and torchrun do the rest.",
            "",
            "## Where the run folder lands",
            "",
            f"`$WORKBENCH_RUNS_DIR/{run_id}` on machine 0, else `runs/{run_id}` inside this folder "
            "(`$WORKBENCH_RUN_DIR` names the folder outright). Only the main process (machine 0, rank 0) writes it: "
            "status.json with a heartbeat, metrics, completions, checkpoints and the adapter; machine 0's output goes to "
            "train.log there, the other machines' to their own terminals (Slurm: slurm-JOBID.out).",
            "",
            "Put it on a filesystem the dashboard's machine sees and point the dashboard at the same runs folder "
            "(`WORKBENCH_RUNS_DIR`, or the folder field of the Runs tab): it follows the run by its heartbeat, shows "
            "`lost` when the heartbeat stops, and Stop writes `stop.request` there, which the run obeys at the end of "
            "its step. To resume, the run folder must be the same path on every machine.",
            *(
                [
                    "",
                    "With the vLLM machine the adapter saved each step is loaded by the server from the run folder, so "
                    "the run folder must be on a filesystem the vLLM machine shares, at the same path.",
                ]
                if cfg.vllm_node and cfg.generation == "vllm-server"
                else []
            ),
            "",
        ]
    )


def requirements_text() -> str:
    lines = ["# The versions this bundle was written with; install them (and this workbench) on every machine."]
    for name in PACKAGES:
        try:
            # a local build tag (torch's +cpu) names this machine's wheel, not what the cluster needs
            lines.append(f"{name}=={importlib.metadata.version(name).split('+')[0]}")
        except importlib.metadata.PackageNotFoundError:
            lines.append(f"# {name}: not installed where the bundle was written")
    return "\n".join(lines) + "\n"


def write_bundle(cfg: RunConfig, out: str | Path, run_id: str | None = None, import_reward_file: bool = True) -> Bundle:
    """Check `cfg` and write its bundle into `out` (created; files already there are replaced).

    `import_reward_file` False: the reward file is checked without running it (see validate_config).
    """
    cfg = cfg.with_absolute_paths()
    check_config(cfg, import_reward_file)
    folder = Path(out).resolve()
    folder.mkdir(parents=True, exist_ok=True)
    run_id = run_id or runfolder.new_run_id(cfg.run_name or cfg.task)
    cfg = _portable(cfg, folder)
    cfg.save(folder / runfolder.CONFIG_FILE)
    write_accelerate_config(cfg, folder)
    files = {
        TRAIN_SCRIPT: train_script(cfg, run_id),
        SLURM_SCRIPT: slurm_script(cfg, run_id),
        REQUIREMENTS_FILE: requirements_text(),
    }
    if cfg.vllm_node:
        files[VLLM_SCRIPT] = vllm_script(cfg)
    commands = start_commands(cfg, folder)
    files[README_FILE] = readme_text(cfg, run_id, commands)
    for name, text in files.items():
        path = folder / name
        path.write_text(text, encoding="utf-8")
        if name.endswith(".sh") or name == SLURM_SCRIPT:
            path.chmod(0o755)
    return Bundle(folder, run_id, sorted([runfolder.CONFIG_FILE, ACCELERATE_FILE, *files]), commands)
