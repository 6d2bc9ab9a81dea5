"""What a run is, before anything runs: its config, model names, task, rewards, data mapping and memory.

- `config`       RunConfig (one dataclass, TRL's field names) and its checks
- `models`       the model names a run may give (re-exported from sources/model_files)
- `tasks`        the built-in tasks and their presets
- `rewards`      the reward registry and user reward files
- `heldout`      held-out evaluation's pure part: the held-out prompts, pass@k, one evaluation's record
- `eval_at_k`    mean@k, maj@k and best@k over k sampled answers, with their bootstrap spreads
- `memory`       the memory estimate of a run, from the model's config.json

Checking a config here imports no torch: bad input is refused before any model loads. Reading models, datasets
and GPUs is in workbench/sources/, below this package.
"""
