"""The run folder: the one contract between a training process and everything that reads it.

- `runfolder`    the files of `runs/<run_id>/`, their names, and how each is written and read
- `jsonl_cache`  reads the growing JSON-lines files without reading a byte twice
- `file_cache`   parses a run's small files once per version, for listings of thousands of runs
- `run_locks`    the runs folder's queue and dispatcher locks, a run's stop request
- `checkpoint_integrity`  which checkpoint folders are whole enough to resume from
"""
