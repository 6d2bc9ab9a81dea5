"""Start the GRPO Workbench dashboard: `python app.py` serves http://127.0.0.1:7860.

Binds 127.0.0.1 unless told otherwise (--host or WORKBENCH_HOST): the app
starts processes and reads files, so it is not for the open network.
"""

from __future__ import annotations

import argparse
import os


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="GRPO Workbench dashboard")
    parser.add_argument("--host", default=os.environ.get("WORKBENCH_HOST", "127.0.0.1"),
                        help="address to bind (default 127.0.0.1: this machine only)")
    parser.add_argument("--port", type=int, default=int(os.environ.get("WORKBENCH_PORT", "7860")))
    parser.add_argument("--runs-dir", default=None, help="folder of run folders (default: ./runs)")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)

    # No usage reporting or update check: the machines this runs on are often offline.
    os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")
    from workbench.ui.app import build_app, launch_options
    from workbench.ui.server import serve

    app = build_app(args.runs_dir)
    serve(app, args.host, args.port, show_error=True, **launch_options(app))


if __name__ == "__main__":
    main()
