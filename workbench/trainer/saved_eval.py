"""Evaluating a run's saved policy now, in this process: `python -m workbench eval RUN --checkpoint ...`.

The same held-out prompts, generation settings and reward functions as the run's own evaluations
(workbench/trainer/evaluator.py), with the base model alone (`base`, step 0), a checkpoint (`N`, step N) or
the newest adapter (`latest`: the final `adapter/`, else the newest complete checkpoint). Greedy answers
match what the run recorded at that step on the same device; the record is returned, not written.
"""

from __future__ import annotations

from pathlib import Path

from workbench.errors import WorkbenchError
from workbench.runstore import checkpoint_integrity, runfolder
from workbench.spec.config import ConfigError, ConfigProblem, RunConfig, data_field
from workbench.spec.heldout import eval_problems
from workbench.spec.reward_choice import correctness_reward_for


class CheckpointChoiceError(WorkbenchError):
    """A --checkpoint that names nothing the run saved."""


def saved_policy(run_dir: Path, which: str) -> tuple[Path | None, int]:
    """The adapter folder `which` names (None for `base`) and the step it was saved at."""
    which = (which or "").strip()
    if which == "base":
        return None, 0
    if which == "latest":
        if (run_dir / runfolder.ADAPTER_DIR).is_dir():
            return run_dir / runfolder.ADAPTER_DIR, int(runfolder.read_run_status(run_dir).step or 0)
        newest = checkpoint_integrity.last_checkpoint(run_dir)
        if newest is None:
            raise CheckpointChoiceError(
                "--checkpoint: latest, but the run saved no adapter or checkpoint yet; use --checkpoint base",
                field="--checkpoint",
            )
        return newest, int(newest.name.split("-")[-1])
    saved = checkpoint_integrity.checkpoint_steps(run_dir)
    if not which.isdigit() or int(which) not in saved:
        listed = ", ".join(str(step) for step in saved) or "none"
        raise CheckpointChoiceError(
            f"--checkpoint: {which!r} is not latest, base or a saved checkpoint's step (this run has: {listed})",
            field="--checkpoint",
        )
    return run_dir / f"checkpoint-{int(which)}", int(which)


def evaluate_saved(run_dir: str | Path, which: str = "latest") -> dict:
    """One evaluation record (spec/heldout.py) of the run's policy `which` on its held-out prompts."""
    import torch

    from workbench.trainer.answering import end_token_ids
    from workbench.trainer.evaluator import Evaluator, Policy, load_eval_rows
    from workbench.trainer.run_pieces import build_reward_funcs, load_dataset_for, load_model_and_tokenizer

    run_dir = Path(run_dir)
    cfg = RunConfig.load(run_dir / runfolder.CONFIG_FILE)
    problems = eval_problems(cfg, correctness_reward_for(cfg), data_field(cfg))
    if problems:
        raise ConfigError([ConfigProblem(*found) for found in problems])
    adapter, step = saved_policy(run_dir, which)
    model, tokenizer = load_model_and_tokenizer(cfg)
    if adapter is not None:
        from peft import PeftModel

        model = PeftModel.from_pretrained(model, str(adapter))
    device = "cuda" if torch.cuda.is_available() and cfg.device != "cpu" else "cpu"
    model.to(device)
    has_template = tokenizer.chat_template is not None
    rows = load_eval_rows(cfg, load_dataset_for(cfg, has_template)["prompt"], has_template)
    policy = Policy(model, tokenizer, device, end_token_ids(model, tokenizer), build_reward_funcs(cfg))
    return Evaluator(policy, cfg, rows).evaluate(step)
