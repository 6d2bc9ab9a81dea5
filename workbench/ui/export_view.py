"""The Setup tab's cluster export, pure: the form's run spread over machines, where the bundle goes, what to type.

The form describes one machine (its processes come from the hardware picker);
the export multiplies them by the number of machines, so `num_processes` in
the bundle is the total the batch plan counts. Bundles land in
`<runs folder>/bundles/<run id>/`, beside the runs and never taken for one.
"""

from __future__ import annotations

from pathlib import Path

from workbench.runstore.runfolder import RUNS_DIR_ENV
from workbench.spec.cluster import DISTRIBUTED_BACKENDS
from workbench.spec.config import RunConfig

BUNDLES_DIR = "bundles"
EXPORT_FIELDS = ("num_machines", "main_process_ip", "main_process_port", "distributed_backend", "vllm_node")
BACKEND_CHOICES = DISTRIBUTED_BACKENDS


def cluster_config(
    cfg: RunConfig,
    num_machines: int,
    main_process_ip: str,
    main_process_port: int,
    distributed_backend: str,
    vllm_node: bool,
) -> RunConfig:
    """`cfg` (one machine's processes) run on `num_machines` such machines."""
    # read as the field's type first: 2.5 machines is refused by name (ConfigError), never cut to 2
    machines = max(1, cfg.with_changes(num_machines=num_machines or 1).num_machines)
    return cfg.with_changes(
        num_machines=machines,
        num_processes=cfg.num_processes * machines,
        main_process_ip=(main_process_ip or "").strip(),
        main_process_port=main_process_port,
        distributed_backend=distributed_backend,
        vllm_node=bool(vllm_node),
    )


def bundle_folder(runs_dir: str | Path, run_id: str) -> Path:
    """Where the Export button writes the bundle whose run folder gets `run_id`."""
    return Path(runs_dir) / BUNDLES_DIR / run_id


def export_text(folder: Path, run_id: str, commands: list[str], runs_dir: str | Path) -> str:
    """What the Export box shows: the folder, how to start it, and where the run folder must land to be seen here."""
    return "\n".join(
        [
            f"# bundle written to {folder}",
            "# copy it to the machines (or a shared filesystem); its README.md says the rest.",
            f"# set {RUNS_DIR_ENV}={runs_dir} on machine 0 (a folder this machine shares) and the run "
            f"{run_id} shows in the Runs tab",
            *commands,
        ]
    )
