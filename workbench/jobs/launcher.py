"""Start, stop, resume and delete training runs as background processes.

Used by the UI, the CLI and the notebooks. A run is a folder (see
workbench/runstore/runfolder.py) plus a process started from an argument list
(workbench/jobs/commands.py), never a shell. The process runs in its own
process group, detached from the caller, so closing the UI does not end it and
stopping it can reach every process it started. A run that generates on a vLLM
server of its own starts that server too (workbench/jobs/vllm_server.py); the
server ends with the run. How a run stands is read from its folder
(workbench/jobs/run_state.py).

What the launcher decides from is its own record of each run
(workbench/runstore/launch_records.py: the owner, whether and how it is
sandboxed, the config it checked, the processes it started with their start
times), kept outside the run folder, which the run's code can write. A resume
or a queued start writes config.json back from the record, and a stop signals
only the recorded processes, never a pid read from status.json.

A launch whose devices (GPUs, or the CPU) a live run holds waits in the GPU
queue (rules in workbench/jobs/queue.py, read from the run folders by
workbench/jobs/gpu_queue.py): its run folder is made with the state `queued`,
and the runs folder's dispatcher process (workbench/jobs/dispatcher.py) starts
it once they are free. Every check-and-claim holds the runs folder's queue
lock, so two launches at once never take the same device.
"""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from workbench.jobs import bundle, processes, queue, sandbox_bwrap, sandbox_policy, user_disk, vllm_server, warden
from workbench.jobs.commands import build_command, launch_env, sandboxed_command
from workbench.jobs.gpu_queue import ensure_dispatcher, machine_gpus, queue_state
from workbench.jobs.run_state import LauncherError, run_dir_of, runs_elsewhere, status_of_dir
from workbench.runstore import checkpoint_integrity, launch_records, run_locks, runfolder
from workbench.spec import cluster, config_checks
from workbench.spec.config import RunConfig
from workbench.spec.config_checks import check_config
from workbench.spec.config_problems import ConfigError
from workbench.spec.run_status import RunStatus, running_seconds

SAVE_WAIT_SECONDS = 900.0  # how long a stop waits for a save under way before it gives up on it
# A sandboxed run's step time and `saving` state are its own to write: a stop waits for them at most this long
# (WORKBENCH_SANDBOX_STOP_WAIT_S), then ends its processes.
SANDBOXED_STOP_WAIT_SECONDS = 120.0


def stop_wait_cap(record: launch_records.LaunchRecord | None) -> float | None:
    """The longest a stop waits on what a sandboxed run says (its step time, a save); None outside a sandbox."""
    if record is None or not record.sandboxed:
        return None
    try:
        return max(0.0, float(os.environ.get("WORKBENCH_SANDBOX_STOP_WAIT_S", SANDBOXED_STOP_WAIT_SECONDS)))
    except ValueError:
        return SANDBOXED_STOP_WAIT_SECONDS


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
        raise LauncherError(
            field="--run-dir",
            rule=f"{path} is not directly inside the runs folder {root}",
            fix="name a folder inside --runs-dir, or leave --runs-dir out (the run folder's parent "
            "is then its runs folder)",
        )
    if path.exists() and (not path.is_dir() or any(path.iterdir())):
        raise LauncherError(
            field="--run-dir",
            rule=f"{path} already exists and is not an empty folder",
            fix="name a new folder, or resume a run there with `python -m workbench resume RUN`",
        )
    path.mkdir(parents=True, exist_ok=True)
    return path


def _spawn(config: RunConfig, run_dir: Path, resume: bool, sandboxed: bool = False) -> int:
    """Start the run's first process (its sandbox's starter, or the trainer); returns its pid."""
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
        server = vllm_server.start_for_run(config, run_dir)
        runfolder.update_status(run_dir, pid=None, pgid=None, vllm=server)
        launch_records.update_record(run_dir, processes=(launch_records.ProcessRecord.of_pid(server["pid"]),))
    process = processes.spawn(command, run_dir / runfolder.LOG_FILE, env, cwd=run_dir, append=True, reap=True)
    return process.pid


def _refuse_multi_machine(config: RunConfig) -> None:
    if cluster.is_multi_machine(config):
        raise LauncherError(
            field="num_machines",
            rule=f"a run over {cluster.machines_in_job(config)} machines starts on those machines, not from here",
            fix="export a cluster bundle (`python -m workbench export CONFIG --out DIR`, or Export "
            "in the Setup tab) and start its scripts there",
        )


def check_launch(config: RunConfig, import_reward_file: bool = True, read_data: bool = True) -> None:
    """Refuse (ConfigError, LauncherError, VLLMServerError) a config that cannot start here, before anything runs.

    `import_reward_file` False: the reward file is checked without running it here (see validate_config);
    it runs only in the training process. `read_data` False: its rows are read only inside its sandbox.
    """
    check_config(config, import_reward_file, read_data)
    _refuse_multi_machine(config)
    vllm_server.preflight(config)


def refuse_in_sandbox(config: RunConfig) -> None:
    """ConfigError for what a sandboxed run (a shared dashboard's) may not ask: a reward call with no time limit."""
    problems = config_checks.shared_problems(config)
    if problems:
        raise ConfigError(problems)


def start_process(config: RunConfig, run_dir: Path, resume: bool, **fields) -> None:
    """Write the status `starting` (with `fields`), start the run's processes, record them.

    Whether it starts sandboxed is the launcher's record's word (a launch from
    a dashboard with accounts, `train --sandbox`), on resume and from the queue
    too; config.json is written again from `config`, which the caller checked.
    """
    sandboxed = bool((launch_records.read_record(run_dir) or launch_records.LaunchRecord()).sandboxed)
    runfolder.write_json_atomic(run_dir / runfolder.CONFIG_FILE, config.to_dict())
    runfolder.update_status(
        run_dir,
        state="starting",
        pid=None,
        pgid=None,
        sandbox_pid=None,
        command=build_command(config, run_dir, resume=resume),
        vllm=vllm_server.server_section(config),
        **fields,
    )
    launch_records.update_record(run_dir, processes=(), resume=False, queued_at=None)
    pid = _spawn(config, run_dir, resume=resume, sandboxed=sandboxed)
    launch_records.record_started(run_dir, pid)  # the trainer first: readers take the first as the run's
    runfolder.update_status(run_dir, pid=pid, pgid=pid)
    if warden.watching():  # the admin's run-time cap or disk totals: the dispatcher keeps them while it runs
        ensure_dispatcher(run_dir.parent)


def _turn(config: RunConfig, run_id: str, owner: str | None, holding, queued) -> queue.Place:
    """Where a launch of `config` stands now: first of all, it may not push `owner` over the per-user limit."""
    queue.check_user_limit(owner, [*holding, *queued], queue.max_runs_per_user(os.environ))
    entry = queue.Entry(run_id, queue.devices_of(config.to_dict(), machine_gpus()), owner, queued_at=time.time())
    return queue.place_of_new(entry, queued, holding)


def start(
    config: RunConfig,
    runs_dir: str | os.PathLike | None = None,
    smoke: bool = False,
    owner: str | None = None,
    import_reward_file: bool = True,
    sandboxed: sandbox_policy.Policy | None = None,
    into: str | os.PathLike | None = None,
) -> str:
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
        refuse_in_sandbox(config)
        sandbox_bwrap.check_available()
    root = runfolder.runs_root(runs_dir)
    with run_locks.queue_lock(root):
        holding, queued = queue_state(root)
        place = _turn(config, "", owner, holding, queued)
        user_disk.check_room(root, owner, "this launch")  # DiskTotalError past WORKBENCH_USER_DISK_GB
        run_dir = (
            _new_run_dir(config, root, prefix="smoke-" if smoke else "") if into is None else _claim_run_dir(into, root)
        )
        config.save(run_dir / runfolder.CONFIG_FILE)
        launch_records.write_record(
            run_dir,
            launch_records.LaunchRecord(
                owner=owner,
                sandboxed=sandboxed is not None,
                config=config.to_dict(),
                policy=None if sandboxed is None else sandboxed.to_status(),
            ),
        )
        fields = {
            "step": 0,
            "smoke_test": smoke,
            "owner": owner,
            "sandbox": None if sandboxed is None else sandboxed.to_status(),
        }
        if place.may_start:
            start_process(config, run_dir, resume=False, started_at=time.time(), **fields)
        else:
            launch_records.update_record(run_dir, queued_at=place.entry.queued_at)
            runfolder.update_status(
                run_dir,
                state=runfolder.QUEUED,
                queued_at=place.entry.queued_at,
                command=build_command(config, run_dir),
                **fields,
            )
        if queued or not place.may_start:
            ensure_dispatcher(root)
    return run_dir.name


@contextmanager
def helper_job(runs_dir: str | os.PathLike | None, owner: str | None, kind: str) -> Iterator[Callable[[int], None]]:
    """Room for a helper job `owner` starts (a signal check, the Compare tab's sampling, an export), counted
    with their runs against the per-user cap: UserLimitError when those fill it. The caller starts the job
    inside the block and records its process with the function given; it counts until that process ends
    (runstore/launch_records.py, outside every run folder). Held under the queue lock: two clicks cannot
    both take the last place. DiskTotalError when the owner's disk total is full (jobs/user_disk.py)."""
    root = runfolder.runs_root(runs_dir).resolve()
    with run_locks.queue_lock(root):
        holding, queued = queue_state(root)
        jobs = [queue.Entry(job_id, frozenset(), owner, "running") for job_id in launch_records.live_jobs(root, owner)]
        queue.check_user_limit(owner, [*holding, *queued, *jobs], queue.max_runs_per_user(os.environ))
        user_disk.check_room(root, owner, f"this {kind} job")  # DiskTotalError past WORKBENCH_USER_DISK_GB
        yield lambda pid: launch_records.record_job(root, f"{kind}-{pid}", owner, pid)


def smoke_test(
    config: RunConfig,
    runs_dir: str | os.PathLike | None = None,
    owner: str | None = None,
    import_reward_file: bool = True,
    sandboxed: sandbox_policy.Policy | None = None,
) -> str:
    """Start one real optimizer step with the same settings, in its own run folder marked as a smoke test.

    It catches what only a real step shows (memory, chat template, reward
    errors) in seconds; `wait(run_id)` gives its outcome.
    """
    one_step = config.with_changes(
        max_steps=1, save_steps=max(config.save_steps, 1), run_name=config.run_name or f"{config.task}"
    )
    return start(
        one_step, runs_dir, smoke=True, owner=owner, import_reward_file=import_reward_file, sandboxed=sandboxed
    )


def graceful_wait_seconds(timeout: float, step_time: float | None) -> float:
    """How long a stop waits for the trainer to end its step and save: `timeout`, or longer for slow steps.

    The trainer stops only at the end of a step, so a step slower than the
    timeout would otherwise be killed halfway, losing the step and the adapter.
    """
    if not step_time or step_time <= 0:
        return timeout
    return max(timeout, 2.0 * step_time + 10.0)


def _wait_until_final(run_dir: Path, seconds: float, poll: float = 0.25, save_limit: float = SAVE_WAIT_SECONDS) -> dict:
    """The run's status once it is final, or after `seconds`; a save under way is waited for up to `save_limit`."""
    deadline = time.monotonic() + seconds
    save_deadline = None
    while True:
        current = status_of_dir(run_dir)
        if current["state"] in runfolder.FINAL_STATES:
            return current
        now = time.monotonic()
        if current["state"] == "saving":
            save_deadline = save_deadline or now + save_limit
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
    record = launch_records.read_record(run_dir)
    if runs_elsewhere(current) and current.get("last_state", current["state"]) not in runfolder.FINAL_STATES:
        return _stop_remote(run_dir, current, timeout)
    if record is None:
        return _stop_unrecorded(run_dir, current, timeout)
    if current["state"] in runfolder.FINAL_STATES and not record.live_processes():
        _stop_own_server(run_dir, record)  # its guard ends it anyway; this makes sure before returning
        return current
    cap = stop_wait_cap(record)
    save_limit = SAVE_WAIT_SECONDS if cap is None else cap
    if current["state"] in ("training", "saving"):
        run_locks.request_stop(run_dir)
        wait = graceful_wait_seconds(timeout, runfolder.last_metric(run_dir, "step_time"))
        current = _wait_until_final(
            run_dir, wait if cap is None else min(wait, max(timeout, cap)), save_limit=save_limit
        )
        if current["state"] in runfolder.FINAL_STATES and not _still_running_after(record, 5.0):
            _stop_own_server(run_dir, record)
            return current
    # not training yet (nothing to save) or not answering: end every process the launcher started for it
    # (SIGTERM first, which the trainer takes as a stop request too; no SIGKILL while it saves)
    for started in record.live_processes():
        processes.end_tree(
            started.pid, grace=5.0, hold=lambda: status_of_dir(run_dir)["state"] == "saving", hold_limit=save_limit
        )
    run_locks.clear_stop_request(run_dir)
    if runfolder.read_run_status(run_dir).state not in runfolder.FINAL_STATES:
        runfolder.update_status(
            run_dir, state="stopped", finished_at=time.time(), note="killed: it did not stop on request"
        )
    _stop_own_server(run_dir, record)
    return status_of_dir(run_dir)


def _still_running_after(record: launch_records.LaunchRecord, seconds: float) -> bool:
    """Whether a recorded process still runs after up to `seconds` of waiting for them all to exit."""
    deadline = time.monotonic() + seconds
    while record.live_processes():
        if time.monotonic() > deadline:
            return True
        time.sleep(0.1)
    return False


def _stop_own_server(run_dir: Path, record: launch_records.LaunchRecord) -> None:
    """End a run's vLLM server started out here; a sandboxed run's ends with its sandbox, and its status.json,
    which names the server's pid, is the run's to write: nothing read there is signalled."""
    if not record.sandboxed:
        vllm_server.stop_for_run(run_dir)


def _stop_unrecorded(run_dir: Path, current: dict, timeout: float) -> dict:
    """A run the launcher has no record of (started in a terminal, or before records were kept): asked to stop
    through its folder; its processes are not the launcher's to kill."""
    if current["state"] in runfolder.FINAL_STATES:
        return current
    run_locks.request_stop(run_dir)
    current = _wait_until_final(run_dir, graceful_wait_seconds(timeout, runfolder.last_metric(run_dir, "step_time")))
    if current["state"] not in runfolder.FINAL_STATES:
        current["note"] = (
            "stop requested: it stops at the end of its step; the launcher did not start it, so it "
            "never kills its processes (stop it where it was started)"
        )
    return current


def _take_out_of_queue(run_dir: Path) -> bool:
    """Stop a queued run before it starts (state `stopped`, nothing else touched); False if it started meanwhile."""
    with run_locks.queue_lock(run_dir.parent):
        if runfolder.read_run_status(run_dir).state != runfolder.QUEUED:
            return False
        runfolder.update_status(
            run_dir,
            state="stopped",
            finished_at=time.time(),
            queued_resume=None,
            note="taken out of the queue before it started",
        )
        launch_records.update_record(run_dir, queued_at=None)
        return True


def _stop_remote(run_dir: Path, current: dict, timeout: float) -> dict:
    """Stop a run on another machine through its folder alone: its pids mean nothing here, so nothing is killed.

    The trainer finds stop.request at the end of its step, saves and ends
    `stopped`; a lost run finds it if it comes back.
    """
    run_locks.request_stop(run_dir)
    if current["state"] != runfolder.LOST:
        current = _wait_until_final(
            run_dir, graceful_wait_seconds(timeout, runfolder.last_metric(run_dir, "step_time"))
        )
    if current["state"] not in runfolder.FINAL_STATES or current["state"] == runfolder.LOST:
        current["note"] = (
            f"stop requested: the run on {current['host']} stops at the end of its step; processes "
            "on another machine are never killed from here"
        )
    return current


def resume(
    run_id: str,
    runs_dir: str | os.PathLike | None = None,
    owner: str | None = None,
    import_reward_file: bool = True,
    sandboxed: sandbox_policy.Policy | None = None,
) -> str:
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
    checkpoint = checkpoint_integrity.last_checkpoint(run_dir)
    if checkpoint is None:
        raise LauncherError(
            f"run {run_dir.name} has no checkpoint to resume from (it saves every save_steps steps); "
            f"start a new run instead"
        )
    record = launch_records.read_record(run_dir)
    config = recorded_config(run_dir)
    owner = (record.owner if record is not None else RunStatus.of(current).owner) or owner
    kept = resume_policy(record, RunStatus.of(current), sandboxed)
    # a sandboxed run's data may lie in folders its code wrote (its own run folder): read only inside its sandbox
    check_launch(config, import_reward_file, read_data=kept is None)
    if kept is not None:
        refuse_in_sandbox(config)
        sandbox_bwrap.check_available()
    with run_locks.queue_lock(run_dir.parent):
        holding, queued = queue_state(run_dir.parent)
        ended = status_of_dir(run_dir)
        state = ended["state"]
        if state not in runfolder.FINAL_STATES:
            raise LauncherError(f"run {run_dir.name} was resumed meanwhile and is {state}; stop it before resuming")
        place = _turn(config, run_dir.name, owner, holding, queued)
        user_disk.check_room(run_dir.parent, owner, "this resume")
        fields = {
            "error": None,
            "finished_at": None,
            "summary": None,
            "note": None,
            "owner": owner,
            "sandbox": None if kept is None else kept.to_status(),
            # the time it ran so far: its elapsed goes on from there, the time it was stopped left out
            "ran_before_resume": running_seconds(ended, time.time(), live=False),
        }
        launch_records.update_record(
            run_dir,
            owner=owner,
            sandboxed=kept is not None,
            config=config.to_dict(),
            policy=None if kept is None else kept.to_status(),
            resume=not place.may_start,
            queued_at=None if place.may_start else place.entry.queued_at,
        )
        if place.may_start:
            start_process(config, run_dir, resume=True, resumed_at=time.time(), **fields)
        else:
            runfolder.update_status(
                run_dir, state=runfolder.QUEUED, queued_at=place.entry.queued_at, queued_resume=True, **fields
            )
        if queued or not place.may_start:
            ensure_dispatcher(run_dir.parent)
    return run_dir.name


def recorded_config(run_dir: Path) -> RunConfig:
    """The config a resume or a queued start runs: the one the launcher checked and recorded, not config.json
    (which the run's code may have rewritten); config.json only for a run the launcher has no record of."""
    record = launch_records.read_record(run_dir)
    if record is not None and record.config:
        return RunConfig.from_dict(record.config)
    return RunConfig.load(run_dir / runfolder.CONFIG_FILE)


def resume_policy(
    record: launch_records.LaunchRecord | None, written: RunStatus, sandboxed: sandbox_policy.Policy | None
) -> sandbox_policy.Policy | None:
    """The sandbox a resume starts in: the one the caller computed now for the run's owner; else the launcher's
    record's; never more than that. A run with no record but a sandbox in its status.json (from before records
    were kept) resumes in a sandbox that adds nothing: what its status.json lists is not taken on trust."""
    if sandboxed is not None:
        return sandboxed
    if record is not None:
        return (
            (sandbox_policy.Policy.from_status(record.policy) or sandbox_policy.Policy()) if record.sandboxed else None
        )
    return sandbox_policy.Policy() if written.sandbox is not None else None


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
        raise LauncherError(
            field="run",
            rule=f"{real} is not a run folder inside the runs folder {root}",
            fix="only runs listed there can be deleted here; remove other folders yourself",
        )
    record = launch_records.read_record(real)
    if status_of_dir(real)["state"] not in runfolder.FINAL_STATES or (record and record.live_processes()):
        raise LauncherError(f"run {run_dir.name} is still running (its processes have not ended); stop it first")
    shutil.rmtree(real)
    launch_records.remove_record(real)
