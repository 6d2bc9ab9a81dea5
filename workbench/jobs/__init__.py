"""Process control: starting, judging, queueing and ending the processes a run needs.

- `launcher`     start, stop, resume and delete training runs
- `commands`     the command line and environment a run starts with
- `run_state`    how a run stands, judged from its folder and its processes
- `run_list`     every run of a runs folder, as the Runs tab lists them
- `queue`        the GPU queue's rules, pure; `gpu_queue` reads it from the run folders
- `dispatcher`   the one process per runs folder that starts queued runs
- `allocator`    which memory allocator a training process runs with
- `vllm_server`  a run's own vLLM server and the guard that ends it with the run
- `sandbox`      the bubblewrap sandbox a run of a dashboard with accounts starts in
- `bundle`       the cluster bundle that runs a config on other machines
- `processes`    spawn a job in its own session, end its whole tree, find a free port
"""
