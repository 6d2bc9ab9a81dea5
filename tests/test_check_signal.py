"""`python -m workbench check-signal` and its background job on the tiny model (trainer/signal_probe.py,
cli/check_signal.py, jobs/signal_job.py)."""

import json

import pytest
from helpers import poll_until

from workbench import cli
from workbench.jobs import sandbox, signal_job
from workbench.spec.config import RunConfig

# The tiny random model, short completions, two groups of four: the fewest that make a report.
TINY_CHECK = [
    "--model",
    "tiny",
    "--set",
    "device=cpu",
    "--set",
    "max_completion_length=8",
    "--set",
    "num_generations=4",
    "--set",
    "per_device_train_batch_size=4",
    "--groups",
    "2",
]


@pytest.mark.slow
def test_tiny_model_on_arithmetic_will_not_learn(capsys):
    code = cli.main(["check-signal", "--task", "arithmetic", *TINY_CHECK, "--json"])
    assert code == 0
    report = json.loads(capsys.readouterr().out)
    assert (report["groups"], report["completions"]) == (2, 8)
    assert report["correctness_reward"] == "exact_answer"
    assert report["correctness_rate"] == 0.0 and report["groups_with_correct"] == 0
    assert 0.0 <= report["truncation_rate"] <= 1.0 and report["mean_length"] <= 8
    assert not report["learns"]
    assert report["verdict"] == (
        "arithmetic on tiny: 0 of 2 groups have any correct answer; nothing will learn "
        "- pick a larger model or an easier task"
    )


@pytest.mark.parametrize(
    "args, field",
    [
        (["--set", "temperature=0"], "temperature"),
        (["--groups", "0"], "--groups"),
        (["--set", "correctness_reward=brevity"], "correctness_reward"),
    ],
    ids=["temperature", "groups", "correctness"],
)
def test_bad_config_exits_2_naming_the_field(capsys, args, field):
    code = cli.main(["check-signal", "--task", "arithmetic", "--model", "tiny", "--set", "device=cpu", *args])
    assert code == 2
    assert field in capsys.readouterr().err


@pytest.mark.slow
def test_background_check_writes_its_report(tmp_path):
    config = RunConfig.for_task("arithmetic").with_changes(
        model="tiny", device="cpu", max_completion_length=8, num_generations=4, per_device_train_batch_size=4
    )
    job = signal_job.start_signal_check(config, tmp_path, groups=1)
    assert job.folder.parent == tmp_path / signal_job.CHECKS_DIR
    state = poll_until(lambda: (lambda s: s if s["state"] != "running" else None)(signal_job.read_signal_check(job)))
    assert state["state"] == "done", state
    assert state["report"]["groups"] == 1 and "0 of 1 groups" in state["report"]["verdict"]


@pytest.mark.slow
@pytest.mark.skipif(sandbox.bwrap_binary() is None, reason="bubblewrap is not installed (make test installs it)")
def test_check_from_a_shared_dashboard_runs_in_its_sandbox(tmp_path):
    import gradio as gr
    from helpers import accounts_text, app_handler, setup_form_values

    from workbench.access import users
    from workbench.ui.app import build_app

    app = build_app(tmp_path / "runs", users=users.parse_users(accounts_text()), sandbox=sandbox.Policy())
    start, poll = (app_handler(app, "setup_tab", name) for name in ("start_signal", "poll_signal"))
    values = setup_form_values(model="tiny", max_completion_length=8, num_generations=4, per_device_train_batch_size=4)
    job, shown, _ = start(gr.Request(username="alice"), None, *values)
    assert job is not None, shown
    # started through the sandbox's wrapper, the policy on its command line (never a file in the job's folder)
    assert "workbench.jobs.signal_job" in job.process.args and "--policy" in job.process.args
    assert {p.name for p in job.folder.iterdir()} <= {"check.log", "config.json", "report.json"}
    html = poll_until(lambda: (lambda h, t: h if "Checking" not in h else None)(*poll(job)))
    assert "wb-signal-verdict" in html and "groups with zero spread" in html, html
    assert "correct (mentions_answer full marks)" in html  # the demo's correctness reward, from the task
