"""Start the GRPO Workbench dashboard: `python app.py` serves http://127.0.0.1:7860."""

from __future__ import annotations

import argparse
import os


def main() -> None:
    parser = argparse.ArgumentParser(description="GRPO Workbench dashboard")
    parser.add_argument("--host", default=os.environ.get("WORKBENCH_HOST", "127.0.0.1"))
    parser.add_argument("--port", type=int, default=int(os.environ.get("WORKBENCH_PORT", "7860")))
    parser.add_argument("--runs-dir", default=None, help="folder of run folders (default: ./runs)")
    args = parser.parse_args()

    from workbench.ui.app import build_app

    build_app(args.runs_dir).launch(server_name=args.host, server_port=args.port)


if __name__ == "__main__":
    main()
