"""What a run is, before anything runs: its config, model, task, rewards, dataset, memory and hardware.

- `config`       RunConfig (one dataclass, TRL's field names) and its checks
- `models`       the bundled model, local folders, hub ids, the tiny random model
- `tasks`        the built-in tasks and their presets
- `rewards`      the reward registry and user reward files
- `datasets_io`  user datasets (JSONL, CSV, Parquet, a datasets folder)
- `memory`       the memory estimate of a run, from the model's config.json
- `hardware`     the GPUs a run can use, asked through NVML without torch

Checking a config here imports no torch: bad input is refused before any model loads.
"""
