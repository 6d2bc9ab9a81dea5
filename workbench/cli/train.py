"""`python -m workbench train | runs | stop | resume`: training runs from the command line.

    python -m workbench train                      # the demo task on the bundled model, in the foreground
    python -m workbench train --model tiny --max-steps 3 --set beta=0.0
    python -m workbench train --config my.json --background   # prints the run id and folder (and its queue place)
    python -m workbench train --recipe dapo        # a published variant (spec/recipes.py); prints what it changed
    python -m workbench train --sandbox --set reward_file=theirs.py   # in a bubblewrap sandbox (jobs/sandbox.py)
    python -m workbench runs                       # a table of runs
    python -m workbench stop RUN                   # graceful stop, kill after a timeout
    python -m workbench resume RUN                 # continue from the last checkpoint

Bad input exits with status 2 and a one-line message; a failed run exits 1.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

from workbench import startup
from workbench.cli import ArgumentError
from workbench.errors import WorkbenchError
from workbench.spec.run_status import RunStatus

STOP_SERVER_GRACE_S = 40.0  # a sandboxed run's own vLLM server: how long its guard may take to end it


def add_parser(subparsers) -> None:
    train = subparsers.add_parser("train", help="train a LoRA adapter with GRPO (foreground or --background)")
    train.add_argument("--config", help="a config.json (RunConfig fields); other options change it")
    train.add_argument("--model", help="smollm2-135m-instruct (default), tiny, a model folder or a hub id")
    train.add_argument(
        "--task", help="a built-in task: demo (default), arithmetic, keywords, gsm8k, reward_hacking (a lesson)"
    )
    train.add_argument("--max-steps", type=int, dest="max_steps", help="optimizer steps to train")
    train.add_argument(
        "--recipe",
        help="a published GRPO variant: grpo, dapo, dr_grpo, gspo (or none); applied "
        "before --set, and the fields it changed are printed",
    )
    train.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="FIELD=VALUE",
        help="any RunConfig field, e.g. --set beta=0.0 --set num_generations=4 (repeatable)",
    )
    train.add_argument(
        "--run-dir",
        dest="run_dir",
        help="write the run here instead of a new folder under runs/ "
        "(with --background: a new or empty folder, whose parent is then the runs folder)",
    )
    train.add_argument(
        "--runs-dir", dest="runs_dir", help="folder holding runs (default $WORKBENCH_RUNS_DIR or ./runs)"
    )
    train.add_argument("--background", action="store_true", help="start in the background; print the run id")
    train.add_argument("--resume", action="store_true", help="continue --run-dir from its last checkpoint")
    train.add_argument(
        "--sandbox",
        action="store_true",
        help="train inside a bubblewrap sandbox: no network, only its run folder writable, nothing "
        "else of the runs folder or the home folders visible (for code you did not write)",
    )
    train.set_defaults(run=run_train)

    runs = subparsers.add_parser("runs", help="list training runs")
    runs.add_argument("--runs-dir", dest="runs_dir")
    runs.add_argument(
        "--helpers",
        action="store_true",
        help="list the helper jobs' folders instead (signal checks): whose, how big, and whether their job runs",
    )
    runs.set_defaults(run=run_runs)

    stop = subparsers.add_parser("stop", help="stop a run (saves its adapter)")
    stop.add_argument("run_id", metavar="RUN")
    stop.add_argument("--runs-dir", dest="runs_dir")
    stop.add_argument(
        "--timeout",
        type=float,
        default=60.0,
        help="seconds to wait before killing it (default 60; longer for slow steps, never during a save)",
    )
    stop.set_defaults(run=run_stop)

    resume = subparsers.add_parser("resume", help="continue a run from its last checkpoint, in the background")
    resume.add_argument("run_id", metavar="RUN")
    resume.add_argument("--runs-dir", dest="runs_dir")
    resume.set_defaults(run=run_resume)


def run(args) -> int:
    return args.run(args)


def config_from_args(args):
    """The RunConfig the options describe; ArgumentError (exit 2) for anything wrong."""
    from workbench.spec.config import ConfigError, RunConfig, parse_assignment

    try:
        # A saved config is taken as it is; otherwise the task's own settings (as the Setup tab applies them).
        config = RunConfig.load(args.config) if args.config else RunConfig.for_task(args.task or RunConfig().task)
        changes = {
            name: getattr(args, name) for name in ("model", "task", "max_steps") if getattr(args, name) is not None
        }
        config = config.with_changes(**changes) if changes else config
        # the recipe first (its steps_per_generation follows the batch), so --set can still change any field after it
        config = _with_recipe(config, getattr(args, "recipe", None))
        changes = dict(parse_assignment(text) for text in args.set)
        return config.with_changes(**changes) if changes else config
    except ConfigError as exc:
        raise ArgumentError(str(exc).replace("\n", "; ")) from None


def _with_recipe(config, name: str | None):
    """`config` with recipe `name` applied, printing the fields it changed (stderr: stdout stays the run's id)."""
    if name is None:
        return config
    from workbench.spec import recipes

    problem = recipes.recipe_problem(name)
    if problem:
        raise ArgumentError(f"--recipe: {problem[1]}; {problem[2]}")
    new, changed = recipes.apply_recipe(config, name)
    lines = recipes.describe_changes(config, new, changed)
    if not os.environ.get("WORKBENCH_RECIPE_SHOWN"):  # a foreground run starts again under its allocator: once
        print(
            f"recipe {name} changed {len(changed)} field(s)" + "".join(f"\n  {line}" for line in lines),
            file=sys.stderr,
            flush=True,
        )
        os.environ["WORKBENCH_RECIPE_SHOWN"] = "1"
    return new


def _checked(config) -> None:
    from workbench.spec.config import ConfigError
    from workbench.spec.config_checks import check_config

    try:
        check_config(config)
    except ConfigError as exc:
        raise ArgumentError(str(exc).replace("\n", "; ")) from None


def run_train(args) -> int:
    from workbench.jobs import gpu_queue, launcher, run_state
    from workbench.runstore import checkpoint_integrity, runfolder

    if args.background or args.sandbox:  # no model loads in this process (workbench/startup.py)
        startup.resume_collection()
    config = config_from_args(args)
    _checked(config)
    if not args.sandbox and _recorded_sandboxed(args.run_dir):
        # a run the launcher started in a sandbox runs its code nowhere else, from any entry point
        print(f"{args.run_dir} was started in a sandbox: it trains in one again (--sandbox)", file=sys.stderr)
        args.sandbox = True
    if args.sandbox:
        _check_sandbox()
    if args.background:
        try:
            # --run-dir: that folder (new or empty); its parent is the runs folder the queue and `runs` read
            runs_dir = args.runs_dir or (Path(args.run_dir).resolve().parent if args.run_dir else None)
            run_id = launcher.start(config, runs_dir, into=args.run_dir, sandboxed=_policy() if args.sandbox else None)
        except WorkbenchError as exc:  # a vLLM server address or port, the per-user limit, --run-dir
            raise ArgumentError(str(exc).replace("\n", "; ")) from None
        run_dir = run_state.run_dir_of(run_id, runs_dir)
        print(f"{run_id}\t{run_dir}")
        place = gpu_queue.queue_place(run_id, runs_dir)
        if place:
            print(
                f"queued at position {place['queue_position']}, waiting for {place['waits_for']}; it starts by "
                f"itself when that is free (`python -m workbench stop {run_id}` takes it out of the queue)"
            )
        return 0
    if args.sandbox:
        return _train_sandboxed(args, config)
    if args.from_command_line:
        _start_under_the_run_allocator(config)
    from workbench.trainer.training import end_process, run_training

    if args.run_dir:
        run_dir = Path(args.run_dir)
        if os.environ.get("RANK", "0") == "0":  # the other ranks write nothing, and their machine may be another
            _refuse_a_live_run(run_dir)
    else:
        run_dir = runfolder.runs_root(args.runs_dir) / runfolder.new_run_id(config.run_name or config.task)
        print(f"Run folder: {run_dir}", flush=True)
    if args.resume and checkpoint_integrity.last_checkpoint(run_dir) is None:
        raise ArgumentError(f"--resume: {run_dir} has no checkpoint-* folder; start a new run without --resume")
    if os.environ.get("RANK", "0") == "0":
        _start_vllm_server(config, run_dir)
    code = run_training(config, run_dir, resume=args.resume, show_progress=sys.stdout.isatty())
    if os.environ.get("RANK", "0") != "0":  # one summary per run, from the main process
        return end_process(code)
    if runfolder.inside_sandbox():  # the sandbox ends whatever is left in it once this process ends:
        _stop_vllm_server(run_dir)  # its vLLM server gets its graceful end first
    final = runfolder.read_run_status(run_dir)
    if final.state == "failed":
        error = final.error or {}
        print(f"Run failed: {error.get('type')}: {error.get('message')}\n{error.get('hint', '')}", file=sys.stderr)
    else:
        print(f"Run {final.state} at step {final.step}; adapter in {run_dir / runfolder.ADAPTER_DIR}")
    return end_process(code)


def _policy():
    from workbench.jobs import sandbox_policy

    return sandbox_policy.Policy()


def _check_sandbox() -> None:
    from workbench.jobs import sandbox_bwrap

    try:
        sandbox_bwrap.check_available()
    except WorkbenchError as exc:
        raise ArgumentError(str(exc)) from None


def _train_sandboxed(args, config) -> int:
    """The foreground run, inside its sandbox: this process waits for it (Ctrl-C reaches it) and prints the end."""
    from workbench.jobs import commands, sandbox
    from workbench.runstore import checkpoint_integrity, runfolder

    config = config.with_absolute_paths()
    run_dir = (
        Path(args.run_dir).resolve()
        if args.run_dir
        else runfolder.runs_root(args.runs_dir).resolve() / runfolder.new_run_id(config.run_name or config.task)
    )
    if args.run_dir:
        _refuse_a_live_run(run_dir)
    if args.resume and checkpoint_integrity.last_checkpoint(run_dir) is None:
        raise ArgumentError(f"--resume: {run_dir} has no checkpoint-* folder; start a new run without --resume")
    run_dir.mkdir(parents=True, exist_ok=True)
    config.save(run_dir / runfolder.CONFIG_FILE)
    print(f"Run folder: {run_dir} (sandboxed)", flush=True)
    runfolder.update_status(run_dir, state="starting", sandbox=_policy().to_status())
    _record_foreground_run(run_dir, config)
    command = [
        sys.executable,
        "-m",
        "workbench",
        "train",
        "--run-dir",
        str(run_dir),
        "--config",
        str(run_dir / runfolder.CONFIG_FILE),
        *(["--resume"] if args.resume else []),
    ]
    try:  # the run inside prints how it ended
        return sandbox.run_foreground(run_dir, command, commands.launch_env(config))
    except WorkbenchError as exc:
        raise ArgumentError(str(exc)) from None


def _recorded_sandboxed(run_dir) -> bool:
    """Whether the launcher's record of the run in `run_dir` says it runs sandboxed (never true inside one)."""
    from workbench.runstore import launch_records, runfolder

    if not run_dir or runfolder.inside_sandbox():
        return False
    record = launch_records.read_record(Path(run_dir).resolve())
    return record is not None and record.sandboxed


def _record_foreground_run(run_dir: Path, config) -> None:
    """The launcher's record of a sandboxed run in this terminal: sandboxed, with this process as its own, so a
    later resume from any entry point starts it sandboxed again and a stop reaches this process only."""
    from workbench.runstore import launch_records

    kept = launch_records.read_record(run_dir)
    launch_records.update_record(
        run_dir,
        sandboxed=True,
        policy=(kept.policy if kept else None) or _policy().to_status(),
        config=config.to_dict(),
        resume=False,
        processes=(launch_records.ProcessRecord.of_pid(os.getpid()),),
    )


def _start_vllm_server(config, run_dir: Path) -> None:
    """A foreground run that generates on a vLLM server of its own starts it here (the launcher's runs have one)."""
    from workbench.jobs import vllm_server

    try:
        vllm_server.ensure_for_run(config, run_dir)
    except WorkbenchError as exc:
        raise ArgumentError(str(exc)) from None


def _stop_vllm_server(run_dir: Path) -> None:
    from workbench.jobs import vllm_server

    # the guard gives its server 10 s to end, then logs that it stopped: wait for both, even on a busy machine
    vllm_server.stop_for_run(run_dir, grace=STOP_SERVER_GRACE_S)


def _refuse_a_live_run(run_dir: Path) -> None:
    """Exit 2 when another process still trains into `run_dir` (two trainers would mix their files)."""
    from workbench.jobs import run_state
    from workbench.runstore import runfolder

    pid = run_state.other_live_process(run_dir)
    if pid is not None:
        state = runfolder.read_run_status(run_dir).state
        raise ArgumentError(
            f"--run-dir: the run in {run_dir} is still {state} (process {pid} is alive); "
            f"stop it first with `python -m workbench stop {run_dir}`, or wait for it to end"
        )


def _start_under_the_run_allocator(config) -> None:
    """Re-execute this command with the launcher's environment (allocator, CPU threads), once.

    The allocator is fixed when a process starts, so a foreground run gets the
    same one as a background run only by starting again; then both step alike.
    """
    from workbench.jobs import allocator, commands

    if allocator.applied() is not None:
        return
    try:
        env = commands.launch_env(config)
    except WorkbenchError as exc:
        raise ArgumentError(str(exc)) from None
    sys.stdout.flush()
    os.execve(sys.executable, [sys.executable, "-m", "workbench", *sys.argv[1:]], env)


def format_runs_table(runs: list[dict]) -> str:
    """Runs (`run_list.list_runs`: each status with the launcher's and the config's fields) as a text table (pure)."""
    from workbench.jobs.run_state import runs_elsewhere

    header = ("RUN", "STATE", "STEP", "MODEL", "TASK", "STARTED")
    rows = [header]
    for entry in runs:
        status = RunStatus.of(entry)
        total, started = status.total_steps, status.started_at
        rows.append(
            (
                entry["run_id"],
                (status.state or "?")
                + (f" #{entry['queue_position']}" if entry.get("queue_position") else "")
                + (" (smoke test)" if status.smoke_test else "")
                + (f" on {status.host}" if runs_elsewhere(status) else ""),
                f"{status.step or 0}/{total}" if total else str(status.step or 0),
                Path(str(entry.get("model") or "")).name,
                entry.get("task") or "",
                time.strftime("%Y-%m-%d %H:%M", time.localtime(started)) if started else "",
            )
        )
    widths = [max(len(str(row[i])) for row in rows) for i in range(len(header))]
    table = "\n".join("  ".join(str(cell).ljust(w) for cell, w in zip(row, widths)).rstrip() for row in rows)
    reasons = [
        f"{entry['run_id']}: {entry['error']['message']}"
        for entry in runs
        if entry.get("state") in ("unreadable", "lost") and entry.get("error")
    ]
    queued = sorted((entry for entry in runs if entry.get("queue_position")), key=lambda e: e["queue_position"])
    reasons += [
        f"{entry['run_id']}: queued #{entry['queue_position']}, waits for {entry['waits_for']}" for entry in queued
    ]
    return "\n".join([table, *reasons])


def run_runs(args) -> int:
    from workbench.jobs import run_list

    if args.helpers:
        return run_helpers(args.runs_dir)
    runs = run_list.list_runs(args.runs_dir)
    if not runs:
        print("No runs yet; start one with `python -m workbench train`.")
        return 0
    print(format_runs_table(runs))
    run_list.keep_queue_moving(args.runs_dir, runs)  # a queue left without its dispatcher (a reboot) moves again
    return 0


def run_helpers(runs_dir) -> int:
    """The helper folders of the runs folder (jobs/helper_folders.py): what the server's start removes is `left`."""
    from workbench.jobs import helper_folders
    from workbench.runstore import runfolder

    entries = helper_folders.listed(runfolder.runs_root(runs_dir))
    if not entries:
        print("No helper folders.")
        return 0
    for entry in entries:
        state = "running" if entry.live else "left (removed at the server's next start)"
        print(f"{entry.folder}  {entry.owner or '(owner unknown)'}  {entry.bytes() / 2**20:.1f} MiB  {state}")
    return 0


def run_stop(args) -> int:
    from workbench.jobs import launcher

    try:
        final = launcher.stop(args.run_id, args.runs_dir, timeout=args.timeout)
    except launcher.LauncherError as exc:
        raise ArgumentError(str(exc)) from None
    status = RunStatus.of(final)
    note = f" ({status.note})" if status.note else ""
    print(f"{final['run_id']}: {status.state} at step {status.step or 0}{note}")
    return 0


def run_resume(args) -> int:
    from workbench.jobs import launcher, run_state
    from workbench.spec.config import ConfigError

    try:
        run_id = launcher.resume(args.run_id, args.runs_dir)
    except (launcher.LauncherError, ConfigError) as exc:
        raise ArgumentError(str(exc).replace("\n", "; ")) from None
    print(f"{run_id}\t{run_state.run_dir_of(run_id, args.runs_dir)}")
    return 0
