"""Background processes and the run folders they write.

- `runfolder`  the files of `runs/<run_id>/`: the one contract between a training process and its readers
- `launcher`   start, watch, stop, resume and delete training runs
- `sampling`   `python -m workbench sample` jobs: a model (and adapter) answering prompts
- `probes`     the Compare tab's jobs: base model and checkpoint answering the same prompts
- `processes`  spawn a job in its own session, end its whole tree, find a free port
"""
