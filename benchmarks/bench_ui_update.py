"""How fast the UI answers: server-side time per calculator update, and time to serve.

    .venv/bin/python benchmarks/bench_ui_update.py [--repeats 200] [--starts 3]

1. Calls the very function the Calculator tab runs on every input change
   (`workbench.ui.calculator_tab.update_calculator`) on a mix of valid,
   invalid and bad inputs, and prints median and p95 milliseconds; then the
   same plus gradio's own serialisation of the outputs (`postprocess`), which
   the server also does before answering. The Setup tab's live plan update is
   timed the same way. Target: under 50 ms.
2. Starts `python app.py` on a free port a few times and prints the seconds
   until it answers HTTP 200. Target: under 5 s.
"""

from __future__ import annotations

import argparse
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

# A mix of what people type: valid, invalid (suggestions searched), bad input, wide heatmap axes.
CASES = {
    "valid": {"per_device_train_batch_size": 8},
    "invalid 3 x 1, G 8": {"num_processes": 3},
    "invalid, eval rule": {
        "per_device_train_batch_size": 3,
        "num_generations": 2,
        "do_eval": True,
        "per_device_eval_batch_size": 3,
    },
    "bad input": {"num_generations": 0},
    "wide axes": {"per_device_train_batch_size": 48, "num_generations": 40, "num_processes": 6},
}


def percentile(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def time_calls(fn, repeats: int) -> list[float]:
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - start) * 1000)
    return samples


def report(name: str, samples: list[float]) -> None:
    print(f"  {name:<34} median {statistics.median(samples):6.1f} ms   p95 {percentile(samples, 0.95):6.1f} ms")


def bench_calculator(repeats: int) -> None:
    import gradio as gr

    from workbench.ui import calculator_tab

    # The output components in the tab's order: badge, 4 buttons, state, warnings, numbers, heatmap, table.
    components = [gr.HTML(), *[gr.Button() for _ in range(4)], gr.State(), gr.HTML(), gr.HTML(), gr.Plot(), gr.HTML()]

    def serialised(values):
        for component, value in zip(components, values):
            if isinstance(component, gr.Button):
                continue  # a gr.update dict; gradio only copies its fields
            component.postprocess(value)

    print("Calculator tab, update_calculator (server side, per input change):")
    everything = []
    for name, overrides in CASES.items():
        inputs = {**calculator_tab.START_VALUES, **overrides}
        values = [inputs[field] for field in calculator_tab.FIELDS] + [1.0]
        calculator_tab.update_calculator(*values)  # first call loads plotly's validators
        samples = time_calls(lambda values=values: calculator_tab.update_calculator(*values), repeats)
        report(name, samples)
        with_post = time_calls(
            lambda values=values: serialised(calculator_tab.update_calculator(*values)), repeats // 2
        )
        report(name + " + postprocess", with_post)
        everything += with_post
    report("ALL cases, with postprocess", everything)


def bench_setup(repeats: int) -> None:
    import importlib.util

    if importlib.util.find_spec("workbench.ui.setup_tab") is None:
        return
    from workbench.spec.config import RunConfig
    from workbench.ui import setup_tab

    print("Setup tab, live plan update (server side, per settings change):")
    values = setup_tab.benchmark_values()
    setup_tab.update_plan(*values)
    report("update_plan", time_calls(lambda: setup_tab.update_plan(*values), repeats))
    # every update turns the form into a RunConfig: its field types are resolved once per process
    fields = RunConfig().to_dict()
    report("RunConfig.from_dict", time_calls(lambda: RunConfig.from_dict(fields), repeats))


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def seconds_to_serve(runs_dir: Path, timeout: float = 120.0) -> float:
    port = free_port()
    start = time.monotonic()
    process = subprocess.Popen(
        [sys.executable, str(REPO / "app.py"), "--port", str(port), "--runs-dir", str(runs_dir)],
        cwd=REPO,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        while time.monotonic() - start < timeout:
            if process.poll() is not None:
                raise SystemExit(f"app.py exited with code {process.returncode} before serving")
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=2) as response:
                    if response.status == 200:
                        return time.monotonic() - start
            except OSError:
                time.sleep(0.05)
        raise SystemExit(f"app.py did not serve within {timeout:.0f} s")
    finally:
        process.terminate()
        process.wait(timeout=20)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=200)
    parser.add_argument("--starts", type=int, default=3, help="how many times to start app.py (0 to skip)")
    args = parser.parse_args()
    bench_calculator(args.repeats)
    bench_setup(args.repeats)
    if args.starts:
        print("Time from `python app.py` to HTTP 200:")
        with tempfile.TemporaryDirectory() as tmp:
            starts = [seconds_to_serve(Path(tmp) / "runs") for _ in range(args.starts)]
        print("  " + ", ".join(f"{s:.2f} s" for s in starts) + f"   median {statistics.median(starts):.2f} s")


if __name__ == "__main__":
    main()
