"""Process start-up: the cyclic garbage collector paused while a process imports its libraries.

Importing torch, transformers, PEFT, TRL and datasets makes millions of objects and no garbage, and the
collector walks them again and again meanwhile, so `import torch, transformers, peft, trl, datasets` takes
markedly more CPU with it than without (`benchmarks/bench_startup.py` prints both). Every training run,
sampler, signal check and dashboard pays that at each start, so `python -m workbench` and `app.py` pause
collection on their first line, and resume it once their libraries and model are in
(`resume_collection`). What start-up left as garbage is collected once, what it built is set aside for
good (`gc.freeze`: modules, classes and the loaded model live as long as the process), and collection goes
on as usual for what the work makes.
A command that does not resume it itself has it resumed before it runs (`workbench/cli/__init__.py`).
"""

from __future__ import annotations

import gc


def pause_collection() -> None:
    """Pause cyclic garbage collection until `resume_collection()`."""
    gc.disable()


def resume_collection() -> None:
    """Set aside what start-up made and collect as usual from here; nothing to do where it was not paused
    (a notebook, a test, or once resumed)."""
    if gc.isenabled():
        return
    # One collection first: start-up does leave some cyclic garbage (hundreds of thousands of small objects
    # after loading the bundled model), which a freeze would keep for the process's life.
    gc.collect()
    gc.freeze()
    gc.enable()
