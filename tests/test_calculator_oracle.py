"""TRL itself as the oracle: plan()'s validity and error text equal what GRPOConfig raises.

A broad grid (about 800 combinations: 1 to 8 processes, batch, num_generations,
gradient accumulation, steps_per_generation / generation_batch_size set or not
or both, evaluation on and off). GRPOConfig construction takes well under a
millisecond, so the whole file runs in seconds after TRL's import.
"""

import itertools
import warnings

import pytest

from workbench.calc import plan

trl = pytest.importorskip("trl")


class GRPOConfigOnProcesses(trl.GRPOConfig):
    """GRPOConfig that sees `processes` training processes.

    TrainingArguments.world_size reads accelerate's PartialState. Setting
    WORLD_SIZE/RANK/LOCAL_RANK instead would make PartialState initialise a
    torch.distributed process group and wait for peers that never come, so the
    oracle patches the property on this subclass only; everything else in
    __post_init__ runs unchanged.
    """

    processes = 1

    @property
    def world_size(self):
        return self.processes


def trl_verdict(processes: int, inputs: dict):
    """(error text or None, generation_batch_size, steps_per_generation) from TRL."""
    GRPOConfigOnProcesses.processes = processes
    kwargs = dict(inputs)
    do_eval = kwargs.pop("do_eval", False)
    if do_eval:
        # do_eval=True alone does not evaluate: TRL checks the eval batch only when eval_strategy != "no".
        kwargs["eval_strategy"] = "steps"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            config = GRPOConfigOnProcesses(
                output_dir="unused-oracle-dir", report_to="none", use_cpu=True, bf16=False, **kwargs
            )
        except ValueError as exc:
            return str(exc), None, None
    return None, config.generation_batch_size, config.steps_per_generation


BATCH_MODES = {
    "ga1": dict(gradient_accumulation_steps=1),
    "ga2": dict(gradient_accumulation_steps=2),
    "spg3": dict(steps_per_generation=3),
    "gbs24": dict(generation_batch_size=24),
    "gbs10": dict(generation_batch_size=10),
    "both": dict(steps_per_generation=2, generation_batch_size=16),
}

TRAIN_CASES = [
    pytest.param(
        n, dict(per_device_train_batch_size=bs, num_generations=g, **BATCH_MODES[mode]), id=f"n{n}-bs{bs}-G{g}-{mode}"
    )
    for n, bs, g, mode in itertools.product((1, 2, 3, 4, 6, 8), (1, 2, 3, 8), (1, 2, 3, 8), BATCH_MODES)
]

EVAL_CASES = [
    pytest.param(
        n,
        dict(
            per_device_train_batch_size=2,
            num_generations=g,
            do_eval=True,
            per_device_eval_batch_size=ebs,
            num_generations_eval=ge,
        ),
        id=f"eval-n{n}-G{g}-ebs{ebs}-Ge{ge}",
    )
    for n, g, ebs, ge in itertools.product(range(1, 9), (2, 4, 8), (1, 3, 8), (None, 2, 6))
]


@pytest.mark.parametrize("processes, inputs", TRAIN_CASES + EVAL_CASES)
def test_plan_agrees_with_grpo_config(processes, inputs):
    error, gbs, spg = trl_verdict(processes, inputs)
    result = plan(num_processes=processes, with_suggestions=False, **inputs)
    if error is None:
        assert result.valid, result.errors
        assert (result.generation_batch_size, result.steps_per_generation) == (gbs, spg)
    else:
        assert not result.valid
        assert result.errors[0] == error


def test_grid_covers_valid_and_invalid_cases():
    verdicts = [trl_verdict(case.values[0], case.values[1])[0] is None for case in TRAIN_CASES + EVAL_CASES]
    assert len(verdicts) >= 500
    assert 0.2 < sum(verdicts) / len(verdicts) < 0.8


def test_suggestions_are_valid_for_trl():
    # Every suggestion for an invalid case is accepted by GRPOConfig too.
    for case in TRAIN_CASES[::7] + EVAL_CASES[::5]:
        processes, inputs = case.values
        result = plan(num_processes=processes, **inputs)
        for suggestion in result.suggestions:
            changed = suggestion.plan.inputs
            names = (set(inputs) | set(suggestion.changes)) - {"num_processes", "vllm_gpus"}
            trl_inputs = {k: changed[k] for k in names}
            assert trl_verdict(changed["num_processes"], trl_inputs)[0] is None, suggestion.description
