"""Speed choices measured where the run runs (workbench/tuning/): the rule that picks, the key a choice is kept under,
the server's cache, the probe on a real tiny model (a lever that merged wrongly is caught), `workbench tune`, and a
run that takes the kept choice."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from workbench.runstore import runfolder
from workbench.spec.config import RunConfig
from workbench.trainer import speed_choice, speed_probe, training
from workbench.tuning import cache, choice, for_config, machine
from workbench.tuning.choice import Candidate, Possible, SpeedChoice

ROOT = Path(__file__).resolve().parents[1]
TRL = Candidate()
SHARED = Candidate(shared_prompt_pass=True)
COPY = Candidate("float32", True)
PACKED = Candidate("float32", True, packed_decode=True)
BF16 = Candidate("bfloat16", True)


def seconds(**by_candidate: float) -> dict[str, float]:
    names = {"trl": TRL, "shared": SHARED, "copy": COPY, "packed": PACKED, "bf16": BF16}
    return {names[name].label(): value for name, value in by_candidate.items()}


def test_the_fastest_exact_candidate_wins_and_a_simpler_one_within_the_noise_margin_beats_it(monkeypatch):
    monkeypatch.setattr(choice, "BF16_COPY_LEARNS_AS_WELL", False)  # the exact levers alone (the next test: bfloat16)
    everything = choice.first_round(Possible(bf16_copy=True))
    assert everything == [TRL, SHARED, COPY, PACKED, BF16]
    assert choice.pick(seconds(trl=8, shared=7, copy=5.8, packed=7.8, bf16=4.6), everything, {}, True) == COPY
    # packed is fastest but by less than MIN_GAIN over the copy alone: the copy, with one lever fewer, wins
    assert choice.pick(seconds(trl=8, shared=7, copy=5.0, packed=4.95), everything, {}, True) == COPY
    assert choice.pick(seconds(trl=8, shared=7, copy=5.0, packed=4.0), everything, {}, True) == PACKED
    # a candidate that did not give TRL's completions is never taken
    failed = {COPY.label(): "3 of 8 completions differ", PACKED.label(): "3 of 8 completions differ"}
    assert choice.pick(seconds(trl=8, shared=7, copy=5.0, packed=4.0), everything, failed, True) == SHARED
    assert choice.pick({}, everything, {}, True) == TRL
    assert choice.first_round(Possible(shared=False, packed=False)) == [TRL, Candidate("float32")]


def test_the_bfloat16_copy_is_taken_only_on_native_bfloat16_and_once_the_learning_benchmark_shows_no_loss(monkeypatch):
    timings = seconds(trl=8, copy=5.8, bf16=4.0)
    candidates = [TRL, COPY, BF16]
    monkeypatch.setattr(choice, "BF16_COPY_LEARNS_AS_WELL", False)
    assert choice.pick(timings, candidates, {}, bf16_native=True) == COPY
    monkeypatch.setattr(choice, "BF16_COPY_LEARNS_AS_WELL", True)
    assert choice.pick(timings, candidates, {}, bf16_native=True) == BF16
    assert choice.pick(timings, candidates, {}, bf16_native=False) == COPY


def test_the_key_changes_with_the_machine_the_model_and_the_shape_but_not_with_the_learning_rate():
    here = {"cpu": "AMD EPYC", "cores": 2, "torch": "2.13.0"}
    config = RunConfig.for_task("demo").to_dict()
    key = choice.key_of(here, "/models/a", config)
    assert choice.key_of(here, "/models/a", {**config, "learning_rate": 1e-3}) == key
    assert choice.key_of({**here, "cpu": "Intel Xeon"}, "/models/a", config) != key
    assert choice.key_of({**here, "torch": "2.14.0"}, "/models/a", config) != key
    assert choice.key_of(here, "/models/b", config) != key
    assert choice.key_of(here, "/models/a", {**config, "per_device_train_batch_size": 16}) != key
    assert choice.key_of(here, "/models/a", {**config, "max_completion_length": 64}) != key


def test_the_dashboards_demo_and_the_command_lines_share_one_choice_on_a_cpu_machine(monkeypatch):
    from workbench.ui import setup_form, setup_form_view

    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")  # a CPU machine, whatever this one has
    dashboard = setup_form.config_from_values(*setup_form_view.default_values({"gpus": [], "busy": []}))
    command_line = RunConfig.for_task("demo")
    assert (dashboard.device, command_line.device) == ("cpu", "auto")  # what each writes
    assert for_config.key_for(dashboard) == for_config.key_for(command_line)
    assert for_config.key_for(command_line.with_changes(device="cuda")) != for_config.key_for(command_line)


def test_a_choice_kept_under_other_rules_is_measured_again(monkeypatch):
    here, config = {"cpu": "AMD EPYC"}, RunConfig.for_task("demo").to_dict()
    key = choice.key_of(here, "/models/a", config)
    monkeypatch.setattr(choice, "BF16_COPY_LEARNS_AS_WELL", not choice.BF16_COPY_LEARNS_AS_WELL)
    assert choice.key_of(here, "/models/a", config) != key


def test_the_cpu_name_and_flags_read_from_x86_and_arm_cpuinfo():
    name, flags = machine._cpuinfo_fields("processor\t: 0\nmodel name\t: AMD EPYC\nflags\t\t: fpu avx2 avx512_bf16\n")
    assert (name, machine.native_bf16(flags)) == ("AMD EPYC", True)
    name, flags = machine._cpuinfo_fields("processor\t: 0\nFeatures\t: fp asimd sve\nCPU part\t: 0xd40\n")
    assert (name, machine.native_bf16(flags)) == ("", False)
    assert machine.native_bf16({"fp", "asimd", "bf16"})
    assert set(machine.fingerprint()) >= {"cpu", "cpu_flags", "cores", "torch", "transformers", "trl", "peft"}


def a_choice(key: str = "k1", merged: str = "float32", at: float = 1.0) -> SpeedChoice:
    return SpeedChoice(
        key=key,
        chosen=Candidate(merged, True),
        cpu="Test CPU",
        measured_at=at,
        seconds={TRL.label(): 2.0, Candidate(merged, True).label(): 1.0},
    )


def test_the_cache_keeps_choices_by_key_reads_nothing_malformed_and_is_never_written_from_a_sandbox(
    tmp_path, monkeypatch
):
    path = tmp_path / "speed-choices.json"
    assert cache.lookup("k1", path) is None
    assert cache.store(a_choice(), path)
    assert cache.lookup("k1", path) == a_choice()
    assert cache.lookup("k2", path) is None
    runfolder.write_json_atomic(
        path,
        {
            "k1": {"key": "k1", "chosen": {"merged_generation": "float64"}},
            "k2": {**a_choice("k2").to_dict(), "key": "k3"},
            "k4": "text",
        },
    )
    assert (cache.lookup("k1", path), cache.lookup("k2", path), cache.lookup("k4", path)) == (None, None, None)
    path.unlink()
    path.symlink_to(tmp_path / "elsewhere.json")  # a link where the cache lives is read as no cache
    (tmp_path / "elsewhere.json").write_text(json.dumps({"k1": a_choice().to_dict()}))
    assert cache.lookup("k1", path) is None
    monkeypatch.setenv(runfolder.SANDBOX_ENV, "1")
    assert not cache.store(a_choice("k5"), tmp_path / "other.json") and not (tmp_path / "other.json").exists()


def test_the_cache_keeps_the_newest_entries_only(tmp_path, monkeypatch):
    monkeypatch.setattr(cache, "MAX_ENTRIES", 3)
    path = tmp_path / "speed-choices.json"
    for index in range(5):
        cache.store(a_choice(f"k{index}", at=float(index)), path)
    assert sorted(json.loads(path.read_text())) == ["k2", "k3", "k4"]


def test_a_run_takes_the_choice_the_launcher_hands_over_only_for_its_own_key(tmp_path, monkeypatch):
    monkeypatch.setenv("WORKBENCH_CACHE", str(tmp_path))
    config = RunConfig.for_task("demo", model="tiny")
    handed = a_choice(for_config.key_for(config), merged="bfloat16")
    env = {for_config.CHOICE_ENV: json.dumps(handed.to_dict()), for_config.PROBE_ENV: "off"}
    taken, record = speed_choice.choose(config, print, training.probe_trainer, env)
    assert taken == handed and record["merged_generation"] == "bfloat16" and record["cpu"] == "Test CPU"
    other = {**env, for_config.CHOICE_ENV: json.dumps(a_choice("another-key").to_dict())}
    taken, record = speed_choice.choose(config, print, training.probe_trainer, other)
    assert taken is None and record["merged_generation"] == "no" and "=off" in record["source"]
    explicit = config.with_changes(merged_generation="float32", shared_prompt_pass="no", packed_decode="no")
    assert (
        speed_choice.choose(explicit, print, training.probe_trainer, env)[1]["source"]
        == "every speed lever is set in the config"
    )
    # the launcher hands a kept choice over in the run's environment (a sandboxed run cannot read the cache)
    assert for_config.launcher_env(config) == {}
    cache.store(handed)
    assert json.loads(for_config.launcher_env(config)[for_config.CHOICE_ENV]) == handed.to_dict()


def tune(tiny_model: str, cache_dir: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "WORKBENCH_CACHE": str(cache_dir)}
    env.pop(for_config.PROBE_ENV, None)
    return subprocess.run(
        [sys.executable, "-m", "workbench", "tune", "--model", tiny_model, *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )


@pytest.mark.slow
def test_workbench_tune_times_each_candidate_on_a_real_model_keeps_the_choice_and_a_run_takes_it(tiny_model, tmp_path):
    done = tune(tiny_model, tmp_path, "--json")
    assert done.returncode == 0, done.stderr
    measured = SpeedChoice.from_dict(json.loads(done.stdout))
    assert "timing 1/" in done.stderr and "kept in" in done.stderr
    assert set(measured.seconds) >= {TRL.label(), SHARED.label(), Candidate("float32", True).label()}
    # exact, or the bfloat16 copy on a CPU that multiplies bfloat16 natively (the learning benchmark showed no loss)
    assert measured.exact_failures == {} and choice.allowed(measured.chosen, {}, machine.native_bf16())
    assert measured.cpu == machine.cpu_name() and measured.chosen.label() in measured.seconds
    again = tune(tiny_model, tmp_path)
    assert "kept from an earlier probe" in again.stderr and "timing" not in again.stderr
    assert f"chosen: {measured.chosen.label()}" in again.stdout

    run_dir = tmp_path / "run"
    env = {**os.environ, "WORKBENCH_CACHE": str(tmp_path)}
    env.pop(for_config.PROBE_ENV, None)
    trained = subprocess.run(
        [
            sys.executable,
            "-m",
            "workbench",
            "train",
            "--model",
            tiny_model,
            "--max-steps",
            "1",
            "--set",
            "eval_strategy=no",
            "--run-dir",
            str(run_dir),
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert trained.returncode == 0, trained.stderr[-2000:]
    status = runfolder.read_status(run_dir)
    assert status["speed_choice"]["source"] == "measured earlier on this machine"
    assert status["speed_choice"]["chosen"] == measured.chosen.label()
    assert status["merged_generation"]["value"] == measured.chosen.merged_generation
    assert "speed probe" not in trained.stdout + trained.stderr


@pytest.mark.slow
def test_a_copy_that_merges_wrongly_or_a_decode_step_that_never_runs_is_caught_and_never_chosen(
    tiny_model, monkeypatch, tmp_path
):
    from workbench.trainer import llama_decode
    from workbench.trainer.generation_copy import GenerationCopy

    def sync_without_the_update(self, step):  # the copy keeps the base weights: the LoRA update never lands
        self.synced_step = step

    def the_models_own_forward(self, **kwargs):  # the decode step written for llama layers never runs
        return self.own_forward(**kwargs)

    monkeypatch.setattr(GenerationCopy, "sync", sync_without_the_update)
    monkeypatch.setattr(llama_decode.FusedLlamaDecode, "forward", the_models_own_forward)
    monkeypatch.setenv("WORKBENCH_CACHE", str(tmp_path))
    measured = speed_probe.measure(RunConfig.for_task("demo", model=tiny_model), lambda _: None, training.probe_trainer)
    assert "completions differ from TRL's sampling" in measured.exact_failures[COPY.label()]
    assert measured.exact_failures[PACKED.label()] == (
        "did not take effect: packed_decode: no decode step ran through MKL's packed GEMM"
    )
    if BF16.label() in measured.seconds:  # timed where the CPU has native bfloat16: its sync is the same as the copy's
        assert measured.exact_failures[BF16.label()].startswith("its float32 twin failed the exact check")
    assert measured.chosen.merged_generation == "no"
    explicit = speed_probe.measure(
        RunConfig.for_task("demo", model=tiny_model, merged_generation="no"), lambda _: None, training.probe_trainer
    )
    assert set(explicit.seconds) == {TRL.label(), SHARED.label()}  # only what the config leaves to auto


TAMPER = '''
import json, os

def tamper(completions, **kwargs):
    """A student's reward: forge this machine's speed choice, so that other runs take a lever it picked."""
    outcome = []
    for path in (CACHE_FILE, "cache-link.json"):
        try:
            if path == "cache-link.json" and not os.path.lexists(path):
                os.symlink(CACHE_FILE, path)
            with open(path, "w") as handle:
                handle.write(json.dumps({"forged": True}))
            outcome.append("wrote " + path)
        except OSError as exc:
            outcome.append(type(exc).__name__)
    with open("tamper.txt", "a") as handle:
        handle.write(" ".join(outcome) + "\\n")
    return [0.0 for _ in completions]
'''


@pytest.mark.slow
@pytest.mark.skipif(
    not __import__("shutil").which("bwrap"), reason="bubblewrap is not installed (make test installs it)"
)
def test_a_sandboxed_run_takes_a_choice_measured_outside_its_sandbox_and_cannot_forge_the_cache(tmp_path, monkeypatch):
    from helpers import tiny_settings

    from workbench.jobs import launcher, run_state, sandbox

    cache_dir = tmp_path / "cache"
    monkeypatch.setenv("WORKBENCH_CACHE", str(cache_dir))
    monkeypatch.delenv(for_config.PROBE_ENV, raising=False)
    reward = tmp_path / "tamper.py"
    reward.write_text(TAMPER.replace("CACHE_FILE", repr(str(cache_dir / cache.CACHE_FILE))))
    config = RunConfig.for_task(
        "demo", **tiny_settings(max_steps=1, reward_file=str(reward), eval_strategy="no", reward_names=["tamper"])
    )
    runs = tmp_path / "runs"
    run_id = launcher.start(config, runs, sandboxed=sandbox.Policy())
    final = run_state.wait(run_id, runs, timeout=400)
    assert final["state"] == "finished", runfolder.read_log_tail(runs / run_id)
    status = runfolder.read_status(runs / run_id)
    # measured by `workbench tune` outside the sandbox before it started, kept, and handed over
    assert status["speed_choice"]["source"] == "measured earlier on this machine"
    kept = cache.lookup(for_config.key_for(config))
    assert kept is not None and status["speed_choice"]["chosen"] == kept.chosen.label()
    assert "forged" not in (cache_dir / cache.CACHE_FILE).read_text()
    assert set((runs / run_id / "tamper.txt").read_text().split()) <= {
        "OSError",
        "PermissionError",
        "FileNotFoundError",
        "wrote",
        "cache-link.json",
    }
    assert "timing 1/" in (runs / run_id / runfolder.LOG_FILE).read_text()  # the probe's lines are in the run's log
