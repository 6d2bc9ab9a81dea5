"""The shared server's peak memory for one user action on a hostile file: each under about 1 GiB (issue 52).

    .venv/bin/python benchmarks/bench_server_memory.py [--only CASE] [--cap-gib 6] [--record]

For each case a fresh Python process builds the dashboard with accounts (alice and bob, as `app.py --users`
serves it: `workbench.ui.app.build_app`), takes the event handler the page calls (the Setup tab's live preview,
the Train tab's Launch or its run picker) and calls it as alice would, after one honest call of the same
handler (so the imports are paid). Its peak resident memory is the process's VmHWM, reset (clear_refs) just
before the hostile call: the server's memory at its highest during that one action, what it had before
included. The cases:

- `parquet bomb, preview` / `parquet bomb, launch`: 30 rows of a 40 MiB string, zstd level 19, no dictionary
  (a file of about 40 KB), as dataset_name;
- `1 GiB JSON line, preview`: a JSON-lines file of one 1 GiB line (sparse);
- `40 MiB prompt, preview`: one row whose prompt is 40 MiB; the HTML the preview sends is measured too;
- `template multiplying a string, preview`: a model folder whose chat_template.jinja is
  `{{ 'x' * 1500000000 }}`, named as the model;
- `100 MiB metrics.jsonl, Train tab`: a finished run of alice's with 100 MiB of metric lines, picked.

A child past `--cap-gib` of resident memory is killed and shown as past it. `--record` appends the figures to
benchmarks/results/bench_server_memory.jsonl (results_file.py) with the machine and its load.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))  # the tests' helpers: the Setup form's values, a handler of the app
sys.path.insert(0, str(ROOT / "benchmarks"))

MIB, GIB = 2**20, 2**30
TARGET_GIB = 1.0
CASES = (
    "parquet bomb, preview",
    "parquet bomb, launch",
    "1 GiB JSON line, preview",
    "40 MiB prompt, preview",
    "template multiplying a string, preview",
    "100 MiB metrics.jsonl, Train tab",
)
RUN_ID = "20260101-000001-alice"
MODEL_CONFIG = {
    "model_type": "llama",
    "architectures": ["LlamaForCausalLM"],
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "vocab_size": 1000,
    "max_position_embeddings": 512,
    "tie_word_embeddings": True,
}
METRIC = b'{"step": 1, "loss": 0.0, "reward": 0.0, "k0": 0.0, "k1": 0.0, "k2": 0.0, "k3": 0.0}\n'


# ---------------------------------------------------------------- the hostile files


def plant(root: Path) -> None:
    """The runs folder with alice's uploads (the hostile files, an honest dataset, a model folder) and her run."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from workbench.runstore import launch_records, runfolder
    from workbench.spec.config import RunConfig

    uploads = root / "runs" / "uploads" / "alice"
    uploads.mkdir(parents=True)
    (uploads / "honest.jsonl").write_text('{"prompt": "What is 2 + 2?"}\n')
    value = "x" * (40 * MIB)
    pq.write_table(
        pa.table({"prompt": [value] * 30}),
        uploads / "bomb.parquet",
        compression="zstd",
        compression_level=19,
        use_dictionary=False,
    )
    (uploads / "long_prompt.jsonl").write_text(json.dumps({"prompt": value}) + "\n")
    del value
    with open(uploads / "line.jsonl", "wb") as handle:  # one line of 1 GiB, stored sparse
        handle.write(b'{"prompt": "')
        handle.truncate(GIB)
    model = uploads / "model"
    model.mkdir()
    (model / "config.json").write_text(json.dumps(MODEL_CONFIG))
    (model / "tokenizer_config.json").write_text("{}")
    (model / "chat_template.jinja").write_text("{{ 'x' * 1500000000 }}")
    run_dir = root / "runs" / RUN_ID
    RunConfig(model="tiny").save(run_dir / runfolder.CONFIG_FILE)
    launch_records.write_record(
        run_dir, launch_records.LaunchRecord(owner="alice", sandboxed=True, policy={}, config={})
    )
    runfolder.update_status(run_dir, state="finished", owner="alice", step=1)
    with open(run_dir / runfolder.METRICS_FILE, "wb") as handle:
        chunk = METRIC * (MIB // len(METRIC))
        for _ in range(100):
            handle.write(chunk)


# ---------------------------------------------------------------- one case, in a fresh process


def _status_kib(field: str) -> int:
    with open("/proc/self/status") as handle:
        for line in handle:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return 0


def child(case: str, root: Path) -> dict:
    """Build the app, call the case's handler once honestly, then once with the hostile file; what it cost."""
    import gradio as gr
    from helpers import app_handler, setup_form_values

    from workbench.access import users
    from workbench.ui.app import build_app
    from workbench.ui.train_view import RunWatch

    runs = root / "runs"
    uploads = runs / "uploads" / "alice"
    app = build_app(runs, users={name: users.User(name, "user", "") for name in ("alice", "bob")})
    alice = gr.Request(username="alice")
    honest = str(uploads / "honest.jsonl")
    if case.endswith("Train tab"):
        pick = app_handler(app, "train_tab", "on_pick")
        call = lambda: pick(alice, RUN_ID, RunWatch(), 0.5)  # noqa: E731
        warm = None
    elif case.endswith("launch"):
        launch = app_handler(app, "train_tab", "on_launch")
        call = lambda: launch(alice, RunWatch(), 0.5, *setup_form_values(dataset_name=str(uploads / "bomb.parquet")))  # noqa: E731
        warm = None
    else:
        preview = app_handler(app, "setup_tab", "live_preview")
        hostile = {
            "parquet bomb, preview": dict(dataset_name=str(uploads / "bomb.parquet")),
            "1 GiB JSON line, preview": dict(dataset_name=str(uploads / "line.jsonl")),
            "40 MiB prompt, preview": dict(dataset_name=str(uploads / "long_prompt.jsonl")),
            "template multiplying a string, preview": dict(dataset_name=honest, model=str(uploads / "model")),
        }[case]
        call = lambda: preview(alice, *setup_form_values(**hostile))  # noqa: E731
        warm = lambda: preview(alice, *setup_form_values(dataset_name=honest))  # noqa: E731
    if warm:
        warm()
    before = _status_kib("VmRSS") * 1024
    with open("/proc/self/clear_refs", "w") as handle:
        handle.write("5")  # VmHWM from here on: this action's peak
    started = time.monotonic()
    try:
        out = call()
        outcome = _what_it_said(out)
    except Exception as exc:  # a handler that raises: the page would show "Error"
        outcome = f"raised {type(exc).__name__}: {str(exc)[:200]}"
    seconds = time.monotonic() - started
    return {
        "before_mib": round(before / MIB),
        "peak_mib": round(_status_kib("VmHWM") / 1024),
        "seconds": round(seconds, 2),
        "outcome": outcome,
    }


def _what_it_said(out) -> str:
    """The refusal or note the handler's output carries, and the size of the HTML it sends."""
    import re

    values = out.values() if isinstance(out, dict) else out if isinstance(out, (list, tuple)) else [out]
    texts = [v.get("value") if isinstance(v, dict) else getattr(v, "value", v) for v in values]
    texts = [t for t in texts if isinstance(t, str)]
    sent = sum(len(t) for t in texts)
    said = next(
        (m.group(0) for t in texts for m in [re.search(r"(WORKBENCH_[A-Z_]+|Not launched[^<]{0,120}|Queued)", t)] if m),
        "",
    )
    return f"{sent / MIB:.2f} MiB of text sent; {said or 'no refusal'}"


# ---------------------------------------------------------------- the parent


def run_case(case: str, root: Path, cap: int) -> dict:
    """The case in a fresh process, killed past `cap` bytes of resident memory."""
    process = subprocess.Popen(
        [sys.executable, __file__, "--child", case, "--root", str(root)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "GRADIO_ANALYTICS_ENABLED": "False"},
    )
    killed = []

    def watch() -> None:
        while process.poll() is None:
            try:
                rss = int(Path(f"/proc/{process.pid}/statm").read_text().split()[1]) * os.sysconf("SC_PAGE_SIZE")
            except (OSError, ValueError):
                return
            if rss > cap:
                killed.append(rss)
                process.kill()
                return
            time.sleep(0.05)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    out, err = process.communicate(timeout=900)
    watcher.join()
    if killed:
        return {"peak_mib": None, "outcome": f"killed past the benchmark's {cap / GIB:.0f} GiB cap"}
    lines = [line for line in out.splitlines() if line.startswith("{")]
    if not lines:
        return {"peak_mib": None, "outcome": f"the child failed: {err.strip().splitlines()[-1:]}"}
    return json.loads(lines[-1])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", choices=CASES, action="append")
    parser.add_argument("--cap-gib", type=float, default=6.0)
    parser.add_argument("--record", action="store_true")
    parser.add_argument("--child", choices=CASES)
    parser.add_argument("--root", type=Path)
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(child(args.child, args.root)))
        return 0
    figures = {}
    with tempfile.TemporaryDirectory(prefix="bench-server-memory-") as folder:
        root = Path(folder)
        plant(root)
        for case in args.only or CASES:
            found = run_case(case, root, int(args.cap_gib * GIB))
            peak = found.get("peak_mib")
            verdict = "past the cap" if peak is None else "within" if peak <= TARGET_GIB * 1024 else "PAST"
            shown = f"{peak / 1024:.2f} GiB" if peak is not None else f"> {args.cap_gib:.0f} GiB"
            print(f"{case:42} peak {shown:>10} ({verdict} the {TARGET_GIB:.0f} GiB target)  {found['outcome']}")
            figures[case] = {**found, "target_gib": TARGET_GIB, "within": verdict == "within"}
    if args.record:
        from results_file import record

        load = os.getloadavg()
        path = record("bench_server_memory", figures, note=f"load average at the end {load[0]:.2f}; 2 shared cores")
        print(f"recorded in {path.relative_to(ROOT)}")
    return 0 if all(f["within"] for f in figures.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
