# glm-kv: every set-up step lives here, so a fresh machine needs only `make book` / `make test`.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
# CPU wheel where the machine has one (pip's find-links); users with a GPU may set TORCH=torch.
TORCH  ?= torch==2.13.0
PIP    := $(BIN)/python -m pip install --quiet --disable-pip-version-check
STAMP  := $(VENV)/.glm-kv-installed
PROFILE ?= article

.PHONY: setup book books html test test-unit test-sglang test-book chromium bench clean

setup: $(STAMP)

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PIP) $(TORCH)
	$(PIP) -e ".[tensors,book,test]"
	touch $@

## The main job: execute every chapter for one profile and build its HTML book.
book: setup
	$(BIN)/glm-kv book --profile $(PROFILE)
	@echo "HTML: _build/profiles/$(PROFILE)/html/index.html"

## Every shipped profile, plus the side-by-side comparison page.
books: setup
	$(BIN)/glm-kv book

## The committed (default-profile) notebooks as they are, warnings as errors.
html: setup
	$(BIN)/jupyter-book build . --warningiserror --nitpick --keep-going

chromium:
	@command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1 || \
	  { if [ "$$(id -u)" = 0 ]; then apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; \
	    else echo "chromium missing and not root: the screenshot check will be skipped"; fi; }

## SGLang 0.5.23's own classes against the engine (its own cached virtualenv).
test-sglang:
	bash scripts/sglang-env.sh
	GLM_KV_SGLANG=1 .venv-sglang/bin/python -m pytest -q tests/sglang

## The book builds with warnings as errors and its charts render offline in headless Chromium.
test-book: html chromium
	$(BIN)/python scripts/screenshot_check.py --html _build/html --out _build/screenshots

## Unit tests plus every committed notebook re-executed and compared (nbval); the pool-by-pool
## comparison with SGLang's classes runs too when .venv-sglang exists.
test-unit: setup
	GLM_KV_SGLANG=1 $(BIN)/python -m pytest --nbval-lax --ignore=tests/sglang tests notebooks book

## What CI runs.
test: setup test-sglang test-book test-unit

bench: setup
	$(BIN)/python -m benchmarks

clean:
	rm -rf _build .pytest_cache
