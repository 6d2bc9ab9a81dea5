"""The Setup tab's pure parts that show the GPU queue: busy GPUs stay choosable, a queued smoke test says why."""

from workbench.spec.hardware import GpuInfo
from workbench.ui import setup_view

GPUS = [GpuInfo(0, "H100", 81_000, 1_000, 97), GpuInfo(1, "H100", 81_000, 80_000, 0)]


def test_a_gpu_a_run_holds_can_be_chosen_and_says_the_launch_waits():
    choices = setup_view.gpu_choices(GPUS, busy={0})
    assert [index for _, index in choices] == [0, 1]
    assert choices[0][0].endswith("(held by a run: a launch on it waits in the queue)")
    assert "queue" not in choices[1][0]
    table = setup_view.hardware_html(GPUS, busy={0})
    assert table.count(setup_view.BUSY_NOTE) == 1 and "free</td>" in table


def test_a_queued_smoke_test_says_what_it_waits_for():
    text = setup_view.smoke_result_html({"state": "queued", "run_id": "s1", "queue_position": 1,
                                         "waits_for": "GPU 0 (run <x>)"})
    assert "Smoke test queued at position 1: it waits for GPU 0 (run &lt;x&gt;)" in text and "(run s1)" in text
    assert "Smoke test loading model" in setup_view.smoke_result_html({"state": "loading_model", "run_id": "s1"})
