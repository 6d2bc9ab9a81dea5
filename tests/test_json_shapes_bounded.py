"""JSON and CSV shaped to dodge the byte budget, and JSON nested past Python's stack (issue 52, the attack round).

Found by attacking the fixed shared server as a hostile student. The dataset budget counted a JSON line, array
item or CSV cell by its bytes, but not what it decodes to: a 60 MiB line of `{},{},...` (under the rows' 64 MiB
share) took the preview to 1.5 GiB, since each two-byte `{}` is a 64-byte dict. A CSV was parsed into a list of
all its rows before the budget looked at one: 60 MiB of one-letter rows took 6.3 GiB and 73 s for a preview of
200. A file of blank lines cost a turn of the reader's loop per byte (39 s for 60 MiB). And a few KiB of `[[[[`
raised RecursionError, which no reader caught: in a dataset it was a traceback; in any run's status.json (a run's
code writes it) it broke every user's Runs and Train tabs, and the dashboard could not even be built again. A
`step` of 4,000 digits or a `started_at` of -1e18 (the right types) broke the owner's and the admin's Runs tab
(OverflowError, OSError); such numbers now read as unreadable (spec/run_status.py MAX_INT, TIMES).
Now JSON is charged for its objects before it is decoded (`read_budget.json_objects_cost`), a CSV is read row by
row, each line read costs at least `LINE_COST`, and too deep a nesting reads as unreadable, one message.
"""

from __future__ import annotations

import json
import subprocess
import sys

import gradio as gr
import pytest
from helpers import app_handler, sandboxed_run_with_a_live_process

from workbench.sources import dataset_reading, read_budget
from workbench.sources.dataset_error import DatasetError

MIB = 2**20
DICTS = 20 * MIB  # `{},` twenty million times: 60 MiB of text, 1.5 GiB of dicts
DEEP = "[" * 100_000 + "]" * 100_000  # 200 KB


def _write_shapes(folder) -> dict:
    body = "{}," * DICTS + "{}"
    files = {
        "dicts.jsonl": '{"prompt": "hi", "pad": [' + body + "]}\n",
        "dicts.json": '[{"prompt": "hi", "pad": [' + body + "]}]",
        "dicts.csv": 'prompt,answer\n"[' + body + ']",1\n',
        "rows.csv": "prompt\n" + "x\n" * (30 * MIB),
    }
    for name, text in files.items():
        (folder / name).write_text(text)
    return files


def test_json_and_csv_shaped_to_decode_past_the_budget_stay_within_it(tmp_path):
    """Each file is under the rows' share of the default budget in bytes; read as the preview does, in a fresh
    process, none takes the server past 1 GiB, and each answers with its rows or one refusal naming the setting."""
    _write_shapes(tmp_path)
    code = (
        "import json, sys\n"
        "from workbench.sources import dataset_reading\n"
        "try:\n"
        "    said = f'{len(dataset_reading.first_rows(sys.argv[1], 200))} rows'\n"
        "except dataset_reading.DatasetError as exc:\n"
        "    said = str(exc)\n"
        "peak = next(line for line in open('/proc/self/status') if line.startswith('VmHWM'))\n"
        "print(json.dumps([said, int(peak.split()[1]) * 1024]))\n"
    )
    for name in ("dicts.jsonl", "dicts.json", "dicts.csv", "rows.csv"):
        out = subprocess.run([sys.executable, "-c", code, str(tmp_path / name)], capture_output=True, text=True)
        assert out.returncode == 0, out.stderr[-2000:]
        said, peak = json.loads(out.stdout)
        assert peak < 2**30, f"{name}: the preview took {peak / MIB:.0f} MiB ({said[:200]})"
        assert said == "200 rows" or read_budget.MAX_READ_ENV in said, said


def test_a_file_of_blank_lines_is_charged_for_each_line(tmp_path):
    """100,000 blank lines (100 KB, far under a 1 MiB rows' share by bytes) before the first row: each line
    costs the reader at least LINE_COST, so the read ends before the row, refused, rather than looping on."""
    budget = read_budget.Budget(4 * MIB)
    for name, text in {
        "blank.jsonl": "\n" * 100_000 + '{"prompt": "x"}\n',
        "blank.csv": "prompt\n" + "\n" * 100_000,
    }.items():
        path = tmp_path / name
        path.write_text(text + ("x\n" if name.endswith(".csv") else ""))
        with pytest.raises(DatasetError, match=read_budget.MAX_READ_ENV):
            dataset_reading.first_rows(path, 200, read_budget.Budget(budget.limit))


@pytest.mark.parametrize(
    ("name", "text"),
    [
        ("deep.jsonl", '{"prompt": "hi", "x": ' + DEEP + "}\n"),
        ("deep.json", '[{"prompt": "hi", "x": ' + DEEP + "}]"),
        ("deep.csv", 'prompt,answer\n"[{""a"": ' + DEEP + '}]",1\n'),
    ],
)
def test_a_dataset_nested_past_pythons_stack_is_refused_in_one_message(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text)
    with pytest.raises(DatasetError, match="nested deeper"):
        dataset_reading.first_rows(path, 200)


HOSTILE_STATUS = {
    "nested": '{"state": "training", "x": ' + DEEP + "}",
    "huge numbers": '{"state": "training", "step": ' + "9" * 4000 + ', "total_steps": ' + "9" * 4000 + "}",
    "times no date holds": '{"state": "training", "step": 1, "started_at": -1e18, "updated_at": 1e308}',
}


@pytest.mark.slow  # builds the whole app
@pytest.mark.parametrize("case", sorted(HOSTILE_STATUS))
def test_a_runs_status_json_of_hostile_json_breaks_no_ones_tabs(tmp_path, case):
    """alice's sandboxed run rewrites its status.json (under the 4 MiB bound) as 200 KB of nested brackets, or
    with numbers of the right type that no float or date holds: the dashboard builds, and bob's, alice's and the
    admin's Runs and Train tabs answer, the run or its fields unreadable (the nesting named to its viewers)."""
    from workbench.access import users
    from workbench.runstore import runfolder
    from workbench.ui.app import build_app

    run_dir = tmp_path / "runs" / "20260101-000001-alice"
    process = sandboxed_run_with_a_live_process(run_dir)
    try:
        (run_dir / runfolder.STATUS_FILE).write_text(HOSTILE_STATUS[case])  # the run's code
        accounts = {name: users.User(name, role, "") for name, role in [("alice", "user"), ("bob", "user")]}
        app = build_app(run_dir.parent, users={**accounts, "root": users.User("root", "admin", "")})
        for viewer in ("bob", "alice", "root"):
            request = gr.Request(username=viewer)
            rows = str(app_handler(app, "runs_tab", "on_load")(request, [], [], None, "reward", 0.5, {}))
            shown = str(app_handler(app, "train_tab", "on_load")(request, None, 0.5))
            if viewer != "bob":
                assert "unreadable" in rows or "lingering" in rows, "the owner and the admin see the run, unreadable"
                assert case != "nested" or "nested deeper" in shown, "and are told why it cannot be read"
    finally:
        process.kill()
        process.wait()
