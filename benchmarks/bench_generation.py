"""Generation backends compared on the same run: completions per second and step time.

    python benchmarks/bench_generation.py                # every backend this machine can run
    python benchmarks/bench_generation.py --steps 6 --model Qwen/Qwen2-0.5B-Instruct --num-generations 16
    python benchmarks/bench_generation.py --backends transformers vllm-server --json out.json

Each backend trains the same config (task, model, batch, G, lengths, seed)
for `--steps` optimizer steps through the launcher, exactly as the app would:
`transformers` (TRL's generate in the trainer), `vllm-server` (the run's own
vLLM server, LoRA adapter hot-loaded each step) and, where CUDA is present,
TRL's `trl-colocate` and `trl-server`. On a GPU machine the server gets the
last GPU and training the others; with one GPU the server shares it.

Reported per backend: median step time (the first step, which warms up, left
out), completions per second over the whole step, for vllm-server the
server's own generation rate (`vllm/completions_per_second`,
`vllm/tokens_per_second`), the LoRA sync cost per step - the adapter hot-load
for vllm-server (`vllm/adapter_sync_seconds`), TRL's merge-and-copy or
merge-and-broadcast of every weight for its modes (`vllm/weight_sync_seconds`)
- and on a GPU machine each GPU's peak used memory over the run (NVML, the
vLLM engine's pool included; workbench/jobs/gpu_watch.py). The machine is named in
the table: a CPU figure says nothing about a GPU, and on a CPU vLLM is slower
than transformers - it is there for correctness, not speed.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from workbench.jobs import launcher, run_state  # noqa: E402  (after the path fix above)
from workbench.jobs.gpu_watch import GpuMemoryWatch  # noqa: E402
from workbench.runstore import runfolder  # noqa: E402  (after the path fix above)
from workbench.sources.gpus import list_gpus  # noqa: E402
from workbench.spec.config import RunConfig  # noqa: E402
from workbench.spec.generation import find_vllm_python, vllm_importable_here  # noqa: E402


def machine_label() -> str:
    """CPU model and cores, and the GPUs NVML sees: the table is only true for this machine."""
    cpu = platform.processor() or "CPU"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    gpus = list_gpus()
    gpu_text = ", ".join(f"{g.name} ({g.total_mb // 1024} GiB)" for g in gpus) or "no GPU"
    return f"{cpu}, {os.cpu_count()} cores; {gpu_text}"


def backends_here() -> list[str]:
    """The backends this machine can run: TRL's vLLM modes need CUDA and vLLM in this Python."""
    found = ["transformers"]
    if find_vllm_python() is not None:
        found.append("vllm-server")
    if list_gpus() and vllm_importable_here():
        found += ["trl-colocate"] + (["trl-server"] if len(list_gpus()) > 1 else [])
    return found


def config_for(backend: str, args) -> RunConfig:
    gpus = [g.index for g in list_gpus()]
    changes = dict(
        generation=backend,
        model=args.model,
        max_steps=args.steps,
        save_steps=args.steps,
        per_device_train_batch_size=args.num_generations,
        num_generations=args.num_generations,
        max_completion_length=args.max_completion_length,
        vllm_max_model_len=args.max_model_len,
        run_name=f"bench-{backend}",
    )
    if gpus:
        changes.update(bf16=True)
        if backend in ("vllm-server", "trl-server") and len(gpus) > 1:
            # the Open-R1 layout: the last GPU serves, one trains (the same single process as the others)
            changes.update(vllm_gpu_ids=[gpus[-1]], gpu_ids=[gpus[0]], vllm_gpu_memory_utilization=0.9)
        else:
            changes.update(gpu_ids=[gpus[0]])
    return RunConfig.for_task(args.task, **changes)


def one_run(backend: str, args, runs_dir: Path) -> dict:
    config = config_for(backend, args)
    launched = time.monotonic()
    with GpuMemoryWatch() as watch:
        run_id = launcher.start(config, runs_dir)
        try:
            final = run_state.wait(run_id, runs_dir, timeout=args.timeout)
        except BaseException:  # interrupted: the detached run (and its server) must not outlive the benchmark
            launcher.stop(run_id, runs_dir, timeout=0)
            raise
    if final["state"] not in runfolder.FINAL_STATES:
        final = launcher.stop(run_id, runs_dir, timeout=0)
    run_dir = run_state.run_dir_of(run_id, runs_dir)
    steps = [m for m in runfolder.read_jsonl(run_dir / runfolder.METRICS_FILE) if "step_time" in m]
    times = [m["step_time"] for m in steps[1:]] or [m["step_time"] for m in steps]
    completions_per_step = config.per_device_train_batch_size * config.gradient_accumulation_steps
    row = {
        "backend": backend,
        "state": final["state"],
        "steps": len(steps),
        "median_step_s": statistics.median(times) if times else None,
        "wall_s": time.monotonic() - launched,
        "completions_per_s": completions_per_step / statistics.median(times) if times else None,
        "server_ready_s": (final.get("vllm") or {}).get("ready_after_s"),
        "peak_gib_per_gpu": {index: used / 2**30 for index, used in watch.peak_bytes().items()},
    }
    for name in (
        "vllm/completions_per_second",
        "vllm/tokens_per_second",
        "vllm/adapter_sync_seconds",
        "vllm/weight_sync_seconds",
    ):
        values = [m[name] for m in steps[1:] if name in m]
        row[name] = statistics.median(values) if values else None
    if final["state"] != "finished":
        row["error"] = (final.get("error") or {}).get("message", "")[:300]
    return row


def table(rows: list[dict], label: str, args) -> str:
    def show(value, digits=2):
        return "—" if value is None else f"{value:.{digits}f}"

    def sync(row) -> str:
        if row["vllm/adapter_sync_seconds"] is not None:
            return f"{row['vllm/adapter_sync_seconds']:.2f} (adapter hot-load)"
        if row["vllm/weight_sync_seconds"] is not None:
            return f"{row['vllm/weight_sync_seconds']:.2f} (TRL: merge, send every weight)"
        return "—"

    def memory(row) -> str:
        return ", ".join(f"GPU {i}: {gib:.1f}" for i, gib in sorted(row["peak_gib_per_gpu"].items())) or "—"

    lines = [
        f"Machine: {label}",
        f"Config: {args.model}, task {args.task}, G={args.num_generations} completions of up to "
        f"{args.max_completion_length} tokens per step, {args.steps} steps (first step left out)",
        "",
        "| backend | state | median step (s) | completions/s (whole step) | vLLM generation completions/s "
        "| vLLM tokens/s | LoRA sync per step (s) | server ready after (s) | peak GiB per GPU |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['backend']} | {r['state']} | {show(r['median_step_s'])} | {show(r['completions_per_s'])} "
            f"| {show(r['vllm/completions_per_second'])} | {show(r['vllm/tokens_per_second'], 1)} "
            f"| {sync(r)} | {show(r['server_ready_s'], 0)} | {memory(r)} |"
        )
    lines += [f"\n{r['backend']} did not finish: {r['error']}" for r in rows if r.get("error")]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--backends", nargs="+", default=None, help="default: every backend this machine can run")
    parser.add_argument("--model", default="smollm2-135m-instruct")
    parser.add_argument("--task", default="demo")
    parser.add_argument("--steps", type=int, default=4)
    parser.add_argument("--num-generations", type=int, default=8)
    parser.add_argument("--max-completion-length", type=int, default=48)
    parser.add_argument("--max-model-len", type=int, default=1024)
    parser.add_argument("--timeout", type=float, default=1800.0, help="seconds per backend's run")
    parser.add_argument("--json", type=Path, help="also write the rows here")
    args = parser.parse_args(argv)
    backends = args.backends or backends_here()
    label = machine_label()
    rows = []
    with tempfile.TemporaryDirectory(prefix="bench-generation-") as tmp:
        for backend in backends:
            print(f"{backend} ...", file=sys.stderr, flush=True)
            rows.append(one_run(backend, args, Path(tmp) / "runs"))
    print(table(rows, label, args))
    if args.json:
        args.json.write_text(json.dumps({"machine": label, "rows": rows}, indent=1))
    return 0 if all(r["state"] == "finished" for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
