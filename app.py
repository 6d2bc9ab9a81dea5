"""Start the GRPO Workbench dashboard: `python app.py` serves http://127.0.0.1:7860.

Binds 127.0.0.1 unless told otherwise (--host or WORKBENCH_HOST). The app
starts processes and runs reward code, so any other address requires sign-in:
accounts from --users FILE or WORKBENCH_USERS_FILE (`python -m workbench users
add NAME --file FILE` writes them); without accounts it refuses to start. With
accounts it asks for sign-in on loopback too, and each user sees and controls
their own runs (an admin every run) and names paths only in their uploads,
their runs and the folders --models-dir / --data-dir share; every run runs in
a bubblewrap sandbox (--no-sandbox to serve without, with a warning on the
page); run folders are private to the serving account (umask 077). Gradio's
upload cache is cleaned of day-old files at start and hourly. --ssl-certfile
and --ssl-keyfile serve HTTPS; a sign-in lasts --session-hours (default 12)
(docs/sharing.md: "Sharing with a class").
"""

from __future__ import annotations

import argparse
import os


def build_parser() -> argparse.ArgumentParser:
    """The dashboard's options (the documentation's CLI reference shows them too)."""
    parser = argparse.ArgumentParser(prog="python app.py", description="GRPO Workbench dashboard")
    parser.add_argument(
        "--host",
        default=os.environ.get("WORKBENCH_HOST", "127.0.0.1"),
        help="address to bind (default 127.0.0.1: this machine only)",
    )
    parser.add_argument("--port", type=int, default=int(os.environ.get("WORKBENCH_PORT", "7860")))
    parser.add_argument("--runs-dir", default=None, help="folder of run folders (default: ./runs)")
    parser.add_argument(
        "--users", default=None, help="users file for sign-in (default $WORKBENCH_USERS_FILE); required off loopback"
    )
    parser.add_argument(
        "--no-sandbox",
        action="store_true",
        dest="no_sandbox",
        help="with accounts, start runs without their bubblewrap sandbox (the page warns everyone)",
    )
    parser.add_argument(
        "--ssl-certfile",
        default=os.environ.get("WORKBENCH_SSL_CERTFILE"),
        help="PEM certificate: serve HTTPS (with --ssl-keyfile; docs/sharing.md: serving over HTTPS)",
    )
    parser.add_argument(
        "--ssl-keyfile", default=os.environ.get("WORKBENCH_SSL_KEYFILE"), help="PEM private key of --ssl-certfile"
    )
    parser.add_argument(
        "--session-hours",
        default=os.environ.get("WORKBENCH_SESSION_HOURS"),
        help="hours a sign-in lasts before the page asks again (default 12)",
    )
    parser.add_argument(
        "--models-dir",
        default=None,
        help="with accounts: a folder of models every user may train on (default $WORKBENCH_MODELS_DIR)",
    )
    parser.add_argument(
        "--data-dir",
        default=None,
        help="with accounts: a folder of datasets every user may use (default $WORKBENCH_DATA_DIR)",
    )
    return parser


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    return build_parser().parse_args(argv)


def sandbox_policy(args: argparse.Namespace, known: dict):
    """The sandbox runs start in: with accounts, always (SystemExit saying what to install when bwrap cannot make
    one), unless --no-sandbox; None without accounts (one user on loopback, as before)."""
    from workbench.access.users import USERS_FILE_ENV
    from workbench.jobs import sandbox

    if not known or args.no_sandbox:
        if known:
            print("warning: --no-sandbox: reward files run with this server's rights", flush=True)
        return None
    try:
        sandbox.check_available()
    except sandbox.SandboxError as exc:
        raise SystemExit(
            f"error: {exc}\n(or start with --no-sandbox to serve without it; every page then says so)"
        ) from None
    users_file = args.users or os.environ.get(USERS_FILE_ENV)
    return sandbox.Policy(hidden_files=(os.path.abspath(users_file),) if users_file else ())


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)

    # No usage reporting or update check: the machines this runs on are often offline.
    os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")
    from workbench.access import limits, paths, run_memory
    from workbench.access import users as accounts
    from workbench.access.sessions import session_hours
    from workbench.access.sign_in_limits import limits_from_env
    from workbench.access.tls import check_tls
    from workbench.errors import WorkbenchError

    try:
        known = accounts.load_users(args.users)
        accounts.check_serving(args.host, known)
        check_tls(args.ssl_certfile, args.ssl_keyfile)
        hours = session_hours(args.session_hours)
        sign_in_limits = limits_from_env(os.environ)
        shared = paths.shared_folders(args.models_dir, args.data_dir)
        limits.max_actions()
        run_memory.run_share()  # WORKBENCH_MAX_RUN_MEMORY_GB, refused now rather than at every launch
    except WorkbenchError as exc:
        raise SystemExit(f"error: {exc}") from None
    if known:
        # Run folders, uploads and everything the runs write are this account's alone (0700 / 0600):
        # processes started from here (trainers, servers, the queue's dispatcher) inherit the umask.
        os.umask(0o077)

    from workbench import startup
    from workbench.access.uploads import MAX_UPLOAD_BYTES
    from workbench.jobs import helper_folders, run_list
    from workbench.runstore import runfolder
    from workbench.ui import cleanup, run_reports
    from workbench.ui.app import build_app, launch_options
    from workbench.ui.server import serve

    policy = sandbox_policy(args, known)
    run_list.keep_queue_moving(args.runs_dir)  # runs queued before a reboot start as their devices free up
    for folder in helper_folders.clean(runfolder.runs_root(args.runs_dir)):  # left by jobs killed mid-way
        print(f"removed the helper folder {folder}, whose job no longer runs", flush=True)
    app = build_app(args.runs_dir, users=known, sandbox=policy, shared_dirs=shared)
    startup.resume_collection()  # Gradio and the page are built (workbench/startup.py)
    # Gradio's upload cache keeps what a page used within the hour; the reports offered for download, a day
    cleanup.start_cleaning(
        lambda: [cleanup.upload_cache_folder()],
        every=cleanup.CACHE_EVERY_SECONDS,
        max_age=cleanup.CACHE_MAX_AGE_SECONDS,
    )
    cleanup.start_cleaning(lambda: [run_reports.reports_root()])
    sign_in = None
    if known:

        def sign_in(name: str, password: str) -> bool:
            return accounts.authenticate(known, name, password) is not None

    serve(
        app,
        args.host,
        args.port,
        show_error=True,
        auth=sign_in,
        max_file_size=MAX_UPLOAD_BYTES,
        auth_message="GRPO Workbench: sign in with your account." if known else None,
        ssl_certfile=args.ssl_certfile,
        ssl_keyfile=args.ssl_keyfile,
        session_hours=hours,
        sign_in_limits=sign_in_limits,
        **launch_options(app),
    )


if __name__ == "__main__":
    from workbench import startup

    startup.pause_collection()  # while Gradio and the app's modules import (workbench/startup.py)
    main()
