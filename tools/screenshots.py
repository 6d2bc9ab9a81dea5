"""Take the README's and the docs' screenshots into assets/ (`make screenshots` runs it).

    .venv/bin/python tools/screenshots.py                      # every picture the browser tests take
    .venv/bin/python tools/screenshots.py setup.png runs.png   # some of them
    .venv/bin/python tools/screenshots.py --demo-run runs/<a finished demo run>   # and demo_run.png

Each picture is taken by the browser test that sets its scene (a trained tiny run, a GSM8K-like split, the
bundled model's answers, ...), through browser_fixtures' `UI.screenshot`. In a plain test run that writes into a
temporary folder, so `make test` leaves assets/ alone; here the tests that take the pictures run with
WORKBENCH_SCREENSHOTS set to assets/ (PICTURES: which test takes which picture). demo_run.png shows a finished
50-step demo run of the bundled model (about five minutes of training): `--demo-run` takes it from one
(benchmarks/bench_demo.py --read RUN --screenshot; `bench_demo.py --screenshot` trains one first).
Needs Debian's chromium, as the browser tests do. Exits 1 when a picture was not written.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
ASSETS = ROOT / "assets"
SCREENSHOTS_ENV = "WORKBENCH_SCREENSHOTS"  # tests/browser_fixtures.py reads it
# picture -> the test that takes it (tests/test_screenshots.py checks each names a test that does)
PICTURES = {
    "calculator.png": "tests/test_ui_calculator_browser.py::test_invalid_plan_shows_trl_message_and_a_suggestion_fixes_it",
    "first_run.png": "tests/test_ui_setup_events_browser.py::test_the_first_run_strip_launches_the_demo_from_any_tab",
    "setup_first_view.png": "tests/test_ui_setup_events_browser.py::test_the_first_view_fits_and_keeps_its_landmarks",
    "setup.png": "tests/test_ui_setup_browser.py::test_preview_shows_the_exact_command",
    "setup_signal.png": "tests/test_ui_setup_browser.py::test_signal_check_says_the_tiny_model_cannot_learn_arithmetic",
    "setup_dataset.png": "tests/test_ui_dataset_browser.py::test_columns_of_a_real_split_are_mapped_and_previewed",
    "train.png": "tests/test_ui_train_browser.py::test_full_path_setup_launch_watch_stop_and_find_the_run",
    "runs.png": "tests/test_ui_train_browser.py::test_runs_tab_overlays_runs_and_deletes_after_confirmation",
    "compare.png": "tests/test_ui_train_browser.py::test_compare_on_the_bundled_model_shows_real_answers",
    "held_out.png": "tests/test_ui_eval_browser.py::test_the_train_tab_draws_held_out_accuracy_at_steps_0_1_2_and_what_changed",
    "token_view.png": "tests/test_ui_tokens_browser.py::test_a_card_opens_into_its_tokens_coloured_by_the_chosen_channel",
    "explorer.png": "tests/test_ui_explorer_browser.py::test_the_explorer_filters_sorts_searches_and_opens_a_group_and_a_prompts_history",
    "report.png": "tests/test_report.py::test_the_report_opens_in_chromium_offline_with_its_figures_drawn",
}
# taken from a finished demo run, not by a test
DEMO_PICTURE = "demo_run.png"


def modified(names) -> dict[str, float]:
    return {name: (ASSETS / name).stat().st_mtime if (ASSETS / name).exists() else 0.0 for name in names}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("pictures", nargs="*", help=f"pictures to take (default: all of {', '.join(PICTURES)})")
    parser.add_argument("--demo-run", type=Path, help=f"a finished demo run folder: take {DEMO_PICTURE} from it too")
    args = parser.parse_args(argv)
    unknown = [name for name in args.pictures if name not in PICTURES]
    if unknown:
        parser.error(f"no test takes {', '.join(unknown)}; known: {', '.join(PICTURES)}")
    wanted = args.pictures or list(PICTURES)
    before = modified(wanted)
    tests = sorted({PICTURES[name] for name in wanted})
    env = {**os.environ, SCREENSHOTS_ENV: str(ASSETS)}
    subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *tests], cwd=ROOT, env=env)
    if args.demo_run:
        subprocess.run(
            [sys.executable, str(ROOT / "benchmarks" / "bench_demo.py"), "--read", str(args.demo_run), "--screenshot"],
            cwd=ROOT,
            env=env,
        )
        wanted, before = [*wanted, DEMO_PICTURE], {**before, **modified([DEMO_PICTURE])}
    after = modified(wanted)
    missing = [name for name in wanted if after[name] <= before[name]]
    for name in wanted:
        print(f"{'written' if name not in missing else 'NOT written'}: assets/{name}")
    return 1 if missing else 0


if __name__ == "__main__":
    sys.exit(main())
