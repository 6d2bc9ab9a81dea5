"""The allocator and thread choices a training process starts with: names, environments, refusals."""

from dataclasses import replace

import pytest

from workbench.errors import WorkbenchError
from workbench.jobs import allocator, allocator_probe, commands
from workbench.runstore import runfolder
from workbench.sources.gpus import cpu_threads
from workbench.spec.config import RunConfig
from workbench.tuning import allocator_kept


def test_the_default_is_glibc_until_an_allocator_is_measured_on_this_machine(monkeypatch, tmp_path):
    monkeypatch.delenv(allocator.ALLOCATOR_ENV_VAR, raising=False)
    monkeypatch.setenv("WORKBENCH_CACHE", str(tmp_path))
    assert allocator.choose() == "glibc"  # nothing measured here: what a process gets without the workbench

    assert allocator_kept.keep(allocator_kept.measured({"glibc": 5.0, "glibc-arenas": 4.0}))
    assert allocator.choose() == "glibc-arenas"  # measured faster here, by more than the noise margin
    assert allocator.choose("glibc") == "glibc"  # an explicit request still wins

    elsewhere = replace(allocator_kept.kept(), key="another-machine")
    assert allocator_kept.keep(elsewhere)
    assert allocator_kept.kept() is None and allocator.choose() == "glibc"  # another machine's figure is not ours

    monkeypatch.setenv(runfolder.SANDBOX_ENV, "1")
    assert not allocator_kept.keep(allocator_kept.measured({"glibc": 1.0}))  # a sandboxed run keeps nothing


def test_glibc_s_own_allocator_wins_unless_another_is_faster_by_the_noise_margin():
    assert allocator_kept.pick({"glibc": 5.0, "tcmalloc": 4.95}) == "glibc"
    assert allocator_kept.pick({"glibc": 5.0, "tcmalloc": 4.5}) == "tcmalloc"
    assert allocator_kept.pick({"jemalloc": 6.0, "tcmalloc": 5.0}) == "tcmalloc"


@pytest.mark.slow
def test_the_allocator_probe_times_a_real_run_under_the_allocator_it_names(tiny_model, tmp_path, monkeypatch):
    monkeypatch.setenv("WORKBENCH_CACHE", str(tmp_path / "cache"))
    lines = []
    seconds = allocator_probe.measure(["glibc-arenas"], tiny_model, 2, lines.append)
    assert list(seconds) == ["glibc-arenas"] and 0 < seconds["glibc-arenas"] < 60
    assert lines[0].startswith("timing 1/1: glibc-arenas")
    with pytest.raises(WorkbenchError, match="did not train"):  # a failed run is said, not timed as zero
        allocator_probe.step_seconds("glibc", str(tmp_path / "no-model-here"), 2, tmp_path / "runs")


def test_the_environment_variable_overrides_the_default(monkeypatch):
    monkeypatch.setenv(allocator.ALLOCATOR_ENV_VAR, "glibc-trim")
    assert allocator.choose() == "glibc-trim"
    assert allocator.choose("glibc") == "glibc"  # an explicit request wins over the variable


def test_an_unknown_allocator_names_the_variable_and_the_choices():
    with pytest.raises(WorkbenchError) as caught:
        allocator.choose("mimalloc")
    assert caught.value.field == allocator.ALLOCATOR_ENV_VAR
    assert "glibc" in caught.value.fix and "mimalloc" in str(caught.value)


def test_one_choice_replaces_another():
    trim = allocator.allocator_env("glibc-trim", base={"PATH": "/bin", "LD_PRELOAD": "/old.so"})
    assert trim["MALLOC_MMAP_THRESHOLD_"] == "131072" and "LD_PRELOAD" not in trim and trim["PATH"] == "/bin"
    plain = allocator.allocator_env("glibc", base=trim)
    assert not any(k.startswith("MALLOC_") for k in plain)
    assert plain[allocator.APPLIED_ENV_VAR] == "glibc"


@pytest.mark.skipif("tcmalloc" not in allocator.available(), reason="Debian's libtcmalloc-minimal4 is not installed")
def test_tcmalloc_is_preloaded_from_its_library():
    env = allocator.allocator_env("tcmalloc", base={})
    assert env["LD_PRELOAD"].endswith("libtcmalloc_minimal.so.4")


@pytest.mark.parametrize("processes, cores, expected", [(1, 2, 2), (2, 2, 1), (3, 2, 1), (2, 16, 8)])
def test_cpu_threads_share_the_cores(processes, cores, expected):
    assert cpu_threads(processes, cores) == expected


def test_launch_env_of_a_cpu_run(monkeypatch):
    monkeypatch.delenv(allocator.ALLOCATOR_ENV_VAR, raising=False)
    env = commands.launch_env(RunConfig(device="cpu", num_processes=2), base={"PATH": "/bin"})
    assert env["CUDA_VISIBLE_DEVICES"] == "" and env["OMP_NUM_THREADS"] == str(cpu_threads(2))
    assert env[allocator.APPLIED_ENV_VAR] == allocator.choose()
    mine = commands.launch_env(RunConfig(device="cpu"), base={"OMP_NUM_THREADS": "1"})
    assert mine["OMP_NUM_THREADS"] == "1"  # the caller's own setting wins


def test_status_records_the_allocator_as_a_decision_with_its_reason(monkeypatch, tmp_path):
    monkeypatch.delenv(allocator.ALLOCATOR_ENV_VAR, raising=False)
    monkeypatch.setenv("WORKBENCH_CACHE", str(tmp_path))
    none_kept = allocator.decide()
    assert (none_kept.value, none_kept.measured_on) == ("glibc", None) and "none measured" in none_kept.why
    assert allocator_kept.keep(allocator_kept.measured({"glibc": 5.0, "glibc-arenas": 4.0}))
    kept = allocator.decide()
    assert kept.value == "glibc-arenas" and kept.measured_on == allocator_kept.kept().cpu and "tune" in kept.why
    asked = allocator.decide("glibc-trim")
    assert (asked.value, asked.why) == ("glibc-trim", f"{allocator.ALLOCATOR_ENV_VAR} asks for it")
    # the launcher's decision travels in the environment; the training process records it as it was made
    monkeypatch.setattr(allocator.os, "environ", allocator.allocator_env(kept.value, base={}, decision=kept))
    assert allocator.applied_decision() == kept
    monkeypatch.setattr(allocator.os, "environ", {})
    assert allocator.applied_decision().why == "not chosen by the workbench"
