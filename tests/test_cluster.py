"""The cluster shape of a RunConfig: total processes for the calculator, and refusals with a fix."""

import pytest

from workbench.spec import cluster
from workbench.spec.config import ConfigError, RunConfig
from workbench.spec.config_checks import check_config, plan_for, validate_config


def cfg(**changes) -> RunConfig:
    # tiny model, 2 completions per process: a valid batch plan for any process count
    base = dict(model="tiny", per_device_train_batch_size=2, num_generations=2, device="cpu")
    return RunConfig(**{**base, **changes})


def fields(config: RunConfig) -> list[str]:
    return [p.field for p in validate_config(config)]


@pytest.mark.parametrize(
    "machines, processes, per_machine", [(1, 1, 1), (2, 2, 1), (2, 8, 4), (4, 4, 1)], ids=["1x1", "2x1", "2x4", "4x1"]
)
def test_num_processes_is_the_total_and_the_calculator_sees_it(machines, processes, per_machine):
    config = cfg(num_machines=machines, num_processes=processes)
    assert cluster.processes_per_machine(config) == per_machine
    assert fields(config) == []
    plan = plan_for(config.with_changes(max_steps=-1), dataset_size=64)
    # gbs = bs * n * GA with n the world size over every machine
    assert plan.generation_batch_size == 2 * processes


def test_processes_that_do_not_split_are_refused_with_the_nearest_multiples():
    with pytest.raises(ConfigError) as caught:
        check_config(cfg(num_machines=2, num_processes=3))
    problem = caught.value.problems[0]
    assert problem.field == "num_processes" and "do not split evenly over 2 machines" in problem.rule
    assert "use 2 or 4" in problem.fix


@pytest.mark.parametrize(
    "value, rule",
    [
        ("a b", "neither an IP address nor a host name"),
        ("10.0.0.999", "neither an IP address nor a host name"),
        ("0.0.0.0", "cannot connect to it"),
    ],
    ids=["space", "bad-octet", "any-address"],
)
def test_bad_main_process_ip_is_refused(value, rule):
    problems = validate_config(cfg(num_machines=2, num_processes=2, main_process_ip=value))
    assert [p.field for p in problems] == ["main_process_ip"] and rule in problems[0].rule


@pytest.mark.parametrize(
    "value",
    ["", "127.0.0.1", "10.1.2.3", "node-01.cluster.local", "fe80::1"],
    ids=["empty", "loopback", "private", "hostname", "ipv6"],
)
def test_good_addresses_pass(value):
    assert fields(cfg(num_machines=2, num_processes=2, main_process_ip=value)) == []


@pytest.mark.parametrize("port", [0, 80, 70000], ids=["zero", "privileged", "too-big"])
def test_bad_main_process_port_is_refused(port):
    problems = validate_config(cfg(num_machines=2, num_processes=2, main_process_port=port))
    assert [p.field for p in problems] == ["main_process_port"] and "29500" in problems[0].fix


@pytest.mark.parametrize("backend", ["deepspeed-zero2", "deepspeed-zero3", "fsdp"])
def test_deepspeed_and_fsdp_on_cpu_are_refused(backend):
    problems = validate_config(cfg(num_machines=2, num_processes=2, distributed_backend=backend))
    assert [p.field for p in problems] == ["distributed_backend"]
    assert "CUDA" in problems[0].rule and "ddp" in problems[0].fix


@pytest.mark.parametrize("backend", ["deepspeed-zero3", "fsdp"])
def test_a_sharded_adapter_cannot_feed_the_vllm_server(backend):
    config = cfg(
        device="cuda",
        num_machines=2,
        num_processes=4,
        distributed_backend=backend,
        generation="vllm-server",
        vllm_node=True,
    )
    problems = validate_config(config)
    assert [p.field for p in problems] == ["distributed_backend"]
    assert "split over the processes" in problems[0].rule and "trl-server" in problems[0].fix


def test_zero2_serves_vllm_and_zero3_serves_trl_server():
    ok = dict(device="cuda", num_machines=2, num_processes=4, vllm_node=True)
    assert fields(cfg(**ok, distributed_backend="deepspeed-zero2", generation="vllm-server")) == []
    assert fields(cfg(**ok, distributed_backend="deepspeed-zero3", generation="trl-server")) == []


def test_unknown_backend_is_refused():
    problems = validate_config(cfg(distributed_backend="horovod"))
    assert problems[0].field == "distributed_backend" and "deepspeed-zero3" in problems[0].fix


@pytest.mark.parametrize(
    "changes, field, words",
    [
        (dict(generation="transformers"), "vllm_node", "uses no server"),
        (dict(generation="vllm-server", vllm_server_base_url="http://10.0.0.5:8000"), "vllm_node", "existing server"),
        (dict(generation="vllm-server", vllm_gpu_ids=[3]), "vllm_gpu_ids", "not one of the num_machines"),
    ],
    ids=["no-server", "external-server", "gpus-from-a-training-machine"],
)
def test_a_vllm_node_is_never_a_training_node(changes, field, words):
    problems = validate_config(cfg(device="cuda", num_machines=2, num_processes=2, vllm_node=True, **changes))
    assert [p.field for p in problems] == [field] and words in problems[0].rule


def test_a_vllm_node_adds_a_machine_to_the_job_but_not_to_the_batch():
    config = cfg(device="cuda", num_machines=2, num_processes=4, vllm_node=True, generation="vllm-server")
    assert cluster.machines_in_job(config) == 3 and cluster.processes_per_machine(config) == 2
    assert plan_for(config).generation_batch_size == 2 * 4


def test_the_vllm_port_and_the_rendezvous_port_differ():
    problems = validate_config(
        cfg(device="cuda", num_machines=2, num_processes=2, vllm_node=True, generation="vllm-server", vllm_port=29500)
    )
    assert [p.field for p in problems] == ["main_process_port"]


def test_one_machine_is_checked_against_this_machines_hardware():
    # a one-machine DeepSpeed run on this CPU-only machine: refused for the CPU here
    problems = validate_config(
        RunConfig(model="tiny", distributed_backend="deepspeed-zero2", device="auto", num_processes=1).with_changes()
    )
    assert "distributed_backend" in [p.field for p in problems]


def test_new_fields_round_trip_from_text():
    config = RunConfig.from_dict(
        {"num_machines": "2", "main_process_port": "29501", "vllm_node": "true", "distributed_backend": "fsdp"}
    )
    assert (config.num_machines, config.main_process_port, config.vllm_node) == (2, 29501, True)


def test_the_launcher_sends_a_multi_machine_run_to_the_bundle(tmp_path):
    from workbench.jobs import launcher

    with pytest.raises(launcher.LauncherError, match="export a cluster bundle"):
        launcher.start(cfg(num_machines=2, num_processes=2), runs_dir=tmp_path)
    assert not any(tmp_path.iterdir())
