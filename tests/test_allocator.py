"""The allocator and thread choices a training process starts with: names, environments, refusals."""

import pytest

from workbench.errors import WorkbenchError
from workbench.jobs import allocator, commands
from workbench.spec.config import RunConfig
from workbench.spec.hardware import cpu_threads


def test_the_default_is_installed_or_falls_back_to_glibc(monkeypatch):
    monkeypatch.delenv(allocator.ALLOCATOR_ENV_VAR, raising=False)
    chosen = allocator.choose()
    assert chosen in allocator.available()
    assert chosen == (allocator.DEFAULT_ALLOCATOR if allocator.DEFAULT_ALLOCATOR in allocator.available() else "glibc")


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
