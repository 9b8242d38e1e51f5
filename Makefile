# The README's two set-up commands: `make audit` and `make test`.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
OUT ?= softrank-report
PANEL ?= default
PYTEST_ARGS ?=

.PHONY: install audit test quick bench fuzz clean docs gallery

install: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml Makefile
	$(PYTHON) -m venv $(VENV)
	# torch is pinned: an unpinned torch pulls a multi-GB CUDA build.
	$(PY) -m pip install --quiet "torch==2.13.0"
	$(PY) -m pip install --quiet -e ".[models,dev,dist,geometry]"
	touch $@

audit: install
	$(VENV)/bin/softrank audit --panel $(PANEL) --out $(OUT)

quick: install
	$(VENV)/bin/softrank audit --panel quick --out $(OUT)

# softrank's own 15 certifiers run the in-process suites at sizes 32, 64 and MiniLM 64 (the
# plugin's end-to-end runs keep the full ci sizes; every audit brackets the built-ins at 128):
# keeps make test within 15 minutes on 2 cores. SOFTRANK_SIZES=... make test to choose.
SOFTRANK_SIZES ?= 32,64,minilm:64
test: install
	SOFTRANK_SIZES=$(SOFTRANK_SIZES) $(PY) -m pytest -m "not slow" --softrank-profile ci $(PYTEST_ARGS)

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
# extra). Offline; warnings are errors and every cross-reference must resolve (-n, nitpicky),
# so a stale docstring fails the build (CI runs it: .ci/run). The gallery's images are the committed
# docs/gallery/*.png: `make gallery` remakes them from a fresh audit of the quick panel (a
# few minutes on 2 cores); `make docs` never runs an audit.
SPHINXOPTS ?= -n -W --keep-going
GALLERY_RUN ?= docs/_build/gallery-run
docs: install $(VENV)/.docs-installed
	$(VENV)/bin/sphinx-build $(SPHINXOPTS) -b html docs docs/_build/html

$(VENV)/.docs-installed: pyproject.toml | install
	$(PY) -m pip install --quiet -e ".[docs]"
	touch $@

gallery: install
	rm -rf $(GALLERY_RUN)
	$(VENV)/bin/softrank audit --panel quick --out $(GALLERY_RUN)
	cp $(GALLERY_RUN)/*.png $(GALLERY_RUN)/studies/*.png docs/gallery/

clean:
	rm -rf $(VENV) $(OUT) .pytest_cache
