"""Every tie to Gradio's internals, in one place, each checked against the installed Gradio before it is used.

Written for Gradio 6.31.0 (`WRITTEN_FOR`, the version requirements.txt pins).
The dashboard reaches past Gradio's public API only here, in the patches that
`PATCHES` lists: what each one is for, what it touches, how to tell it is no
longer needed, and what the dashboard does without it. Before a patch is
applied its target is checked (the attribute or function is there with the
shape and the use the patch relies on, read from Gradio's code objects and
built page scripts, not from its version number). When a target is gone or
changed, one `GradioChanged` warning names the patch, the installed and the
expected Gradio version and what changes without it, and Gradio's own
behaviour is kept: a patch is either applied to what it was written for or
not applied, never applied to nothing.

tests/test_gradio_compat.py runs every check against the installed Gradio
and each patch on Gradio's own code path, so an upgrade that moves a target
fails there first; tests/test_architecture.py keeps every other module of the
workbench to Gradio's public API (the rule: ARCHITECTURE.md).
"""

# The package's modules: the register of patches and its shared checks; the patches on the server; the scripts
# served in the page; the stand-in for Gradio's sign-in. Everything is re-exported, so `gradio_compat.X` reads
# as it did when this was one module.
from workbench.ui.gradio_compat.gradio_compat_page_scripts import (
    CLOCK_CALLBACK_MARKS,
    CLOCK_CALLBACK_MAX_CHARS,
    CLOCK_CALLBACK_SLOWED_MS,
    FRAME_THROTTLE_JS,
    PLOT_REDRAWS_JS,
    PLOTLY_ASSETS,
    STATUS_TRACKER_ASSETS,
    clock_callbacks,
    frame_throttle_problem,
    frame_throttle_script,
    is_clock_callback,
    plot_redraws_problem,
    plot_redraws_script,
)
from workbench.ui.gradio_compat.gradio_compat_patches import (
    INTERNAL_ATTRIBUTES,
    OFF,
    PATCHES,
    WRITTEN_FOR,
    GradioChanged,
    Patch,
    code_reads,
    frontend_assets,
    installed_version,
    nested_code,
    off_patches,
    optional_module,
    parameter_names,
    ready,
)
from workbench.ui.gradio_compat.gradio_compat_server import (
    PROFILING_ENV,
    QUEUE_IDLE_SLEEP_S,
    QUEUE_SLEEPS,
    TRACE_FIELDS,
    UPLOAD_ROUTE,
    add_route_trace,
    cheap_skips,
    cheap_skips_problem,
    events_problem,
    guard_inputs,
    guard_inputs_problem,
    plot_data_problem,
    plotly_value,
    quiet_queue,
    quiet_queue_problem,
    route_timing_on,
    route_timing_problem,
    stop_streams,
    stream_stop_problem,
    upload_folder,
    upload_route,
    upload_route_problem,
    wrap_handlers,
)
from workbench.ui.gradio_compat.gradio_compat_sign_in import (
    LOGIN_FIELDS,
    LOGIN_MESSAGE_SELECTOR,
    LOGIN_PAGE_ASSETS,
    LOGIN_WRONG_SELECTOR,
    LOGIN_WRONG_STATUS,
    SESSION_COOKIES,
    check_login_messages,
    has_sign_in,
    keep_sessions_in,
    login_messages_problem,
    mounted_app,
    own_sign_in,
    password_check,
    session_cookie_names,
    session_user,
    sign_in_problem,
)

__all__ = [
    "WRITTEN_FOR",
    "INTERNAL_ATTRIBUTES",
    "installed_version",
    "Patch",
    "PATCHES",
    "OFF",
    "off_patches",
    "GradioChanged",
    "ready",
    "frontend_assets",
    "code_reads",
    "nested_code",
    "parameter_names",
    "optional_module",
    "QUEUE_IDLE_SLEEP_S",
    "QUEUE_SLEEPS",
    "quiet_queue_problem",
    "quiet_queue",
    "stream_stop_problem",
    "stop_streams",
    "cheap_skips_problem",
    "cheap_skips",
    "PROFILING_ENV",
    "TRACE_FIELDS",
    "route_timing_problem",
    "route_timing_on",
    "add_route_trace",
    "plot_data_problem",
    "plotly_value",
    "upload_folder",
    "guard_inputs_problem",
    "guard_inputs",
    "UPLOAD_ROUTE",
    "upload_route_problem",
    "upload_route",
    "events_problem",
    "wrap_handlers",
    "CLOCK_CALLBACK_MAX_CHARS",
    "CLOCK_CALLBACK_MARKS",
    "CLOCK_CALLBACK_SLOWED_MS",
    "STATUS_TRACKER_ASSETS",
    "FRAME_THROTTLE_JS",
    "is_clock_callback",
    "clock_callbacks",
    "frame_throttle_problem",
    "frame_throttle_script",
    "PLOTLY_ASSETS",
    "PLOT_REDRAWS_JS",
    "plot_redraws_problem",
    "plot_redraws_script",
    "SESSION_COOKIES",
    "LOGIN_FIELDS",
    "LOGIN_WRONG_STATUS",
    "LOGIN_MESSAGE_SELECTOR",
    "LOGIN_WRONG_SELECTOR",
    "LOGIN_PAGE_ASSETS",
    "sign_in_problem",
    "own_sign_in",
    "login_messages_problem",
    "check_login_messages",
    "mounted_app",
    "keep_sessions_in",
    "session_cookie_names",
    "has_sign_in",
    "session_user",
    "password_check",
]
