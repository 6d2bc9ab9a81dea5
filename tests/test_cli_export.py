"""`python -m workbench export`: a bundle from a config file or from a run, and one-line refusals."""

import pytest

from workbench.cli import main
from workbench.runstore import runfolder
from workbench.spec.config import RunConfig


@pytest.fixture
def config_file(tmp_path):
    config = RunConfig(model="tiny", device="cpu", per_device_train_batch_size=2, num_generations=2, max_steps=2)
    return config.save(tmp_path / "my.json")


def test_export_a_config_file_with_changes(config_file, tmp_path, capsys):
    code = main(
        [
            "export",
            str(config_file),
            "--out",
            str(tmp_path / "b"),
            "--set",
            "num_machines=2",
            "--set",
            "num_processes=2",
            "--run-id",
            "r1",
        ]
    )
    out = capsys.readouterr().out
    assert code == 0 and "Bundle for run r1" in out and "launch_train.sh 1" in out
    assert RunConfig.load(tmp_path / "b" / "config.json").num_machines == 2


def test_export_a_run_by_its_id(config_file, tmp_path, capsys):
    run_dir = tmp_path / "runs" / "20260101-000000-demo"
    RunConfig.load(config_file).save(run_dir / runfolder.CONFIG_FILE)
    code = main(["export", run_dir.name, "--runs-dir", str(tmp_path / "runs"), "--out", str(tmp_path / "b")])
    assert code == 0 and (tmp_path / "b" / "launch_train.sh").is_file()


@pytest.mark.parametrize(
    "args, words",
    [
        (["nope"], "neither a config file nor a run"),
        (["CONFIG", "--set", "num_machines=2", "--set", "num_processes=3"], "do not split evenly"),
        (
            ["CONFIG", "--set", "num_machines=2", "--set", "num_processes=2", "--set", "main_process_ip=a b"],
            "neither an IP address nor a host name",
        ),
    ],
    ids=["unknown-source", "uneven-split", "bad-ip"],
)
def test_bad_input_exits_2_with_one_line(config_file, tmp_path, capsys, args, words):
    args = [str(config_file) if a == "CONFIG" else a for a in args]
    code = main(["export", *args, "--out", str(tmp_path / "b"), "--runs-dir", str(tmp_path)])
    err = capsys.readouterr().err
    assert code == 2 and words in err and len(err.strip().splitlines()) == 1
