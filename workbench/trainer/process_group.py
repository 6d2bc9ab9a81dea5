"""The end of a training process that ran in torch.distributed's process group: the group closed, the trainer kept,
and the process ended at once with its exit code (`end_process_group` says why nothing may be freed)."""

from __future__ import annotations

import contextlib
import os
import sys

# What a multi-process run keeps until its process ends: its trainer (end_process_group says why).
KEPT_UNTIL_EXIT: list = []


def end_process_group(trainer) -> None:
    """Close torch.distributed's process group, when the run made one, and keep the trainer until the process
    ends (`end_process`).

    The objects a multi-process run leaves cannot be freed safely. Left to the interpreter's teardown,
    gloo's threads were destroyed while still joinable: the process aborted ("terminate called without an
    active exception", SIGABRT) after a finished run. Freed when `python -m workbench train` returned, the
    DDP model's reducer joined gloo's threads while holding the GIL, and one of them was waiting for the GIL
    to free its last collective's tensors: a deadlock (gdb: `~ProcessGroupGloo` in `thread::join`, a
    `pt_gloo_runloop` thread in `~AsyncAllgatherWork` taking the GIL). Both were seen on the second machine
    of a two-machine run, where torchrun's agent on the first then waited for it until killed.
    """
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        KEPT_UNTIL_EXIT.append(trainer)
        dist.destroy_process_group()


def end_process(exit_code: int) -> int:
    """`exit_code`; a process that ran in a process group instead ends here with it, at once, its output
    flushed and nothing freed (end_process_group says why). Called last, when everything is written."""
    if not KEPT_UNTIL_EXIT:
        return exit_code
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):
            stream.flush()
    os._exit(exit_code)
