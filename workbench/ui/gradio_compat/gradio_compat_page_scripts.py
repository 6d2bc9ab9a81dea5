"""Gradio patches served in the page: scripts that run before Gradio's own (the frame throttle, the plot redraws),
each served only while Gradio's built page scripts still have what it works on.
"""

from __future__ import annotations

import functools
import json
import re
from pathlib import Path

from workbench.ui.gradio_compat.gradio_compat_patches import frontend_assets, ready

# ---- frame_throttle ----------------------------------------------------------------------------------

# A clock callback is short and reads performance.now() to count seconds: in Gradio 6.31's status tracker
# it is `()=>{F(Pe,(performance.now()-w(de))/1e3),W&&ze()}`. The page script and `is_clock_callback` both
# recognise it by these.
CLOCK_CALLBACK_MAX_CHARS = 120
CLOCK_CALLBACK_MARKS = ("performance.now()", "/1e3")
CLOCK_CALLBACK_SLOWED_MS = 250
STATUS_TRACKER_ASSETS = "statustracker-*.js"

FRAME_THROTTLE_JS = """<script>
(() => {
  const nextFrame = window.requestAnimationFrame.bind(window);
  const state = { slowed: 0, frames: 0 };
  window.wbFrameThrottle = state;
  window.requestAnimationFrame = (callback) => {
    state.frames += 1;
    const source = String(callback);
    if (source.length < %(max_chars)d && %(marks)s) {
      state.slowed += 1;
      return -setTimeout(() => nextFrame(callback), %(slowed_ms)d);
    }
    return nextFrame(callback);
  };
  const cancelFrame = window.cancelAnimationFrame.bind(window);
  window.cancelAnimationFrame = (id) => (id < 0 ? clearTimeout(-id) : cancelFrame(id));
})();
</script>""" % {
    "max_chars": CLOCK_CALLBACK_MAX_CHARS,
    "slowed_ms": CLOCK_CALLBACK_SLOWED_MS,
    "marks": " && ".join(f"source.includes({json.dumps(mark)})" for mark in CLOCK_CALLBACK_MARKS),
}

# `x=window.requestAnimationFrame` as minified (`typeof window<"u"?window.requestAnimationFrame:...` in 6.31):
# a reference taken when the script loads, which is why the throttle must run before Gradio's scripts.
_FRAME_ALIAS = re.compile(
    r"([\w$]+)\s*=\s*(?:typeof\s+window\s*[!=<>]+\s*[`'\"]u(?:ndefined)?[`'\"]\s*\?\s*)?"
    r"window\.requestAnimationFrame\b"
)
_ARROW_CALL = re.compile(r"([\w$.]+)\(\s*(\(\)\s*=>\s*\{)")


def is_clock_callback(source: str) -> bool:
    """True for a frame callback FRAME_THROTTLE_JS slows (the same test as the page script's)."""
    return len(source) < CLOCK_CALLBACK_MAX_CHARS and all(mark in source for mark in CLOCK_CALLBACK_MARKS)


def clock_callbacks(script: str) -> list[str]:
    """The callbacks `script` hands to requestAnimationFrame that FRAME_THROTTLE_JS slows, as the page sees them."""
    frame_calls = {"requestAnimationFrame", "window.requestAnimationFrame", *_FRAME_ALIAS.findall(script)}
    found = []
    for call in _ARROW_CALL.finditer(script):
        if call.group(1) not in frame_calls:
            continue
        start, depth = call.start(2), 0
        for end in range(call.end(2) - 1, min(len(script), start + CLOCK_CALLBACK_MAX_CHARS)):
            depth += {"{": 1, "}": -1}.get(script[end], 0)
            if depth == 0:
                if is_clock_callback(script[start : end + 1]):
                    found.append(script[start : end + 1])
                break
    return found


@functools.cache
def frame_throttle_problem(assets: Path | None = None) -> str | None:
    """What is missing for the frame throttle in Gradio's built page scripts (None: nothing)."""
    trackers = sorted((assets or frontend_assets()).glob(STATUS_TRACKER_ASSETS))
    if not trackers:
        return f"Gradio's page has no {STATUS_TRACKER_ASSETS}"
    if not any(clock_callbacks(path.read_text(encoding="utf-8", errors="replace")) for path in trackers):
        return "Gradio's status tracker no longer hands requestAnimationFrame the clock callback it slows"
    return None


def frame_throttle_script(assets: Path | None = None) -> str:
    """FRAME_THROTTLE_JS while Gradio's status tracker still has the clock it slows; "" (nothing) otherwise."""
    return FRAME_THROTTLE_JS if ready("frame_throttle", frame_throttle_problem(assets)) else ""


# ---- plot_redraws ------------------------------------------------------------------------------------

PLOTLY_ASSETS = "PlotlyPlot-*.js"

# A react on a div that shows a figure runs after the current task, and only if the div is still in the page:
# Gradio 6.31 asks the div it drops for a new one to draw the new figure first. `deferred` and `dropped` count.
PLOT_REDRAWS_JS = """<script>
(() => {
  const state = { deferred: 0, dropped: 0 };
  window.wbPlotRedraws = state;
  let plotly;
  const wrap = (Plotly) => {
    if (!Plotly || typeof Plotly.react !== "function" || Plotly.wbReact) return;
    const react = Plotly.react;
    Plotly.wbReact = react;
    Plotly.react = function (div, ...figure) {
      if (!div || !div._fullLayout) return react.call(this, div, ...figure);  // a first drawing: at once
      state.deferred += 1;
      return new Promise((resolve, reject) => setTimeout(() => {
        if (!div.isConnected) {
          state.dropped += 1;
          resolve(div);
          return;
        }
        Promise.resolve(react.call(Plotly, div, ...figure)).then(resolve, reject);
      }, 0));
    };
  };
  Object.defineProperty(window, "Plotly", {
    configurable: true, enumerable: true, get: () => plotly, set: (value) => { plotly = value; wrap(value); },
  });
})();
</script>"""


@functools.cache
def plot_redraws_problem(assets: Path | None = None) -> str | None:
    """What is missing for PLOT_REDRAWS_JS in Gradio's built page scripts (None: nothing)."""
    scripts = sorted((assets or frontend_assets()).glob(PLOTLY_ASSETS))
    if not scripts:
        return f"Gradio's page has no {PLOTLY_ASSETS}"
    sources = [path.read_text(encoding="utf-8", errors="replace") for path in scripts]
    if not any(re.search(r"\bwindow\.Plotly\s*=[^=]", source) for source in sources):
        return "Gradio's plotly script no longer sets window.Plotly"
    if not any(".react(" in source for source in sources):
        return "Gradio's plotly script no longer draws a plot with Plotly.react"
    return None


def plot_redraws_script(assets: Path | None = None) -> str:
    """PLOT_REDRAWS_JS while Gradio's plotly script still sets the window.Plotly it wraps; "" otherwise."""
    return PLOT_REDRAWS_JS if ready("plot_redraws", plot_redraws_problem(assets)) else ""
