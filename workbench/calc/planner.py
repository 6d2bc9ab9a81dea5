"""`plan()`: TRL's verdict on a set of batch settings, with the nearest valid fixes.

The rules (`rules.build_plan`) say what TRL makes of the inputs; the
suggestions (`suggestions.suggest_fixes`) search for valid neighbours. This
module puts the two together so neither has to import the other.
"""

from __future__ import annotations

from workbench.calc.rules import Plan, build_plan, normalise_inputs
from workbench.calc.suggestions import suggest_fixes


def plan(
    per_device_train_batch_size=8,
    gradient_accumulation_steps=1,
    num_generations=8,
    num_processes=1,
    steps_per_generation=None,
    generation_batch_size=None,
    num_iterations=1,
    dataset_size=None,
    num_train_epochs=1.0,
    max_steps=-1,
    max_completion_length=512,
    do_eval=False,
    per_device_eval_batch_size=8,
    num_generations_eval=None,
    vllm_gpus=0,
    with_suggestions=True,
) -> Plan:
    """What TRL 1.16 makes of these GRPOConfig values on `num_processes` training processes.

    `vllm_gpus` counts GPUs serving a vLLM server beside the training processes
    (TRL never sees them; suggestions may move one between the two).
    num_train_epochs defaults to 1 here; TrainingArguments' own default is 3.
    do_eval=True stands for evaluating during training (TRL checks the eval
    batch only when do_eval and eval_strategy != "no").
    Raises InputError for values no configuration could have.
    """
    v = normalise_inputs(
        per_device_train_batch_size=per_device_train_batch_size,
        gradient_accumulation_steps=gradient_accumulation_steps,
        num_generations=num_generations,
        num_processes=num_processes,
        steps_per_generation=steps_per_generation,
        generation_batch_size=generation_batch_size,
        num_iterations=num_iterations,
        dataset_size=dataset_size,
        num_train_epochs=num_train_epochs,
        max_steps=max_steps,
        max_completion_length=max_completion_length,
        do_eval=do_eval,
        per_device_eval_batch_size=per_device_eval_batch_size,
        num_generations_eval=num_generations_eval,
        vllm_gpus=vllm_gpus,
    )
    result = build_plan(v)
    if with_suggestions and not result.valid:
        result.suggestions = suggest_fixes(v)
    return result
