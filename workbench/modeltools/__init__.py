"""Jobs that load a model outside training: answering prompts with it, and merging an adapter into it.

- `sampling`      `python -m workbench sample` jobs: a model (and adapter) answering prompts
- `probes`        the Compare tab's jobs: base model and checkpoint answering the same prompts
- `export_model`  merges a run's adapter into its base model, in a process of its own
"""
