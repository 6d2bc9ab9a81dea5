"""The speed probe: time each combination of speed levers on this machine, for this model and this run's shape, and keep the
fastest one that is exact.

It builds a trainer as a run does (the run's model, precision, LoRA and batch shape; the prompts of the run's
built-in task, or the demo's when the run reads a dataset: the server never reads a run's data), gives the LoRA update
small random values (at step 0 it is zero, which would hide a copy that merged it wrongly), then for each candidate
(workbench/tuning/choice.first_round) runs one generation round and its training passes with the same seed:
`steps_per_generation x num_iterations` calls of the trainer's `training_step`, no optimizer step. A candidate meant
to be exact must give TRL's own completions, word for word, and the same loss to float32 rounding; one that does not
is reported and never chosen. The two fastest are timed once more and keep their faster round. About a minute for the
bundled model on a 2-core CPU.

The check of MKL's packed GEMM goes through ctypes: it runs first in a child process, so a library that crashes there
ends the child, not the probe.
"""

from __future__ import annotations

import gc
import math
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from workbench.spec.config import RunConfig
from workbench.trainer import levers
from workbench.tuning import machine
from workbench.tuning.choice import (
    LEVER_FIELDS,
    SHAPE_FIELDS,
    Candidate,
    Possible,
    SpeedChoice,
    allowed,
    first_round,
    pick,
)
from workbench.tuning.for_config import key_for, model_identity

# settings the probe keeps from the run beside its shape (the model and how it samples)
# (not its chat_template: a user's template is rendered only inside the run's sandbox)
KEPT_FIELDS = (
    "model",
    "lora_alpha",
    "lora_dropout",
    "temperature",
    "top_p",
    "top_k",
    "repetition_penalty",
    "seed",
    *SHAPE_FIELDS,
    *LEVER_FIELDS,
)
LOSS_RTOL = 1e-3  # the loss of an exact lever against TRL's path: float32 rounding, summed over a round
CHILD_CHECK_TIMEOUT_S = 120
# LoRA B's spread for the probe: enough to move the logits, so a wrong merge changes the completions
LORA_B_STD = 0.02


def probe_config(cfg: RunConfig) -> RunConfig:
    """The run's model and shape on prompts the server may read: its built-in task's, or the demo's."""
    from workbench.spec.config import data_field

    task = cfg.task if not data_field(cfg)[1] else "demo"
    kept = {name: getattr(cfg, name) for name in KEPT_FIELDS}
    return RunConfig.for_task(task, **kept, report_to=[], eval_strategy="no", record_tokens=False, max_steps=1)


def packed_decode_in_child() -> str | None:
    """trainer/packed_decode.available() run in a child process: None when MKL's packed GEMM works, else why not."""
    code = "from workbench.trainer.packed_decode import available; print(available() or '')"
    try:
        done = subprocess.run(
            [sys.executable, "-c", code],
            capture_output=True,
            text=True,
            timeout=CHILD_CHECK_TIMEOUT_S,
            cwd=str(Path(__file__).resolve().parents[2]),
        )
    except subprocess.TimeoutExpired:
        return f"its check did not answer in {CHILD_CHECK_TIMEOUT_S} s"
    if done.returncode != 0:
        return f"its check ended the child process (exit {done.returncode}): {done.stderr.strip()[-200:]}"
    return done.stdout.strip() or None


def possible_levers(cfg: RunConfig, model_type: str, on_cpu: bool, packed_missing: str | None) -> tuple[Possible, dict]:
    """What can run for this model here, restricted to the config's explicit settings; and why each lever cannot."""
    from workbench.spec.speed import unsupported_reason

    why_not = {}
    shared = unsupported_reason(model_type, cfg.gradient_checkpointing, cfg.num_processes)
    if shared:
        why_not["shared_prompt_pass"] = shared
    if not on_cpu:
        why_not["packed_decode"] = "MKL's packed GEMM is a CPU kernel"
    elif packed_missing:
        why_not["packed_decode"] = packed_missing
    bf16_copy = machine.native_bf16() if on_cpu else cfg.bf16
    if not bf16_copy:
        why_not["bfloat16 copy"] = "no native bfloat16 on this CPU" if on_cpu else "bf16 is off"
    return Possible(
        copy=True,
        shared="shared_prompt_pass" not in why_not,
        packed="packed_decode" not in why_not,
        bf16_copy=bf16_copy,
    ), why_not


def consistent(candidate: Candidate, cfg: RunConfig) -> bool:
    """Whether `candidate` agrees with every lever the config sets itself."""
    settings = candidate.settings()
    return all(getattr(cfg, name) in ("auto", settings[name]) for name in LEVER_FIELDS)


class _Bench:
    """A trainer built as the run's (by `build_trainer`, trainer/speed_wiring.probe_trainer), and one timed round per
    call."""

    def __init__(self, cfg: RunConfig, folder: Path, build_trainer):
        import torch

        from workbench.sources.gpus import runs_on_cpu_here

        self.cfg = cfg
        self.trainer = build_trainer(cfg, folder)
        self.model_type = self.trainer.model.config.model_type
        self.on_cpu = runs_on_cpu_here(cfg.device)
        generator = torch.Generator().manual_seed(cfg.seed)
        with torch.no_grad():
            for name, parameter in self.trainer.model.named_parameters():
                if "lora_B" in name:
                    parameter.copy_(torch.randn(parameter.shape, generator=generator) * LORA_B_STD)
        self.batch = next(iter(self.trainer.get_train_dataloader()))
        self.calls = self.trainer.args.steps_per_generation * self.trainer.num_iterations
        # set by the Trainer's loop, which the probe does not run: the loss normalises by it
        self.trainer.current_gradient_accumulation_steps = self.trainer.args.gradient_accumulation_steps

    def round(self, candidate: Candidate) -> tuple[float, list[str], float]:
        """Seconds of one round with `candidate`, its completions and its summed loss."""
        import torch

        trainer = self.trainer
        levers.attach(trainer, self.cfg.with_changes(**candidate.settings()), self.model_type)
        trainer._unwritten_completions = []
        torch.manual_seed(self.cfg.seed)
        started = time.perf_counter()
        loss = sum(float(trainer.training_step(trainer.model, self.batch, None)) for _ in range(self.calls))
        seconds = time.perf_counter() - started
        trainer.model.zero_grad(set_to_none=True)
        return seconds, [record["completion"] for record in trainer._unwritten_completions], loss


def differs(texts: list[str], loss: float, reference: tuple[list[str], float]) -> str | None:
    """How a round meant to be exact differs from TRL's path, or None."""
    ref_texts, ref_loss = reference
    changed = sum(a != b for a, b in zip(texts, ref_texts)) + abs(len(texts) - len(ref_texts))
    if changed:
        return f"{changed} of {len(ref_texts)} completions differ from TRL's sampling"
    if not math.isclose(loss, ref_loss, rel_tol=LOSS_RTOL, abs_tol=1e-6):
        return f"loss {loss:.6g} against TRL's {ref_loss:.6g}"
    return None


def measure(cfg: RunConfig, progress: Callable[[str], None], build_trainer) -> SpeedChoice:
    """Time the levers for `cfg` on this machine with trainers `build_trainer(cfg, folder)` makes
    (speed_wiring.probe_trainer) and pick; the choice is not stored (workbench/tuning/cache.py)."""
    run_cfg, cfg = cfg, probe_config(cfg)
    packed_missing = packed_decode_in_child() if cfg.device != "cuda" else None
    progress("loading the model for the speed probe")
    with tempfile.TemporaryDirectory(prefix="workbench-tune-") as folder:
        bench = _Bench(cfg, Path(folder), build_trainer)
        possible, why_not = possible_levers(cfg, bench.model_type, bench.on_cpu, packed_missing)
        candidates = [c for c in first_round(possible) if c == Candidate() or consistent(c, run_cfg)]
        bench.round(Candidate())  # warm-up: the first round pays one-off costs
        seconds, exact_failures, reference = {}, {}, None
        for index, candidate in enumerate(candidates, 1):
            progress(f"timing {index}/{len(candidates)}: {candidate.label()}")
            took, texts, loss = bench.round(candidate)
            seconds[candidate.label()] = took
            idle = levers.not_taking_effect(bench.trainer)
            if idle:  # a swap that fell back to TRL's path is not a lever: never chosen
                exact_failures[candidate.label()] = "did not take effect: " + "; ".join(idle)
                continue
            if reference is None:
                reference = (texts, loss)
            elif candidate.exact:
                problem = differs(texts, loss, reference)
                if problem:
                    exact_failures[candidate.label()] = problem
        fastest = sorted((c for c in candidates if c.label() not in exact_failures), key=lambda c: seconds[c.label()])
        for candidate in fastest[:2]:  # a second round for the two that decide
            progress(f"timing again: {candidate.label()}")
            seconds[candidate.label()] = min(seconds[candidate.label()], bench.round(candidate)[0])
        del bench
        gc.collect()
    for candidate in candidates:  # the bfloat16 copy is synced by the same code as its float32 twin, checked exactly
        twin = Candidate("float32", candidate.shared_prompt_pass).label()
        if not candidate.exact and twin in exact_failures:
            exact_failures[candidate.label()] = f"its float32 twin failed the exact check ({exact_failures[twin]})"
    native = machine.native_bf16() if cfg.device != "cuda" else True
    chosen = pick(seconds, [c for c in candidates if consistent(c, run_cfg)], exact_failures, native)
    not_taken = {
        c.label(): (
            "not exact: sampled in bfloat16; the learning benchmark has not shown it learns as well "
            "(set merged_generation=bfloat16 to take it)"
        )
        for c in candidates
        if not c.exact and not allowed(c, exact_failures, native)
    }
    not_taken.update({name: reason for name, reason in why_not.items()})
    return SpeedChoice(
        key=key_for(run_cfg),
        chosen=chosen,
        cpu=machine.cpu_name(),
        measured_at=time.time(),
        seconds={k: round(v, 3) for k, v in seconds.items()},
        exact_failures=exact_failures,
        not_taken=not_taken,
        model=model_identity(run_cfg),
    )
