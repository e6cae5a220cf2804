# glm-kv: every set-up step lives here, so a fresh machine needs only `make book` / `make test`.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
# CPU wheel where the machine has one (pip's find-links); users with a GPU may set TORCH=torch.
TORCH  ?= torch==2.13.0
PIP    := $(BIN)/python -m pip install --quiet --disable-pip-version-check
STAMP  := $(VENV)/.glm-kv-installed
PROFILE ?= h200-0.5.23
# One kernel name everywhere: the notebooks' kernelspec, papermill, nbval and JupyterLab.
KERNEL := glm-kv
KERNEL_SPEC := $(VENV)/share/jupyter/kernels/$(KERNEL)/kernel.json

.PHONY: setup book books html lab test test-unit test-sglang test-book test-vllm chromium cjk-font bench clean mutants

setup: $(STAMP) $(KERNEL_SPEC)

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PIP) $(TORCH)
	$(PIP) -e ".[tensors,book,test]"
	touch $@

## The project's virtualenv as a named Jupyter kernel (inside the venv: nothing outside is touched).
$(KERNEL_SPEC): $(STAMP)
	$(BIN)/python -m ipykernel install --sys-prefix --name $(KERNEL) --display-name "glm-kv (Python 3, .venv)" >/dev/null
	@test -f $@

## JupyterLab on the repository, the glm-kv kernel selected by every notebook.
lab: setup
	$(BIN)/jupyter lab --ServerApp.root_dir="$(CURDIR)" $(LAB_ARGS) \
	  $$([ "$$(id -u)" = 0 ] && echo --allow-root) notebooks/01_token.ipynb

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

## Chromium for the screenshot check. No system CJK font is needed: the book ships its own CJK
## subset (book/_static/fonts, OFL), which `make cjk-font` re-makes from Debian's fonts-noto-cjk.
chromium:
	@command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1 || \
	  { if [ "$$(id -u)" = 0 ]; then apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; \
	    else echo "chromium missing and not root: the screenshot check will be skipped"; fi; }

## The book's CJK web font subset, after adding Chinese text (tests/book/test_cjk_font.py says when).
cjk-font: setup
	@test -f /usr/share/fonts/opentype/noto/NotoSansCJK-Regular.ttc || \
	  { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq fonts-noto-cjk >/dev/null; }
	$(BIN)/python scripts/cjk_subset.py

## The run's seed: empty draws a fresh one (printed); `make test SEED=N` reproduces a run.
SEED ?=

## What CI runs: every group (sglang, vllm, book, unit, notebooks), even after one fails; one summary
## line per group (PASS/FAIL, counts, time); non-zero exit when any group failed.
test: setup
	$(BIN)/python scripts/test_groups.py --seed "$(SEED)"

## One group alone (same seed rules).
test-sglang: setup
	$(BIN)/python scripts/test_groups.py --seed "$(SEED)" --only sglang
test-book: setup
	$(BIN)/python scripts/test_groups.py --seed "$(SEED)" --only book
test-unit: setup
	$(BIN)/python scripts/test_groups.py --seed "$(SEED)" --only unit --only notebooks

## vLLM 0.33.0's own KV sizing driven on the CPU (tests/vllm), the `vllm` group of `make test` alone: its
## own .venv-vllm first (scripts/vllm-env.sh, 8.2 GB, ~3.5 min the first time), then the group.
test-vllm: setup
	$(BIN)/python scripts/test_groups.py --seed "$(SEED)" --only vllm

## Mutation score of glm_kv/inputs and glm_kv/ledgers under the fast tests (mutmut, in its own
## .venv-mutants; not part of `make test`). MODULES="token request" scopes it (default: the
## arithmetic ledgers, then resolve and profile; "all": every module); SEED=N reproduces a run.
## SAMPLE=N: a random sample of about N mutants stratified by module (MODULES default "all"),
## FLOOR=K at least K per module (default 4), SAMPLE_SEED=S the sample's seed (default the one
## benchmarks/mutants.md records), RECHECK=1 re-tries its survivors with the tests added against
## them; exit 1 when the (stratified) score is under 90 %. JOBS=N mutmut workers (default: cores).
## Results add up under mutants/; `scripts/mutants.py --report` reprints the table.
FLOOR ?= 4
SAMPLE_SEED ?= 20261201
MUTANTS_ARGS = $(or $(MODULES),$(if $(SAMPLE),all)) $(if $(SAMPLE),--sample $(SAMPLE) --floor $(FLOOR) --seed $(SAMPLE_SEED)) \
  $(if $(RECHECK),--recheck) $(if $(JOBS),--max-children $(JOBS))
mutants:
	@test -f .venv-mutants/.glm-kv-mutants || { $(PYTHON) -m venv .venv-mutants && \
	  .venv-mutants/bin/python -m pip install --quiet --disable-pip-version-check $(TORCH) && \
	  .venv-mutants/bin/python -m pip install --quiet --disable-pip-version-check ".[mutants,test]" && \
	  .venv-mutants/bin/python -m pip uninstall --quiet -y glm-kv && touch .venv-mutants/.glm-kv-mutants; }
	GLM_KV_SEED="$(SEED)" nice .venv-mutants/bin/python scripts/mutants.py $(MUTANTS_ARGS)

bench: setup
	$(BIN)/python -m benchmarks

clean:
	rm -rf _build .pytest_cache
