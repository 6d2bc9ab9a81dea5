"""Start, watch, stop and resume training runs as background processes.

Used by the UI, the CLI and the notebooks. A run is a folder (see
workbench/jobs/runfolder.py) plus a process started from an argument list, never a
shell: `python -m workbench train --run-dir DIR --config DIR/config.json`, or
`accelerate launch --num_processes N ... -m workbench train ...` for several
processes (DDP, on GPUs or on CPU with gloo). The process runs in its own
process group, detached from the caller, so closing the UI does not end it and
stopping it can reach every process it started. A run that generates on a vLLM
server of its own starts that server too (workbench/jobs/vllm_server.py); the
server ends with the run.

Nothing here keeps state between calls: `status` and `list_runs` read the run
folders, so they work after the caller restarts. A run whose process is gone
while its status is not final (killed, out of memory) is reported as failed.

A launch whose devices (GPUs, or the CPU) a live run holds waits in the GPU
queue (rules in workbench/jobs/queue.py): its run folder is made with the
state `queued`, and the runs folder's dispatcher process
(workbench/jobs/dispatcher.py) starts it once they are free. Every
check-and-claim holds the runs folder's queue lock, so two launches at once
never take the same device.
"""

from __future__ import annotations

import os
import shutil
import socket
import sys
import time
from pathlib import Path
from typing import Iterable

from workbench.errors import WorkbenchError
from workbench.jobs import allocator, bundle, file_cache, processes, queue, runfolder, sandbox, vllm_server
from workbench.spec import cluster
from workbench.spec.config import RunConfig, check_config
from workbench.spec.hardware import cpu_threads, list_gpus, runs_on_cpu
from workbench.spec.run_status import RunStatus, status_field

STALE_SECONDS = 30.0  # a live process whose heartbeat is older than this is flagged as stalled
# A run on another machine whose heartbeat (every 2 s) is older than this shows as `lost`: long
# enough for a shared filesystem's attribute cache (NFS keeps them up to 60 s) to show a live run late.
LOST_SECONDS = 120.0
SAVE_WAIT_SECONDS = 900.0  # how long a stop waits for a save under way before it gives up on it
# A run the launcher has marked `starting` but whose process it has not recorded yet (it is being spawned)
# counts as starting for this long; after that, as failed.
RECORD_PID_SECONDS = 30.0
DISPATCHER_MODULE = "workbench.jobs.dispatcher"  # started as `python -m` while runs are queued
SANDBOX_MODULE = "workbench.jobs.sandbox"  # a sandboxed run's first process, which becomes its bwrap


class LauncherError(WorkbenchError):
    """A run that does not exist or cannot do what was asked; the message says what to do."""


# ---------------------------------------------------------------- commands


def _accelerate_prefix() -> list[str]:
    script = Path(sys.executable).parent / "accelerate"
    return [str(script), "launch"] if script.is_file() else [sys.executable, "-m", "accelerate.commands.launch"]


def launch_env(config: RunConfig, base: dict | None = None) -> dict:
    """The environment a run's processes start with: GPU visibility, allocator, CPU threads.

    The allocator is $WORKBENCH_ALLOCATOR or the measured default (workbench.jobs.allocator);
    on a CPU run each process gets its share of the cores, unless the caller set OMP_NUM_THREADS.
    """
    on_cpu = runs_on_cpu(config.device, env=base)
    env = processes.training_env(config.gpu_ids, "cpu" if on_cpu else config.device, base)
    env = allocator.allocator_env(allocator.choose(env.get(allocator.ALLOCATOR_ENV_VAR)), env)
    if on_cpu and not env.get("OMP_NUM_THREADS"):
        env["OMP_NUM_THREADS"] = str(cpu_threads(cluster.processes_per_machine(config)))
    return env


def build_command(config: RunConfig, run_dir: str | os.PathLike, resume: bool = False) -> list[str]:
    """The exact argument list that trains `config` into `run_dir` (the UI's "Preview command")."""
    run_dir = Path(run_dir)
    train = ["-m", "workbench", "train", "--run-dir", str(run_dir), "--config", str(run_dir / runfolder.CONFIG_FILE)]
    if resume:
        train.append("--resume")
    if config.num_processes <= 1:
        return [sys.executable, *train]
    if config.distributed_backend != "ddp":  # TRL's accelerate file for DeepSpeed / FSDP, written by _spawn
        return [*_accelerate_prefix(), "--config_file", str(run_dir / bundle.ACCELERATE_FILE),
                "--main_process_port", str(processes.free_port()), *train]
    launch = [*_accelerate_prefix(), "--num_processes", str(config.num_processes), "--num_machines", "1",
              "--mixed_precision", "bf16" if config.bf16 else "no", "--dynamo_backend", "no",
              "--main_process_port", str(processes.free_port())]
    # The torchrun path (--multi_gpu) serves CPU processes too: the trainer sets
    # use_cpu and torch.distributed picks gloo. accelerate's own --cpu flag
    # would start a single process unless MPI is installed.
    launch.append("--multi_gpu")
    return [*launch, *train]


# ---------------------------------------------------------------- finding runs


def run_dir_of(run_id: str | os.PathLike, runs_dir: str | os.PathLike | None = None) -> Path:
    """The folder of a run, from its id (or a path to the folder itself)."""
    path = Path(run_id)
    if runfolder.is_run_dir(path):
        return path.resolve()
    candidate = runfolder.runs_root(runs_dir) / str(run_id)
    if runfolder.is_run_dir(candidate):
        return candidate
    known = [p.name for p in runfolder.list_run_dirs(runs_dir)[:5]]
    raise LauncherError(
        f"run: no run called {str(run_id)!r} in {runfolder.runs_root(runs_dir)}; "
        + (f"recent runs: {', '.join(known)}" if known else "start one with `python -m workbench train`")
    )


def _new_run_dir(config: RunConfig, runs_dir, prefix: str = "") -> Path:
    """A new, empty run folder; made under the queue lock, so two launches in one second get two names."""
    root = runfolder.runs_root(runs_dir)
    label = prefix + (config.run_name or f"{config.task}-{Path(config.model).name}")
    base = runfolder.new_run_id(label)
    run_id, n = base, 1
    while (root / run_id).exists():  # two runs started within the same second
        n += 1
        run_id = f"{base}-{n}"
    path = root / run_id
    path.mkdir(parents=True)
    return path


def _claim_run_dir(path: str | os.PathLike, root: Path) -> Path:
    """The run folder a caller named (`train --background --run-dir`): directly in the runs folder, new or empty."""
    path = Path(path).resolve()
    if path.parent != root.resolve():
        raise LauncherError(field="--run-dir", rule=f"{path} is not directly inside the runs folder {root}",
                            fix="name a folder inside --runs-dir, or leave --runs-dir out (the run folder's parent "
                                "is then its runs folder)")
    if path.exists() and (not path.is_dir() or any(path.iterdir())):
        raise LauncherError(field="--run-dir", rule=f"{path} already exists and is not an empty folder",
                            fix="name a new folder, or resume a run there with `python -m workbench resume RUN`")
    path.mkdir(parents=True, exist_ok=True)
    return path


# ---------------------------------------------------------------- process liveness


def unreadable_status(run_dir: Path, exc: BaseException) -> dict:
    """The status readers give a run folder they cannot read: state `unreadable` and the reason."""
    return {
        "state": runfolder.UNREADABLE, "run_id": run_dir.name, "run_dir": str(run_dir),
        "error": {
            "type": type(exc).__name__,
            "message": f"this run folder cannot be read: {exc}",
            "hint": "Check the folder's permissions and that its status.json and config.json are UTF-8 JSON "
                    "objects, or delete the folder.",
            "traceback_tail": "",
        },
    }


def status_of_dir(run_dir: str | os.PathLike, read=runfolder.read_json_object) -> dict:
    """A run's status as readers should see it: a dead process with a non-final state is `failed`.

    It is status.json (`RunStatus.to_dict`, the state judged here) with what the
    launcher adds: `run_id`, `run_dir`, and `stalled_seconds` for a silent heartbeat,
    `last_state` for a run on another machine that is `lost`.
    A folder that cannot be read is reported `unreadable` with the reason; this never raises.
    `read`: how status.json is read (`file_cache.read_json_object` for a listing).
    """
    run_dir = Path(run_dir)
    try:
        return _live_status(run_dir, RunStatus.from_dict(read(os.path.join(run_dir, runfolder.STATUS_FILE))))
    except (OSError, ValueError, TypeError) as exc:
        return unreadable_status(run_dir, exc)


def runs_elsewhere(status: RunStatus | dict) -> bool:
    """Whether the run's process is on another machine (status.json's `host`), where no pid can be looked up."""
    host = status_field(status, "host")
    return bool(host) and host != socket.gethostname()


def _live_status(run_dir: Path, status: RunStatus) -> dict:
    """`status` judged (`failed` when its process is gone, `lost` when its heartbeat is), with the launcher's fields."""
    status.update(state=status.state or "starting")
    seen = {"run_id": run_dir.name, "run_dir": str(run_dir)}
    if status.state in runfolder.FINAL_STATES or status.state == runfolder.QUEUED:
        return {**status.to_dict(), **seen}  # a queued run has no process yet: the dispatcher starts it
    updated = status.updated_at or 0.0
    if runs_elsewhere(status):
        seen.update(_remote_judgement(status, updated))
    elif status.state == "starting" and not status.pid and not status.pgid \
            and time.time() - updated < RECORD_PID_SECONDS:
        pass  # being spawned: the launcher records the pid next
    elif not processes.alive(status.pid, updated or None) and not processes.alive(status.pgid, updated or None):
        status.update(state="failed", error={
            "type": "ProcessDied",
            "message": f"the training process (pid {status.pid}) ended without recording why",
            "hint": "It was killed or ran out of memory. Read the end of train.log; if memory ran out, "
                    "lower per_device_train_batch_size, num_generations or max_completion_length.",
            "traceback_tail": runfolder.read_log_tail(run_dir, 2000),
        })
    elif updated and time.time() - updated > STALE_SECONDS:
        seen["stalled_seconds"] = round(time.time() - updated, 1)
    return {**status.to_dict(), **seen}


def _remote_judgement(status: RunStatus, updated: float) -> dict:
    """A run on another machine, judged by its heartbeat alone: `lost` once it is older than LOST_SECONDS.

    Sets the state and error of `status`; returns the launcher's fields (`last_state`, `stalled_seconds`).
    """
    age = time.time() - updated if updated else float("inf")
    if age > LOST_SECONDS:
        last_state = status.state
        status.update(state=runfolder.LOST, error={
            "type": "HeartbeatLost",
            "message": f"the run on {status.host} has not written status.json for "
                       + (f"{age:.0f} s" if updated else "ever") + f" (limit {LOST_SECONDS:.0f} s)",
            "hint": f"Its processes cannot be seen from here. Check on {status.host} (its terminal or "
                    "slurm-JOBID.out, and train.log in the run folder) whether it still runs and whether the "
                    "filesystem is still shared; it shows its state again as soon as its heartbeat returns.",
            "traceback_tail": "",
        })
        return {"last_state": last_state}
    if age > STALE_SECONDS:
        return {"stalled_seconds": round(age, 1)}
    return {}


def status(run_id: str, runs_dir: str | os.PathLike | None = None) -> dict:
    return status_of_dir(run_dir_of(run_id, runs_dir))


def is_running(run_id: str, runs_dir: str | os.PathLike | None = None) -> bool:
    return status(run_id, runs_dir)["state"] not in runfolder.FINAL_STATES


def _listed(run_dir: Path) -> tuple[dict, dict]:
    """One run's `list_runs` entry (its status as readers see it, and the config fields a table shows) and config."""
    entry = status_of_dir(run_dir, read=file_cache.read_json_object)
    try:
        config = file_cache.read_json_object(os.path.join(run_dir, runfolder.CONFIG_FILE))
    except (OSError, ValueError) as exc:  # one broken folder must not hide every other run
        entry, config = unreadable_status(run_dir, exc), {}
    entry.update({key: config.get(key) for key in ("model", "task", "run_name", "dataset_path", "num_processes",
                                                     "generation")})
    return entry, config


def _settled(listed: tuple[dict, dict]) -> bool:
    """An entry that only a new status.json changes: a final state read from the file, not a live process's."""
    return listed[0]["state"] in runfolder.FINAL_STATES and listed[0]["state"] != runfolder.UNREADABLE


def list_runs(runs_dir: str | os.PathLike | None = None) -> list[dict]:
    """Every run, newest first: its status plus the config fields a table shows.

    The Runs tab lists thousands of runs every 3 s: a finished run's entry is
    built once per version of its status.json, and each file is parsed once
    per version (jobs/file_cache.py).
    """
    runs, configs = [], []
    for run_dir in runfolder.list_run_dirs(runs_dir):
        entry, config = file_cache.cached(os.path.join(run_dir, runfolder.STATUS_FILE), lambda _: _listed(run_dir),
                                          "listed", keep=_settled)
        runs.append(dict(entry))  # callers add fields (a queued run's place) to their copy
        configs.append(config)
    if any(entry["state"] == runfolder.QUEUED for entry in runs):  # their `queue_position` and `waits_for`
        holding, queued = _queue_entries((Path(e["run_dir"]), e, c) for e, c in zip(runs, configs))
        places = {place.entry.run_id: _place_fields(place) for place in queue.plan(queued, holding)}
        for entry in runs:
            entry.update(places.get(entry["run_id"], {}))
    return runs


def wait(run_id: str, runs_dir: str | os.PathLike | None = None, timeout: float = 600.0,
         poll: float = 0.5) -> dict:
    """Block until the run reaches a final state (or `timeout`), and return its status."""
    deadline = time.monotonic() + timeout
    while True:
        current = status(run_id, runs_dir)
        if current["state"] in runfolder.FINAL_STATES or time.monotonic() > deadline:
            return current
        time.sleep(poll)


def busy_gpu_ids(runs_dir: str | os.PathLike | None = None) -> set[int]:
    """GPUs held by runs that are still going (theirs and their vLLM servers'), read from their run folders."""
    holding, _ = queue_state(runfolder.runs_root(runs_dir))
    return {index for entry in holding for index in map(queue.gpu_index, entry.devices) if index is not None}


# ---------------------------------------------------------------- the GPU queue


def _machine_gpus() -> list[int]:
    """The GPU indexes runs started from here can use: none when this process's CUDA_VISIBLE_DEVICES hides all."""
    if runs_on_cpu("auto", gpus_present=True):  # true only when CUDA_VISIBLE_DEVICES hides every GPU
        return []
    return [g.index for g in list_gpus()]


def _process_alive(status: RunStatus | dict) -> bool:
    """Whether a process of a run here (its trainer, or its vLLM server's guard) has not exited yet."""
    return any(processes.alive(pid, status_field(status, "updated_at"))
               for pid in (*runfolder.pids_here(status), runfolder.server_pid_here(status)) if pid)


def _queue_entries(runs: Iterable[tuple[Path, dict, dict | None]]) -> tuple[list[queue.Entry], list[queue.Entry]]:
    """(runs holding devices, queued runs) among (run folder, status, config or None to read it) triples.

    A run holds its devices while it is live on this machine, and after its
    status is final (or queued again, to resume) for as long as its processes
    take to exit: a GPU is free only once they have. Runs on other machines
    hold nothing here.
    """
    holding, queued, gpus = [], [], None
    for run_dir, status, config in runs:  # one field at a time: most of a large folder's runs are skipped at once
        state = status_field(status, "state")
        if runs_elsewhere(status) or state in (runfolder.UNREADABLE, runfolder.LOST):
            continue
        live = state not in runfolder.FINAL_STATES and state != runfolder.QUEUED
        ending = not live and _process_alive(status)
        if not (live or ending or state == runfolder.QUEUED):
            continue
        if gpus is None:
            gpus = _machine_gpus()
        devices = queue.devices_of(runfolder.read_config(run_dir) if config is None else config, gpus)
        owner = status_field(status, "owner")
        if state == runfolder.QUEUED:
            queued.append(queue.Entry(run_dir.name, devices, owner, state, status_field(status, "queued_at") or 0.0))
        if live or ending:
            holding.append(queue.Entry(run_dir.name, devices, owner, state if live else queue.ENDING))
    return holding, queued


def queue_state(root: Path) -> tuple[list[queue.Entry], list[queue.Entry]]:
    """(runs holding devices, queued runs) of the runs folder `root`, read from the run folders."""
    return _queue_entries((run_dir, status_of_dir(run_dir), None) for run_dir in runfolder.list_run_dirs(root))


def _place_fields(place: queue.Place) -> dict:
    return {"queue_position": place.position, "waits_for": queue.describe_wait(place.waits_for)}


def queue_place(run_id: str, runs_dir: str | os.PathLike | None = None) -> dict | None:
    """A queued run's `{"queue_position": N, "waits_for": "GPU 0 (run X)"}`; None for a run that is not queued."""
    holding, queued = queue_state(runfolder.runs_root(runs_dir))
    return next((_place_fields(p) for p in queue.plan(queued, holding) if p.entry.run_id == run_id), None)


def status_with_queue_place(run_dir: str | os.PathLike) -> dict:
    """`status_of_dir`, plus `queue_position` and `waits_for` while the run is queued."""
    run_dir = Path(run_dir)
    current = status_of_dir(run_dir)
    if current["state"] == runfolder.QUEUED:
        current.update(queue_place(run_dir.name, run_dir.parent) or {})
    return current


def ensure_dispatcher(runs_dir: str | os.PathLike | None = None) -> bool:
    """Start the runs folder's dispatcher process unless one is alive; True when this call started one.

    It runs in a session of its own, so it outlives the app and needs no
    browser; it ends by itself once nothing is queued.
    """
    root = runfolder.runs_root(runs_dir)
    held = runfolder.hold_dispatcher_lock(root)
    if held is None:
        return False
    with held:  # the child inherits the lock: it holds it from its first instant, and this copy lets go
        processes.spawn([sys.executable, "-m", DISPATCHER_MODULE, "--runs-dir", str(root),
                         "--lock-fd", str(held.fileno())], root / runfolder.DISPATCHER_LOG_FILE, processes.job_env(),
                        cwd=root, append=True, reap=True, pass_fds=(held.fileno(),))
    return True


def keep_queue_moving(runs_dir: str | os.PathLike | None = None, runs: list[dict] | None = None) -> bool:
    """The backstop the app (at start and on each Runs-tab refresh) and `workbench runs` call.

    Starts a dispatcher when a run is queued and none is alive (after a reboot,
    or one that was killed); `runs` is a `list_runs()` answer already at hand.
    """
    runs = list_runs(runs_dir) if runs is None else runs
    return any(entry.get("state") == runfolder.QUEUED for entry in runs) and ensure_dispatcher(runs_dir)


# ---------------------------------------------------------------- start / stop / resume


def sandboxed_command(command: list[str], run_dir: Path) -> list[str]:
    """`command` started through the run's sandbox (workbench/jobs/sandbox.py), which becomes its first process."""
    return [sys.executable, "-m", SANDBOX_MODULE, "--run-dir", str(run_dir), "--", *command]


def _spawn(config: RunConfig, run_dir: Path, resume: bool, sandboxed: bool = False) -> int:
    command = build_command(config, run_dir, resume=resume)
    if config.distributed_backend != "ddp":
        bundle.write_accelerate_config(config, run_dir)
    env = launch_env(config)
    if sandboxed:
        # its vLLM server, if it has one, starts inside the same sandbox (the trainer starts it there):
        # the sandbox has a network of its own, which a server started out here could not reach
        command = sandboxed_command(command, run_dir)
    elif vllm_server.manages_server(config):
        # the server loads its model while the trainer loads its own; its guard ends it with the run
        runfolder.update_status(run_dir, pid=None, pgid=None, vllm=vllm_server.start_for_run(config, run_dir))
    process = processes.spawn(command, run_dir / runfolder.LOG_FILE, env, cwd=run_dir, append=True, reap=True)
    return process.pid


def _refuse_multi_machine(config: RunConfig) -> None:
    if cluster.is_multi_machine(config):
        raise LauncherError(field="num_machines", rule=f"a run over {cluster.machines_in_job(config)} machines "
                            "starts on those machines, not from here",
                            fix="export a cluster bundle (`python -m workbench export CONFIG --out DIR`, or Export "
                                "in the Setup tab) and start its scripts there")


def check_launch(config: RunConfig, import_reward_file: bool = True) -> None:
    """Refuse (ConfigError, LauncherError, VLLMServerError) a config that cannot start here, before anything runs.

    `import_reward_file` False: the reward file is checked without running it here (see validate_config);
    it runs only in the training process.
    """
    check_config(config, import_reward_file)
    _refuse_multi_machine(config)
    vllm_server.preflight(config)


def start_process(config: RunConfig, run_dir: Path, resume: bool, **fields) -> None:
    """Write the status `starting` (with `fields`), start the run's processes, record the pid.

    A run whose status.json has a `sandbox` section (a launch from a dashboard
    with accounts, `train --sandbox`) starts in its sandbox, on resume and
    from the queue too.
    """
    status = runfolder.update_status(run_dir, state="starting", pid=None, pgid=None, sandbox_pid=None,
                                     command=build_command(config, run_dir, resume=resume),
                                     vllm=vllm_server.server_section(config), **fields)
    pid = _spawn(config, run_dir, resume=resume, sandboxed=RunStatus.of(status).sandbox is not None)
    runfolder.update_status(run_dir, pid=pid, pgid=pid)


def _turn(config: RunConfig, run_id: str, owner: str | None, holding, queued) -> queue.Place:
    """Where a launch of `config` stands now: first of all, it may not push `owner` over the per-user limit."""
    queue.check_user_limit(owner, [*holding, *queued], queue.max_runs_per_user(os.environ))
    entry = queue.Entry(run_id, queue.devices_of(config.to_dict(), _machine_gpus()), owner, queued_at=time.time())
    return queue.place_of_new(entry, queued, holding)


def start(config: RunConfig, runs_dir: str | os.PathLike | None = None, smoke: bool = False,
          owner: str | None = None, import_reward_file: bool = True,
          sandboxed: sandbox.Policy | None = None, into: str | os.PathLike | None = None) -> str:
    """Check `config`, make its run folder and start training in the background; returns the run id.

    When a live run holds its devices (GPUs, or the CPU) the run waits in the
    queue, state `queued`, and starts by itself once they are free
    (`queue_place` says where it stands). Raises ConfigError (nothing started)
    when the config cannot run, UserLimitError when `owner` already has as many
    runs running or queued as $WORKBENCH_MAX_RUNS_PER_USER allows. Local
    paths are saved absolute: the trainer runs in the run folder, not here.
    `owner`: the signed-in user who launched it (status.json's `owner`, see
    workbench/access/owners.py). `import_reward_file` False: the reward file
    is checked without running it here; it runs only in the training process.
    `sandboxed`: run it in a bubblewrap sandbox with this policy (a dashboard
    with accounts does for every run; workbench/jobs/sandbox.py).
    `into`: the run's folder, new or empty and directly in the runs folder,
    instead of a new one named after the run (LauncherError otherwise).
    """
    config = config.with_absolute_paths()
    check_launch(config, import_reward_file)
    if sandboxed is not None:
        sandbox.check_available()
    root = runfolder.runs_root(runs_dir)
    with runfolder.queue_lock(root):
        holding, queued = queue_state(root)
        place = _turn(config, "", owner, holding, queued)
        run_dir = _new_run_dir(config, root, prefix="smoke-" if smoke else "") if into is None \
            else _claim_run_dir(into, root)
        config.save(run_dir / runfolder.CONFIG_FILE)
        fields = {"step": 0, "smoke_test": smoke, "owner": owner,
                  "sandbox": None if sandboxed is None else sandboxed.to_status()}
        if place.may_start:
            start_process(config, run_dir, resume=False, started_at=time.time(), **fields)
        else:
            runfolder.update_status(run_dir, state=runfolder.QUEUED, queued_at=place.entry.queued_at,
                                    command=build_command(config, run_dir), **fields)
        if queued or not place.may_start:
            ensure_dispatcher(root)
    return run_dir.name


def smoke_test(config: RunConfig, runs_dir: str | os.PathLike | None = None, owner: str | None = None,
               import_reward_file: bool = True, sandboxed: sandbox.Policy | None = None) -> str:
    """Start one real optimizer step with the same settings, in its own run folder marked as a smoke test.

    It catches what only a real step shows (memory, chat template, reward
    errors) in seconds; `wait(run_id)` gives its outcome.
    """
    one_step = config.with_changes(max_steps=1, save_steps=max(config.save_steps, 1),
                                   run_name=config.run_name or f"{config.task}")
    return start(one_step, runs_dir, smoke=True, owner=owner, import_reward_file=import_reward_file,
                 sandboxed=sandboxed)


def graceful_wait_seconds(timeout: float, step_time: float | None) -> float:
    """How long a stop waits for the trainer to end its step and save: `timeout`, or longer for slow steps.

    The trainer stops only at the end of a step, so a step slower than the
    timeout would otherwise be killed halfway, losing the step and the adapter.
    """
    if not step_time or step_time <= 0:
        return timeout
    return max(timeout, 2.0 * step_time + 10.0)


def _wait_until_final(run_dir: Path, seconds: float, poll: float = 0.25) -> dict:
    """The run's status once it is final, or after `seconds`; a save under way is always waited for."""
    deadline = time.monotonic() + seconds
    save_deadline = None
    while True:
        current = status_of_dir(run_dir)
        if current["state"] in runfolder.FINAL_STATES:
            return current
        now = time.monotonic()
        if current["state"] == "saving":
            save_deadline = save_deadline or now + SAVE_WAIT_SECONDS
            if now > save_deadline:
                return current
        elif now > deadline:
            return current
        time.sleep(poll)


def stop(run_id: str, runs_dir: str | os.PathLike | None = None, timeout: float = 30.0) -> dict:
    """Stop a run: ask for a graceful stop (save, state `stopped`), kill its process group if it does not.

    The wait is `timeout`, stretched for steps slower than that; a run that is
    saving (a checkpoint or its adapter) is never killed before the save ends.
    """
    run_dir = run_dir_of(run_id, runs_dir)
    current = status_of_dir(run_dir)
    if current["state"] == runfolder.QUEUED:
        if _take_out_of_queue(run_dir):
            return status_of_dir(run_dir)
        current = status_of_dir(run_dir)  # its turn came meanwhile: stop it as any other run
    if runs_elsewhere(current) and current.get("last_state", current["state"]) not in runfolder.FINAL_STATES:
        return _stop_remote(run_dir, current, timeout)
    if current["state"] in runfolder.FINAL_STATES:
        vllm_server.stop_for_run(run_dir)  # its guard ends it anyway; this makes sure before returning
        return current
    written = RunStatus.of(current)
    pgid = written.pgid or written.pid
    if current["state"] in ("training", "saving"):
        runfolder.request_stop(run_dir)
        wait = graceful_wait_seconds(timeout, runfolder.last_metric(run_dir, "step_time"))
        current = _wait_until_final(run_dir, wait)
        if current["state"] in runfolder.FINAL_STATES:
            vllm_server.stop_for_run(run_dir)
            return current
    # not training yet (nothing to save) or not answering: end every process of the run
    # (SIGTERM first, which the trainer takes as a stop request too; no SIGKILL while it saves)
    processes.end_tree(pgid, grace=5.0, hold=lambda: status_of_dir(run_dir)["state"] == "saving",
                       hold_limit=SAVE_WAIT_SECONDS)
    runfolder.clear_stop_request(run_dir)
    if runfolder.read_run_status(run_dir).state not in runfolder.FINAL_STATES:
        runfolder.update_status(run_dir, state="stopped", finished_at=time.time(),
                                note="killed: it did not stop on request")
    vllm_server.stop_for_run(run_dir)
    return status_of_dir(run_dir)


def _take_out_of_queue(run_dir: Path) -> bool:
    """Stop a queued run before it starts (state `stopped`, nothing else touched); False if it started meanwhile."""
    with runfolder.queue_lock(run_dir.parent):
        if runfolder.read_run_status(run_dir).state != runfolder.QUEUED:
            return False
        runfolder.update_status(run_dir, state="stopped", finished_at=time.time(), queued_resume=None,
                                note="taken out of the queue before it started")
        return True


def _stop_remote(run_dir: Path, current: dict, timeout: float) -> dict:
    """Stop a run on another machine through its folder alone: its pids mean nothing here, so nothing is killed.

    The trainer finds stop.request at the end of its step, saves and ends
    `stopped`; a lost run finds it if it comes back.
    """
    runfolder.request_stop(run_dir)
    if current["state"] != runfolder.LOST:
        current = _wait_until_final(run_dir, graceful_wait_seconds(timeout, runfolder.last_metric(run_dir, "step_time")))
    if current["state"] not in runfolder.FINAL_STATES or current["state"] == runfolder.LOST:
        current["note"] = (f"stop requested: the run on {current['host']} stops at the end of its step; processes "
                           "on another machine are never killed from here")
    return current


def resume(run_id: str, runs_dir: str | os.PathLike | None = None, owner: str | None = None,
           import_reward_file: bool = True, sandboxed: sandbox.Policy | None = None) -> str:
    """Continue a stopped, failed or finished run from its last checkpoint; steps continue from there.

    Like a launch, it waits in the queue while a live run holds its devices.
    A run keeps its owner; `owner` is recorded only for a run that has none
    (started before the dashboard had accounts). `import_reward_file`: as in `start`.
    A run started in a sandbox resumes in the same one; `sandboxed` puts a run
    that had none into one.
    """
    run_dir = run_dir_of(run_id, runs_dir)
    current = status_of_dir(run_dir)
    if current["state"] == runfolder.UNREADABLE:
        raise LauncherError(f"run {run_dir.name}: {current['error']['message']}; {current['error']['hint']}")
    if current["state"] not in runfolder.FINAL_STATES:
        raise LauncherError(f"run {run_dir.name} is still {current['state']}; stop it before resuming")
    checkpoint = runfolder.last_checkpoint(run_dir)
    if checkpoint is None:
        raise LauncherError(
            f"run {run_dir.name} has no checkpoint to resume from (it saves every save_steps steps); "
            f"start a new run instead"
        )
    config = RunConfig.load(run_dir / runfolder.CONFIG_FILE)
    check_launch(config, import_reward_file)
    written = RunStatus.of(current)
    owner = written.owner or owner
    kept = sandbox.Policy.from_status(written.sandbox) or sandboxed
    if kept is not None:
        sandbox.check_available()
    with runfolder.queue_lock(run_dir.parent):
        holding, queued = queue_state(run_dir.parent)
        state = status_of_dir(run_dir)["state"]
        if state not in runfolder.FINAL_STATES:
            raise LauncherError(f"run {run_dir.name} was resumed meanwhile and is {state}; stop it before resuming")
        place = _turn(config, run_dir.name, owner, holding, queued)
        fields = {"error": None, "finished_at": None, "summary": None, "note": None, "owner": owner,
                  "sandbox": None if kept is None else kept.to_status()}
        if place.may_start:
            start_process(config, run_dir, resume=True, resumed_at=time.time(), **fields)
        else:
            runfolder.update_status(run_dir, state=runfolder.QUEUED, queued_at=place.entry.queued_at,
                                    queued_resume=True, **fields)
        if queued or not place.may_start:
            ensure_dispatcher(run_dir.parent)
    return run_dir.name


def delete_run(run_id: str, runs_dir: str | os.PathLike | None = None) -> None:
    """Remove a finished run's folder: refused while it runs, and for any folder outside the runs folder.

    A path (or a link in the runs folder) may point anywhere, e.g. at a model
    folder, which also holds a config.json; only a folder directly inside the
    runs folder, links resolved, is ever removed.
    """
    run_dir = run_dir_of(run_id, runs_dir)
    root = runfolder.runs_root(runs_dir)
    real = run_dir.resolve()
    if real.parent != root.resolve():
        raise LauncherError(field="run", rule=f"{real} is not a run folder inside the runs folder {root}",
                            fix="only runs listed there can be deleted here; remove other folders yourself")
    if status_of_dir(real)["state"] not in runfolder.FINAL_STATES:
        raise LauncherError(f"run {run_dir.name} is still running; stop it first")
    shutil.rmtree(real)


def other_live_process(run_dir: str | os.PathLike) -> int | None:
    """The pid of a live process that writes `run_dir`, unless it belongs to this run's own process tree.

    A second trainer in the same folder would interleave both runs' files and
    checkpoints. The launcher's own child finds its pid (or a parent's: the
    accelerate launcher) in status.json, and a worker of several processes
    its sibling's (rank 0 writes its pid); those are let through.
    """
    import psutil

    status = runfolder.read_run_status(run_dir)
    if status.state in runfolder.FINAL_STATES or runs_elsewhere(status):  # a pid on another machine
        return None
    updated = status.updated_at or None
    me = psutil.Process()
    own = {me.pid, *(parent.pid for parent in me.parents())}
    worker = "LOCAL_RANK" in os.environ  # started by torchrun / accelerate with sibling workers
    for pid in runfolder.pids_here(status):
        if pid not in own and processes.alive(pid, updated) \
                and not (worker and _sibling(pid, me.ppid())):
            return pid
    return None


def _sibling(pid: int, parent: int) -> bool:
    import psutil

    try:
        return psutil.Process(pid).ppid() == parent
    except psutil.Error:
        return False
