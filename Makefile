# The README's two set-up commands: `make audit` and `make test`.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
OUT ?= softrank-report
PANEL ?= default
PYTEST_ARGS ?=

.PHONY: install audit test quick bench fuzz docs docs-check gallery clean

install: $(VENV)/.installed

# The lock: requirements/lock.txt pins every dependency with all the extras of pyproject.toml
# (and the build requirements) with sha256 hashes, for CPython 3.11 on Linux x86_64; torch is
# the CPU wheel 2.13.0+cpu from $(TORCH_WHEELS) (PyPI's torch is a multi-GB CUDA build).
# `make lock` resolves it again with uv (in $(LOCK_VENV)) after pyproject.toml's dependencies
# change, keeping the pins that still fit (LOCK_ARGS=--upgrade: every pin to the newest;
# LOCK_ARGS="--upgrade-package NAME": one); `make lock-check` compares it with pyproject.toml.
LOCK := requirements/lock.txt
LOCK_VENV ?= .venv-lock
UV_VERSION ?= 0.13.9
TORCH_WHEELS ?= /opt/wheels
LOCK_ARGS ?=

# Installs exactly the lock, then softrank itself without dependencies; refuses a lock that
# does not match pyproject.toml.
$(VENV)/.installed: pyproject.toml Makefile $(LOCK)
	$(PYTHON) tools/lockfile.py check
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --require-hashes -r $(LOCK)
	$(PY) -m pip install --quiet --no-deps --no-build-isolation -e .
	$(PY) tools/lockfile.py installed
	touch $@

.PHONY: lock lock-check
lock: $(LOCK_VENV)/.uv-$(UV_VERSION)
	$(PYTHON) tools/lockfile.py compile --uv $(LOCK_VENV)/bin/uv \
		--find-links $(TORCH_WHEELS) $(LOCK_ARGS)

$(LOCK_VENV)/.uv-$(UV_VERSION):
	$(PYTHON) -m venv --clear $(LOCK_VENV)
	$(LOCK_VENV)/bin/python -m pip install --quiet "uv==$(UV_VERSION)"
	touch $@

lock-check:
	$(PYTHON) tools/lockfile.py check

audit: install
	$(VENV)/bin/softrank audit --panel $(PANEL) --out $(OUT)

quick: install
	$(VENV)/bin/softrank audit --panel quick --out $(OUT)

# softrank's own 15 certifiers run the in-process suites at sizes 32, 64 and MiniLM 64 (the
# plugin's end-to-end runs keep the full ci sizes; every audit brackets the built-ins at 128):
# keeps make test within 15 minutes on 2 cores. SOFTRANK_SIZES=... make test to choose.
SOFTRANK_SIZES ?= 32,64,minilm:64
test: install
	SOFTRANK_SIZES=$(SOFTRANK_SIZES) $(PY) -m pytest -m "not slow and not docs_site" --softrank-profile ci $(PYTEST_ARGS)

# The fuzz tier's long run (tests/test_fuzz.py): each of its 5 targets draws fresh inputs for
# FUZZ_SECONDS (default 130: about 11 minutes in all); counts of inputs in fuzz-stats.json.
FUZZ_SECONDS ?= 130
fuzz: install
	SOFTRANK_FUZZ_SECONDS=$(FUZZ_SECONDS) $(PY) -m pytest -m fuzz tests/test_fuzz.py \
		-p no:cacheprovider $(PYTEST_ARGS)

# asv benchmarks of this commit (sizes: SOFTRANK_BENCH_SIZES=64,128; filter: ASV_ARGS="-b Checker")
bench: install
	$(VENV)/bin/asv machine --yes > /dev/null
	$(VENV)/bin/asv run -E existing:$(abspath $(PY)) --set-commit-hash $$(git rev-parse HEAD) \
		--show-stderr $(ASV_ARGS)

# The documentation site: docs/_build/html/index.html (Sphinx, numpydoc, MyST; the [docs]
# extra, installed from the lock by `make install`). Offline; warnings are errors and every
# cross-reference must resolve (-n, nitpicky), so a stale docstring fails the build (CI runs
# it: .ci/run). The gallery's images are the committed
# docs/gallery/*.png: `make gallery` remakes them from a fresh audit of the quick panel (a
# few minutes on 2 cores); `make docs` never runs an audit.
SPHINXOPTS ?= -n -W --keep-going
GALLERY_RUN ?= docs/_build/gallery-run
docs: install
	$(VENV)/bin/sphinx-build $(SPHINXOPTS) -b html docs docs/_build/html

# The site, built afresh, as a reader opens it (tests/test_docs_site.py): headless Chromium
# reads every page with math from file://, with no host name resolving, and checks that
# MathJax typeset each formula without a TeX error, that no page requested anything but the
# site's own files, and that no page or style sheet names an asset on another host. Debian's
# chromium is installed by the tests where missing (as root); here a missing site or browser
# fails instead of skipping. CI runs it (.ci/run).
docs-check: docs
	SOFTRANK_DOCS_CHECK=required $(PY) -m pytest -m docs_site tests/test_docs_site.py \
		-p no:cacheprovider $(PYTEST_ARGS)

gallery: install
	rm -rf $(GALLERY_RUN)
	$(VENV)/bin/softrank audit --panel quick --out $(GALLERY_RUN)
	cp $(GALLERY_RUN)/*.png $(GALLERY_RUN)/studies/*.png docs/gallery/

clean:
	rm -rf $(VENV) $(OUT) .pytest_cache
