"""The Setup tab's cluster export: one machine's processes times the machines, bundles beside the runs."""

import pytest

from workbench.jobs import bundle
from workbench.runstore import runfolder
from workbench.spec.config import RunConfig
from workbench.ui import export_view


@pytest.fixture
def form_cfg():
    # what the form gives: this machine's processes (2 CPU processes) and a small valid batch
    return RunConfig(
        model="tiny", device="cpu", num_processes=2, per_device_train_batch_size=2, num_generations=2, max_steps=2
    )


def test_the_export_multiplies_one_machines_processes(form_cfg):
    cfg = export_view.cluster_config(form_cfg, 4, " 10.0.0.1 ", 29501, "ddp", False)
    assert (cfg.num_machines, cfg.num_processes, cfg.main_process_ip, cfg.main_process_port) == (
        4,
        8,
        "10.0.0.1",
        29501,
    )


def test_bundles_land_under_the_runs_folder_and_are_not_runs(form_cfg, tmp_path):
    cfg = export_view.cluster_config(form_cfg, 2, "", 29500, "ddp", False)
    run_id = runfolder.new_run_id(cfg.run_name or cfg.task)
    folder = export_view.bundle_folder(tmp_path, run_id)
    written = bundle.write_bundle(cfg, folder, run_id)
    assert written.folder == tmp_path / "bundles" / run_id
    assert runfolder.list_run_dirs(tmp_path) == []
    text = export_view.export_text(written.folder, run_id, written.commands, tmp_path)
    assert str(written.folder) in text and f"WORKBENCH_RUNS_DIR={tmp_path}" in text and "launch_train.sh 1" in text


def test_the_export_fields_are_runconfig_fields():
    assert set(export_view.EXPORT_FIELDS) <= set(RunConfig().to_dict())
