"""The run report (insight/report.py) built from run folders written as the trainer writes them.

Completions go through the recorder's own `completion_records`, metrics are TRL's
names, probe answers are the files the Compare tab leaves; plotly.js is replaced
by a stand-in, except in the one test that checks it is inlined once.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from html import escape
from html.parser import HTMLParser
from pathlib import Path

import pytest

from workbench.insight import groups, report
from workbench.modeltools import probes
from workbench.runstore import runfolder
from workbench.spec.config import RunConfig
from workbench.spec.config_checks import plan_for
from workbench.trainer.recorder import completion_records
from workbench.ui import run_reports

HOSTILE = '<script>alert("x")</script><img src=x onerror=alert(1)>'
FAKE_PLOTLY = "window.Plotly = {newPlot: function () {}};"
# (step, group) -> the G total rewards of that group; step 2's group 1 is the best, step 4's group 0 the worst.
TOTALS = {
    (1, 0): (0.2, 0.4, 0.6, 0.8),
    (1, 1): (0.1, 0.3, 0.5, 0.5),
    (2, 0): (0.4, 0.4, 0.6, 0.6),
    (2, 1): (0.9, 1.0, 0.9, 1.0),
    (3, 0): (0.5, 0.5, 0.5, 0.5),
    (3, 1): (0.3, 0.6, 0.3, 0.6),
    (4, 0): (0.0, 0.1, 0.0, 0.1),
    (4, 1): (0.7, 0.7, 0.8, 0.9),
    (5, 0): (0.6, 0.8, 0.6, 0.9),
    (5, 1): (0.5, 0.9, 0.7, 0.9),
}
STEPS = 5
G = 4


def round_records(
    step: int, prompt: str = "Name a colour.", completion: str = "Blue {i}", reward_name: str = "brevity"
) -> list[dict]:
    """One generation round in the recorder's format, from TRL-style `_logs` with group-scaled advantages."""
    totals = [total for group in (0, 1) for total in TOTALS[(step, group)]]
    advantages = []
    for group in (0, 1):
        mean, std = groups.mean_and_std(TOTALS[(step, group)])
        advantages += [(total - mean) / (std + 1e-4) for total in TOTALS[(step, group)]]
    logs = {
        "prompt": [f"{prompt} ({i // G})" for i in range(2 * G)],
        "completion": [completion.format(i=i) for i in range(2 * G)],
        "advantages": advantages,
        "rewards": {reward_name: totals},
    }
    return completion_records(logs, step, G, [1.0], lengths=[12] * (2 * G), truncated=[i == 0 for i in range(2 * G)])


def metric_records(reward_name: str = "brevity") -> list[dict]:
    return [
        {
            "step": s,
            "reward": 0.3 + 0.1 * s,
            "reward_std": 0.2,
            f"rewards/{reward_name}/mean": 0.3 + 0.1 * s,
            "kl": 0.01 * s,
            "loss": 0.02 - 0.005 * s,
            "completions/mean_length": 20.0 - s,
            "completions/min_length": 4,
            "completions/max_length": 32,
            "completions/clipped_ratio": 0.1,
            "frac_reward_zero_std": 0.0,
        }
        for s in range(1, STEPS + 1)
    ]


def write_run_folder(runs_dir, name="20261123-101500-demo", config=None, status=None, metrics=None, completions=None):
    """A run folder of a finished 5-step demo run in `runs_dir`, parts replaced as asked."""
    run_dir = runs_dir / name
    run_dir.mkdir(parents=True)
    cfg = (
        config
        if config is not None
        else RunConfig.for_task("demo")
        .with_changes(
            model="tiny",
            num_generations=G,
            max_steps=STEPS,
            # the records below are scored by brevity alone
            reward_names=["brevity"],
            reward_weights=[1.0],
            temperature=1.0,
            eval_strategy="no",
        )
        .to_dict()
    )
    (run_dir / runfolder.CONFIG_FILE).write_text(json.dumps(cfg))
    runfolder.write_json_atomic(
        run_dir / runfolder.STATUS_FILE,
        status
        or {
            "state": "finished",
            "step": STEPS,
            "total_steps": STEPS,
            "started_at": 1_700_000_000.0,
            "updated_at": 1_700_000_125.0,
        },
    )
    runfolder.append_jsonl(run_dir / runfolder.METRICS_FILE, metric_records() if metrics is None else metrics)
    records = [r for s in range(1, STEPS + 1) for r in round_records(s)] if completions is None else completions
    runfolder.append_jsonl(run_dir / runfolder.COMPLETIONS_FILE, records)
    return run_dir


@pytest.fixture
def write_run(tmp_path):
    """`write_run(name, **parts)`: `write_run_folder` in this test's own runs folder."""
    return lambda *args, **parts: write_run_folder(tmp_path / "runs", *args, **parts)


@pytest.fixture(scope="module")
def default_page(tmp_path_factory):
    """The report of the default run, built once for the tests that only read it."""
    return build(write_run_folder(tmp_path_factory.mktemp("default") / "runs"))


def build(run_dir, **kwargs) -> str:
    contents = report.RunContents(
        name=run_dir.name,
        folder=str(run_dir),
        comparisons=probes.stored_comparisons(run_dir),
        **runfolder.read_run(run_dir),
    )
    return report.build_report(contents, plotly_js=kwargs.pop("plotly_js", FAKE_PLOTLY), **kwargs)


class Tags(HTMLParser):
    """Every start tag of a page with its attributes (script bodies are data, as in a browser)."""

    def __init__(self, page: str):
        super().__init__()
        self.tags: list[tuple[str, dict]] = []
        self.feed(page)

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))


def section_text(page: str, anchor: str) -> str:
    """The HTML of one report section, up to the next one (group cards hold sections of their own)."""
    start = page.index(f'<section class="wb-section" id="{anchor}">')
    ends = [i for i in (page.find('<section class="wb-section"', start + 1), page.find("<footer>", start)) if i > 0]
    return page[start : min(ends)]


# ---------------------------------------------------------------- the page


def test_every_section_and_the_four_curves_are_there(default_page):
    page = default_page
    for anchor, _ in report.SECTIONS:
        assert f'<section class="wb-section" id="{anchor}">' in page
    for name in report.CURVES:
        assert f'<div class="wb-figure" id="wb-figure-{name}"></div>' in page
        assert f'Plotly.newPlot("wb-figure-{name}"' in page
    assert "Reward (mean ± std" in page and "KL to the base model" in page and "Completion length" in page


def test_plotly_is_inlined_once_and_no_address_leaves_the_file(write_run):
    from plotly.offline import get_plotlyjs

    page = build(write_run(), plotly_js=None)
    bundle = get_plotlyjs()
    assert page.count(bundle) == 1
    rest = page.replace(bundle, "")
    assert "url(" not in rest and "@import" not in rest  # no font or image fetched by the styles
    tags = Tags(rest).tags
    assert not [t for t, a in tags if t in ("link", "img", "iframe") or "src" in a]
    assert all(a["href"].startswith("#") for t, a in tags if t == "a")


def test_summary_says_the_outcome_settings_and_plan_in_words(default_page):
    summary = section_text(default_page, "summary")
    assert "The mean reward went from 0.40 at step 1 to 0.80 at step 5 (+0.40)." in summary
    assert "The model tiny was trained with a LoRA adapter (rank 16, alpha 32) on the task demo" in summary
    assert "4 completions of at most 32 tokens" in summary and "scored by brevity (weight 1)" in summary
    assert "Each generation round sampled 2 prompts x G = 4 completions" in summary
    assert "8 completions (2 prompt groups)" in summary


def test_batch_plan_uses_the_calculators_words_and_numbers(default_page):
    section = section_text(default_page, "plan")
    assert "Valid: TRL 1.16 accepts these settings" in section
    plan = plan_for(RunConfig.for_task("demo").with_changes(num_generations=G, max_steps=STEPS))
    for meaning, how, number in plan.numbers():
        assert f'{escape(meaning)}<br><small>{escape(how)}</small></td><td class="wb-num">{number}</td>' in section
    assert '<td class="wb-num">5</td>' in section  # optimizer steps in the run: max_steps


def test_settings_table_lists_each_field_with_its_help(default_page):
    settings = section_text(default_page, "settings")
    assert "<code>learning_rate</code>" in settings and "LoRA wants 1e-4 to 1e-3" in settings
    assert "<summary>The other" in settings  # the rest folded away


def test_health_notes_come_from_the_health_checks(default_page, write_run):
    assert "No alarms." in section_text(default_page, "health")
    no_signal = [{**m, "frac_reward_zero_std": 1.0} for m in metric_records()]
    alarmed = section_text(build(write_run("flat", metrics=no_signal)), "health")
    assert 'class="wb-alarm wb-alarm-error"' in alarmed and "No learning signal (step 5)" in alarmed


def held_out_records(accuracies, prompts=("2+2", "3+5")) -> list[dict]:
    """eval.jsonl records at steps 0, 1, ...: each prompt right while its index is below accuracy * n."""
    from workbench.spec.heldout import eval_record

    records = []
    for step, accuracy in enumerate(accuracies):
        right = [i < accuracy * len(prompts) for i in range(len(prompts))]
        rewards = {"exact_answer": [1.0 if ok else 0.0 for ok in right]}
        records.append(
            eval_record(
                step,
                list(prompts),
                [f"answer {step}.{i}" for i in range(len(prompts))],
                rewards,
                [3] * len(prompts),
                "exact_answer",
            )
        )
    return records


def test_the_held_out_curve_the_best_checkpoint_and_the_changed_answers_are_in_the_report(write_run, make_checkpoint):
    run_dir = write_run("evaluated")
    # held-out accuracy falls after step 2 while the training reward rises: the alarm fires too
    runfolder.append_jsonl(run_dir / runfolder.EVAL_FILE, held_out_records([0.5, 0.5, 1.0, 0.5, 0.0, 0.0]))
    for step in (2, 5):
        make_checkpoint(run_dir, step)
    page = build(run_dir)
    held_out = section_text(page, "held-out")
    assert (
        "2 held-out prompts, answered greedily at 6 evaluations. Accuracy went from 50% at step 0 to 0% at "
        "step 5." in held_out
    )
    assert "The best evaluated checkpoint by accuracy is checkpoint-2 (100%)" in held_out
    assert 'Plotly.newPlot("wb-figure-held-out"' in page
    assert "<td><b>2+2</b></td><td>right → wrong</td><td>answer 0.0</td><td>answer 5.0</td>" in held_out
    assert "Held-out accuracy falls as the reward rises (step 5)" in section_text(page, "health")
    assert "evaluated no held-out prompts" in section_text(build(write_run("not-evaluated")), "held-out")


# ---------------------------------------------------------------- completion groups


def test_first_middle_last_steps_then_the_best_and_worst_groups(default_page):
    section = section_text(default_page, "groups")
    headings = [h for h in section.split("<h3>")[1:]]
    titles = [h[: h.index("</h3>")] for h in headings]
    assert titles == [
        "First step: step 1",
        "Middle step: step 3",
        "Last step: step 5",
        "Best group: step 2, mean 0.95",
        "Worst group: step 4, mean 0.05",
    ]
    assert (
        "the groups with the highest and the lowest mean total reward among the run&#x27;s 10 whole groups "
        "over 5 steps (the earliest one when several tie)" in section
    )
    # the best group is the second prompt of its step, shown with the dashboard's cards and arithmetic
    best = headings[3]
    assert "Prompt 2 of 2" in best and best.count('class="wb-card ') == G
    assert "(0.900 - 0.950) / 0.058 = -0.86" in best  # (0.90 - 0.95) / 0.06 would be -0.83


@pytest.mark.parametrize(
    "steps, titles",
    [
        (1, ["First and last step: step 1"]),
        (2, ["First step: step 1", "Last step: step 2"]),
    ],
    ids=["one-step", "two-steps"],
)
def test_a_short_run_names_each_step_once(write_run, steps, titles):
    records = [r for s in range(1, steps + 1) for r in round_records(s)]
    section = section_text(build(write_run(completions=records)), "groups")
    assert [h[: h.index("</h3>")] for h in section.split("<h3>")[1:]][: len(titles)] == titles


def test_best_and_worst_ties_go_to_the_earliest_group():
    def view(step, group, mean):
        item = groups.CompletionView(0, "", {}, mean, 0.0, 0.0, "", None, False, True)
        return groups.GroupView(step, group, "", [item], mean, 0.0, "group", 1)

    best, worst = report.best_and_worst(
        [view(1, 0, 0.5), view(2, 1, 0.9), view(3, 0, 0.9), view(4, 0, 0.1), view(5, 0, 0.1)]
    )
    assert (best.step, best.group, worst.step) == (2, 1, 4)
    assert report.best_and_worst([]) == (None, None)


def test_a_step_recorded_again_after_a_resume_shows_its_newest_round(write_run):
    old = round_records(2, completion="old {i}")
    records = round_records(1) + old + round_records(3) + round_records(2, completion="new {i}")
    by_step = report.rounds_by_step(records)
    for step in (1, 2, 3):
        assert groups.groups_for_step(by_step[step], step) == groups.groups_for_step(records, step)
    section = section_text(build(write_run(completions=records)), "groups")
    assert "new 0" in section and "old 0" not in section


def test_many_prompts_in_a_step_show_the_first_few(write_run):
    records = []
    for group in range(5):
        records += [{**r, "group": group} for r in round_records(1)[:G]]
    section = section_text(build(write_run(completions=records)), "groups")
    assert "The first 3 of the step&#x27;s 5 prompts." in section


# ---------------------------------------------------------------- escaping and odd runs


def test_text_from_the_run_is_shown_never_run(write_run):
    config = RunConfig.for_task("demo").with_changes(model="tiny", run_name="x").to_dict()
    config.update(model=HOSTILE, run_name=HOSTILE)
    records = [
        r
        for s in range(1, 3)
        for r in round_records(s, prompt=HOSTILE, completion=HOSTILE + " {i}", reward_name=HOSTILE)
    ]
    status = {"state": "failed", "step": 2, "error": {"type": "RuntimeError", "message": HOSTILE, "hint": HOSTILE}}
    run_dir = write_run(
        "<img src=x onerror=alert(2)>",
        config=config,
        status=status,
        metrics=metric_records(reward_name=HOSTILE),
        completions=records,
    )
    page = build(run_dir)
    tags = Tags(page).tags
    scripts = [a for t, a in tags if t == "script"]
    assert len(scripts) == 1 + len(report.CURVES)  # plotly.js and one per figure, nothing else
    assert not [t for t, _ in tags if t == "img"]
    assert not [(t, a) for t, a in tags if any(name.startswith("on") for name in a)]
    assert "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;" in page
    assert "<title>Run report: &lt;img src=x onerror=alert(2)&gt;</title>" in page
    assert "The run failed." in page
    assert page.lower().count("</script") == len(scripts)  # no text from the run closes a script


class Shown(HTMLParser):
    """The text a browser shows in each part of a page (not scripts or styles), by section id ('' outside one)."""

    def __init__(self, page: str):
        super().__init__()
        self.text: dict[str, str] = {}
        self.where, self.hidden = "", 0
        self.feed(page)

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag in ("script", "style"):
            self.hidden += 1
        elif tag == "section" and "wb-section" in (attrs.get("class") or ""):
            self.where = attrs.get("id", "")
        elif tag == "footer":
            self.where = "footer"

    def handle_endtag(self, tag):
        if tag in ("script", "style"):
            self.hidden -= 1

    def handle_data(self, data):
        if not self.hidden:
            self.text[self.where] = self.text.get(self.where, "") + data


def test_hostile_text_in_every_field_the_report_shows_is_shown_as_text(write_run):
    """Every text field of config.json and status.json, every record's text, and a probe side's name."""
    config = RunConfig.for_task("demo").with_changes(model="tiny").to_dict()
    texts = [name for name, value in config.items() if isinstance(value, str)]
    config.update(
        {name: HOSTILE for name in texts},
        reward_names=[HOSTILE],
        reward_weights=[HOSTILE],
        report_to=[HOSTILE],
        gpu_ids=[HOSTILE],
    )
    status = {
        "state": "failed",
        "step": 2,
        "total_steps": 2,
        "host": HOSTILE,
        "owner": HOSTILE,
        "error": {"type": HOSTILE, "message": HOSTILE, "hint": HOSTILE, "traceback_tail": HOSTILE},
    }
    records = [r for s in (1, 2) for r in round_records(s, prompt=HOSTILE, completion=HOSTILE, reward_name=HOSTILE)]
    run_dir = write_run(
        HOSTILE.replace("/", "|"),
        config=config,
        status=status,
        metrics=metric_records(reward_name=HOSTILE),
        completions=records,
    )
    side = str(run_dir / "<b onmouseover=alert(3)>side")  # a probe side is named after its adapter folder
    write_side(run_dir, probes.BASE_LABEL, None, [HOSTILE], [HOSTILE], model=HOSTILE)
    write_side(run_dir, "trained", side, [HOSTILE], [HOSTILE], model=HOSTILE)
    page = build(run_dir)
    tags = Tags(page).tags
    assert {t for t, _ in tags} <= {
        "html",
        "head",
        "meta",
        "title",
        "style",
        "script",
        "body",
        "header",
        "div",
        "h1",
        "h2",
        "h3",
        "p",
        "ul",
        "li",
        "b",
        "main",
        "nav",
        "a",
        "section",
        "table",
        "tr",
        "th",
        "td",
        "code",
        "details",
        "summary",
        "br",
        "small",
        "pre",
        "span",
        "footer",
    }
    assert not [(t, a) for t, a in tags if any(name.startswith("on") for name in a)]
    assert len([t for t, _ in tags if t == "script"]) == 1 + len(report.CURVES)
    assert page.lower().count("</script") == 1 + len(report.CURVES)
    shown = Shown(page).text
    name = HOSTILE.replace("/", "|")
    assert (
        f"Run report: {name}" in shown[""] and f"model{HOSTILE}" in shown[""] and f"task{HOSTILE} (data)" in shown[""]
    )
    assert (
        f"on the data {HOSTILE}" in shown["summary"]
        and f"The run failed.\n{HOSTILE}\n{HOSTILE}\n{HOSTILE}" in shown["summary"]
    )
    assert shown["groups"].count(HOSTILE) >= 3  # prompt, completion, reward name
    assert "<b onmouseover=alert(3)>side" in shown["probes"] and shown["probes"].count(HOSTILE) == 3
    # each once (a field shows inside another's name once more: model in reward_model)
    assert all(
        shown["settings"].count(f"{field}{HOSTILE}") == sum(other.endswith(field) for other in texts) for field in texts
    )
    assert name in shown["footer"]
    state = build(write_run("odd-state", status={"state": HOSTILE}))
    assert f"state{HOSTILE}" in Shown(state).text[""] and not [t for t, _ in Tags(state).tags if t == "img"]


def test_a_run_with_nothing_recorded_still_reports(write_run):
    status = {"state": "failed", "error": {"type": "OSError", "message": "no model", "hint": "Check the model."}}
    page = build(write_run("empty", status=status, metrics=[], completions=[]))
    assert "No reward was logged." in page and "Check the model." in page
    assert "This run recorded no completions." in page
    assert "No metrics were logged" in page
    assert "No metrics yet" in page  # each figure says why it is empty


def test_records_that_are_not_objects_and_a_missing_config_are_passed_over(write_run):
    run_dir = write_run("odd")
    (run_dir / runfolder.CONFIG_FILE).unlink()
    with open(run_dir / runfolder.METRICS_FILE, "a") as handle:
        handle.write('[1, 2]\n"text"\n')
    page = build(run_dir)
    assert "This run folder holds no readable config.json." in page
    assert "The batch plan cannot be counted from this config.json" in page
    assert "Last step: step 5" in page


def test_a_live_run_says_the_report_is_a_snapshot(write_run):
    page = build(write_run("live", status={"state": "training", "step": 3, "total_steps": 5}))
    assert "written while the run was training: it shows the run so far" in page
    assert "<b>steps</b>3 of 5" in page
    queued = build(write_run("queued", status={"state": "queued"}, metrics=[], completions=[]))
    assert "written while the run waited in the GPU queue" in queued


# ---------------------------------------------------------------- base vs trained


def write_side(run_dir, label, adapter, prompts, answers, tokens=64, done=True, model="tiny"):
    path = probes.answers_path(run_dir, label, model, adapter, prompts, tokens)
    path.parent.mkdir(exist_ok=True)
    runfolder.append_jsonl(path, [{"total": len(prompts), "model": model, "adapter": adapter}])
    runfolder.append_jsonl(
        path, [{"index": i, "prompt": p, "answer": a, "seconds": 0.1} for i, (p, a) in enumerate(zip(prompts, answers))]
    )
    if done:
        runfolder.append_jsonl(path, [{"done": True}])
    return path


def test_stored_comparisons_pair_each_checkpoint_with_the_base_model(write_run):
    run_dir = write_run()
    prompts = ["What is 2 + 2?", HOSTILE]
    final, step2 = str(run_dir / "adapter"), str(run_dir / "checkpoint-2")
    write_side(run_dir, probes.BASE_LABEL, None, prompts, ["Four, I think.", "base <b>"])
    write_side(run_dir, probes.FINAL_LABEL, final, prompts, ["4", "final " + HOSTILE])
    write_side(run_dir, "step 2 (checkpoint-2)", step2, prompts, ["4.", "step2"])
    write_side(run_dir, probes.BASE_LABEL, None, prompts, ["long"], tokens=128, done=False)  # a cancelled base
    write_side(run_dir, probes.FINAL_LABEL, final, prompts, ["4", "x"], tokens=128)  # its base never finished
    comparisons = probes.stored_comparisons(run_dir)
    assert [(c.label, c.max_new_tokens) for c in comparisons] == [("step 2 (checkpoint-2)", 64), ("final adapter", 64)]
    assert comparisons[1].base == ["Four, I think.", "base <b>"] and comparisons[1].trained == ["4", "final " + HOSTILE]
    section = section_text(build(run_dir), "probes")
    assert "Base model vs final adapter" in section and "at most 64 tokens each" in section
    assert "final &lt;script&gt;" in section and "base &lt;b&gt;" in section
    assert probes.stored_comparisons(run_dir.parent / "missing") == []


def test_without_probe_answers_the_report_says_how_to_get_them(default_page):
    assert "Answer side by side" in section_text(default_page, "probes")


# ---------------------------------------------------------------- the Runs tab's writer


def test_runs_tab_writes_the_report_into_the_run_folder_and_a_copy_to_download(write_run, tmp_path, monkeypatch):
    monkeypatch.setattr(report, "build_report", lambda contents: f"<html>{contents.name}</html>")
    run_dir = write_run()
    (tmp_path / "downloads").mkdir()
    written, copy = run_reports.write_report(run_dir, download_root=tmp_path / "downloads")
    assert written == run_dir / "report.html" and written.read_text() == f"<html>{run_dir.name}</html>"
    assert copy.parent.parent.parent == tmp_path / "downloads" and copy.name == f"{run_dir.name}-report.html"
    assert copy.read_bytes() == written.read_bytes()


def test_report_copies_lie_in_a_private_folder_of_their_own(write_run):
    """Not /tmp/workbench-reports/<run id>/, which any account of the machine could read or plant a link in."""
    run_dir = write_run()
    _, copy = run_reports.write_report(run_dir)
    root = copy.parent.parent
    assert root.parent == Path(tempfile.gettempdir()) and root.name != "workbench-reports"
    assert root.name.startswith(run_reports.REPORTS_PREFIX) and len(root.name) > len(run_reports.REPORTS_PREFIX) + 6
    assert (root.stat().st_mode & 0o777, copy.stat().st_mode & 0o777) == (0o700, 0o600)
    assert run_reports.write_report(run_dir)[1] == copy, "the next report of the run replaces the copy"
    shutil.rmtree(copy.parent)


# ---------------------------------------------------------------- in Chromium, offline

# A demo run as the README shows it: answers that get shorter as the brevity reward teaches (long -> short).
DEMO_ANSWERS = {
    "What is the capital of France?": (
        "The capital of France is Paris. It lies on the Seine and is known for the Eiffel Tower, the Louvre "
        "and its cafés.",
        "The capital of France is Paris, on the Seine.",
        "Paris is the capital.",
        "Paris.",
    ),
    "How many legs does a spider have?": (
        "A spider has eight legs. Spiders are arachnids, not insects, which have six legs; they also have two "
        "body parts.",
        "A spider has eight legs, unlike insects.",
        "Eight legs.",
        "Eight.",
    ),
    "Who wrote Romeo and Juliet?": (
        "Romeo and Juliet was written by William Shakespeare, the English playwright, around 1595; it is one of "
        "his tragedies.",
        "William Shakespeare wrote it, around 1595.",
        "William Shakespeare.",
        "Shakespeare.",
    ),
    "What is the boiling point of water?": (
        "Water boils at 100 degrees Celsius (212 degrees Fahrenheit) at sea level; at altitude it boils at a "
        "lower temperature.",
        "100 degrees Celsius at sea level.",
        "100 °C.",
        "100 °C.",
    ),
}
DEMO_STEPS = 8


def write_demo_run(run_dir):
    """A finished 8-step demo run (G = 4, two prompts a step) with base vs trained answers."""
    run_dir.mkdir(parents=True)
    RunConfig.for_task("demo").with_changes(num_generations=G, max_steps=DEMO_STEPS).save(
        run_dir / runfolder.CONFIG_FILE
    )
    runfolder.write_json_atomic(
        run_dir / runfolder.STATUS_FILE,
        {
            "state": "finished",
            "step": DEMO_STEPS,
            "total_steps": DEMO_STEPS,
            "started_at": 1_795_000_000.0,
            "updated_at": 1_795_000_000.0 + 6.5 * DEMO_STEPS + 20,
        },
    )
    questions = list(DEMO_ANSWERS)
    for step in range(1, DEMO_STEPS + 1):
        asked = [questions[(2 * step + k) % len(questions)] for k in (0, 1)]
        texts = [DEMO_ANSWERS[q][min(3, max(0, (step - 1) // 2 + (i % 3) - 1))] for q in asked for i in range(G)]
        scores = [max(0.0, 1 - len(t) / 200) for t in texts]
        advantages = []
        for k in (0, 1):
            mean, std = groups.mean_and_std(scores[k * G : (k + 1) * G])
            advantages += [(s - mean) / (std + 1e-4) for s in scores[k * G : (k + 1) * G]]
        logs = {
            "prompt": [q for q in asked for _ in range(G)],
            "completion": texts,
            "advantages": advantages,
            "rewards": {"brevity": scores},
        }
        lengths = [max(2, len(t) // 4) for t in texts]
        runfolder.append_jsonl(
            run_dir / runfolder.COMPLETIONS_FILE,
            completion_records(logs, step, G, [1.0], lengths, [n >= 28 for n in lengths]),
        )
        mean, std = groups.mean_and_std(scores)
        runfolder.append_jsonl(
            run_dir / runfolder.METRICS_FILE,
            [
                {
                    "step": step,
                    "reward": mean,
                    "reward_std": std,
                    "rewards/brevity/mean": mean,
                    "rewards/brevity/std": std,
                    "kl": 0.0004 * step**2,
                    "loss": 0.003 * (-1) ** step / step,
                    "completions/mean_length": sum(lengths) / 8,
                    "completions/min_length": min(lengths),
                    "completions/max_length": max(lengths),
                    "completions/clipped_ratio": sum(n >= 28 for n in lengths) / 8,
                    "frac_reward_zero_std": 0.0,
                }
            ],
        )
    prompts = list(DEMO_ANSWERS)[:3]
    write_side(
        run_dir,
        probes.BASE_LABEL,
        None,
        prompts,
        [DEMO_ANSWERS[q][0] for q in prompts],
        model=RunConfig.for_task("demo").model,
    )
    write_side(
        run_dir,
        probes.FINAL_LABEL,
        str(run_dir / "adapter"),
        prompts,
        [DEMO_ANSWERS[q][3] for q in prompts],
        model=RunConfig.for_task("demo").model,
    )
    return run_dir


@pytest.mark.browser
def test_the_report_opens_in_chromium_offline_with_its_figures_drawn(browser, tmp_path):
    from browser_fixtures import screenshot_folder

    run_dir = write_demo_run(tmp_path / "runs" / "20261123-101500-demo-smollm2-135m-instruct")
    completions = runfolder.read_jsonl(run_dir / runfolder.COMPLETIONS_FILE)
    completions[1]["completion"] = HOSTILE  # in the first step, which the report shows
    runfolder.replace_file(
        run_dir / runfolder.COMPLETIONS_FILE, "".join(json.dumps(r) + "\n" for r in completions).encode()
    )
    out = tmp_path / "report.html"
    out.write_text(build(run_dir, plotly_js=None), encoding="utf-8")
    context = browser.new_context(viewport={"width": 1280, "height": 1000}, offline=True)
    page = context.new_page()
    requests, dialogs, errors = [], [], []
    page.on("request", lambda r: requests.append(r.url))
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    page.on("console", lambda m: m.type == "error" and errors.append(m.text))
    page.on("pageerror", lambda e: errors.append(str(e)))
    try:
        page.goto(out.as_uri())
        page.wait_for_function(
            f"document.querySelectorAll('.js-plotly-plot .scatterlayer .trace').length >= {len(report.CURVES)}",
            timeout=30_000,
        )
        drawn = page.evaluate("Array.from(document.querySelectorAll('.js-plotly-plot'), e => e.data.length)")
        assert len(drawn) == len(report.CURVES) and all(count > 0 for count in drawn)
        for _, title in report.SECTIONS:
            assert page.locator("nav.wb-toc").get_by_text(title, exact=True).is_visible()
        for heading in (
            "Summary",
            "Curves",
            "Health notes",
            "Completion groups and their advantages",
            "Base model vs trained",
            "Settings",
            "Batch plan",
        ):
            assert page.get_by_role("heading", name=heading, exact=True).count() == 1
        assert page.get_by_text("Paris.", exact=True).count() >= 1
        assert page.get_by_text(HOSTILE).first.is_visible()  # shown as text
        assert page.evaluate("document.scripts.length") == 1 + len(report.CURVES)
        assert [url for url in requests if not url.startswith("file:")] == []
        assert dialogs == [] and errors == []
        first_row = page.locator("#wb-figure-reward").bounding_box()  # the picture ends below the first curves
        page.screenshot(
            path=str(screenshot_folder(tmp_path / "shots") / "report.png"),
            clip={"x": 0, "y": 0, "width": 1280, "height": first_row["y"] + first_row["height"] + 6},
        )
    finally:
        context.close()


@pytest.mark.browser
@pytest.mark.slow
def test_the_runs_tab_writes_the_report_and_offers_it_to_download(ui):
    # On the session's shared server (no server of its own to start); the run leaves with the test.
    run_dir = write_demo_run(ui.server.runs_dir / "20261123-101500-report-demo")
    try:
        ui.open("Runs")
        runs = ui.panel("Runs")
        runs.get_by_role("button", name="Report", exact=True).click()
        ui.expect_text(runs, "Pick the run whose report to write first.")
        ui.choose("Run", run_dir.name, scope=runs)
        runs.get_by_role("button", name="Report", exact=True).click()
        ui.expect_text(runs, f"Report written to {run_dir / 'report.html'}")
        with ui.page.expect_download() as download:
            ui.page.locator("#wb-runs-report a[download]").click()
        assert download.value.suggested_filename == f"{run_dir.name}-report.html"
        assert open(download.value.path(), "rb").read() == (run_dir / "report.html").read_bytes()
        assert b"Base model vs final adapter" in (run_dir / "report.html").read_bytes()
    finally:
        shutil.rmtree(run_dir)  # the server removes its report copies when it ends
