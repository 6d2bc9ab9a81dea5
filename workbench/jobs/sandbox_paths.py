"""The paths a sandbox shows besides its run's folder: the code and Python it runs, the model caches, vLLM's
record of model classes, and the files a run's config names (never through a link inside the runs folder).

`sandbox` decides from these where each is mounted (read-only, hidden, masked); the paths here are real ones,
every link resolved, so a mount shows what the path names now.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from workbench.jobs import processes

SCRATCH = "/tmp/workbench-scratch"  # inside: the private, writable caches
SCRATCH_VLLM = f"{SCRATCH}/cache/vllm"  # inside: vLLM's cache root, whatever the caller's VLLM_CACHE_ROOT


def real_path(path) -> str:
    """`path` with `~` expanded and every link resolved."""
    return os.path.realpath(os.path.expanduser(str(path)))


def code_paths() -> list[str]:
    """The project, this Python (the venv and the interpreter it was made from) and its import path."""
    here = real_path(os.getcwd())  # `python -m` puts the working folder on sys.path: it is not code to show
    paths = [
        processes.PROJECT_ROOT,
        sys.prefix,
        sys.base_prefix,
        sys.exec_prefix,
        Path(real_path(sys.executable)).parent.parent,
        *(p for p in sys.path if p and real_path(p) != here),
    ]
    return [p for p in dict.fromkeys(real_path(p) for p in paths) if os.path.exists(p)]


def cache_paths(env: dict) -> list[str]:
    """The model caches a run reads (read-only inside): the workbench's converted models and the HF hub cache."""
    from workbench.sources.model_files import cache_dir

    hub = env.get("HF_HUB_CACHE") or os.path.join(
        env.get("HF_HOME") or os.path.expanduser("~/.cache/huggingface"), "hub"
    )
    paths = [str(cache_dir()), hub]
    return [p for p in dict.fromkeys(real_path(p) for p in paths) if os.path.isdir(p)]


def vllm_model_info_cache(env: dict) -> str | None:
    """The host's record of what each model class vLLM inspected supports (`modelinfos` in vLLM's cache root),
    when there is one."""
    root = env.get("VLLM_CACHE_ROOT") or os.path.join(
        env.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser(env.get("HOME") or "~"), ".cache"), "vllm"
    )
    path = real_path(os.path.join(root, "modelinfos"))
    return path if os.path.isdir(path) else None


def vllm_record_placement(config: dict, env: dict) -> tuple[tuple[str, str], ...]:
    """For a run whose generation runs vLLM: the host's model-class record, shown read-only in the sandbox's own
    vLLM cache root (the scratch caches', where VLLM_CACHE_ROOT points inside).

    With it a sandboxed vLLM finds its model class instead of inspecting it in a fresh process that re-imports
    vLLM and torch (a large part of a CPU server's start). A class the record lacks (another model family, or a
    record an older vLLM wrote) is inspected as before, and vLLM logs that it could not save what it found."""
    from workbench.spec.generation import GENERATIONS

    record = vllm_model_info_cache(env)
    if record is None or config.get("generation") not in set(GENERATIONS) - {"transformers"}:
        return ()
    return ((record, f"{SCRATCH_VLLM}/modelinfos"),)


def named_paths(config: dict, runs_root: str | None = None) -> list[str]:
    """The local files and folders a run's config names (model folder, dataset, reward file) that exist.

    What lies in the runs folder (a user's runs) its users' code may write: a path with a link inside the
    runs folder on its way is not shown (a link made since the path rule looked, say by another run of the
    same user, could lead to another user's upload).
    """
    from workbench.spec.config import PATH_FIELDS

    named = []
    for name in PATH_FIELDS:
        value = config.get(name)
        if isinstance(value, str) and value.strip() and os.path.isabs(os.path.expanduser(value.strip())):
            typed, path = os.path.abspath(os.path.expanduser(value.strip())), real_path(value.strip())
            if runs_root and _link_in(typed, runs_root):
                continue
            if os.path.exists(path):
                named.append(path)
    return named


def _link_in(path: str, folder: str) -> bool:
    """Whether a link that lies inside `folder` is on the way to `path` (links elsewhere, an admin's, are fine)."""
    parts = Path(path).parts
    for count in range(2, len(parts) + 1):
        step = os.path.join(*parts[:count])
        if os.path.islink(step) and is_under(real_path(os.path.dirname(step)), [folder]):
            return True
    return False


def is_under(path: str, roots) -> bool:
    """Whether the real path `path` is one of `roots` or lies inside one."""
    return any(path == root or path.startswith(root.rstrip("/") + "/") for root in roots)


def hub_cache(env: dict) -> str | None:
    """The HF hub cache among the caches a run reads (set as HF_HUB_CACHE inside), if any."""
    caches = [p for p in cache_paths(env) if p.rstrip("/").endswith("hub")]
    return caches[0] if caches else None
