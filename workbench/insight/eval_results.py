"""Reading a run's held-out evaluations (eval.jsonl): the curve, its JSON form, the answers that changed.

- `read_evals(run_dir)`: the evaluation records that count, one per step in step order, read through the
  process's cache (`jsonl_cache.records`: only the lines appended since the last read are parsed); a step
  written twice (a resume) counts once, the newest record winning (`resumed.merge_metrics`).
- `curve_points(records, per_prompt)`: what `python -m workbench eval RUN --json` prints (with k >= 2 samples,
  `mean_at_k`, `maj_at_k`, `best_at_k` and each one's bootstrap spread `<name>_std`; `maj_at_k_note` when maj@k
  is unavailable; `groups` per data source with `eval_group_column`).
- `best_checkpoint(records, checkpoint_steps)`: the saved checkpoint with the best held-out figure the run chose
  (`best_checkpoint_metric`, accuracy by default; ties: the higher accuracy, pass@k, then the earlier step;
  `spec.heldout.best_evaluation`), the one training keeps whatever
  save_total_limit prunes; `best_checkpoint_of(run_dir)` reads both from the run folder.
- `as_metrics(records)`: the curve as metric records (`held_out/accuracy`, `held_out/pass_at_k`,
  `held_out/mean_at_k`, ... by step, each spread as `<name>_std`), so
  the figures that overlay runs' training metrics overlay held-out curves the same way.
- `at_k_text(record)`: mean@k, maj@k and best@k with their spreads in words (maj@k's note when it is
  unavailable); `group_texts(record)` the same per data source, for the CLI's lines and the report.
- `changed_answers(records)`: the prompts whose greedy answer went wrong -> right or right -> wrong between the
  first evaluation (step 0, before any update) and the latest, with both completions.

The record is described in workbench/spec/heldout.py. Pure apart from `read_evals` and `best_checkpoint_of`.
"""

from __future__ import annotations

from pathlib import Path

from workbench.insight.resumed import merge_metrics
from workbench.runstore import jsonl_cache, runfolder
from workbench.spec.heldout import best_evaluation

AT_K_KEYS = ("mean_at_k", "mean_at_k_std", "maj_at_k", "maj_at_k_std", "best_at_k", "best_at_k_std")
CURVE_KEYS = ("step", "accuracy", "pass_at_k", "k", *AT_K_KEYS, "rewards", "n")
PROMPT_KEYS = ("prompt", "completion", "rewards")
# The held-out curve under metric names, for figures that draw metrics (the Runs tab's overlay).
HELD_OUT_ACCURACY, HELD_OUT_PASS_AT_K = "held_out/accuracy", "held_out/pass_at_k"
HELD_OUT_AT_K = {name: f"held_out/{name}" for name in ("mean_at_k", "maj_at_k", "best_at_k")}
WRONG_TO_RIGHT = "wrong → right"
RIGHT_TO_WRONG = "right → wrong"


def read_evals(run_dir: str | Path) -> list[dict]:
    """The run's evaluation records, one per step in step order ([] when the run never evaluated)."""
    return merge_metrics([], jsonl_cache.records(Path(run_dir) / runfolder.EVAL_FILE).records)


def best_checkpoint(records: list[dict], checkpoint_steps) -> dict | None:
    """The evaluation record of the best evaluated checkpoint among `checkpoint_steps` (None: none evaluated)."""
    return best_evaluation(records, {step for step in checkpoint_steps if step > 0})


def best_checkpoint_of(run_dir: str | Path) -> dict | None:
    """The run's best evaluated checkpoint still on disk, as `best_checkpoint` (None without evaluations)."""
    records = read_evals(run_dir)
    if not records:
        return None
    return best_checkpoint(records, runfolder.checkpoint_steps(run_dir))


def curve_points(records: list[dict], per_prompt: bool = False) -> list[dict]:
    """`{"step", "accuracy", "pass_at_k", "k", "mean_at_k", "mean_at_k_std", ..., "rewards", "n"}` per evaluation
    (the @k figures None without k >= 2 samples), `maj_at_k_note` and `groups` when the record has them;
    `per_prompt` adds `prompts`."""
    points = []
    for record in records:
        point = {key: record.get(key) for key in CURVE_KEYS}
        for key in ("maj_at_k_note", "groups"):
            if record.get(key):
                point[key] = record[key]
        if per_prompt:
            point["prompts"] = [{key: row.get(key) for key in PROMPT_KEYS} for row in record.get("prompts") or []]
        points.append(point)
    return points


def as_metrics(records: list[dict]) -> list[dict]:
    """`{"step", "held_out/accuracy", "held_out/pass_at_k", "held_out/mean_at_k", "held_out/mean_at_k_std", ...}`
    per evaluation (a missing value left out)."""
    metrics = []
    for record in records:
        point = {
            "step": record["step"],
            HELD_OUT_ACCURACY: record.get("accuracy"),
            HELD_OUT_PASS_AT_K: record.get("pass_at_k"),
        }
        for name, metric in HELD_OUT_AT_K.items():
            point[metric], point[f"{metric}_std"] = record.get(name), record.get(f"{name}_std")
        metrics.append({key: value for key, value in point.items() if value is not None})
    return metrics


def changed_answers(records: list[dict]) -> list[dict]:
    """Prompts whose greedy answer changed verdict from the first evaluation to the latest, wrong → right first.

    Each: `prompt`, `change`, `first_step`, `last_step`, `before` and `after` (the two completions). A prompt is
    matched by its text; one the two evaluations do not share is left out.
    """
    if len(records) < 2:
        return []
    first, last = records[0], records[-1]
    before = {row.get("prompt"): row for row in first.get("prompts") or []}
    changed = []
    for row in last.get("prompts") or []:
        old = before.get(row.get("prompt"))
        if old is None or bool(old.get("correct")) == bool(row.get("correct")):
            continue
        changed.append(
            {
                "prompt": row.get("prompt"),
                "change": WRONG_TO_RIGHT if row.get("correct") else RIGHT_TO_WRONG,
                "first_step": first["step"],
                "last_step": last["step"],
                "before": old.get("completion", ""),
                "after": row.get("completion", ""),
            }
        )
    return sorted(changed, key=lambda item: item["change"] != WRONG_TO_RIGHT)


def _figure(value, spread) -> str:
    if value is None:
        return "-"
    return f"{value:.3f}" if spread is None else f"{value:.3f} ± {spread:.3f}"


def at_k_text(record: dict) -> str:
    """`mean@k 0.250 ± 0.040, maj@k ..., best@k ...` ("" without k >= 2 samples); an unavailable maj@k says why."""
    k = record.get("k") or 0
    if k < 2 or record.get("mean_at_k") is None:
        return ""
    parts = []
    for name in ("mean_at_k", "maj_at_k", "best_at_k"):
        label = f"{name.split('_')[0]}@{k}"
        if name == "maj_at_k" and record.get(name) is None:
            parts.append(f"{label} unavailable" if record.get("maj_at_k_note") else f"{label} -")
        else:
            parts.append(f"{label} {_figure(record.get(name), record.get(f'{name}_std'))}")
    return ", ".join(parts)


def group_texts(record: dict) -> list[str]:
    """One line per data source (`eval_group_column`'s values): its n, accuracy, pass@k and the @k figures."""
    k = record.get("k") or 0
    lines = []
    for name, figures in (record.get("groups") or {}).items():
        figures = {**figures, "k": k, "maj_at_k_note": record.get("maj_at_k_note")}
        passed = f", pass@{k} {_figure(figures.get('pass_at_k'), None)}" if k else ""
        at_k = at_k_text(figures)
        lines.append(
            f"{name or '(no value)'}: n {figures.get('n')}, accuracy {_figure(figures.get('accuracy'), None)}"
            f"{passed}{', ' + at_k if at_k else ''}"
        )
    return lines
