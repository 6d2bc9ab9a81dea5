"""Run the app's own Gradio events without a browser: one `Page` per browser page, events found by name.

`Page(app).run(event, inputs)` runs an event as Gradio's queue does
(`Blocks.process_api`: preprocess, the handler, postprocess) with the page's
own session state, so `gr.State` values carry from one event to the next.
Inputs are what the browser would send; a `gr.State` input is taken from the
session whatever is passed. Used by tests/test_train_tab.py and by the
benchmarks that time the server's side of a page (benchmarks/bench_big_run.py).
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any


def find_event(app, module: str, name: str, trigger: tuple[Any, str] | None = None):
    """The event whose handler is `name` (e.g. "on_refresh", "<lambda>") in `module` (e.g. "workbench.ui.train_tab").

    `trigger` = (component, event name) picks one of several handlers of the same name; a component of
    None stands for any component ((None, "tick"): a timer's tick), the app itself for its page load.
    """
    found = [
        fn
        for fn in app.fns.values()
        if fn.fn is not None
        and fn.fn.__module__ == module
        and fn.fn.__qualname__.rsplit(".", 1)[-1] == name
        and (
            trigger is None
            or any(
                event == trigger[1] and (trigger[0] is None or target == trigger[0]._id) for target, event in fn.targets
            )
        )
    ]
    if len(found) != 1:
        raise LookupError(f"{len(found)} events run {module}.{name}" + (f" on {trigger[1]}" if trigger else ""))
    return found[0]


def find_component(app, elem_id: str):
    return next(block for block in app.blocks.values() if getattr(block, "elem_id", None) == elem_id)


_LOOP: list = []


def _event_loop() -> asyncio.AbstractEventLoop:
    if not _LOOP:
        loop = asyncio.new_event_loop()
        threading.Thread(target=loop.run_forever, daemon=True, name="app-events").start()
        _LOOP.append(loop)
    return _LOOP[0]


class Page:
    """One browser page of `app`: its session state, and its events run as the server runs them."""

    def __init__(self, app):
        from gradio.state_holder import SessionState

        self.app = app
        self.state = SessionState(app)

    def run(self, event, inputs: list) -> dict:
        """Gradio's answer to the event: {"data": [one value per output], ...}.

        Run on the event loop of a thread of its own, which lives as long as the process (as a server's
        loop and its worker threads do), and is free even where this thread's loop is taken (playwright's).
        """
        return asyncio.run_coroutine_threadsafe(
            self.app.process_api(event, inputs, state=self.state), _event_loop()
        ).result()

    @staticmethod
    def output(event, result: dict, elem_id: str) -> Any:
        """The value the event sent to the component `elem_id`."""
        index = next(i for i, block in enumerate(event.outputs) if getattr(block, "elem_id", None) == elem_id)
        return result["data"][index]
